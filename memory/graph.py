"""The event graph: a ``networkx.MultiDiGraph`` view of a namespace's events, relations and topics.

Built from a committed snapshot and cached with it, so it is rebuilt only when the namespace changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from logicmap.memory.embeddings import normalize
from logicmap.memory.records import Event, Turn

if TYPE_CHECKING:
    from logicmap.memory.store import NamespaceSnapshot

__all__ = ["EventGraph", "Neighbor"]


@dataclass(frozen=True)
class Neighbor:
    """An adjacent event, the relation label and whether the edge points out of or into the event."""

    event_id: str
    label: str
    direction: str  # "out": event -> neighbor, "in": neighbor -> event


class EventGraph:
    """Events as nodes, typed relations as edges, topic membership as a node attribute."""

    def __init__(self, snapshot: NamespaceSnapshot) -> None:
        self.namespace = snapshot.namespace
        self.snapshot = snapshot
        self.events: dict[str, Event] = snapshot.events
        self.turns: dict[str, Turn] = snapshot.turns
        self.topic_of: dict[str, str] = {}
        for topic in snapshot.topics.values():
            for member in topic.members:
                self.topic_of[member] = topic.id
        self.graph = nx.MultiDiGraph()
        for eid, event in self.events.items():
            self.graph.add_node(eid, summary=event.summary, topic=self.topic_of.get(eid), time=event.time)
        for rel in snapshot.relations.values():
            if rel.source in self.events and rel.target in self.events:
                self.graph.add_edge(rel.source, rel.target, key=rel.label, label=rel.label, turn_ids=rel.turn_ids)
        self.ids: list[str] = list(self.events)
        self._turn_index: tuple[np.ndarray, np.ndarray] | None = None
        self._index = {eid: i for i, eid in enumerate(self.ids)}
        vectors = [snapshot.event_vectors[eid] for eid in self.ids if eid in snapshot.event_vectors]
        if self.ids and len(vectors) == len(self.ids):
            self.matrix = normalize(np.vstack(vectors))
        else:
            self.matrix = np.zeros((len(self.ids), 1), dtype=np.float32)

    @classmethod
    def from_snapshot(cls, snapshot: NamespaceSnapshot) -> EventGraph:
        return cls(snapshot)

    @classmethod
    def of(cls, snapshot: NamespaceSnapshot) -> EventGraph:
        """The event graph of a snapshot, built once and cached on it."""
        return snapshot.derived(cls.from_snapshot)

    def topic_leaders(self, ranking: list[str], top_p: int) -> list[str]:
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
        return self.matrix[self._index[event_id]]

    def neighbors(self, event_id: str, relation_types: set[str] | None = None) -> list[Neighbor]:
        """Events linked to ``event_id`` in either direction, optionally only by the given labels."""
        found: list[Neighbor] = []
        seen: set[tuple[str, str, str]] = set()
        for _, target, label in self.graph.out_edges(event_id, keys=True):
            if relation_types is None or label in relation_types:
                key = (target, label, "out")
                if key not in seen and target != event_id:
                    seen.add(key)
                    found.append(Neighbor(target, label, "out"))
        for source, _, label in self.graph.in_edges(event_id, keys=True):
            if relation_types is None or label in relation_types:
                key = (source, label, "in")
                if key not in seen and source != event_id:
                    seen.add(key)
                    found.append(Neighbor(source, label, "in"))
        return found

    def similarities(self, query_vector: np.ndarray | list[float]) -> np.ndarray:
        """Cosine similarity of every event (in ``self.ids`` order) to a vector."""
        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        return self.matrix @ normalize(np.asarray(query_vector, dtype=np.float32))

    def turn_similarities(self, query_vector: np.ndarray | list[float]) -> np.ndarray:
        """Per event (in ``self.ids`` order), the best cosine similarity of one of its cited turns to a vector.

        Events whose text is a concatenation of turns (the no-LLM segmenter's) are found by their best
        turn rather than by one diluted, possibly truncated, embedding of all of them.
        """
        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        if self._turn_index is None:
            owners, vectors = [], []
            for i, eid in enumerate(self.ids):
                for tid in self.events[eid].turn_ids:
                    vec = self.snapshot.turn_vectors.get(tid)
                    if vec is not None:
                        owners.append(i)
                        vectors.append(vec)
            matrix = normalize(np.vstack(vectors)) if vectors else np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
            self._turn_index = (np.asarray(owners, dtype=np.int64), matrix)
        owners, matrix = self._turn_index
        scores = self.similarities(query_vector)
        if len(owners):
            np.maximum.at(scores, owners, matrix @ normalize(np.asarray(query_vector, dtype=np.float32)))
        return scores

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
        counts: dict[str, int] = {}
        for _, _, label in self.graph.edges(keys=True):
            counts[label] = counts.get(label, 0) + 1
        return counts

    def stats(self) -> dict[str, object]:
        return {
            "events": len(self.ids),
            "relations": self.graph.number_of_edges(),
            "topics": len(self.snapshot.topics),
            "turns": len(self.turns),
            "sessions": len(self.snapshot.manifest.sessions),
            "relation_labels": self.relation_labels(),
        }
