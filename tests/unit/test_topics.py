"""The topic layer: k-means start, join-or-open assignment, periodic re-clustering, the n_clusters rule."""

from __future__ import annotations

import numpy as np

from logicmap.memory.topics import TopicLayer, n_clusters_for


def _blob(center: np.ndarray, n: int, seed: int, spread: float = 0.05) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        v = center + rng.normal(0, spread, center.shape)
        out.append((v / np.linalg.norm(v)).astype(np.float32))
    return out


def test_cluster_count_rule() -> None:
    assert n_clusters_for(3) == 2
    assert n_clusters_for(10) == 2
    assert n_clusters_for(40) == 8
    assert n_clusters_for(1000) == 50
    assert n_clusters_for(1) == 1


def test_first_step_runs_kmeans_and_separates_blobs() -> None:
    a, b = np.eye(8)[0], np.eye(8)[1]
    vectors = {f"e{i}": v for i, v in enumerate(_blob(a, 5, 1) + _blob(b, 5, 2))}
    update = TopicLayer(delta=0.9, recluster_every=4).update("ns", {}, vectors, list(vectors), steps=0)
    assert update.reclustered and update.steps == 1
    groups = sorted(sorted(t.members) for t in update.topics)
    assert groups == [[f"e{i}" for i in range(5)], sorted(f"e{i}" for i in range(5, 10))]


def test_new_event_joins_a_similar_topic_or_opens_one() -> None:
    a, b, c = np.eye(8)[0], np.eye(8)[1], np.eye(8)[2]
    vectors = {f"e{i}": v for i, v in enumerate(_blob(a, 5, 1) + _blob(b, 5, 2))}
    layer = TopicLayer(delta=0.9, recluster_every=4)
    first = layer.update("ns", {}, vectors, list(vectors), steps=0)
    topics = {t.id: t for t in first.topics}
    vectors["near_a"] = _blob(a, 1, 3, spread=0.01)[0]
    vectors["far"] = _blob(c, 1, 4, spread=0.01)[0]
    second = layer.update("ns", topics, vectors, ["near_a", "far"], steps=first.steps)
    assert not second.reclustered
    assert second.joined == 1 and second.opened == 1
    joined_topic = second.assignment["near_a"]
    assert set(topics[joined_topic].members) < set(next(t for t in second.topics if t.id == joined_topic).members)
    new_topic = second.assignment["far"]
    assert new_topic not in topics and [t.members for t in second.topics if t.id == new_topic] == [["far"]]


def test_full_reclustering_every_t_steps() -> None:
    layer = TopicLayer(delta=0.99, recluster_every=2)
    rng = np.random.default_rng(0)
    vectors: dict[str, np.ndarray] = {}
    topics: dict = {}
    steps = 0
    history = []
    for step in range(4):
        new = []
        for i in range(6):
            v = rng.normal(size=8)
            vectors[f"s{step}e{i}"] = (v / np.linalg.norm(v)).astype(np.float32)
            new.append(f"s{step}e{i}")
        update = layer.update("ns", topics, vectors, new, steps)
        steps = update.steps
        history.append(update.reclustered)
        topics = {t.id: t for t in (*[t for t in topics.values() if t.id not in update.retired], *update.topics)}
        topics = {t.id: t for t in update.topics} if update.reclustered else topics
    assert history == [True, True, False, True]
    assert len(topics) == n_clusters_for(len(vectors))
    assert sorted(m for t in topics.values() for m in t.members) == sorted(vectors)
