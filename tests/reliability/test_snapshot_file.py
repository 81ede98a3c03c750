"""Persisted namespace snapshots: a reopened namespace equals one rebuilt from its records, and a file that
cannot be trusted (stale, of another history, damaged, of another namespace) is ignored, never believed."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.strategies.registry import answer
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.indexes.snapshot_file import SNAPSHOT_DIR, read_snapshot_file
from logicmap.memory.records.records import Turn
from logicmap.memory.store import _MODELS, ChangeSet, MemoryStore, NamespaceSnapshot
from tests import chroma_internals as chroma
from tests.conftest import make_resources

QUESTIONS = ("What did Maya adopt?", "When did Leo run the marathon?", "Where did they move?")


def _file(store: MemoryStore, namespace: str) -> Path:
    path = chroma.snapshot_file(store, namespace)
    assert path is not None
    return path


def _state(res, namespace: str) -> tuple:
    """Everything a reader gets: records, vectors, the graph's edges, and no-LLM answers with their evidence."""
    snap = res.store.snapshot(namespace)
    vectors = {
        kind: {k: np.asarray(v).tolist() for k, v in getattr(snap, kind).items()}
        for kind in ("turn_vectors", "event_vectors", "fact_vectors", "cue_vectors")
    }
    graph = EventGraph.of(snap)
    edges = [(e, [(n.event_id, n.label, n.direction) for n in graph.neighbors(e)]) for e in graph.ids]
    answers = []
    for question in QUESTIONS:
        result = answer("compass", question, namespace, resources=res, policy="heuristic")
        answers.append((result.answer, [(e.id, e.turn_ids, e.score) for e in result.evidence], result.turn_ranking))
    return snap.fingerprint(), list(snap.events), list(snap.turns), vectors, edges, answers


def _turns_change(namespace: str, base: int, texts: list[str], session: str = "S1") -> ChangeSet:
    turns = [
        Turn(
            namespace=namespace,
            session_id=session,
            dia_id=f"D{session[1:]}:{i + 1}",
            speaker="A",
            text=text,
            position=i,
        )
        for i, text in enumerate(texts)
    ]
    vectors = [[1.0, float(i), float(len(text))] for i, text in enumerate(texts)]
    return ChangeSet(namespace=namespace, base_generation=base, turns=turns, turn_vectors=vectors)


