"""The event graph: a ``networkx.MultiDiGraph`` view of a namespace's events, relations and topics.

Built from a committed snapshot and cached with it, so it is rebuilt only when the namespace changes.
"""

from __future__ import annotations

import threading
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.indexes.snapshot_file import VectorTable
from logicmap.memory.records.records import Event, Turn

if TYPE_CHECKING:
    import networkx as nx

    from logicmap.memory.store import NamespaceSnapshot

__all__ = ["EventGraph", "Neighbor", "Ranking"]

_RECENT_QUERIES = 16  # query vectors whose similarities an event graph keeps


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with unit rows: itself when they are already (embedders give unit vectors), so a namespace's
    vectors are held once, not once more by its graph."""
    squares = np.einsum("ij,ij->i", matrix, matrix)
    if matrix.dtype == np.float32 and np.all(np.abs(squares - 1.0) < 1e-5):
        return matrix
    return normalize(matrix)


class Ranking:
    """Event ids best first by score (ties in graph order), without ``exclude``d ones, sorted only as far as
    they are read: a search reads tens of a namespace's events, and sorting all of them (and making a list of
    every id) was most of a query's time in a large namespace."""

    _FIRST = 64  # ids sorted by the first read; each further read sorts twice as many

    def __init__(self, ids: np.ndarray, scores: np.ndarray, exclude: Container[str] = frozenset()) -> None:
        self._ids, self._keys, self._exclude = ids, -np.asarray(scores, dtype=np.float64), exclude
        self._left = np.arange(len(ids))
        self._read: list[str] = []
        self._scores: dict[str, float] = {}  # the score of every id sorted so far
        self._size = self._FIRST

    def _more(self) -> bool:
        """Sort the next block of ids; False when none is left."""
        left = self._left
        if not left.size:
            return False
        keys, k = self._keys[left], min(self._size, left.size)
        if k < left.size:
            kth = np.partition(keys, k - 1)[k - 1]
            below = np.flatnonzero(keys < kth)
            chosen = np.concatenate([below, np.flatnonzero(keys == kth)[: k - len(below)]])
            chosen.sort()  # stable order below: ties keep graph order
        else:
            chosen = np.arange(left.size)
        block = chosen[np.argsort(keys[chosen], kind="stable")]
        ids = self._ids[left[block]].tolist()
        self._scores.update(zip(ids, (-keys[block]).tolist()))
        self._read.extend(e for e in ids if e not in self._exclude)
        self._left = np.delete(left, chosen)
        self._size *= 2
        return True

    def __iter__(self) -> Iterator[str]:
        i = 0
        while True:
            while i < len(self._read):
                yield self._read[i]
                i += 1
            if not self._more():
                return

    def head(self, n: int) -> list[str]:
        """The first ``n`` ids."""
        return list(islice(self, n))

    def score(self, event_id: str) -> float:
        """``event_id``'s ranking score (what orders it; the query similarity under the dense recipe), for an id
        already read from the ranking (a candidate): kept as its block was sorted, so no search of the ids."""
        return self._scores[event_id]


@dataclass(frozen=True)
class Neighbor:
    """An adjacent event, the relation label and whether the edge points out of or into the event."""

    event_id: str
    label: str
    direction: str  # "out": event -> neighbor, "in": neighbor -> event


