"""Responder role: a short answer from the evidence handed to it, and nothing else.

Fallback (and no-LLM policy): extractive, the evidence sentence that best matches the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.answerers import answer_from_evidence
from logicmap.agents.base import RoleOutcome, run_role
from logicmap.prompts import respond as prompt
from logicmap.prompts.respond import Answer

__all__ = ["EvidenceText", "respond"]


class EvidenceText:
    """One evidence item as the responder sees it."""

    def __init__(self, id: str, text: str, time: str | None = None) -> None:  # mirrors records
        self.id, self.text, self.time = id, text, time

    def render(self) -> str:
        return f"[{self.id}]{f' ({self.time})' if self.time else ''} {self.text}"


def respond(
    llm: BaseChatModel | None,
    question: str,
    evidence: Sequence[EvidenceText],
    *,
    question_date: str | None = None,
    abstain: bool = True,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[Answer]:
    """The answer from ``evidence``. ``abstain=False``: CompassMem's Appendix F.2 prompt, which never states
    that the information is insufficient (the extractive fallback keeps its ``NO_ANSWER``)."""
    ids = {e.id for e in evidence}

    def validate(result: Answer) -> list[str]:
        problems = []
        if not result.answer.strip():
            problems.append("empty answer")
        unknown = [c for c in result.cited_ids if c not in ids]
        if unknown:
            problems.append(f"cited ids {unknown} are not evidence ids {sorted(ids)}")
        return problems

    return run_role(
        llm,
        role="responder",
        messages=prompt.build_messages(
            question, "\n".join(e.render() for e in evidence) or "(no evidence)", question_date, abstain=abstain
        ),
        schema=Answer,
        validate=validate,
        fallback=lambda: answer_from_evidence(question, evidence),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