def test_reopening_from_the_file_and_its_delta_equals_a_rebuild_from_records(
    tmp_path: Path, sample: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "m"
    res = make_resources(data)
    first = sample.model_copy(deep=True)
    first.sessions = first.sessions[:-1]
    ingest_conversation(first, "alice", resources=res, policy="heuristic")
    res.store.snapshot("alice")
    path = _file(res.store, "alice")
    saved_at = path.stat().st_mtime_ns
    assert path.exists() and not list(path.parent.glob("*.tmp"))
    ingest_conversation(sample, "alice", resources=res, policy="heuristic")  # one more session: the file lags
    state = _state(res, "alice")
    assert path.stat().st_mtime_ns == saved_at  # a small delta does not rewrite the file
    res.store.close()

    reopened = make_resources(data)
    whole = chroma.whole_reads(monkeypatch)
    assert _state(reopened, "alice") == state  # the file plus the delta since its generation
    assert whole == []
    reopened.store.close()

    shutil.rmtree(data / SNAPSHOT_DIR)
    rebuilt = make_resources(data)
    assert _state(rebuilt, "alice") == state  # read whole from the records
    assert whole == ["alice"] and _file(rebuilt.store, "alice").exists()  # and saved again
    rebuilt.store.close()


def test_a_commit_through_another_store_object_is_seen_without_reopening(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "m")
    store = res.store
    store.commit(_turns_change("ns", 0, ["one"]))
    assert len(store.snapshot("ns").turns) == 1
    other = MemoryStore(res.settings)  # the same directory in the same process
    try:
        other.commit(_turns_change("ns", 1, ["one", "two"], session="S2"))
    finally:
        other.close()
    assert store.snapshot("ns").generation == 2 and len(store.snapshot("ns").turns) == 3
    store.close()


def _two_histories(tmp_path: Path) -> tuple[Path, Path]:
    """Two stores whose namespace "ns" has generation 1 with other records, and the first one a generation 2."""
    for name, texts in (("x", ["x one", "x two"]), ("y", ["y only"])):
        res = make_resources(tmp_path / name)
        res.store.commit(_turns_change("ns", 0, texts))
        res.store.snapshot("ns")
        res.store.close()
    return tmp_path / "x", tmp_path / "y"


@pytest.mark.parametrize("generation", [1, 2])
def test_a_file_of_another_history_or_a_later_generation_is_ignored(
    tmp_path: Path, generation: int, caplog: pytest.LogCaptureFixture
) -> None:
    x, y = _two_histories(tmp_path)
    if generation == 2:
        res = make_resources(x)
        res.store.commit(_turns_change("ns", 1, ["x three"], session="S2"))
        res.store.close()
        shutil.rmtree(x / SNAPSHOT_DIR)
        res = make_resources(x)
        res.store.snapshot("ns")  # read whole, saved at generation 2
        assert read_snapshot_file(_file(res.store, "ns"), "ns", _MODELS).generation == 2
        res.store.close()
    reader = make_resources(y)
    target = _file(reader.store, "ns")
    shutil.copyfile(x / target.relative_to(y), target)
    with caplog.at_level(logging.WARNING, logger="logicmap.memory.store"):
        snap = reader.store.snapshot("ns")
    assert [t.text for t in snap.turns.values()] == ["y only"] and snap.generation == 1
    assert "ignoring the persisted snapshot" in caplog.text
    chroma.forget_snapshots(reader.store)
    assert [t.text for t in reader.store.snapshot("ns").turns.values()] == ["y only"]  # the file was replaced
    reader.store.close()


def _damage(path: Path, how: str) -> None:
    body = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(body[: len(body) // 2]))
    elif how == "header":
        body[20] ^= 0xFF
        path.write_bytes(bytes(body))
    elif how == "body":
        body[-5] ^= 0x01  # inside the last section (a vector matrix)
        path.write_bytes(bytes(body))
    elif how == "garbage":
        path.write_bytes(b"not a snapshot at all")
    else:
        path.write_bytes(b"")


@pytest.mark.parametrize("how", ["truncated", "header", "body", "garbage", "empty"])
def test_a_damaged_file_is_ignored_and_the_store_still_answers(
    tmp_path: Path, sample: Conversation, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "m"
    res = make_resources(data)
    short = sample.model_copy(deep=True)
    short.sessions = short.sessions[:2]
    ingest_conversation(short, "alice", resources=res, policy="heuristic")
    state = _state(res, "alice")
    res.store.close()
    _damage(_file(res.store, "alice"), how)
    reopened = make_resources(data)
    whole = chroma.whole_reads(monkeypatch)
    assert _state(reopened, "alice") == state
    assert whole == ["alice"]
    chroma.forget_snapshots(reopened.store)
    assert reopened.store.snapshot("alice").fingerprint() == state[0] and whole == ["alice"]  # a sound file again
    reopened.store.close()


def test_a_snapshot_file_is_never_read_for_another_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = make_resources(tmp_path / "m")
    store = res.store
    store.commit(_turns_change("left", 0, ["left secret one", "left secret two"]))
    store.commit(_turns_change("right", 0, ["right text"]))
    store.snapshot("left"), store.snapshot("right")
    left, right = _file(store, "left"), _file(store, "right")
    assert left.parent != right.parent and left.parent.parent == right.parent.parent
    shutil.copyfile(left, right)  # left's file where right's belongs (same generation number)
    chroma.forget_snapshots(store)
    whole = chroma.whole_reads(monkeypatch)
    snap: NamespaceSnapshot = store.snapshot("right")
    assert [t.text for t in snap.turns.values()] == ["right text"]
    assert all(t.namespace == "right" for t in snap.turns.values()) and whole == ["right"]
    assert [t.text for t in store.snapshot("left").turns.values()] == ["left secret one", "left secret two"]
    assert whole == ["right"]  # left still opens from its own file
    store.close()
