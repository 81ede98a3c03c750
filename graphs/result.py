"""The typed result every answering strategy returns: answer, evidence with cited turns, cost."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agents.base import Cost, FallbackRecord

__all__ = ["AnswerResult", "EvidenceItem"]


class EvidenceItem(BaseModel):
    """A piece of evidence handed to the responder, with the turns it cites."""

    kind: Literal["event", "turn", "fact", "path"] = "event"
    id: str
    text: str
    turn_ids: list[str] = Field(default_factory=list)
    time: str | None = None
    score: float | None = None


class AnswerResult(BaseModel):
    """The answer to one question by one strategy, and what it cost."""

    strategy: str
    namespace: str
    question: str
    answer: str
    evidence: list[EvidenceItem] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    steps: int = 0
    fallbacks: list[FallbackRecord] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    def cited_turns(self, limit: int | None = None) -> list[str]:
        """Turn ids cited by the evidence, in evidence order, without repeats, at most ``limit``."""
        seen: list[str] = []
        for item in self.evidence:
            for tid in item.turn_ids:
                if tid not in seen:
                    seen.append(tid)
                    if limit is not None and len(seen) >= limit:
                        return seen
        return seen
