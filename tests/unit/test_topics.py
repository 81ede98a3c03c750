"""The topic layer: k-means start, join-or-open assignment, periodic re-clustering, the n_clusters rule."""

from __future__ import annotations

import numpy as np

from logicmap.memory.indexes.topics import TopicLayer, n_clusters_for
from logicmap.memory.records.records import Topic


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


def _at(cosine: float) -> np.ndarray:
    """A unit vector at ``cosine`` to the first axis (exact in float32 for 0.5 and 0.75)."""
    return np.array([cosine, np.sqrt(1 - cosine * cosine), 0, 0], dtype=np.float32)


def _one_topic() -> dict[str, Topic]:
    return {"T0": Topic(id="T0", namespace="ns", centroid=[1.0, 0.0, 0.0, 0.0], members=["a"])}


def test_the_default_layer_joins_a_topic_only_above_delta_09() -> None:
    """App. B: delta = 0.9. An event at cosine 0.85 opens a topic, one at 0.93 joins (a delta of 0.8 would join
    the first, one of 0.95 would open a topic for the second)."""
    vectors = {"a": _at(1.0), "near": _at(0.93), "far": _at(0.85)}
    far = TopicLayer().update("ns", _one_topic(), vectors, ["far"], steps=1)
    near = TopicLayer().update("ns", _one_topic(), vectors, ["near"], steps=1)
    assert not far.reclustered and (far.joined, far.opened) == (0, 1)
    assert not near.reclustered and (near.joined, near.opened) == (1, 0) and near.assignment == {"near": "T0"}


def test_a_topic_is_joined_only_when_the_similarity_exceeds_delta() -> None:
    """App. B: "exceeds" delta. At a cosine equal to delta (0.5, exact in float32) the event opens a topic."""
    vectors = {"a": _at(1.0), "equal": _at(0.5), "above": _at(0.75)}
    equal = TopicLayer(delta=0.5).update("ns", _one_topic(), vectors, ["equal"], steps=1)
    above = TopicLayer(delta=0.5).update("ns", _one_topic(), vectors, ["above"], steps=1)
    assert (equal.joined, equal.opened) == (0, 1) and (above.joined, above.opened) == (1, 0)


def test_the_default_layer_reclusters_every_fourth_step() -> None:
    """App. B: T = 4; the first step clusters (no topics yet), steps 4 and 8 re-cluster (t mod T = 0)."""
    layer = TopicLayer()
    rng = np.random.default_rng(1)
    vectors: dict[str, np.ndarray] = {}
    topics: dict[str, Topic] = {}
    steps, history = 0, []
    for step in range(8):
        new = []
        for i in range(3):
            v = rng.normal(size=8)
            vectors[f"s{step}e{i}"] = (v / np.linalg.norm(v)).astype(np.float32)
            new.append(f"s{step}e{i}")
        update = layer.update("ns", topics, vectors, new, steps)
        steps = update.steps
        history.append(update.reclustered)
        kept = {} if update.reclustered else {t.id: t for t in topics.values() if t.id not in update.retired}
        topics = {**kept, **{t.id: t for t in update.topics}}
    assert history == [True, False, False, True, False, False, False, True]


def test_ingest_reclusters_every_fourth_session_by_default(resources, tmp_path) -> None:
    """The ingest's own defaults (the settings' and ``IngestContext``'s): sessions 1 and 4 re-cluster."""
    from datetime import datetime

    from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
    from logicmap.memory.files.loaders import Conversation, RawTurn, Session

    sessions = [
        Session(
            session_id=f"S{s}",
            timestamp=datetime(2024, 1, s, 10, 0),
            timestamp_text=f"10:00 am on {s} January, 2024",
            turns=[
                RawTurn(dia_id=f"D{s}:1", speaker="Ann", text=f"On day {s} I painted a picture of boat {s}."),
                RawTurn(dia_id=f"D{s}:2", speaker="Bo", text=f"Lovely, what colour was boat number {s}?"),
            ],
        )
        for s in range(1, 6)
    ]
    conversation = Conversation(conversation_id="boats", speakers=["Ann", "Bo"], sessions=sessions)
    runs = {
        "settings": ingest_conversation(conversation, "boats-a", resources=resources, policy="heuristic"),
        "context": ingest_conversation(
            conversation, "boats-b", resources=resources, context=IngestContext(policy="heuristic")
        ),
    }
    for report in runs.values():
        assert [s.topics_reclustered for s in report.sessions] == [True, False, False, True, False]
