"""Chat model factory: ``ChatOpenAI`` for OpenAI or any OpenAI-compatible server, from settings.

Any ``langchain_core`` chat model can be passed to the graphs instead.
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from logicmap.memory.config import LogicMapSettings

__all__ = ["make_chat_model"]


def make_chat_model(settings: LogicMapSettings) -> BaseChatModel | None:
    """The configured chat model, or ``None`` when no model is configured (no-LLM policies run)."""
    if not settings.chat_model:
        return None
    from langchain_openai import ChatOpenAI

    api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if api_key is None and settings.openai_base_url:
        api_key = "not-needed"  # local OpenAI-compatible servers accept any key
    return ChatOpenAI(
        model=settings.chat_model,
        base_url=settings.openai_base_url,
        api_key=api_key,
        temperature=settings.temperature,
        timeout=settings.request_timeout,
        max_retries=1,
    )
