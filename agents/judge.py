"""Judge role: an LLM grades a generated answer against the gold answer (CORRECT / WRONG).

Its fallback is never read as a grade: the eval harness reports a judge that fell back as not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.prompts import judge as prompt
from logicmap.prompts.judge import JudgeVerdict

__all__ = ["judge_answer"]


def _validate(verdict: JudgeVerdict) -> list[str]:
    return [] if verdict.reasoning.strip() else ["give a one-sentence reasoning"]


def judge_answer(
    llm: BaseChatModel | None,
    question: str,
    gold_answer: str,
    generated_answer: str,
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[JudgeVerdict]:
    """The judge's verdict; ``outcome.fallback`` is set when the model gave none (then the output means nothing)."""
    return run_role(
        llm,
        role="judge",
        messages=prompt.build_messages(question, gold_answer, generated_answer),
        schema=JudgeVerdict,
        validate=_validate,
        fallback=lambda: JudgeVerdict(reasoning="judge did not run", label="WRONG"),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
