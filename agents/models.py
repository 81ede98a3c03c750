"""Chat model factory, from settings: any provider LangChain's ``init_chat_model`` knows, or ``ChatOpenAI``.

``LOGICMAP_CHAT_MODEL`` is a model name (``gpt-4o-mini``: ``ChatOpenAI``, also for any OpenAI-compatible server
at ``LOGICMAP_OPENAI_BASE_URL``, whose model names may contain colons) or, without a base URL, LangChain's
``provider:model`` string (``anthropic:claude-sonnet-4-5``, ``google_genai:gemini-2.5-flash``,
``ollama:llama3.1``...), built by ``init_chat_model`` with the provider's own package and API key variable.
Any ``langchain_core`` chat model can be passed to the graphs instead (``Resources(llm_=...)``).
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from logicmap.agents.provider import ProviderError
from logicmap.settings import LogicMapSettings

__all__ = ["PROVIDERS", "make_chat_model", "provider_of"]

PROVIDERS: frozenset[str] = frozenset(
    {
        "openai",
        "anthropic",
        "azure_openai",
        "azure_ai",
        "google_vertexai",
        "google_genai",
        "google_anthropic_vertex",
        "bedrock",
        "bedrock_converse",
        "cohere",
        "fireworks",
        "together",
        "mistralai",
        "huggingface",
        "groq",
        "ollama",
        "deepseek",
        "ibm",
        "nvidia",
        "xai",
        "perplexity",
    }
)
"""The ``provider:`` prefixes of LangChain's ``init_chat_model``."""


def provider_of(model: str, base_url: str | None = None) -> str | None:
    """The LangChain provider a ``provider:model`` string names; None for a plain model name or when a base URL
    is set (an OpenAI-compatible server's model names, such as Ollama's ``qwen2.5:7b``, contain colons)."""
    if base_url or ":" not in model:
        return None
    prefix = model.split(":", 1)[0].strip().lower()
    return prefix if prefix in PROVIDERS else None


def _init_provider_model(settings: LogicMapSettings, chat_model: str, provider: str) -> BaseChatModel:
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        raise ProviderError(
            "missing_key",
            f"LOGICMAP_CHAT_MODEL={settings.chat_model} names a LangChain provider: "
            "install `langchain` and the provider's package (e.g. langchain-anthropic)",
        ) from None
    model = chat_model.split(":", 1)[1]
    options: dict[str, Any] = {
        "temperature": settings.temperature,
        "timeout": settings.request_timeout,
        "max_retries": 0,
    }
    if provider == "openai" and settings.openai_api_key:
        options["api_key"] = settings.openai_api_key.get_secret_value()
    if provider in ("ollama", "google_genai"):  # their clients take no max_retries / timeout keyword
        options.pop("max_retries")
    try:
        chat: BaseChatModel = init_chat_model(model, model_provider=provider, **options)
        return chat
    except ImportError as exc:
        raise ProviderError("missing_key", f"LOGICMAP_CHAT_MODEL={settings.chat_model}: {exc}") from None
    except Exception as exc:  # a provider's client refusing its settings (no API key...)
        raise ProviderError(
            "missing_key",
            f"LOGICMAP_CHAT_MODEL={settings.chat_model} could not be set up: {type(exc).__name__}: {str(exc)[:300]}",
        ) from None


def make_chat_model(settings: LogicMapSettings) -> BaseChatModel | None:
    """The configured chat model, or ``None`` when no model is configured (no-LLM policies run).

    The client does not retry (``max_retries=0`` where the provider takes it): ``agents.provider`` retries
    transient failures with backoff within ``retry_budget_s``, so retries are not multiplied. No API key for
    OpenAI itself, a provider package that is not installed, or a provider client that refuses its settings
    raises ``ProviderError("missing_key")``.
    """
    chat_model = settings.chat_model
    if not chat_model:
        return None
    provider = provider_of(chat_model, settings.openai_base_url)
    if provider is not None and provider != "openai":
        return _init_provider_model(settings, chat_model, provider)
    if provider == "openai":
        chat_model = chat_model.split(":", 1)[1]
        settings = settings.model_copy(update={"chat_model": chat_model})
    from langchain_openai import ChatOpenAI

    api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if api_key is None and settings.openai_base_url:
        api_key = "not-needed"  # local OpenAI-compatible servers accept any key
    if api_key is None and not os.environ.get("OPENAI_API_KEY"):
        raise ProviderError(
            "missing_key",
            f"LOGICMAP_CHAT_MODEL={settings.chat_model} needs an API key: set "
            "LOGICMAP_OPENAI_API_KEY (or OPENAI_API_KEY), or LOGICMAP_OPENAI_BASE_URL for a "
            "local OpenAI-compatible server",
        )
    return ChatOpenAI(
        model=chat_model,
        base_url=settings.openai_base_url,
        api_key=SecretStr(api_key) if api_key is not None else None,
        temperature=settings.temperature,
        timeout=settings.request_timeout,
        max_retries=0,
    )
