"""The graph-feature reranker: a learned turn ranker over the event graph, for the no-LLM policies.

Every turn of a namespace gets a score for a question from features the graph gives it (the similarity of
its event, of its event's topic, of the turns before and after it in its event, of the question it replies
to) next to its own similarity, its lexical match and who said it. The weights are a logistic regression
fitted on public LoCoMo conversations by ``evals/loco.py`` (leave-one-conversation-out figures in its output
and in docs/performance.md) and stored in ``memory/retrieval/turn_ranker_weights.py``; the extra keys of
``memory.retrieval.ranking_keys`` that held out there are features too. The fit sees each question's context (each
feature's best value over its turns) beside each turn's features: ``TurnRanker.context``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, cast

import numpy as np

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.language.timeparse import find_time_phrases
from logicmap.memory.records.chat_turns import recall_turn_ids
from logicmap.memory.retrieval.ranking_keys import (
    CANDIDATE_FEATURES,
    build_key_layout,
    diversify,
    gathers,
    key_features,
)
from logicmap.memory.retrieval.retrieval import turn_index
from logicmap.memory.store import NamespaceSnapshot

__all__ = [
    "ALL_FEATURES",
    "BASE_FEATURES",
    "FEATURES",
    "GRAPH_FEATURES",
    "TurnFeatures",
    "TurnRanker",
    "default_ranker",
    "key_layout",
    "turn_features",
    "turn_layout",
]

BASE_FEATURES = (
    "own",  # best cosine similarity of the turn to a reading of the question (the question, the question without names)
    "z_own",  # the same, standardised over the namespace's turns for this question
    "own_question",  # cosine similarity to the question as written
    "event",  # best similarity of the turn's event summary to a reading
    "z_event",  # the same, standardised
    "topic",  # best similarity of the event's topic centroid to a reading
    "previous",  # own similarity of the turn before it in its event (0 at the event's start)
    "next",  # own similarity of the turn after it in its event
    "reply",  # own similarity of the question this turn answers (another speaker's question right before it)
    "bm25",  # BM25 over turns, divided by the best turn's BM25 for this question
    "speaker_named",  # the question names the turn's speaker
    "dated_for_when",  # a "when" question and the turn holds a time phrase
    "length",  # log(1 + words)
)
#: Every feature a ranker may use: the base ones and the extra keys of ``memory.retrieval.ranking_keys``.
ALL_FEATURES = (*BASE_FEATURES, *CANDIDATE_FEATURES)
#: The features of the shipped ranker (``memory/retrieval/turn_ranker_weights.py``): the base ones and the extra keys that
#: held out on public conversations (``evals/loco.py``): the turn's session, event and neighbours as lexical keys,
#: the facts drawn from it, pseudo-relevance feedback and the sessions a stated date points at. The turn's, its
#: window's and its session's BM25 are read with -ing and -ed forms stemmed (``bm25_stem``, ``window_stem``,
#: ``session_stem`` in place of ``bm25``, ``window_bm25``, ``session_bm25``; issue 41, item 3).
FEATURES = (
    *(f for f in BASE_FEATURES if f != "bm25"),
    "session_own",
    "event_bm25",
    "fact_key",
    "prf",
    "time_match",
    "bm25_stem",
    "window_stem",
    "session_stem",
)
# The features only the event graph gives a turn (its event, topic, neighbours in its event, the question it
# replies to); the others a plain turn index has too. ``evals/train/turn_ranker.py`` fits a ranker without them
# to show what the graph adds.
GRAPH_FEATURES = ("event", "z_event", "topic", "previous", "next", "reply")
_WHEN = re.compile(r"\s*(when|what date|what day|how long ago)\b", re.IGNORECASE)


@dataclass
class TurnFeatures:
    """The feature matrix of every turn of a namespace (rows in ``turn_ids`` order, columns ``names``) for one
    question."""

    turn_ids: list[str]
    matrix: np.ndarray
    names: tuple[str, ...] = FEATURES


def _standardise(x: np.ndarray) -> np.ndarray:
    spread = float(x.std())
    return cast(np.ndarray, (x - x.mean()) / (spread if spread > 1e-9 else 1.0))


def _layout(snapshot: NamespaceSnapshot) -> dict[str, Any]:
    """Question-independent arrays of a snapshot, built once and kept on it."""
    return snapshot.derived(_build_layout)


def turn_layout(snapshot: NamespaceSnapshot) -> dict[str, Any]:
    """The ranker's question-independent arrays of a snapshot (``ids`` in row order, unit ``turn_matrix``,
    ``speakers``, ...), built once per snapshot."""
    return _layout(snapshot)


@lru_cache(maxsize=1 << 17)
def _dated(text: str) -> float:
    """1.0 when a turn's text holds a time phrase (kept across snapshots: a chat's next one re-reads the same turns)."""
    return 1.0 if find_time_phrases(text) else 0.0


def key_layout(snapshot: NamespaceSnapshot) -> dict[str, Any]:
    """The extra keys' question-independent arrays of a snapshot (``memory.retrieval.ranking_keys``), built once."""
    return snapshot.derived(_build_key_layout)


