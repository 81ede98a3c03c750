"""What the in-process store (``memory://``) holds per record: each vector once (the latest snapshot's table row),
retired versions kept compact, still served to runs pinned to their generation, the item ranker's vectors once
(docs/performance.md, "Footprint")."""

from __future__ import annotations

import gc
import tracemalloc
import uuid

import numpy as np
import pytest

from logicmap.memory.records.records import Relation, Topic, Turn
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
    # 14 kB); pickled once retired, about 5.5 kB; packed (the centroid as its float32 bytes, compressed), about 2 kB.
    assert per_version < 3_000, per_version
    old = store.snapshot_at(namespace, 3).topics  # a run pinned to generation 3 reads its topics as committed
    assert [t.centroid for t in old.values()] == [t.centroid for t in _topics(namespace, 2)]
    assert [t.centroid for t in store.snapshot(namespace).topics.values()] == [
        t.centroid for t in _topics(namespace, rounds)
    ]
    report = store.purge(namespace)
    assert report.versions_removed == {"topics": rounds * 5}


def _turns(namespace: str, n: int) -> tuple[list[Turn], list[list[float]]]:
    turns = [
        Turn(namespace=namespace, session_id=f"S{i}", dia_id=f"D{i}:1", speaker="Maya", text=f"Memory {i}.")
        for i in range(n)
    ]
    return turns, [_centroid(i) for i in range(n)]


def test_a_committed_vector_is_held_once_by_the_store_and_its_latest_snapshot() -> None:
    store = open_store(LogicMapSettings(store_url=f"memory://{uuid.uuid4().hex}", embedding_provider="hashing"))
    namespace, n = "foot.vectors", 400
    turns, vectors = _turns(namespace, n)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store.commit(
            ChangeSet(namespace=namespace, base_generation=0, turns=turns, turn_vectors=vectors, embedder="hashing")
        )
        snap = store.snapshot(namespace)
        gc.collect()
        per_turn = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    # The turn record (its copy), one float32 row (1.5 kB), its version and ids: about 3 kB. Its vector kept once
    # more by the version, beside the snapshot's table, took about 1.5 kB more.
    assert per_turn < 3_700, per_turn
    assert [snap.turn_vectors[t.dia_id].tolist() for t in turns[:3]] == [
        np.asarray(v, dtype=np.float32).tolist() for v in vectors[:3]
    ]
    # A retired version keeps its vector (a copy of its own, not the table it was a row of): a run pinned to the
    # first generation reads it after the turn was rewritten with another vector.
    store.commit(
        ChangeSet(
            namespace=namespace,
            base_generation=1,
            turns=[turns[0]],
            turn_vectors=[_centroid(10_000)],
            embedder="hashing",
        )
    )
    del snap
    assert store.snapshot(namespace).turn_vectors["D0:1"].tolist() == np.float32(_centroid(10_000)).tolist()
    assert store.snapshot_at(namespace, 1).turn_vectors["D0:1"].tolist() == np.float32(vectors[0]).tolist()


def test_stored_records_share_their_set_of_set_fields_and_their_strings_and_a_copy_gets_its_own() -> None:
    store = open_store(LogicMapSettings(store_url=f"memory://{uuid.uuid4().hex}", embedding_provider="hashing"))
    namespace, n = "foot.relations", 400
    relations = [
        Relation(
            id=f"E{i}|next|E{i + 1}",
            namespace=namespace,
            source=f"E{i}",
            target=f"E{i + 1}",
            label="next",
            turn_ids=[f"D{i}:1"],
            session_id=f"S{i}",
        )
        for i in range(n)
    ]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store.commit(ChangeSet(namespace=namespace, base_generation=0, relations=relations, embedder="hashing"))
        snap = store.snapshot(namespace)
        gc.collect()
        per_relation = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    # The relation's fields, its strings, its version: about 0.7 kB; a set of its 7 field names of its own took
    # 728 bytes more.
    assert per_relation < 1_000, per_relation
    first, second = snap.relations["E0|next|E1"], snap.relations["E1|next|E2"]
    assert first == relations[0] and first.model_fields_set == relations[0].model_fields_set
    assert first.target is second.source  # an event id its relations name is held once
    changed = second.model_copy(update={"session_id": "S9"})  # a copy's set is its own
    changed.__pydantic_fields_set__.add("extra")
    assert "extra" not in first.model_fields_set


def test_the_item_rankers_vectors_of_one_turn_items_are_held_once() -> None:
    from logicmap import LogicMapStore, Resources
    from logicmap.agents.item_ranking import item_vectors
    from logicmap.memory.records.items import namespace_of

    settings = LogicMapSettings(store_url=f"memory://{uuid.uuid4().hex}", embedding_provider="hashing")
    resources = Resources(settings=settings)
    store = LogicMapStore(resources=resources, policy="heuristic", consolidation="manual")
    words = "dog walk park coffee hospital shift marathon race pottery class move city sister dinner".split()
    rng = np.random.default_rng(3)
    namespace, n = ("memories", "bob"), 300
    from langgraph.store.base import PutOp

    store.batch([PutOp(namespace, f"m{i}", {"content": " ".join(rng.choice(words, 6))}) for i in range(n)])
    store.flush()
    snapshot = resources.store.snapshot(namespace_of(namespace))
    embeddings = resources.embeddings
    embeddings.embed_documents([f"{t.speaker}: {t.text}" for t in snapshot.turns.values()])  # cached beforehand
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        vectors = item_vectors(snapshot, embeddings)
        gc.collect()
        per_item = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert vectors.own.shape == (n, vectors.turns.shape[1]) and np.array_equal(vectors.own, vectors.turns)
    # Each item's turn row (1.5 kB), its evidence flag, the index: about 2.1 kB; its own row again, a copy, took
    # 1.5 kB more.
    assert per_item < 2_800, per_item


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
    # About 21 kB now (a turn, an event, their float32 vectors held once, relations, tags, versions, the embedder's
    # cache); 25.5 kB with each vector kept by its version and again by the snapshot's table, a set of field names
    # and copies of the same ids per record; a vector kept as a list of Python floats costs 12 kB more each.
    assert per_item < 23_500, per_item
