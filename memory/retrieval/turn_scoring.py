"""How evidence turns score against a query: their own similarity, lifted by the event holding them and
by the question they reply to. Plain data in and out, so agents and graphs share one formula."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.runtime.deadline import check_deadline

if TYPE_CHECKING:
    from logicmap.memory.store import NamespaceSnapshot

__all__ = ["CONTEXT_WEIGHT", "TurnGroup", "context_turn_scores"]

# How much of its event's (or its question's) similarity a turn inherits when evidence turns are ranked.
CONTEXT_WEIGHT = 0.9

# One piece of evidence: the id of the event whose similarity its turns inherit (None: no event), and its turns.
TurnGroup = tuple[str | None, Sequence[str]]


def context_turn_scores(
    snapshot: NamespaceSnapshot,
    query_vectors: Sequence[Sequence[float]] | np.ndarray,
    groups: Sequence[TurnGroup],
    *,
    context_weight: float = CONTEXT_WEIGHT,
) -> dict[str, float]:
    """Each turn's score, best over the queries: max(its own similarity, ``context_weight`` x the similarity
    of the event holding it, ``context_weight`` x the similarity of the question it replies to), so a reply
    that only makes sense with its event or its question ranks with them."""
    queries = normalize(np.atleast_2d(np.asarray(query_vectors, dtype=np.float32)))
    scores: dict[str, float] = {}
    for event_id, turn_ids in groups:
        check_deadline("while scoring turns")
        vector = snapshot.event_vectors.get(event_id) if event_id is not None else None
        floor = context_weight * float((queries @ normalize(vector)).max()) if vector is not None else float("-inf")
        known = [t for t in turn_ids if t in snapshot.turn_vectors]
        own = (normalize(np.vstack([snapshot.turn_vectors[t] for t in known])) @ queries.T).max(axis=1) if known else []
        own_of = dict(zip(known, (float(x) for x in own)))
        by_position = {snapshot.turns[t].position: t for t in known if t in snapshot.turns}
        for tid, sim in own_of.items():
            # A reply inherits the relevance of the question it answers, when the group holds both.
            asked = by_position.get(snapshot.turns[tid].position - 1) if tid in snapshot.turns else None
            pair = (
                context_weight * own_of[asked] if asked and snapshot.turns[tid].answers(snapshot.turns[asked]) else sim
            )
            scores[tid] = max(scores.get(tid, float("-inf")), sim, floor, pair)
        for tid in turn_ids:
            scores.setdefault(tid, floor)
    return scores
