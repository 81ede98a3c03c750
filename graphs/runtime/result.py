"""The typed result every answering strategy returns: answer, evidence with cited turns, cost."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from logicmap.agents.base import Cost, FallbackRecord
from logicmap.memory.retrieval.turn_scoring import CONTEXT_WEIGHT, context_turn_scores

if TYPE_CHECKING:
    from logicmap.memory.store import NamespaceSnapshot

__all__ = ["CONTEXT_WEIGHT", "AnswerResult", "EvidenceItem", "rank_turns", "turn_scores"]


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
    turn_ranking: list[str] | None = Field(
        default=None, description="the evidence's turns best first, when the strategy scored them itself"
    )

    def cited_turns(self, limit: int | None = None) -> list[str]:
        """Turn ids cited by the evidence, without repeats, at most ``limit``.

        In the strategy's own ``turn_ranking`` when it has one; otherwise round-robin over the evidence
        items (the first turn of every item, then the second, ...), so a turn budget covers every piece
        of evidence before it goes deep into one.
        """
        if self.turn_ranking is not None:
            cited = set().union(*(item.turn_ids for item in self.evidence)) if self.evidence else set()
            ranked = list(dict.fromkeys(t for t in self.turn_ranking if t in cited))
            return ranked if limit is None else ranked[:limit]
        seen: list[str] = []
        depth = max((len(item.turn_ids) for item in self.evidence), default=0)
        for position in range(depth):
            for item in self.evidence:
                if position < len(item.turn_ids) and item.turn_ids[position] not in seen:
                    seen.append(item.turn_ids[position])
                    if limit is not None and len(seen) >= limit:
                        return seen
        return seen


def turn_scores(
    snapshot: NamespaceSnapshot,
    query_vectors: Sequence[Sequence[float]] | np.ndarray,
    evidence: Sequence[EvidenceItem],
    *,
    context_weight: float = CONTEXT_WEIGHT,
) -> dict[str, float]:
    """Each evidence turn's score, best over the queries (``memory.retrieval.turn_scoring.context_turn_scores``): an
    event item's turns inherit its event's similarity, a reply the similarity of the question it answers."""
    groups = [(item.id if item.kind == "event" else None, item.turn_ids) for item in evidence]
    return context_turn_scores(snapshot, query_vectors, groups, context_weight=context_weight)


def rank_turns(
    snapshot: NamespaceSnapshot,
    query_vector: Sequence[float] | np.ndarray,
    evidence: Sequence[EvidenceItem],
    *,
    context_weight: float = CONTEXT_WEIGHT,
    first: Iterable[str] = (),
) -> list[str]:
    """The evidence's turns best first by ``turn_scores``, for ``AnswerResult.turn_ranking``; ``first``
    (e.g. turns a responder cited) lead."""
    scores = turn_scores(
        snapshot, np.atleast_2d(np.asarray(query_vector, dtype=np.float32)), evidence, context_weight=context_weight
    )
    lead = [t for t in dict.fromkeys(first) if t in scores]
    rest = sorted((t for t in scores if t not in lead), key=lambda t: -scores[t])  # stable: evidence order breaks ties
    return [*lead, *rest]
