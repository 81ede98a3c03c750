"""What keeps a large namespace cheap, checked for meaning: the lazy ranking equals the full sort, records
written without a Chroma document (and older ones with it) read back the same, the delta read honours
retirements, ``MemoryStore.query`` is exact, the collector pause nests, and the graph shares unit vectors."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import numpy as np
import pytest

from logicmap.memory.indexes.graph import EventGraph, Ranking
from logicmap.memory.indexes.snapshot_file import gc_paused
from logicmap.memory.records.records import Turn
from logicmap.memory.store import _RECORD, ChangeSet, MemoryStore, NamespaceSnapshot
from tests import chroma_internals as chroma
from tests.conftest import make_resources


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 500, 3000])
def test_the_lazy_ranking_is_the_full_stable_sort_without_the_excluded(n: int) -> None:
    rng = np.random.default_rng(n)
    ids = np.array([f"e{i}" for i in range(n)], dtype=object)
    scores = np.round(rng.random(n), 2)  # many ties: they must keep graph order, across block boundaries too
    excluded = {f"e{i}" for i in rng.choice(n, size=n // 3, replace=False)} if n else set()
    want = [e for e in ids[np.argsort(-scores, kind="stable")].tolist() if e not in excluded]
    ranking = Ranking(ids, scores, excluded)
    assert ranking.head(5) == want[:5]
    assert list(ranking) == want
    assert list(ranking) == want  # read again from what was sorted
    assert Ranking(ids, scores).head(n + 10) == ids[np.argsort(-scores, kind="stable")].tolist()


def _turns(namespace: str, session: str, texts: list[str]) -> list[Turn]:
    return [
        Turn(namespace=namespace, session_id=session, dia_id=f"D{session[1:]}:{i + 1}", speaker="A", text=t, position=i)
        for i, t in enumerate(texts)
    ]


def test_records_live_in_metadata_and_older_document_records_still_read(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "m")
    store = res.store
    turns = _turns("ns", "S1", ["one", "two"])
    store.commit(ChangeSet(namespace="ns", base_generation=0, turns=turns, turn_vectors=[[1.0, 0.0], [0.0, 1.0]]))
    col = chroma.collection(store, "ns", "turns")  # how the records are stored
    got = col.get(include=["documents", "metadatas"])
    assert got["documents"] == [None, None]  # no Chroma document: nothing for its full-text index to do
    assert sorted(Turn.model_validate_json(m[_RECORD]).text for m in got["metadatas"]) == ["one", "two"]
    # A record as versions before this one wrote it: the JSON in the document, visible from generation 1.
    old = _turns("ns", "S0", ["older"])[0]
    col.add(
        ids=["D0:1@1"],
        embeddings=[[0.6, 0.8]],
        documents=[old.model_dump_json()],
        metadatas=[{"rid": "D0:1", "born": 1, "died": 2**31, "session_id": "S0"}],
    )
    chroma.forget_snapshots(store)
    snap = store.snapshot("ns")
    assert snap.turns["D0:1"].text == "older" and snap.turns["D1:1"].text == "one"
    assert np.allclose(snap.turn_vectors["D0:1"], [0.6, 0.8])
    store.close()


def test_a_delta_read_drops_what_was_retired_and_adds_what_was_born(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "m")
    store = res.store
    store.commit(
        ChangeSet(
            namespace="ns", base_generation=0, turns=_turns("ns", "S1", ["a", "b", "c"]), turn_vectors=[[1.0, 0.0]] * 3
        )
    )
    cached = store.snapshot("ns")
    changed = _turns("ns", "S1", ["a", "b2"])[1:]
    store.commit(
        ChangeSet(
            namespace="ns", base_generation=1, turns=changed, turn_vectors=[[0.0, 1.0]], retire={"turns": ["D1:3"]}
        )
    )
    store.commit(
        ChangeSet(namespace="ns", base_generation=2, turns=_turns("ns", "S2", ["d"]), turn_vectors=[[0.6, 0.8]])
    )
    after = store.snapshot("ns")  # read as a delta on the cached generation 1
    assert cached.generation == 1 and after.generation == 3
    assert {k: t.text for k, t in after.turns.items()} == {"D1:1": "a", "D1:2": "b2", "D2:1": "d"}
    assert np.allclose(after.turn_vectors["D1:2"], [0.0, 1.0]) and "D1:3" not in after.turn_vectors
    chroma.forget_snapshots(store)  # the same state read whole
    assert store.snapshot("ns").fingerprint() == after.fingerprint()
    store.close()


def test_query_is_exact_over_every_record_and_refuses_kinds_without_vectors(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "m")
    store = res.store
    vectors = np.random.default_rng(0).normal(size=(40, 8)).astype(np.float32)
    texts = [f"turn {i}" for i in range(40)]
    store.commit(
        ChangeSet(namespace="ns", base_generation=0, turns=_turns("ns", "S1", texts), turn_vectors=vectors.tolist())
    )
    probe = vectors[3] + 0.1
    hits = store.query("ns", "turns", probe.tolist(), k=40)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    want = unit @ (probe / np.linalg.norm(probe))
    assert len(hits) == 40 and hits[0][0] == "D1:4"
    assert all(abs(score - want[int(rid.split(":")[1]) - 1]) < 1e-5 for rid, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    with pytest.raises(ValueError, match="no vectors"):
        store.query("ns", "relations", probe.tolist(), k=3)
    with pytest.raises(ValueError, match="width 3"):
        store.query("ns", "turns", [1.0, 0.0, 0.0], k=3)
    with pytest.raises(ValueError, match="one width"):
        store.commit(
            ChangeSet(
                namespace="ns",
                base_generation=1,
                turns=_turns("ns", "S2", ["x", "y"]),
                turn_vectors=[[1.0, 0.0], [1.0]],
            )
        )
    store.close()


def test_the_collector_pause_nests_and_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("the pause ends with the block")
    assert gc.isenabled()


def test_the_graph_shares_unit_vectors_and_normalizes_others() -> None:
    from logicmap.memory.indexes.snapshot_file import VectorTable
    from logicmap.memory.records.records import Event
    from logicmap.memory.store import Manifest

    events = {
        f"e{i}": Event(id=f"e{i}", namespace="ns", session_id="S1", summary=f"event {i}", order=i) for i in range(3)
    }
    unit = np.eye(3, dtype=np.float32)
    snap = NamespaceSnapshot(
        namespace="ns",
        manifest=Manifest(namespace="ns", generation=1),
        events=events,
        event_vectors=VectorTable(list(events), unit),
    )
    assert np.shares_memory(EventGraph(snap).matrix, snap.event_vectors.matrix)
    snap2 = NamespaceSnapshot(
        namespace="ns",
        manifest=Manifest(namespace="ns", generation=1),
        events=events,
        event_vectors=VectorTable(list(events), unit * 3),
    )
    assert np.allclose(EventGraph(snap2).matrix, unit)
    assert json.dumps(EventGraph(snap2).ranking(np.array([0.1, 0.9, 0.5]))) == '["e1", "e2", "e0"]'


def test_a_store_query_in_a_namespace_sees_only_its_records(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "m")
    store: MemoryStore = res.store
    for ns, text in (("left", "left text"), ("right", "right text")):
        store.commit(
            ChangeSet(namespace=ns, base_generation=0, turns=_turns(ns, "S1", [text]), turn_vectors=[[1.0, 0.0]])
        )
    assert [r for r, _ in store.query("left", "turns", [1.0, 0.0], k=5)] == ["D1:1"]
    assert store.snapshot("left").turns["D1:1"].text == "left text"
    store.close()
