"""The second hop of the no-LLM search: from the turns the learned ranker found first, follow the event graph
(the same event, typed relations, the same topic, named entities shared across sessions) and score what it
reaches with the ranker's features plus how it was reached.

Multi-hop evidence often shares no words with the question: "Who paced Sam, and what role will he have at
Sam's wedding?" finds "Dev paced me" but not "If he isn't too busy being best man", which a later session
says right after "Dev will pace you". The first hop's best turns name the bridge ("Dev"); the graph leads
from them to the events that name it too. The weights are a logistic regression fitted by
``evals/train/traversal_ranker.py`` and stored in ``memory/retrieval/traversal_weights.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.retrieval.ranking import BASE_FEATURES, TurnRanker, default_ranker, turn_features, turn_layout
from logicmap.memory.runtime.deadline import check_deadline
from logicmap.memory.store import NamespaceSnapshot

__all__ = ["BRIDGE_SEEDS", "HOP_FEATURES", "SEEDS", "TraversalRanker", "default_traversal_ranker", "hop_features"]

SEEDS = 5  # the first hop: the ranker's best turns, whose events the traversal starts from
BRIDGE_SEEDS = 3  # the best of them, whose named entities (not in the question) are followed as bridges
HOP_FEATURES = (
    "same_event",  # the turn's event holds a seed turn (the turn is not a seed itself)
    "related_event",  # the turn's event is linked by a relation to a seed's event
    "shared_entity",  # the turn names an entity a seed names and the question does not (max idf)
    "same_topic",  # the turn's event is in a seed event's topic
    "seed_similarity",  # best cosine similarity of the turn to a seed turn
    "other_session",  # the turn is in a session no seed is in
    "seed",  # the turn is a seed
    "bridge_event",  # the turn's event (not a seed's) names a bridge entity of the best seeds (max idf)
    "bridge_turn",  # the turn itself names a bridge entity (max idf)
    "bridge_neighbour",  # the turn next to it in its event names a bridge entity (max idf)
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")


def _entity_layout(snapshot: NamespaceSnapshot) -> dict[str, Any]:
    """Per turn (in the ranker's layout order): the cue-layer entities it names (speakers left out), their
    inverse document frequencies, and the turns of each event."""
    layout = turn_layout(snapshot)
    ids = layout["ids"]
    names = {c.text for c in snapshot.cues.values() if c.text}
    speakers = set(layout["speakers"])
    entities = [frozenset(w for w in _WORD.findall(snapshot.turns[t].text) if w in names) - speakers for t in ids]
    frequency: dict[str, int] = {}
    for found in entities:
        for name in found:
            frequency[name] = frequency.get(name, 0) + 1
    idf = {name: float(np.log(len(ids) / n)) for name, n in frequency.items()}
    graph = EventGraph.of(snapshot)
    owner = graph.event_of_turn
    events = [owner.get(t) for t in ids]
    session = [snapshot.turns[t].session_id for t in ids]
    return {"entities": entities, "idf": idf, "events": events, "sessions": session, "graph": graph}


def _best_idf(found: frozenset[str] | set[str], wanted: set[str], idf: dict[str, float]) -> float:
    return max((idf[name] for name in found & wanted), default=0.0)


def hop_features(snapshot: NamespaceSnapshot, question: str, first_scores: np.ndarray) -> np.ndarray:
    """``HOP_FEATURES`` of every turn (rows in the ranker's layout order, as ``first_scores``): how the
    traversal from the first hop's ``SEEDS`` best turns reaches it."""
    layout, entity = turn_layout(snapshot), snapshot.derived(_entity_layout)
    n = len(layout["ids"])
    out = np.zeros((n, len(HOP_FEATURES)))
    if n == 0:
        return out
    seeds = np.argsort(-np.asarray(first_scores), kind="stable")[:SEEDS]
    graph, events, idf, entities = entity["graph"], entity["events"], entity["idf"], entity["entities"]
    asked = set(_WORD.findall(question))
    seed_events = {events[i] for i in seeds} - {None}
    related = {nb.event_id for e in seed_events for nb in graph.neighbors(e)} - seed_events
    seed_topics = {graph.topic_of.get(e) for e in seed_events} - {None}
    seed_names = set().union(*(entities[i] for i in seeds)) - asked
    bridges = set().union(*(entities[i] for i in seeds[:BRIDGE_SEEDS])) - asked
    seed_sessions = {entity["sessions"][i] for i in seeds}
    event_bridge: dict[str, float] = {}
    for i in range(n):
        if not i % 256:
            check_deadline("while ranking turns by their links")
        if events[i] is not None and events[i] not in seed_events:
            event_bridge[events[i]] = max(event_bridge.get(events[i], 0.0), _best_idf(entities[i], bridges, idf))
    similarity = (layout["turn_matrix"] @ layout["turn_matrix"][seeds].T).max(axis=1)
    is_seed = np.zeros(n, dtype=bool)
    is_seed[seeds] = True
    for i in range(n):
        if not i % 256:
            check_deadline("while ranking turns by their links")
        if is_seed[i]:
            continue
        event = events[i]
        neighbours = [j for j in (i - 1, i + 1) if 0 <= j < n and event is not None and events[j] == event]
        out[i] = (
            event in seed_events,
            event in related,
            _best_idf(entities[i], seed_names, idf),
            graph.topic_of.get(event) in seed_topics if event is not None else False,
            similarity[i],
            entity["sessions"][i] not in seed_sessions,
            0.0,
            event_bridge.get(event, 0.0) if event is not None else 0.0,
            _best_idf(entities[i], bridges, idf),
            max((_best_idf(entities[j], bridges, idf) for j in neighbours), default=0.0),
        )
    out[:, 6] = is_seed
    return out


@dataclass(frozen=True)
class TraversalRanker:
    """The second hop's scorer: a linear model over the ranker's ``BASE_FEATURES`` and ``HOP_FEATURES``, the
    hop features from the first hop's scores (the shipped ranker's unless ``first`` is given)."""

    coefficients: tuple[float, ...]
    intercept: float = 0.0
    first: TurnRanker | None = None
    """The first hop's ranker (None: the shipped one)."""

    def __post_init__(self) -> None:
        wanted = len(BASE_FEATURES) + len(HOP_FEATURES)
        if len(self.coefficients) != wanted:
            raise ValueError(
                f"a traversal ranker needs {wanted} coefficients (BASE_FEATURES then HOP_FEATURES), got {len(self.coefficients)}"
            )

    def scores(
        self, snapshot: NamespaceSnapshot, question: str, readings: Sequence[Sequence[float]] | np.ndarray
    ) -> dict[str, float]:
        """Every turn's score for ``question`` after the second hop (higher is more likely evidence)."""
        features = turn_features(snapshot, question, readings, BASE_FEATURES)
        if not features.turn_ids:
            return {}
        first = (self.first or default_ranker()).scores(snapshot, question, readings)
        first_scores = np.array([first[t] for t in features.turn_ids])
        matrix = np.column_stack([features.matrix, hop_features(snapshot, question, first_scores)])
        values = matrix @ np.asarray(self.coefficients) + self.intercept
        return dict(zip(features.turn_ids, values.tolist()))


@cache
def default_traversal_ranker() -> TraversalRanker:
    """The shipped second-hop ranker (``memory/retrieval/traversal_weights.py``, written by ``evals/train/traversal_ranker.py``)."""
    from logicmap.memory.retrieval.traversal_weights import COEFFICIENTS, INTERCEPT

    return TraversalRanker(tuple(COEFFICIENTS[name] for name in (*BASE_FEATURES, *HOP_FEATURES)), INTERCEPT)
