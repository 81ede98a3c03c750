"""``logicmap mcp`` driven by the mcp package's own client, over stdio and over streamable HTTP.

stdio: one server fixed to alice. The client remembers, searches, answers, lists and forgets; tool arguments that
name bob's namespace are dropped (the call acts on alice's) and bob's turn id reads like an unknown id. HTTP: one
server, a tenants file mapping two bearer tokens to alice and bob; two connections at once never see each other's
memory, and a request without a known token is refused before any tool runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from logicmap.agents.local_llm import free_port, stop_process_group
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.writes.forget import list_memories
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.settings import LogicMapSettings

pytestmark = pytest.mark.integration

mcp = pytest.importorskip("mcp")
TIMEOUT_S = 240.0
ALICE_SECRET, BOB_SECRET = "heron-5521", "walrus-8830"
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-fedcba9876543210"}


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _seed_bob(data_dir: Path) -> None:
    """Bob's memory, written before the server opens the store (an embedded store serves one process)."""
    resources = Resources(settings=LogicMapSettings(data_dir=data_dir, embedding_provider="hashing"))
    session = Session(
        session_id="S1",
        timestamp="2024-05-01T10:00:00",
        timestamp_text="",
        turns=[RawTurn(dia_id="B1:1", speaker="Bob", text=f"My locker code is {BOB_SECRET}.")],
    )
    ingest_conversation(
        Conversation(conversation_id="bob", speakers=["Bob"], sessions=[session]),
        "bob",
        resources=resources,
        policy="heuristic",
    )
    resources.store.close()


def _after(data_dir: Path) -> tuple[list[str], list[str], Any]:
    resources = Resources(settings=LogicMapSettings(data_dir=data_dir, embedding_provider="hashing"))
    try:
        alice = [i["text"] for i in list_memories("alice", resources=resources).items]
        bob = [i["text"] for i in list_memories("bob", resources=resources).items]
        audit = resources.store.snapshot("alice").manifest.forgets
    finally:
        resources.store.close()
    return alice, bob, audit


def test_stdio_server_serves_one_namespace_and_ignores_a_namespace_argument(tmp_path: Path, child_env: Any) -> None:
    from mcp import Client, StdioServerParameters

    data_dir = tmp_path / "memory"
    _seed_bob(data_dir)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "logicmap", "mcp", "-n", "alice"],
        env=child_env(data_dir, embedder="hashing"),
        cwd=str(tmp_path),
    )

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(params) as client:
            out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            out["remember"] = await client.call_tool(
                "remember", {"text": f"My vault code is {ALICE_SECRET}.", "namespace": "bob"}
            )
            await client.call_tool("remember", {"text": "I grow figs in Porto."})
            out["search"] = await client.call_tool("search_events", {"query": "code", "namespace": "bob"})
            out["answer"] = await client.call_tool("answer", {"question": "What is my code?", "namespace": "bob"})
            out["list"] = await client.call_tool("list_memories", {"namespace": "bob"})
            out["forget_bob"] = await client.call_tool("forget_memory", {"turn_ids": ["B1:1"], "namespace": "bob"})
            page = json.loads(_text(out["list"]))
            secret_turn = next(i["id"] for i in page["items"] if ALICE_SECRET in i["text"])
            out["forget"] = await client.call_tool("forget_memory", {"turn_ids": [secret_turn]})
            out["list_after"] = await client.call_tool("list_memories", {})
        return out

    out = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
    assert out["tools"] == [
        "answer",
        "forget_memory",
        "list_memories",
        "purge_memory",
        "remember",
        "search_events",
        "update_memory",
    ]
    for name in ("remember", "search", "answer", "list"):
        assert not out[name].is_error, _text(out[name])
        assert BOB_SECRET not in _text(out[name]), name
    assert ALICE_SECRET in _text(out["search"]) and ALICE_SECRET in _text(out["answer"])
    assert json.loads(_text(out["list"]))["namespace"] == "alice"
    assert out["forget_bob"].is_error and "no such turn" in _text(out["forget_bob"])
    assert "bob" not in _text(out["forget_bob"]).replace("forget_memory", "")
    assert not out["forget"].is_error, _text(out["forget"])
    assert ALICE_SECRET not in _text(out["list_after"]) and "figs" in _text(out["list_after"])
    alice, bob, audit = _after(data_dir)
    assert alice == ["I grow figs in Porto."] and bob == [f"My locker code is {BOB_SECRET}."]
    assert [(a.surface, a.removed.get("turns")) for a in audit] == [("mcp", 1)]


