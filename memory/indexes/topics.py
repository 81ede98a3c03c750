"""The topic layer: incremental k-means over event embeddings (CompassMem's topic evolution).

k-means to start; each new event joins its most similar topic when the similarity exceeds ``delta``
(strictly greater), else opens a topic; every ``recluster_every`` steps all events are re-clustered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.indexes.kmeans import kmeans_labels
from logicmap.memory.records.records import Topic

__all__ = ["TopicLayer", "TopicUpdate", "n_clusters_for"]


def n_clusters_for(n_events: int) -> int:
    """The paper's rule ``max(2, min(n // 5, 50))``, never more clusters than events."""
    return max(1, min(n_events, max(2, min(n_events // 5, 50))))


@dataclass
class TopicUpdate:
    """The outcome of one topic step: topics to write, topics to retire, the new step count."""

    topics: list[Topic]
    retired: list[str]
    steps: int
    reclustered: bool
    joined: int = 0
    opened: int = 0
    assignment: dict[str, str] = field(default_factory=dict)


@dataclass
class TopicLayer:
    """Keeps topics up to date as events arrive. Pure: it returns changes, the store writes them."""

    delta: float = 0.9
    recluster_every: int = 4
    random_state: int = 0

    def update(
        self,
        namespace: str,
        topics: Mapping[str, Topic],
        vectors: Mapping[str, np.ndarray],
        new_event_ids: Sequence[str],
        steps: int,
    ) -> TopicUpdate:
        """One ingestion step. ``vectors`` holds every event of the namespace, new ones included."""
        steps += 1
        known = {m for t in topics.values() for m in t.members}
        new_ids = [e for e in new_event_ids if e in vectors and e not in known]
        if not topics or (self.recluster_every > 0 and steps % self.recluster_every == 0):
            fresh = self.recluster(namespace, vectors)
            retired = [tid for tid in topics if tid not in {t.id for t in fresh}]
            return TopicUpdate(
                topics=fresh,
                retired=retired,
                steps=steps,
                reclustered=True,
                assignment={m: t.id for t in fresh for m in t.members},
            )
        working = {tid: t.model_copy(deep=True) for tid, t in topics.items()}
        # Drop members that no longer exist (merged events) so centroids stay honest.
        for topic in working.values():
            topic.members = [m for m in topic.members if m in vectors]
        changed: set[str] = set(tid for tid, t in topics.items() if len(t.members) != len(working[tid].members))
        next_index = 1 + max((_index(tid) for tid in working), default=-1)
        joined = opened = 0
        assignment: dict[str, str] = {}
        for eid in new_ids:
            vec = normalize(vectors[eid])
            best_id, best_sim = None, -1.0
            for tid, topic in working.items():
                sim = float(normalize(np.asarray(topic.centroid, dtype=np.float32)) @ vec)
                if sim > best_sim:
                    best_id, best_sim = tid, sim
            if best_id is not None and best_sim > self.delta:  # App. B: joins when the similarity *exceeds* delta
                topic = working[best_id]
                topic.members.append(eid)
                topic.centroid = _centroid([vectors[m] for m in topic.members])
                changed.add(best_id)
                joined += 1
                assignment[eid] = best_id
            else:
                tid = f"T{next_index}"
                next_index += 1
                working[tid] = Topic(id=tid, namespace=namespace, centroid=_centroid([vectors[eid]]), members=[eid])
                changed.add(tid)
                opened += 1
                assignment[eid] = tid
        empty = [tid for tid, t in working.items() if not t.members]
        return TopicUpdate(
            topics=[working[tid] for tid in sorted(changed, key=_index) if tid not in empty],
            retired=[tid for tid in empty if tid in topics],
            steps=steps,
            reclustered=False,
            joined=joined,
            opened=opened,
            assignment=assignment,
        )

    def recluster(self, namespace: str, vectors: Mapping[str, np.ndarray]) -> list[Topic]:
        """Full k-means over all events; topics are numbered by their earliest member for stable ids."""
        ids = list(vectors)
        if not ids:
            return []
        matrix = normalize(np.vstack([vectors[e] for e in ids]))
        k = n_clusters_for(len(ids))
        if k <= 1:
            labels = np.zeros(len(ids), dtype=int)
        else:
            labels = kmeans_labels(matrix, k, n_init=3, random_state=self.random_state)
        clusters: dict[int, list[int]] = {}
        for row, label in enumerate(labels):
            clusters.setdefault(int(label), []).append(row)
        ordered = sorted(clusters.values(), key=lambda rows: rows[0])
        return [
            Topic(
                id=f"T{i}",
                namespace=namespace,
                centroid=_centroid([matrix[r] for r in rows]),
                members=[ids[r] for r in rows],
            )
            for i, rows in enumerate(ordered)
        ]


def _centroid(vectors: Sequence[np.ndarray]) -> list[float]:
    return cast(list[float], normalize(np.mean(np.vstack(vectors), axis=0)).astype(float).tolist())


def _index(topic_id: str) -> int:
    try:
        return int(topic_id.lstrip("T"))
    except ValueError:
        return 0
