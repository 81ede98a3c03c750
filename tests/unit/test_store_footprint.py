"""What the in-process store (``memory://``) holds per record: retired versions kept compact, still served to runs
pinned to their generation (docs/performance.md, "Footprint")."""

from __future__ import annotations

import gc
import tracemalloc
import uuid

import numpy as np

from logicmap.memory.records import Topic
from logicmap.memory.store import ChangeSet, open_store
from logicmap.settings import LogicMapSettings

DIM = 384


def _centroid(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return (vector / np.linalg.norm(vector)).astype(float).tolist()


def _topics(namespace: str, seed: int, n: int = 5) -> list[Topic]:
    return [Topic(id=f"T{i}", namespace=namespace, centroid=_centroid(seed * 100 + i)) for i in range(n)]


def test_rewritten_topics_keep_their_old_versions_compact_and_readable_at_their_generation() -> None:
    store = open_store(LogicMapSettings(store_url=f"memory://{uuid.uuid4().hex}", embedding_provider="hashing"))
    namespace = "foot.topics"
    store.commit(ChangeSet(namespace=namespace, base_generation=0, topics=_topics(namespace, 0), embedder="hashing"))
    rounds = 60
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for seed in range(1, rounds + 1):  # a re-clustering rewrites every topic: the old versions retire
            store.commit(ChangeSet(namespace=namespace, base_generation=seed, topics=_topics(namespace, seed),
                                   embedder="hashing"))
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    per_version = retained / (rounds * 5)
    # A version as Python objects: 384 floats of 24 bytes, the list's 3 kB, the model, the float32 vector (about
    # 14 kB); pickled once retired, with its float32 vector, about 5.5 kB.
    assert per_version < 7_000, per_version
    old = store.snapshot_at(namespace, 3).topics  # a run pinned to generation 3 reads its topics as committed
    assert [t.centroid for t in old.values()] == [t.centroid for t in _topics(namespace, 2)]
    assert [t.centroid for t in store.snapshot(namespace).topics.values()] == [
        t.centroid for t in _topics(namespace, rounds)]
    report = store.purge(namespace)
    assert report.versions_removed == {"topics": rounds * 5}
