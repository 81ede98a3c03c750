"""Forget and purge, proved with a canary: after ``forget(..., purge=True)`` no file under the data directory holds
the canary's text or the bytes of its embedding, no strategy, export or graph shows it, and the rest of the
namespace and every other tenant read exactly as before."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import numpy as np
import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import STRATEGIES, answer
from logicmap.graphs.surfaces.visualize import render_event_graph_html
from logicmap.graphs.writes.forget import (
    UnknownMemoryError,
    aget_memory,
    alist_memories,
    delete_namespace,
    forget,
    get_memory,
    list_memories,
    update_memory,
)
from logicmap.memory.files.backup import export_namespace
from logicmap.memory.files.loaders import Conversation, load_conversations
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.store import UnknownNamespaceError
from tests.conftest import make_resources
from tests.reliability.support import SAMPLE, memory_problems, with_session

CANARY = "ZQXV-canary-8841-locker"
QUESTION = "What is the locker code?"


def _with_canary(conv: Conversation) -> Conversation:
    return with_session(
        conv,
        99,
        [
            (0, "I finally got a locker at the gym near work."),
            (0, f"The locker code is {CANARY}, do not tell anyone."),
            (-1, "Nice, the gym near work is a good one."),
        ],
    )


def _files_holding(directory: Path, *needles: bytes) -> list[str]:
    found = []
    for root, _, files in os.walk(directory):
        for name in files:
            body = (Path(root) / name).read_bytes()
            found += [f"{Path(root, name)}: needle {i}" for i, n in enumerate(needles) if n in body]
    return found


def _answers(res: Resources, namespace: str) -> dict[str, str]:
    return {
        s: answer(s, QUESTION, namespace, resources=res, policy="heuristic").model_dump_json(
            exclude={"cost", "timings", "trace"}
        )
        for s in STRATEGIES
    }


def _kept(snapshot: object, kind: str, gone: set[str]) -> dict[str, object]:
    return {k: v.model_dump(mode="json") for k, v in getattr(snapshot, kind).items() if k not in gone}


@pytest.fixture
def memory(tmp_path: Path) -> Resources:
    res = make_resources(tmp_path / "memory")
    sample = load_conversations(SAMPLE)[0]
    ingest_conversation(_with_canary(sample), "acme", resources=res, policy="heuristic", memory_manager="r2")
    ingest_conversation(sample, "acme.bob", resources=res, policy="heuristic", memory_manager="r2")
    yield res
    if res.store_ is not None:
        res.store_.close()


def test_purge_leaves_no_byte_of_the_canary(memory: Resources, tmp_path: Path) -> None:
    store = memory.store
    before = store.snapshot("acme")
    vector = np.asarray(before.turn_vectors["D99:2"], dtype=np.float32).tobytes()
    data_dir = Path(memory.settings.data_dir)
    assert any(CANARY in a for a in _answers(memory, "acme").values())
    bob_answers, bob_print = _answers(memory, "acme.bob"), store.snapshot("acme.bob").fingerprint()

    report = forget("acme", turn_ids=["D99:2"], purge=True, resources=memory)

    after = store.snapshot("acme")
    assert "D99:2" not in after.turns and not memory_problems(after)
    assert report.purge is not None and report.purge.compacted and report.purge.versions_removed["turns"] >= 1
    assert _files_holding(data_dir, CANARY.encode(), vector) == []
    assert all(CANARY not in a for a in _answers(memory, "acme").values())
    export_namespace(store, "acme", tmp_path / "acme.jsonl")
    assert CANARY not in (tmp_path / "acme.jsonl").read_text()
    assert CANARY not in render_event_graph_html(EventGraph.of(after))
    # What was kept reads as before; the other tenant answers byte for byte as before.
    assert _kept(after, "turns", {"D99:2"}) == _kept(before, "turns", {"D99:2"})
    rebuilt = {eid for eid, e in before.events.items() if "D99:2" in e.turn_ids}
    assert _kept(after, "events", rebuilt) == _kept(before, "events", rebuilt)
    assert all("D99:2" not in e.turn_ids and CANARY not in e.summary for e in after.events.values())
    assert _answers(memory, "acme.bob") == bob_answers and store.snapshot("acme.bob").fingerprint() == bob_print
    audit = after.manifest.forgets[-1]
    assert audit.removed["turns"] == 1 and audit.surface == "python" and CANARY not in audit.model_dump_json()


def test_a_reopened_store_reads_the_purged_namespace(memory: Resources) -> None:
    forget("acme", session_ids=["S99"], purge=True, resources=memory)
    print_ = memory.store.snapshot("acme").fingerprint()
    memory.store.close()
    again = make_resources(Path(memory.settings.data_dir))
    try:
        assert again.store.snapshot("acme").fingerprint() == print_
        assert "S99" not in again.store.manifest("acme").sessions
    finally:
        again.store.close()


def test_unknown_and_foreign_ids_are_one_error_naming_the_namespace(memory: Resources) -> None:
    errors = []
    for ids in (["no-such-turn"], ["D99:2", "nope"]):
        with pytest.raises(UnknownMemoryError) as caught:
            forget("acme.bob", turn_ids=ids, resources=memory)  # D99:2 exists, in another tenant
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "acme.bob" in errors[0] and "D99" not in errors[0]
    with pytest.raises(UnknownMemoryError) as caught:
        get_memory("acme.bob", "D99:2", resources=memory)
    assert "D99" not in str(caught.value)
    with pytest.raises(UnknownNamespaceError):
        forget("nobody", turn_ids=["D1:1"], resources=memory)
    assert memory.store.snapshot("acme").generation == memory.store.manifest("acme").generation


def test_delete_namespace_deletes_only_the_one_named(memory: Resources) -> None:
    bob = _answers(memory, "acme.bob")
    delete_namespace("acme", resources=memory)
    assert not memory.store.has_namespace("acme") and memory.store.namespaces() == ["acme.bob"]
    assert _files_holding(Path(memory.settings.data_dir), CANARY.encode()) == []
    assert _answers(memory, "acme.bob") == bob
    with pytest.raises(UnknownNamespaceError):
        delete_namespace("acme", resources=memory)


def test_list_get_and_update(memory: Resources) -> None:
    page = list_memories("acme", kind="turns", limit=5, resources=memory)
    assert len(page.items) == 5 and page.next_cursor == "5"
    assert asyncio.run(alist_memories("acme", kind="turns", limit=5, resources=memory)) == page
    assert asyncio.run(aget_memory("acme", "D99:1", resources=memory)) == get_memory("acme", "D99:1", resources=memory)
    rest = list_memories("acme", kind="turns", limit=1000, cursor=page.next_cursor, resources=memory)
    assert rest.next_cursor is None and len(page.items) + len(rest.items) == len(memory.store.snapshot("acme").turns)
    assert get_memory("acme", "D99:2", resources=memory)["text"].endswith("do not tell anyone.")
    update_memory("acme", "D99:2", "The locker code changed; I keep it in my head now.", resources=memory)
    snap = memory.store.snapshot("acme")
    assert snap.turns["D99:2"].text.startswith("The locker code changed")
    assert all(CANARY not in json.dumps(e.model_dump(mode="json")) for e in snap.events.values())
    assert any("D99:2" in e.turn_ids for e in snap.events.values()) and not memory_problems(snap)


def test_the_command_line_lifecycle(memory: Resources, capsys: pytest.CaptureFixture[str]) -> None:
    from logicmap.__main__ import main

    base = ["--data-dir", str(memory.settings.data_dir), "--embeddings", "hashing"]
    assert main([*base, "list", "-n", "acme", "--kind", "events"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(listed) == len(memory.store.snapshot("acme").events) and listed[0]["kind"] == "events"
    assert main([*base, "get", "-n", "acme", "D99:2"]) == 0 and CANARY in capsys.readouterr().out
    assert main([*base, "forget", "-n", "acme", "--turn", "D99:2", "--purge", "--yes"]) == 0
    assert "1 turns" in capsys.readouterr().out
    assert main([*base, "get", "-n", "acme", "D99:2"]) == 2
    assert capsys.readouterr().err.strip() == "error: namespace 'acme' holds no such memory; nothing was changed"
    assert main([*base, "stats", "-n", "acme"]) == 0
    audit = json.loads(capsys.readouterr().out)["forgets"]
    assert [(a["surface"], a["removed"]["turns"], a["purged"]) for a in audit] == [("cli", 1, True)]
    assert (
        main([*base, "forget", "-n", "acme", "--before", "2000-01-01", "--yes"]) == 0
    )  # nothing that old: nothing goes
    assert "nothing" in capsys.readouterr().out and len(memory.store.snapshot("acme").manifest.forgets) == 1
    assert main([*base, "forget", "-n", "acme"]) == 2
    assert main([*base, "delete-namespace", "-n", "acme", "--yes"]) == 0
    assert main([*base, "namespaces"]) == 0 and capsys.readouterr().out.split()[-1] == "acme.bob"


def test_the_forgetting_tools_write_only_to_the_runs_namespace(memory: Resources) -> None:
    from logicmap.graphs.chat.chatbot import session_ingester
    from logicmap.graphs.writes.forget import memory_editor
    from logicmap.tools import MemoryToolConfigError, create_memory_toolkit

    store, ingest, editor = memory.store, session_ingester(memory, policy="heuristic"), memory_editor(memory)
    assert "forget_memory" not in {t.name for t in create_memory_toolkit("acme", store=store, ingest=ingest)}
    with pytest.raises(MemoryToolConfigError):
        create_memory_toolkit("acme", store=store, editor=editor)
    bob = {t.name: t for t in create_memory_toolkit("acme.bob", store=store, ingest=ingest, editor=editor)}
    foreign = bob["forget_memory"].invoke({"turn_ids": ["D99:2"]})
    unknown = bob["forget_memory"].invoke({"turn_ids": ["D404:1"]})
    assert foreign == unknown and "acme.bob" in foreign and "D99" not in foreign
    acme = {t.name: t for t in create_memory_toolkit("acme", store=store, ingest=ingest, editor=editor)}
    assert "Forgot 1 turn" in acme["forget_memory"].invoke({"turn_ids": ["D99:2"]})
    assert "Updated turn D99:1" in acme["update_memory"].invoke({"turn_id": "D99:1", "text": "I got a locker."})
    snap = store.snapshot("acme")
    assert "D99:2" not in snap.turns and snap.turns["D99:1"].text == "I got a locker."
    assert [a.surface for a in snap.manifest.forgets] == ["tool", "tool"]
    assert store.snapshot("acme.bob").generation == store.manifest("acme.bob").generation == 5  # bob untouched


def test_a_store_holding_an_older_snapshot_reads_the_purge_whole(memory: Resources) -> None:
    other = make_resources(Path(memory.settings.data_dir))  # a second store object of the same process
    try:
        assert "D99:2" in other.store.snapshot("acme").turns
        forget("acme", turn_ids=["D99:2"], purge=True, resources=memory)
        assert other.store.snapshot("acme").fingerprint() == memory.store.snapshot("acme").fingerprint()
    finally:
        other.store.close()