class EventGraph:
    """Events as nodes, typed relations as edges, topic membership as a node attribute.

    Edges are kept as compact arrays (per event, its out- and in-edges in the order ``networkx`` would
    list them); ``graph`` builds the ``networkx.MultiDiGraph`` view on first use."""

    def __init__(self, snapshot: NamespaceSnapshot) -> None:
        self.namespace = snapshot.namespace
        self.snapshot = snapshot
        self.events: dict[str, Event] = snapshot.events
        self.turns: dict[str, Turn] = snapshot.turns
        self.topic_of: dict[str, str] = {}
        for topic in snapshot.topics.values():
            for member in topic.members:
                self.topic_of[member] = topic.id
        self.ids: list[str] = list(self.events)
        self._turn_index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._index = {eid: i for i, eid in enumerate(self.ids)}
        self._id_array = np.array(self.ids, dtype=object)
        self._recent: dict[bytes, np.ndarray] = {}
        self._lock = threading.Lock()
        self._build_edges(snapshot)
        table = VectorTable.of(snapshot.event_vectors)
        if self.ids and all(eid in table for eid in self.ids):
            self.matrix = _unit_rows(table.rows_of(self.ids))
        else:
            self.matrix = np.zeros((len(self.ids), 1), dtype=np.float32)

    def _build_edges(self, snapshot: NamespaceSnapshot) -> None:
        """Relations between known events, deduplicated by (source, target, label), as sorted arrays."""
        index, labels = self._index, cast(dict[str, int], {})
        triples: dict[tuple[int, int, int], int] = {}
        pair_first: dict[tuple[int, int], int] = {}
        for rel in snapshot.relations.values():
            source, target = index.get(rel.source), index.get(rel.target)
            if source is None or target is None:
                continue
            label = labels.setdefault(rel.label, len(labels))
            key = (source, target, label)
            if key not in triples:
                triples[key] = len(triples)
                pair_first.setdefault((source, target), triples[key])
        self._labels = list(labels)
        n = len(triples)
        edges = np.array(list(triples), dtype=np.int64).reshape(n, 3)
        order = np.arange(n, dtype=np.int64)
        first = np.fromiter((pair_first[(s, t)] for s, t, _ in triples), dtype=np.int64, count=n)
        self._edges = edges
        # networkx lists a node's edges neighbour by neighbour (in the order each was first linked), then by key.
        self._out = np.lexsort((order, first, edges[:, 0])) if n else order
        self._in = np.lexsort((order, first, edges[:, 1])) if n else order
        self._out_ptr = (
            np.searchsorted(edges[self._out, 0], np.arange(len(self.ids) + 1))
            if n
            else np.zeros(len(self.ids) + 1, dtype=np.int64)
        )
        self._in_ptr = (
            np.searchsorted(edges[self._in, 1], np.arange(len(self.ids) + 1))
            if n
            else np.zeros(len(self.ids) + 1, dtype=np.int64)
        )

    @cached_property
    def graph(self) -> nx.MultiDiGraph:
        """The ``networkx.MultiDiGraph`` view (built on first use: drawing, analysis; networkx is imported then)."""
        import networkx as nx

        graph = nx.MultiDiGraph()
        for eid, event in self.events.items():
            graph.add_node(eid, summary=event.summary, topic=self.topic_of.get(eid), time=event.time)
        for rel in self.snapshot.relations.values():
            if rel.source in self.events and rel.target in self.events:
                graph.add_edge(rel.source, rel.target, key=rel.label, label=rel.label, turn_ids=rel.turn_ids)
        return graph

    def index_of(self, event_id: str) -> int:
        """The event's row in ``ids`` (and in ``matrix``)."""
        return self._index[event_id]

    @classmethod
    def from_snapshot(cls, snapshot: NamespaceSnapshot) -> EventGraph:
        return cls(snapshot)

    @classmethod
    def of(cls, snapshot: NamespaceSnapshot) -> EventGraph:
        """The event graph of a snapshot, built once and cached on it."""
        return snapshot.derived(cls.from_snapshot)

    def topic_leaders(self, ranking: Iterable[str], top_p: int) -> list[str]:
        """The best event of each of the first ``top_p`` distinct topics of ``ranking`` (CompassMem's
        topic-diverse starting candidates); an event without a topic is a topic of its own."""
        seen_topics: set[str] = set()
        leaders: list[str] = []
        for eid in ranking:
            topic = self.topic_of.get(eid, f"solo:{eid}")
            if topic not in seen_topics:
                seen_topics.add(topic)
                leaders.append(eid)
                if len(seen_topics) >= top_p:
                    break
        return leaders

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self.events

    def vector(self, event_id: str) -> np.ndarray:
        return cast(np.ndarray, self.matrix[self._index[event_id]])

    def neighbors(self, event_id: str, relation_types: set[str] | None = None) -> list[Neighbor]:
        """Events linked to ``event_id`` in either direction, optionally only by the given labels."""
        row = self._index.get(event_id)
        if row is None:
            return []
        found: list[Neighbor] = []
        seen: set[tuple[str, str, str]] = set()
        for direction, order, ptr, column in (("out", self._out, self._out_ptr, 1), ("in", self._in, self._in_ptr, 0)):
            for edge in order[ptr[row] : ptr[row + 1]]:
                other, label = self.ids[self._edges[edge, column]], self._labels[self._edges[edge, 2]]
                if relation_types is None or label in relation_types:
                    key = (other, label, direction)
                    if key not in seen and other != event_id:
                        seen.add(key)
                        found.append(Neighbor(other, label, direction))
        return found

    def similarities(self, query_vector: np.ndarray | list[float]) -> np.ndarray:
        """Cosine similarity of every event (in ``self.ids`` order) to a vector.

        The last few answers are kept (a query's readings are scored again by later steps of one search), so
        a namespace's matrix is read once per distinct vector; the caller gets its own copy."""
        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        query = normalize(np.asarray(query_vector, dtype=np.float32))
        key = query.tobytes()
        with self._lock:
            known = self._recent.get(key)
        if known is None:
            known = self.matrix @ query
            with self._lock:
                self._recent[key] = known
                while len(self._recent) > _RECENT_QUERIES:
                    self._recent.pop(next(iter(self._recent)))
        return known.copy()

    def ranking(self, scores: np.ndarray) -> list[str]:
        """Event ids best first by ``scores`` (one per event, in ``ids`` order; ties keep graph order)."""
        return cast(list[str], self._id_array[np.argsort(-scores, kind="stable")].tolist())

    def ranked(self, scores: np.ndarray, exclude: Container[str] = frozenset()) -> Ranking:
        """``ranking(scores)`` without ``exclude``, sorted lazily (read it with ``head`` or by iterating)."""
        return Ranking(self._id_array, scores, exclude)

    def turn_similarities(self, query_vector: np.ndarray | list[float], rows: np.ndarray | None = None) -> np.ndarray:
        """Per event (in ``self.ids`` order, or only the events at ``rows``), the best cosine similarity of its
        summary or one of its cited turns to a vector.

        Events whose text is a concatenation of turns (the no-LLM segmenter's) are found by their best
        turn rather than by one diluted, possibly truncated, embedding of all of them.
        """
        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        if self._turn_index is None:
            self._turn_index = self._build_turn_index()
        owners, starts, matrix = self._turn_index
        query = normalize(np.asarray(query_vector, dtype=np.float32))
        if rows is not None:
            return self._turn_similarities_at(np.asarray(rows, dtype=np.int64), query, self._turn_index)
        scores = self.similarities(query)
        if len(owners):
            # Turns are grouped by event (ascending rows): the best turn of each group, in one pass.
            best = np.maximum.reduceat(matrix @ query, starts)
            scores[owners] = np.maximum(scores[owners], best)
        return scores

    def _turn_similarities_at(
        self, rows: np.ndarray, query: np.ndarray, turn_index: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> np.ndarray:
        owners, starts, matrix = turn_index
        scores = self.matrix[rows] @ query if len(rows) else np.zeros(0, dtype=np.float32)
        if len(owners) and len(rows):
            group = np.searchsorted(owners, rows)
            has = (group < len(owners)) & (owners[np.minimum(group, len(owners) - 1)] == rows)
            ends = np.r_[starts[1:], len(matrix)]
            for i in np.flatnonzero(has):
                g = group[i]
                scores[i] = max(scores[i], float((matrix[starts[g] : ends[g]] @ query).max()))
        return scores

    def _build_turn_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cited turns' unit vectors grouped by event: (event rows, group starts, matrix)."""
        table = VectorTable.of(self.snapshot.turn_vectors)
        owners, tids = [], []
        for i, eid in enumerate(self.ids):
            for tid in self.events[eid].turn_ids:
                if tid in table:
                    owners.append(i)
                    tids.append(tid)
        if not tids:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
        rows = np.asarray(owners, dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        return rows[starts], starts, normalize(table.rows_of(tids))

    def top_k(self, query_vector: np.ndarray | list[float], k: int) -> list[tuple[str, float]]:
        sims = self.similarities(query_vector)
        if sims.size == 0:
            return []
        k = min(k, sims.size)
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self.ids[i], float(sims[i])) for i in top]

    @cached_property
    def event_of_turn(self) -> dict[str, str]:
        """The event citing each turn (the last one, should two cite it)."""
        return {t: eid for eid in self.ids for t in self.events[eid].turn_ids}

    def turns_of(self, event_id: str) -> list[Turn]:
        event = self.events[event_id]
        return [self.turns[t] for t in event.turn_ids if t in self.turns]

    def relation_labels(self) -> dict[str, int]:
        counts: Any = np.bincount(self._edges[:, 2], minlength=len(self._labels)) if len(self._edges) else []
        return {label: int(n) for label, n in zip(self._labels, counts) if n}

    def stats(self) -> dict[str, object]:
        return {
            "events": len(self.ids),
            "relations": len(self._edges),
            "topics": len(self.snapshot.topics),
            "turns": len(self.turns),
            "sessions": len(self.snapshot.manifest.sessions),
            "relation_labels": self.relation_labels(),
        }
