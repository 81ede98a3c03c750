"""The memory store: round trips, idempotent writes, namespace isolation, invisible partial sessions."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.records.records import Relation, Turn
from logicmap.memory.store import ChangeSet, GenerationConflict, MemoryStore, StoreLockedError, UnknownNamespaceError
from tests import chroma_internals as chroma
from tests.conftest import make_resources


def _graph_signature(store: MemoryStore, namespace: str) -> tuple:
    graph = EventGraph.of(store.snapshot(namespace))
    nodes = sorted((n, d["summary"], d["topic"]) for n, d in graph.graph.nodes(data=True))
    edges = sorted((u, v, k) for u, v, k in graph.graph.edges(keys=True))
    return nodes, edges


def test_round_trip_reload_gives_identical_graph(tmp_path, sample: Conversation) -> None:
    res = make_resources(tmp_path / "m")
    ingest_conversation(sample, "alice", resources=res, policy="heuristic")
    before = res.store.snapshot("alice")
    signature = _graph_signature(res.store, "alice")
    fingerprint = before.fingerprint()
    res.store.close()

    reopened = make_resources(tmp_path / "m")
    after = reopened.store.snapshot("alice")
    assert after.fingerprint() == fingerprint
    assert _graph_signature(reopened.store, "alice") == signature
    assert len(after.turns) == sample.turn_count
    assert set(after.manifest.sessions) == {s.session_id for s in sample.sessions}
    # Vectors survive the round trip too.
    assert set(after.event_vectors) == set(after.events)
    reopened.store.close()


def test_rewriting_the_same_conversation_changes_nothing(resources, sample: Conversation) -> None:
    ingest_conversation(sample, "bob", resources=resources, policy="heuristic")
    first = resources.store.snapshot("bob").fingerprint()
    report = ingest_conversation(sample, "bob", resources=resources, policy="heuristic")
    assert all(s.skipped for s in report.sessions)
    assert resources.store.snapshot("bob").fingerprint() == first


def test_namespaces_never_see_each_other(resources, sample: Conversation) -> None:
    ingest_conversation(sample, "left", resources=resources, policy="heuristic")
    other = sample.model_copy(deep=True)
    other.sessions = other.sessions[:1]
    for turn in other.sessions[0].turns:
        turn.text = "Zebra-only tenant text about " + turn.text
    ingest_conversation(other, "right", resources=resources, policy="heuristic")
    left, right = resources.store.snapshot("left"), resources.store.snapshot("right")
    assert not any("Zebra-only" in t.text for t in left.turns.values())
    assert all("Zebra-only" in t.text for t in right.turns.values())
    vector = resources.embeddings.embed_query("Zebra-only tenant text")
    hits = resources.store.query("left", "turns", vector, 50)
    assert {rid for rid, _ in hits} <= set(left.turns)
    assert all(t.namespace == "right" for t in right.turns.values())
    assert resources.store.namespaces() == ["left", "right"]


def test_unknown_namespace_is_a_clear_error(resources) -> None:
    with pytest.raises(UnknownNamespaceError, match="unknown namespace 'nobody'"):
        resources.store.require_namespace("nobody")
    with pytest.raises(ValueError, match="invalid namespace"):
        resources.store.manifest("../etc")


def _turn_change(namespace: str, base: int, dia: str, text: str) -> ChangeSet:
    turn = Turn(namespace=namespace, session_id="S9", dia_id=dia, speaker="A", text=text)
    return ChangeSet(namespace=namespace, base_generation=base, turns=[turn], turn_vectors=[[1.0, 0.0, 0.0]])


def test_partial_write_is_invisible_and_cleared_by_the_next_commit(resources) -> None:
    store = resources.store
    store.commit(_turn_change("ns", 0, "D1:1", "committed"))
    # A writer that dies after writing records of generation 2 but before the manifest moves.
    orphan = Turn(namespace="ns", session_id="S9", dia_id="D9:9", speaker="A", text="orphan")
    chroma.write_versions(store, "ns", "turns", [orphan], [[0.0, 1.0, 0.0]], 2)
    chroma.retire_versions(store, "ns", "turns", ["D1:1"], 2, 1)
    chroma.forget_snapshots(store)
    snap = store.snapshot("ns")
    assert set(snap.turns) == {"D1:1"} and snap.turns["D1:1"].text == "committed"
    # The next commit clears the orphan and the stray retirement.
    store.commit(_turn_change("ns", 1, "D1:2", "second"))
    snap = store.snapshot("ns")
    assert set(snap.turns) == {"D1:1", "D1:2"}


def test_stale_writer_gets_a_generation_conflict(resources) -> None:
    store = resources.store
    store.commit(_turn_change("ns", 0, "D1:1", "one"))
    with pytest.raises(GenerationConflict):
        store.commit(_turn_change("ns", 0, "D1:2", "two"))


def test_new_version_replaces_old_and_retire_hides(resources) -> None:
    store = resources.store
    rel = Relation(id="a|x|b", namespace="ns", source="a", target="b", label="x")
    store.commit(ChangeSet(namespace="ns", base_generation=0, relations=[rel]))
    store.commit(
        ChangeSet(namespace="ns", base_generation=1, relations=[rel.model_copy(update={"turn_ids": ["D1:1"]})])
    )
    assert store.snapshot("ns").relations["a|x|b"].turn_ids == ["D1:1"]
    store.commit(ChangeSet(namespace="ns", base_generation=2, retire={"relations": ["a|x|b"]}))
    assert store.snapshot("ns").relations == {}


def test_second_process_on_the_embedded_store_is_refused_with_a_pointer_to_server_mode(resources, tmp_path) -> None:
    resources.store.manifest("ns")  # opens the store and takes the lock
    script = textwrap.dedent(
        f"""
        from logicmap.settings import LogicMapSettings
        from logicmap.memory.store import MemoryStore, StoreLockedError
        try:
            MemoryStore(LogicMapSettings(data_dir={str(resources.settings.data_dir)!r}))
        except StoreLockedError as exc:
            print("LOCKED", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "LOCKED" in out.stdout, out.stderr
    assert "LOGICMAP_CHROMA_HOST" in out.stdout
    assert StoreLockedError.__doc__


def test_reads_are_paged_so_large_namespaces_load_whole(resources, monkeypatch) -> None:
    chroma.read_in_pages_of(monkeypatch, 7)
    turns = [Turn(namespace="big", session_id="S1", dia_id=f"D1:{i}", speaker="A", text=f"turn {i}") for i in range(30)]
    resources.store.commit(
        ChangeSet(
            namespace="big", base_generation=0, turns=turns, turn_vectors=[[1.0, float(i), 0.0] for i in range(30)]
        )
    )
    chroma.forget_snapshots(resources.store)
    assert len(resources.store.snapshot("big").turns) == 30
    # Recovery scans are paged too: 30 orphans of a crashed generation are all cleared.
    orphans = [t.model_copy(update={"dia_id": f"D2:{t.dia_id[3:]}"}) for t in turns]
    chroma.write_versions(resources.store, "big", "turns", orphans, [[0.0, 1.0, 0.0]] * 30, 2)
    resources.store.commit(ChangeSet(namespace="big", base_generation=1))
    chroma.forget_snapshots(resources.store)
    assert len(resources.store.snapshot("big").turns) == 30


def test_a_newer_generation_is_read_as_a_delta_that_equals_a_full_read(resources, sample: Conversation) -> None:
    store = resources.store
    fingerprints, snapshots = [], []
    for n in range(1, len(sample.sessions) + 1):
        part = sample.model_copy(deep=True)
        part.sessions = part.sessions[:n]
        ingest_conversation(part, "delta", resources=resources, policy="heuristic")
        snapshots.append(store.snapshot("delta"))  # advanced from the previous cached generation
        fingerprints.append(snapshots[-1].fingerprint())
    store.commit(
        ChangeSet(
            namespace="delta",
            base_generation=store.manifest("delta").generation,
            retire={"events": [next(iter(snapshots[-1].events))], "turns": ["D1:1"]},
        )
    )
    delta = store.snapshot("delta")
    chroma.forget_snapshots(store)
    full = store.snapshot("delta")
    assert delta is not full and delta.fingerprint() == full.fingerprint()
    assert list(delta.events) == list(full.events) and list(delta.turns) == list(full.turns)  # same order
    for kind in ("turn_vectors", "event_vectors", "fact_vectors", "cue_vectors"):
        mine, theirs = getattr(delta, kind), getattr(full, kind)
        assert mine.keys() == theirs.keys() and all((mine[k] == theirs[k]).all() for k in mine)
    assert "D1:1" not in delta.turns and "D1:1" not in delta.turn_vectors
    # Older snapshots are untouched: a reader holding one keeps its consistent view.
    assert [s.fingerprint() for s in snapshots] == fingerprints and "D1:1" in snapshots[0].turns
