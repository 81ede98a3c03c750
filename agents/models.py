"""Chat model factory: ``ChatOpenAI`` for OpenAI or any OpenAI-compatible server, from settings.

Any ``langchain_core`` chat model can be passed to the graphs instead.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

from logicmap.agents.provider import ProviderError
from logicmap.memory.config import LogicMapSettings

__all__ = ["make_chat_model"]


def make_chat_model(settings: LogicMapSettings) -> BaseChatModel | None:
    """The configured chat model, or ``None`` when no model is configured (no-LLM policies run).

    The client does not retry (``max_retries=0``): ``agents.provider`` retries transient failures with backoff
    within ``retry_budget_s``, so retries are not multiplied. No API key for OpenAI itself raises
    ``ProviderError("missing_key")``.
    """
    if not settings.chat_model:
        return None
    from langchain_openai import ChatOpenAI

    api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if api_key is None and settings.openai_base_url:
        api_key = "not-needed"  # local OpenAI-compatible servers accept any key
    if api_key is None and not os.environ.get("OPENAI_API_KEY"):
        raise ProviderError("missing_key", f"LOGICMAP_CHAT_MODEL={settings.chat_model} needs an API key: set "
                            "LOGICMAP_OPENAI_API_KEY (or OPENAI_API_KEY), or LOGICMAP_OPENAI_BASE_URL for a "
                            "local OpenAI-compatible server")  # fmt: skip
    return ChatOpenAI(
        model=settings.chat_model,
        base_url=settings.openai_base_url,
        api_key=api_key,
        temperature=settings.temperature,
        timeout=settings.request_timeout,
        max_retries=0,
    )