def test_a_stdio_server_that_cannot_start_tells_its_client_why(tmp_path: Path, child_env: Any) -> None:
    """A second server on a data directory another process holds answers the client's initialize with the line it
    prints (before: the client saw only "Connection closed")."""
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

    data_dir = tmp_path / "memory"
    _seed_bob(data_dir)
    holder = Resources(settings=LogicMapSettings(data_dir=data_dir, embedding_provider="hashing"))
    holder.store.require_namespace("bob")  # this process holds the embedded store
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "logicmap", "mcp", "-n", "alice"],
        env=child_env(data_dir, embedder="hashing"),
        cwd=str(tmp_path),
    )

    def errors(exc: BaseException) -> list[str]:  # the client raises inside a task group: an exception group
        if isinstance(exc, BaseExceptionGroup):
            return [m for e in exc.exceptions for m in errors(e)]
        return [str(exc)] if isinstance(exc, MCPError) else [f"{type(exc).__name__}: {exc}"]

    async def connect() -> list[str]:
        try:
            async with Client(params) as client:
                await client.list_tools()
        except Exception as exc:  # what the client saw is the result
            return sorted(set(errors(exc)))
        return ["connected"]

    try:
        seen = asyncio.run(asyncio.wait_for(connect(), TIMEOUT_S))
    finally:
        holder.store.close()
    assert seen == [
        f"error: the embedded store at {data_dir} is in use by another process (pid {os.getpid()}). "
        "The embedded store serves one process at a time; to share memory between processes run a "
        "Chroma server (`chroma run --path DIR --port 8000`) and set LOGICMAP_CHROMA_HOST (and "
        "LOGICMAP_CHROMA_PORT)."
    ]


@contextlib.contextmanager
def _http_server(tmp_path: Path, env: dict[str, str]) -> Any:
    tenants = tmp_path / "tenants.json"
    tenants.write_text(json.dumps({TOKENS["alice"]: "alice", TOKENS["bob"]: "bob"}))
    port = free_port()
    log = open(tmp_path / "mcp.log", "wb")  # closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "logicmap", "mcp", "--http", "--port", str(port), "--tenants", str(tenants)],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (tmp_path / "mcp.log").read_text()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.post(url, json={}, timeout=5).status_code == 401:  # listening, token gate on
                    break
            assert time.monotonic() < deadline, (tmp_path / "mcp.log").read_text()
            time.sleep(0.3)
        yield url
    finally:
        stop_process_group(process, timeout=15.0)
        log.close()


def test_http_server_gives_each_connection_its_tokens_namespace(tmp_path: Path, child_env: Any) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    data_dir = tmp_path / "memory"

    def connect(url: str, token: str | None) -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=120)))

    async def user(url: str, name: str, secret: str, other: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect(url, TOKENS[name]) as client:
            out["remember"] = await client.call_tool("remember", {"text": f"My code is {secret}.", "namespace": other})
            await asyncio.sleep(0.5)  # the other connection writes meanwhile
            out["search"] = await client.call_tool("search_events", {"query": "my code", "namespace": other, "k": 10})
            out["answer"] = await client.call_tool("answer", {"question": "What is my code?", "strategy": "bm25"})
            out["list"] = await client.call_tool("list_memories", {"namespace": other})
        return out

    async def scenario(url: str) -> dict[str, Any]:
        alice, bob = await asyncio.gather(
            user(url, "alice", ALICE_SECRET, "bob"), user(url, "bob", BOB_SECRET, "alice")
        )
        refused = []
        for token in (None, "not-a-known-token-at-all", TOKENS["alice"][:-1]):
            try:
                async with connect(url, token) as client:
                    refused.append(_text(await client.call_tool("list_memories", {})))
            except Exception as exc:  # refused before any tool runs
                refused.append(f"refused: {type(exc).__name__}")
        return {"alice": alice, "bob": bob, "refused": refused}

    with _http_server(tmp_path, child_env(data_dir, embedder="hashing")) as url:
        out = asyncio.run(asyncio.wait_for(scenario(url), TIMEOUT_S))
    for me, secret, theirs in (("alice", ALICE_SECRET, BOB_SECRET), ("bob", BOB_SECRET, ALICE_SECRET)):
        for name, result in out[me].items():
            assert not result.is_error, (me, name, _text(result))
            assert theirs not in _text(result), (me, name)
        assert secret in _text(out[me]["search"]) and secret in _text(out[me]["answer"])
        assert json.loads(_text(out[me]["list"]))["namespace"] == me
    assert all(r.startswith("refused") for r in out["refused"]), out["refused"]
    assert not any(s in r for r in out["refused"] for s in (ALICE_SECRET, BOB_SECRET))
    alice, bob, _ = _after(data_dir)
    assert alice == [f"My code is {ALICE_SECRET}."] and bob == [f"My code is {BOB_SECRET}."]
