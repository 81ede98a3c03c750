"""What the in-process store (``memory://``) holds per record: retired versions kept compact, still served to runs
pinned to their generation (docs/performance.md, "Footprint")."""

from __future__ import annotations

import gc
import tracemalloc
import uuid

import numpy as np
import pytest

from logicmap.memory.records.records import Topic
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
            store.commit(
                ChangeSet(
                    namespace=namespace, base_generation=seed, topics=_topics(namespace, seed), embedder="hashing"
                )
            )
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
        t.centroid for t in _topics(namespace, rounds)
    ]
    report = store.purge(namespace)
    assert report.versions_removed == {"topics": rounds * 5}


@pytest.mark.slow  # 18 s: in `make test`, not in the inner loop
def test_a_store_app_retains_a_bounded_number_of_bytes_per_consolidated_item() -> None:
    from langgraph.store.base import PutOp

    from logicmap import LogicMapStore, Resources

    settings = LogicMapSettings(store_url=f"memory://{uuid.uuid4().hex}", embedding_provider="hashing")
    store = LogicMapStore(resources=Resources(settings=settings), policy="heuristic", consolidation="manual")
    words = "dog walk park coffee hospital shift marathon race pottery class move city sister dinner".split()
    rng = np.random.default_rng(7)
    namespace = ("memories", "alice")

    def put(lo: int, hi: int) -> None:
        store.batch(
            [
                PutOp(namespace, f"m{i}", {"content": f"Memory {i}: I talked about " + " ".join(rng.choice(words, 7))})
                for i in range(lo, hi)
            ]
        )
        store.flush()

    put(0, 20)  # the code paths' own first-use allocations (modules, caches) before measuring
    items = 100
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for lo in range(20, 20 + items, 50):
            put(lo, lo + 50)
        gc.collect()
        per_item = (tracemalloc.get_traced_memory()[0] - before) / items
    finally:
        tracemalloc.stop()
    assert len(store.search(namespace, query="coffee", limit=200)) == 20 + items
    # About 26 kB now (a turn, an event, their float32 vectors, relations, tags, versions, the embedder's cache); a
    # vector kept as a list of Python floats costs 12 kB more each, a retired version kept as objects 9 kB more.
    assert per_item < 40_000, per_item