def _build_key_layout(snapshot: NamespaceSnapshot) -> dict[str, Any]:
    return build_key_layout(snapshot, _layout(snapshot))


def _build_layout(snapshot: NamespaceSnapshot) -> dict[str, Any]:
    graph = EventGraph.of(snapshot)
    recallable = recall_turn_ids(snapshot)
    ids = sorted((t for t in recallable if t in snapshot.turn_vectors), key=lambda t: snapshot.turns[t].position)
    owner = graph.event_of_turn
    turns = [snapshot.turns[t] for t in ids]
    same_event = [
        i > 0 and owner.get(ids[i - 1]) is not None and owner.get(ids[i - 1]) == owner.get(ids[i])
        for i in range(len(ids))
    ]
    topic_vectors = {
        tid: normalize(np.asarray(t.centroid, dtype=np.float32)) for tid, t in snapshot.topics.items() if t.centroid
    }
    topic_row = {tid: i for i, tid in enumerate(topic_vectors)}
    bm25_row = {t: i for i, t in enumerate(recallable)}
    event_ids = sorted(set(owner.values()))
    event_row = {e: i for i, e in enumerate(event_ids)}
    dim = len(next(iter(snapshot.turn_vectors.values()))) if snapshot.turn_vectors else 1
    layout = {
        "ids": ids,
        "turn_matrix": normalize(np.vstack([snapshot.turn_vectors[t] for t in ids])) if ids else np.zeros((0, dim)),
        "event_matrix": normalize(np.vstack([snapshot.event_vectors[e] for e in event_ids]))
        if event_ids
        else np.zeros((0, dim)),
        "event_of": np.array([event_row.get(owner.get(t, ""), -1) for t in ids], dtype=np.int64),
        "topic_matrix": np.vstack(list(topic_vectors.values())) if topic_vectors else np.zeros((0, dim)),
        "topic_of": np.array(
            [topic_row.get(graph.topic_of.get(owner.get(t, ""), ""), -1) for t in ids], dtype=np.int64
        ),
        "previous": np.array(same_event, dtype=bool),
        "next": np.array([*same_event[1:], False], dtype=bool),
        "reply": np.array([same_event[i] and turns[i].answers(turns[i - 1]) for i in range(len(ids))], dtype=bool),
        "speakers": [t.speaker for t in turns],
        "dated": np.array([_dated(t.text) for t in turns]),
        "length": np.array([np.log1p(len(t.text.split())) for t in turns]),
        # Rows of the shared BM25 turn index (``recall_turn_ids`` order) in this layout's order.
        "bm25_rows": np.array([bm25_row[t] for t in ids], dtype=np.int64),
    }
    return layout


def turn_features(
    snapshot: NamespaceSnapshot,
    question: str,
    readings: Sequence[Sequence[float]] | np.ndarray,
    names: Sequence[str] = FEATURES,
) -> TurnFeatures:
    """Features ``names`` (of ``ALL_FEATURES``) of every turn for ``question``; ``readings`` are the unit vectors
    of the question's readings (``memory.language.text.query_readings``), the question as written first."""
    unknown = [n for n in names if n not in ALL_FEATURES]
    if unknown:
        raise ValueError(f"unknown ranker features {unknown}; known: {', '.join(ALL_FEATURES)}")
    layout = _layout(snapshot)
    ids = layout["ids"]
    if not ids:
        return TurnFeatures([], np.zeros((0, len(names))), tuple(names))
    queries = normalize(np.atleast_2d(np.asarray(readings, dtype=np.float32)))
    own_all = layout["turn_matrix"] @ queries.T
    own, own_question = own_all.max(axis=1), own_all[:, 0]
    event_sims = (layout["event_matrix"] @ queries.T).max(axis=1) if len(layout["event_matrix"]) else np.zeros(0)
    event = np.where(
        layout["event_of"] >= 0, event_sims[np.maximum(layout["event_of"], 0)] if len(event_sims) else 0.0, 0.0
    )
    topic_sims = (layout["topic_matrix"] @ queries.T).max(axis=1) if len(layout["topic_matrix"]) else np.zeros(0)
    topic = np.where(
        layout["topic_of"] >= 0, topic_sims[np.maximum(layout["topic_of"], 0)] if len(topic_sims) else 0.0, 0.0
    )
    before = np.concatenate([[0.0], own[:-1]])
    after = np.concatenate([own[1:], [0.0]])
    lexical = turn_index(snapshot).scores(question)[layout["bm25_rows"]].astype(np.float64)
    lexical = lexical / (lexical.max() or 1.0)
    named = {s for s in set(layout["speakers"]) if s and s in question}
    speaker = np.array([1.0 if s in named else 0.0 for s in layout["speakers"]])
    when = 1.0 if _WHEN.match(question) else 0.0
    matrix = np.column_stack(
        [
            own,
            _standardise(own),
            own_question,
            event,
            _standardise(event),
            topic,
            np.where(layout["previous"], before, 0.0),
            np.where(layout["next"], after, 0.0),
            np.where(layout["reply"], before, 0.0),
            lexical,
            speaker,
            layout["dated"] * when,
            layout["length"],
        ]
    ).astype(np.float64)
    if any(n in CANDIDATE_FEATURES for n in names):
        matrix = np.column_stack([matrix, key_features(question, queries, own, lexical, layout, key_layout(snapshot))])
    columns = [ALL_FEATURES.index(n) for n in names]
    return TurnFeatures(list(ids), matrix[:, columns], tuple(names))


