"""One purge for every removal, proved with the canary of ``test_forget_purge.py`` (no file under the data directory
holds the canary's text or its embedding's bytes): a ``LogicMapStore`` delete or replacing put, ``update_memory``'s
old text and a forget without purge are all purged by ``logicmap purge -n NS`` / ``logicmap.purge``; and each
removal purges on its own when asked: ``LogicMapStore(purge=True)``, ``update_memory(purge=True)``, the toolkit's
and the MCP server's ``forget_memory(purge=true)``, MCP's ``purge_memory`` and the forget graph's ``purge`` alone.
A purge a commit asked for and no one finished (the process was killed) is finished by the next open or commit."""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import logicmap
from logicmap.__main__ import main
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.basestore import LogicMapStore
from logicmap.graphs.surfaces.lifecycle import LifecycleContext, forget_graph
from logicmap.graphs.writes.forget import _commit_forget, _one_turn, forget, memory_editor, update_memory
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from tests.conftest import make_resources
from tests.reliability.test_forget_purge import CANARY, _files_holding

ALICE, NS = ("memories", "alice"), "memories.alice"
SECRET = {"content": f"The locker code is {CANARY}, do not tell anyone."}


def _vector(res: Resources, namespace: str) -> tuple[str, bytes]:
    """The canary turn's id and the bytes of its embedding."""
    snap = res.store.snapshot(namespace)
    tid = next(t for t, turn in snap.turns.items() if CANARY in turn.text)
    return tid, np.asarray(snap.turn_vectors[tid], dtype=np.float32).tobytes()


def _traces(res: Resources, vector: bytes) -> list[str]:
    return _files_holding(Path(res.settings.data_dir), CANARY.encode(), vector)


def _chat(res: Resources, namespace: str = "maya") -> str:
    """A small conversation with the canary in its second turn (the first is kept)."""
    turns = [
        RawTurn(dia_id="D1:1", speaker="Maya", text="I finally got a locker at the gym near work."),
        RawTurn(dia_id="D1:2", speaker="Maya", text=f"The locker code is {CANARY}, do not tell anyone."),
        RawTurn(dia_id="D1:3", speaker="Sam", text="Nice, the gym near work is a good one."),
    ]
    conv = Conversation(
        conversation_id="maya",
        speakers=["Maya", "Sam"],
        sessions=[Session(session_id="S1", timestamp="2024-05-01T10:00:00", timestamp_text="", turns=turns)],
    )
    ingest_conversation(conv, namespace, resources=res, policy="heuristic")
    return namespace


