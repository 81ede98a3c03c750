"""Retrieval backbones over a namespace: BM25 and dense search over turns and events.

Every backbone returns ``Hit`` records with the turn ids they cite, so any strategy can use any of them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.language.text import tokenize, verb_stemmed_tokens
from logicmap.memory.records.chat_turns import recall_turn_ids
from logicmap.memory.runtime.deadline import check_deadline
from logicmap.memory.store import NamespaceSnapshot, SnapshotReader

__all__ = [
    "BM25Index",
    "Backbone",
    "Hit",
    "MemoryRetriever",
    "bm25_events",
    "bm25_turns",
    "dense_events",
    "dense_turns",
    "event_index",
    "reciprocal_rank_fusion",
    "tokenize",
    "turn_index",
]


@lru_cache(maxsize=1 << 17)
def _terms(document: str) -> Counter[str]:
    """A document's term counts, shared by every index that holds it (a chat's next snapshot re-indexes the same
    turns; never mutated)."""
    return Counter(tokenize(document))


@lru_cache(maxsize=1 << 17)
def _stemmed_terms(document: str) -> Counter[str]:
    """``_terms`` with ``verb_stemmed_tokens`` (a ``BM25Index(..., stemmed=True)``)."""
    return Counter(verb_stemmed_tokens(document))


class BM25Index:
    """Okapi BM25 (k1 = 1.5, b = 0.75) over a fixed list of documents; ``stemmed``: documents and queries read
    with ``-ing`` and ``-ed`` forms stemmed (``memory.language.text.verb_stemmed_tokens``)."""

    def __init__(self, documents: Sequence[str], k1: float = 1.5, b: float = 0.75, *, stemmed: bool = False) -> None:
        self.k1, self.b = k1, b
        self.tokens = verb_stemmed_tokens if stemmed else tokenize
        self.docs = [(_stemmed_terms if stemmed else _terms)(d) for d in documents]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float32)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.norms = self.k1 * (1 - self.b + self.b * self.lengths / (self.avg or 1.0))
        # Postings: for each term, the documents holding it and how often, so a query touches only those.
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, doc in enumerate(self.docs):
            if not i % 256:
                check_deadline("while indexing turns for BM25")
            for t, f in doc.items():
                rows, freqs = postings.setdefault(t, ([], []))
                rows.append(i)
                freqs.append(f)
        self.postings = {
            t: (np.asarray(r, dtype=np.int64), np.asarray(f, dtype=np.float32)) for t, (r, f) in postings.items()
        }

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs), dtype=np.float32)
        for t in self.tokens(query):  # a repeated query term counts again, as in the per-document sum
            check_deadline("while scoring turns with BM25")
            if t in self.postings:
                rows, f = self.postings[t]
                out[rows] += self.idf[t] * f * (self.k1 + 1) / (f + self.norms[rows])
        return out


@dataclass
class Hit:
    """One retrieved memory: a turn or an event, its text, the turns it cites, and its score."""

    kind: Literal["turn", "event", "fact"]
    id: str
    text: str
    turn_ids: list[str] = field(default_factory=list)
    score: float = 0.0
    time: str | None = None


class Backbone(Protocol):
    """What Goal-Mem, the baselines and the tools need from a retriever."""

    name: str

    def search(self, query: str, k: int) -> list[Hit]: ...


def _turn_hit(snapshot: NamespaceSnapshot, dia_id: str, score: float) -> Hit:
    turn = snapshot.turns[dia_id]
    when = turn.session_time.date().isoformat() if turn.session_time else None
    return Hit("turn", dia_id, turn.render(), [dia_id], score, when)


def _event_hit(snapshot: NamespaceSnapshot, eid: str, score: float) -> Hit:
    event = snapshot.events[eid]
    return Hit("event", eid, event.render(), list(event.turn_ids), score, event.time)


def event_index(snapshot: NamespaceSnapshot) -> BM25Index:
    """BM25 over a snapshot's event summaries, in ``snapshot.events`` order; built once per snapshot."""
    return snapshot.derived(_event_index)


def _event_index(snapshot: NamespaceSnapshot) -> BM25Index:
    return BM25Index([event.summary for event in snapshot.events.values()])


def _turn_index(snapshot: NamespaceSnapshot) -> BM25Index:
    return BM25Index([snapshot.turns[t].render() for t in recall_turn_ids(snapshot)])


def _turn_matrix(snapshot: NamespaceSnapshot) -> np.ndarray:
    return normalize(np.vstack([snapshot.turn_vectors[i] for i in recall_turn_ids(snapshot)]))


def _event_matrix(snapshot: NamespaceSnapshot) -> np.ndarray:
    return normalize(np.vstack([snapshot.event_vectors[i] for i in snapshot.events]))


class MemoryRetriever:
    """A backbone over one namespace: ``bm25`` or ``dense`` over ``turns`` or ``events``."""

    def __init__(
        self,
        store: SnapshotReader,
        namespace: str,
        *,
        method: Literal["bm25", "dense"],
        unit: Literal["turns", "events"],
        embeddings: Embeddings | None = None,
    ) -> None:
        if method == "dense" and embeddings is None:
            raise ValueError("a dense backbone needs an embedder")
        self.store, self.namespace, self.method, self.unit, self.embeddings = store, namespace, method, unit, embeddings
        self.name = f"{method}_{unit}"

    def search(self, query: str, k: int) -> list[Hit]:
        snapshot = self.store.snapshot(self.namespace)
        ids = recall_turn_ids(snapshot) if self.unit == "turns" else list(snapshot.events)
        if not ids or k <= 0:
            return []
        make = _turn_hit if self.unit == "turns" else _event_hit
        if self.method == "bm25":
            index = turn_index(snapshot) if self.unit == "turns" else event_index(snapshot)
            scores = index.scores(query)
        else:
            matrix = snapshot.derived(_turn_matrix if self.unit == "turns" else _event_matrix)
            assert self.embeddings is not None
            scores = matrix @ normalize(np.asarray(self.embeddings.embed_query(query), dtype=np.float32))
        order = np.argsort(-scores, kind="stable")[:k]
        return [make(snapshot, ids[i], float(scores[i])) for i in order]


def turn_index(snapshot: NamespaceSnapshot) -> BM25Index:
    """BM25 over the turns recall may return (rendered; ``memory.records.chat_turns.recall_turn_ids``, in its order);
    built once per snapshot and shared by the BM25 backbone and the graph-feature reranker."""
    return snapshot.derived(_turn_index)


def bm25_turns(store: SnapshotReader, namespace: str) -> MemoryRetriever:
    return MemoryRetriever(store, namespace, method="bm25", unit="turns")


def bm25_events(store: SnapshotReader, namespace: str) -> MemoryRetriever:
    return MemoryRetriever(store, namespace, method="bm25", unit="events")


def dense_turns(store: SnapshotReader, namespace: str, embeddings: Embeddings) -> MemoryRetriever:
    return MemoryRetriever(store, namespace, method="dense", unit="turns", embeddings=embeddings)


def dense_events(store: SnapshotReader, namespace: str, embeddings: Embeddings) -> MemoryRetriever:
    return MemoryRetriever(store, namespace, method="dense", unit="events", embeddings=embeddings)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = 60) -> list[tuple[str, float]]:
    """Fuse several rankings of ids: score = sum of 1 / (k + rank)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, rid in enumerate(ranking):
            scores[rid] = scores.get(rid, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