@dataclass(frozen=True)
class TurnRanker:
    """A linear scorer over ``names`` (``FEATURES`` unless given; a logistic regression's coefficients and
    intercept). ``session_diversity``: the first ``DIVERSE_BUDGET`` turns are taken greedily, each losing this
    much per turn already taken from its session (``memory.retrieval.ranking_keys.diversify``; 0: by score alone).
    ``gather_diversity``: that weight for a question that gathers its answer over the conversation
    (``memory.retrieval.ranking_keys.gathers``: "What books has Tim read?"; 0: ``session_diversity`` for it too).
    ``context``: coefficients of the question's best value of each feature (its maximum over the namespace's
    turns; empty: none). That term is the same for every turn of a question, so it never reorders them; it is
    there because the weights are fitted with it (``evals/loco.py``): the fit pools turns of many questions, and
    the question-level columns take up what differs between questions (how well the best turn matches, whether
    it is a "when" question), which leaves the turn-level weights to what ranks turns within one."""

    coefficients: tuple[float, ...]
    intercept: float = 0.0
    names: tuple[str, ...] = FEATURES
    session_diversity: float = 0.0
    context: tuple[float, ...] = ()
    gather_diversity: float = 0.0

    def __post_init__(self) -> None:
        unknown = [n for n in self.names if n not in ALL_FEATURES]
        if unknown:
            raise ValueError(f"unknown ranker features {unknown}; known: {', '.join(ALL_FEATURES)}")
        if len(self.coefficients) != len(self.names):
            raise ValueError(
                f"a turn ranker needs {len(self.names)} coefficients ({', '.join(self.names)}), got {len(self.coefficients)}"
            )
        if self.context and len(self.context) != len(self.names):
            raise ValueError(
                f"a turn ranker's context needs {len(self.names)} coefficients or none, got {len(self.context)}"
            )

    def diversity(self, question: str) -> float:
        """The session-diversity weight the first turns of ``question`` are taken with."""
        if self.gather_diversity > 0 and gathers(question):
            return self.gather_diversity
        return self.session_diversity

    def scores(
        self, snapshot: NamespaceSnapshot, question: str, readings: Sequence[Sequence[float]] | np.ndarray
    ) -> dict[str, float]:
        """Every turn's score for ``question`` (higher is more likely evidence)."""
        features = turn_features(snapshot, question, readings, self.names)
        values = features.matrix @ np.asarray(self.coefficients) + self.intercept
        if self.context and len(values):
            values = values + float(features.matrix.max(axis=0) @ np.asarray(self.context))
        weight = self.diversity(question)
        if weight > 0 and len(values):
            values = diversify(values, key_layout(snapshot)["session_of"], weight)
        return dict(zip(features.turn_ids, values.tolist()))


@cache
def default_ranker() -> TurnRanker:
    """The shipped ranker (``memory/retrieval/turn_ranker_weights.py``, written by ``evals/loco.py``)."""
    from logicmap.memory.retrieval import turn_ranker_weights as weights

    context: dict[str, float] = getattr(weights, "CONTEXT", {})
    return TurnRanker(
        tuple(weights.COEFFICIENTS[name] for name in FEATURES),
        weights.INTERCEPT,
        FEATURES,
        getattr(weights, "SESSION_DIVERSITY", 0.0),
        tuple(context[name] for name in FEATURES) if context else (),
        getattr(weights, "GATHER_DIVERSITY", 0.0),
    )