def test_a_store_delete_is_purged_by_logicmap_purge(resources: Resources, capsys: pytest.CaptureFixture[str]) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic", consolidation="sync")
    store.put(ALICE, "home", {"content": "I live in Porto, near the river."})
    store.put(ALICE, "locker", SECRET)
    _, vector = _vector(resources, NS)
    store.delete(ALICE, "locker")
    assert store.get(ALICE, "locker") is None and _traces(resources, vector)  # retired, still on disk
    base = ["--data-dir", str(resources.settings.data_dir), "--embeddings", "hashing"]
    assert main([*base, "forget", "-n", NS, "--key", "locker", "--purge", "--yes"]) == 2  # the key is gone already
    assert (
        f"no such key; nothing was changed; to remove from disk what earlier forgets and deletes left: logicmap "
        f"purge -n {NS}" in capsys.readouterr().err
    )
    assert main([*base, "purge", "-n", NS]) == 0
    assert "retired versions removed" in capsys.readouterr().out
    assert _traces(resources, vector) == []
    assert store.get(ALICE, "home").value == {"content": "I live in Porto, near the river."}  # type: ignore[union-attr]
    assert main([*base, "purge", "-n", "nobody"]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown namespace 'nobody': it holds no committed memory yet"


def test_a_purging_store_purges_its_replaced_values_and_its_deletes(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic", consolidation="sync", purge=True)
    store.put(ALICE, "home", {"content": "I live in Porto, near the river."})
    store.put(ALICE, "locker", SECRET)
    _, vector = _vector(resources, NS)
    store.put(ALICE, "locker", {"content": "I moved my things to a new locker."})  # a replace
    assert _traces(resources, vector) == []
    assert store.get(ALICE, "locker").value == {"content": "I moved my things to a new locker."}  # type: ignore[union-attr]
    store.put(ALICE, "old", SECRET)
    store.delete(ALICE, "old")
    assert _traces(resources, vector) == [] and store.get(ALICE, "old") is None
    audit = resources.store.manifest(NS).forgets
    assert [(a.surface, a.purged) for a in audit] == [("store", True), ("store", True)]
    assert not resources.store.purge_owed(NS)


def test_store_purge_and_logicmap_purge_purge_what_forgets_and_updates_left(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic", consolidation="sync")
    store.put(ALICE, "locker", SECRET)
    _, vector = _vector(resources, NS)
    store.put(ALICE, "locker", {"content": "I moved my things to a new locker."})
    assert _traces(resources, vector)
    report = store.purge(ALICE)
    assert report.namespace == NS and report.versions_removed and _traces(resources, vector) == []
    namespace = _chat(resources)
    tid, vector = _vector(resources, namespace)
    update_memory(namespace, tid, "The locker code changed; I keep it in my head now.", resources=resources)
    assert _traces(resources, vector)
    assert logicmap.purge(namespace, resources=resources).versions_removed["turns"] >= 1
    assert _traces(resources, vector) == []


def test_update_memory_can_purge_the_old_text(resources: Resources) -> None:
    namespace = _chat(resources)
    tid, vector = _vector(resources, namespace)
    report = update_memory(
        namespace, tid, "The locker code changed; I keep it in my head now.", purge=True, resources=resources
    )
    assert report.purge is not None and _traces(resources, vector) == []
    snap = resources.store.snapshot(namespace)
    assert snap.turns[tid].text.startswith("The locker code changed") and snap.manifest.forgets[-1].purged


def test_the_toolkits_forget_memory_can_purge(resources: Resources) -> None:
    from logicmap.graphs.chat.chatbot import session_ingester
    from logicmap.tools import create_memory_toolkit

    namespace = _chat(resources)
    tid, vector = _vector(resources, namespace)
    tools = {
        t.name: t
        for t in create_memory_toolkit(
            namespace,
            store=resources.store,
            editor=memory_editor(resources),
            ingest=session_ingester(resources, policy="heuristic"),
        )
    }
    said = tools["forget_memory"].invoke({"turn_ids": [tid], "purge": True})
    assert "purged them from disk" in said and _traces(resources, vector) == []


def test_the_mcp_server_forgets_with_a_purge_and_purges(resources: Resources) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from logicmap.graphs.surfaces.mcp_server import build_mcp_server

    first = _chat(resources, "maya")
    second = _chat(resources, "sam")
    tid, vector = _vector(resources, first)

    async def scenario() -> tuple[Any, Any, Any]:
        async with Client(build_mcp_server(resources, namespace=first)) as client:
            forgot = await client.call_tool("forget_memory", {"turn_ids": [tid], "purge": True})
        async with Client(build_mcp_server(resources, namespace=second)) as client:
            updated = await client.call_tool("update_memory", {"turn_id": tid, "text": "I forgot the code."})
            purged = await client.call_tool("purge_memory", {})
        return forgot, updated, purged

    forgot, updated, purged = asyncio.run(scenario())
    assert not forgot.is_error and not updated.is_error and not purged.is_error
    assert json.loads("".join(c.text for c in purged.content))["namespace"] == "sam"
    assert _traces(resources, vector) == []
    assert resources.store.snapshot(second).turns[tid].text == "I forgot the code."


def test_the_forget_graphs_purge_alone_purges_the_runs_namespace(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic", consolidation="sync")
    store.put(ALICE, "locker", SECRET)
    _, vector = _vector(resources, NS)
    store.delete(ALICE, "locker")
    alice = LifecycleContext(namespace=NS, resources=resources)
    done = forget_graph.invoke({"purge": True}, context=alice)["forgotten"]
    assert done["purge"]["namespace"] == NS and done["removed"] == {}
    assert _traces(resources, vector) == []
    with pytest.raises(ValueError, match="say what to forget"):
        forget_graph.invoke({}, context=alice)


def _commit_without_its_purge(res: Resources, namespace: str, tid: str) -> None:
    """What a purging forget has done when its process dies between its commit and its purge: the commit that
    asks for the purge (the same code ``forget(purge=True)`` runs first), and no purge."""
    _commit_forget(res, namespace, partial(_one_turn, memory_id=tid), surface="python", purge=True)


def test_an_owed_purge_is_finished_by_the_next_open(resources: Resources) -> None:
    namespace = _chat(resources)
    tid, vector = _vector(resources, namespace)
    _commit_without_its_purge(resources, namespace, tid)
    assert _traces(resources, vector)
    resources.store.close()
    again = make_resources(Path(resources.settings.data_dir))
    try:
        assert tid not in again.store.snapshot(namespace).turns
        assert _traces(resources, vector) == []
        assert not again.store.purge_owed(namespace)
    finally:
        again.store.close()


def test_an_owed_purge_is_finished_by_the_next_commit(resources: Resources) -> None:
    namespace = _chat(resources)
    tid, vector = _vector(resources, namespace)
    writer = make_resources(Path(resources.settings.data_dir))  # a store that was open before the purge was owed
    try:
        assert "D1:1" in writer.store.snapshot(namespace).turns
        _commit_without_its_purge(resources, namespace, tid)
        forget(namespace, turn_ids=["D1:3"], resources=writer)  # the next write, without a purge of its own
        assert _traces(resources, vector) == []
        assert not writer.store.purge_owed(namespace)
    finally:
        writer.store.close()


def test_the_servers_store_purges_its_deletes_when_configured(
    resources: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    from logicmap.graphs.runtime.resources import set_default_resources
    from logicmap.studio.store import generate_store

    async def served() -> LogicMapStore:
        async with generate_store() as store:
            return store

    set_default_resources(resources)
    try:
        monkeypatch.setenv("LOGICMAP_STORE_PURGE", "true")
        store = asyncio.run(served())
        assert store.purge_removals
        store.put(ALICE, "locker", SECRET)
        store.flush()  # consolidated, so its vector is in the records too
        _, vector = _vector(resources, NS)
        store.delete(ALICE, "locker")  # what DELETE /store/items runs
        assert _traces(resources, vector) == []
        monkeypatch.setenv("LOGICMAP_STORE_PURGE", "sometimes")
        with pytest.raises(ValueError, match="^LOGICMAP_STORE_PURGE='sometimes': expected true or false$"):
            asyncio.run(served())
        monkeypatch.delenv("LOGICMAP_STORE_PURGE")
        assert not asyncio.run(served()).purge_removals
    finally:
        set_default_resources(None)
