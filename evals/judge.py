"""The LLM judge's model: its own settings (``LOGICMAP_JUDGE_*``), kept apart from the model under test.

The judge metric itself is ``evals.metrics.llm_judge``; this module only builds the model it runs on.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from logicmap.graphs.runtime.resources import Resources

__all__ = ["JudgeSettings", "make_judge_model"]


class JudgeSettings(BaseSettings):
    """The judge model, separate from the model under test (``LOGICMAP_JUDGE_*``); unset fields reuse the main ones."""

    model_config = SettingsConfigDict(env_prefix="LOGICMAP_JUDGE_", env_file=None, extra="ignore")

    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    structured_output: Literal["function_calling", "json_schema", "json_mode", "prompt"] | None = None


def make_judge_model(resources: Resources, model: str | None = None) -> tuple[Any, str]:
    """The judge chat model (``None`` when none is configured) and its structured-output method."""
    from logicmap.agents.models import make_chat_model

    judge = JudgeSettings()
    name = model or judge.model
    method = judge.structured_output or resources.settings.structured_output
    if not name:
        return None, method
    overrides: dict[str, Any] = {"chat_model": name}
    if judge.base_url:
        overrides["openai_base_url"] = judge.base_url
    if judge.api_key:
        overrides["openai_api_key"] = judge.api_key
    settings = resources.settings.model_copy(update=overrides)
    return make_chat_model(settings), method
