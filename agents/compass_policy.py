"""CompassMem's search without an LLM: queue priorities, the similarity explorer's decision, its stopping
test and the learned evidence ranking. Reads the event graph (``memory``); knows nothing of ``graphs``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from langchain_core.embeddings import Embeddings

from logicmap.agents.explorer import similarity_decision
from logicmap.memory.embeddings import normalize
from logicmap.memory.graph import EventGraph
from logicmap.memory.ranking import default_ranker
from logicmap.memory.store import NamespaceSnapshot
from logicmap.memory.text import query_readings
from logicmap.memory.traversal import default_traversal_ranker
from logicmap.memory.turn_scoring import CONTEXT_WEIGHT, context_turn_scores
from logicmap.prompts.explore import ExplorerDecision

__all__ = [
    "QueryEncoder",
    "event_priorities",
    "evidence_filled",
    "heuristic_decision",
    "learned_turn_scores",
    "open_subgoals",
]


@dataclass(frozen=True)
class QueryEncoder:
    """Search texts as unit query vectors, one row per reading: the text and, unless turned off, the text
    without its names (``memory.text.query_readings``): names dominate a sentence embedding."""

    embeddings: Embeddings
    name_free_readings: bool = True

    def readings(self, text: str) -> list[str]:
        """What a search text is matched as."""
        return query_readings(text) if self.name_free_readings else [text]

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, one row each."""
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return normalize(np.asarray(self.embeddings.embed_documents(texts), dtype=np.float32))

    def vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's reading vectors (one matrix per text), in one embedding call."""
        readings = [self.readings(t) for t in texts]
        flat = self.embed([r for rs in readings for r in rs])
        bounds = np.cumsum([0, *(len(rs) for rs in readings)])
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def open_subgoals(subgoals: Sequence[str], satisfied: Sequence[bool]) -> list[str]:
    """The subgoals still to satisfy; all of them once every one is."""
    return [g for g, done in zip(subgoals, satisfied) if not done] or list(subgoals)


def event_priorities(
    graph: EventGraph,
    event_ids: Sequence[str],
    subgoals: Sequence[str],
    satisfied: Sequence[bool],
    encoder: QueryEncoder,
    *,
    by_turns: bool = False,
) -> dict[str, float]:
    """Priority of a queued event = its max similarity to a still-unsatisfied subgoal (to any subgoal once
    every one is satisfied), recomputed from the satisfaction vector so it never goes stale. ``by_turns``:
    an event scores as its best-matching cited turn instead of its summary."""
    if not event_ids:
        return {}
    open_goals = open_subgoals(subgoals, satisfied)
    if not open_goals:  # a question without content words: no subgoal to rank against
        return {e: 0.0 for e in event_ids}
    goal_vectors = np.vstack(encoder.vectors(open_goals))
    if by_turns:
        rows = np.array([graph.index_of(e) for e in event_ids], dtype=np.int64)
        scores = np.max([graph.turn_similarities(g, rows) for g in goal_vectors], axis=0)
    else:
        matrix = np.vstack([graph.vector(e) for e in event_ids])
        scores = (matrix @ goal_vectors.T).max(axis=1)
    return {e: float(s) for e, s in zip(event_ids, scores)}


def evidence_filled(
    graph: EventGraph,
    encoder: QueryEncoder,
    *,
    kept: Sequence[str],
    subgoals: Sequence[str],
    satisfied: Sequence[bool],
    visited: Sequence[str],
    queue: Mapping[str, float],
    context_turns: int,
    context_weight: float = CONTEXT_WEIGHT,
) -> bool:
    """The no-LLM stopping test: the kept evidence fills ``context_turns`` and no queued or unseen event can
    improve it. An event's priority (its best turn or summary similarity) bounds the score of every turn it
    holds, so the search is best-first with a stopping bound."""
    kept = [e for e in kept if e in graph]
    open_goals = open_subgoals(subgoals, satisfied)
    if not kept or not open_goals:
        return bool(kept)
    goals = np.vstack(encoder.vectors(open_goals))
    groups = [(e, graph.events[e].turn_ids) for e in kept]
    scores = list(context_turn_scores(graph.snapshot, goals, groups, context_weight=context_weight).values())
    if len(scores) < context_turns:
        return False
    # Unqueued events are bounded by their localization score: a better one means localizing again.
    seen = set(visited) | set(queue)
    unseen = [i for i, e in enumerate(graph.ids) if e not in seen]
    outside = float(np.max([graph.turn_similarities(g)[unseen] for g in goals])) if unseen else float("-inf")
    best_left = max(max(queue.values(), default=float("-inf")), outside)
    return best_left <= sorted(scores, reverse=True)[context_turns - 1]


def heuristic_decision(
    graph: EventGraph,
    event_id: str,
    subgoals: Sequence[str],
    satisfied: Sequence[bool],
    encoder: QueryEncoder,
    *,
    keep_threshold: float,
    satisfy_threshold: float,
    expand_threshold: float,
) -> ExplorerDecision:
    """The no-LLM explorer (``agents.explorer.similarity_decision``) on one event. It reads what an LLM
    explorer reads: the summary and the raw turns it cites; it may expand to the event's real neighbours."""
    neighbors = list(dict.fromkeys(n.event_id for n in graph.neighbors(event_id)))
    snapshot = graph.snapshot
    turn_vectors = [snapshot.turn_vectors[t] for t in graph.events[event_id].turn_ids if t in snapshot.turn_vectors]
    readings = normalize(np.vstack([graph.vector(event_id), *turn_vectors]))
    return similarity_decision(
        readings,
        encoder.vectors(list(subgoals)),
        satisfied,
        neighbors,
        np.vstack([graph.vector(n) for n in neighbors]) if neighbors else np.zeros((0, 1)),
        keep_threshold=keep_threshold,
        satisfy_threshold=satisfy_threshold,
        expand_threshold=expand_threshold,
    )


def learned_turn_scores(snapshot: NamespaceSnapshot, question: str, encoder: QueryEncoder, *,
                        traversal: bool = False) -> dict[str, float]:
    """Every turn's score for ``question`` by the shipped graph-feature reranker (``memory.ranking``); with
    ``traversal``, after the second hop from its best turns along the event graph (``memory.traversal``)."""
    ranker = default_traversal_ranker() if traversal else default_ranker()
    return ranker.scores(snapshot, question, encoder.embed(encoder.readings(question)))
