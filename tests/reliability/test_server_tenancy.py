"""One authority names a run's tenant, a thread stays with its tenant, and a server reads no files of its own.

Generated cases (seeded), in process:
- the API server's guard (``studio.tenant_guard.run_problem``) on runs that try to override their assistant's
  tenant (context or configurable, fixed names and templates, deployment authority on and off), and on runs
  reusing another tenant's thread; what it lets through resolves to the assistant's template filled from the
  run's user;
- ``resolve_namespace`` with an authenticated user and a deployment authority;
- ``server_readable_path`` with the server mode on: every path outside the allow-listed directory (missing,
  existing, absolute, ``..``, symlinks out, NUL bytes) gets the same error; files inside are read;
- the chatbot graph with a checkpointer: a thread created by one tenant refuses another tenant's run before
  recall, and neither tenant's memory changes.

The same classes against a real ``langgraph dev`` server: ``tests/integration/test_server_tenancy.py``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from logicmap.graphs.chat.chatbot import ChatContext, build_chatbot_graph
from logicmap.graphs.ingest import ingest
from logicmap.graphs.runtime.resources import IngestPathRefused, Resources, server_readable_path, set_server_mode
from logicmap.memory.runtime.tenancy import (
    NamespaceRequiredError,
    TenantOverrideError,
    ThreadTenantError,
    resolve_namespace,
    tenant_key,
)
from logicmap.settings import LogicMapSettings
from logicmap.studio.tenant_guard import run_problem
from tests.conftest import make_resources
from tests.reliability.support import marked_conversation
from tests.store_seam import resources_for

N_GUARD = 400
N_AUTH = 200
N_PATHS = 120
USERS = ["alice", "bob", "carol", "t-1", "Acme_2"]
TEMPLATES = ["{user_id}", "acme-{user_id}", "bob", "alice", None]
HOSTILE = ["alice", "bob", "t.bob", "acme-alice", "{user_id}", "../alice", "alice\n", "", None, 7, ["alice"]]


def _run_payload(rng: random.Random, user: str) -> tuple[dict[str, Any], Any]:
    """A run as a client sends it: its user, maybe a namespace of its own in context or configurable."""
    named = rng.choice(HOSTILE) if rng.random() < 0.7 else None
    values: dict[str, Any] = {"user_id": user}
    if named is not None:
        values["namespace"] = named
    where = rng.choice(["context", "configurable"])
    payload = {"assistant_id": "a1", "input": {}}
    payload["context" if where == "context" else "config"] = values if where == "context" else {"configurable": values}
    return payload, named


def _assistant(template: str | None, rng: random.Random) -> dict[str, Any]:
    if template is None:
        return {"assistant_id": "a1", "context": {}, "config": {}}
    if rng.random() < 0.5:
        return {"assistant_id": "a1", "context": {"namespace": template}, "config": {}}
    return {"assistant_id": "a1", "context": {}, "config": {"configurable": {"namespace": template}}}


def test_a_run_never_overrides_its_assistants_or_deployments_tenant() -> None:
    rng = random.Random(32)
    refused = allowed = 0
    for _ in range(N_GUARD):
        template, user = rng.choice(TEMPLATES), rng.choice(USERS)
        authority = rng.choice([None, None, "{user_id}"])
        payload, named = _run_payload(rng, user)
        problem = run_problem(payload, _assistant(template, rng), None, authority=authority)
        if named not in (None, "") and (template is not None or authority):
            assert problem and "may not name its own namespace" in problem, (template, authority, payload)
            refused += 1
        else:
            assert problem is None, (template, authority, payload, problem)
            allowed += 1
    assert refused > 100 and allowed > 100


def test_a_run_on_another_tenants_thread_is_refused() -> None:
    rng = random.Random(4)
    refused = allowed = 0
    for _ in range(N_GUARD):
        template = rng.choice(["{user_id}", "acme-{user_id}"])
        owner, user = rng.choice(USERS), rng.choice(USERS)
        thread_key = tenant_key(template.format(user_id=owner))
        payload = {"assistant_id": "a1", "config": {"configurable": {"user_id": user}}}
        problem = run_problem(payload, {"context": {"namespace": template}}, thread_key, authority=None)
        if user == owner:
            assert problem is None
            allowed += 1
        else:
            assert problem and "another tenant" in problem
            refused += 1
    # A run with no usable user on a bound thread is refused too (it could only read the thread's state).
    assert run_problem(
        {"assistant_id": "a1"}, {"context": {"namespace": "{user_id}"}}, tenant_key("bob"), authority=None
    )
    assert refused > 100 and allowed > 30


def test_the_authenticated_user_names_the_tenant() -> None:
    rng = random.Random(7)
    for _ in range(N_AUTH):
        auth, claimed = rng.choice(USERS), rng.choice([*USERS, None, ""])
        configurable = {"langgraph_auth_user_id": auth}
        if claimed is not None:
            configurable["user_id"] = claimed
        if claimed not in (None, "") and claimed != auth:
            with pytest.raises(TenantOverrideError):
                resolve_namespace("{user_id}", configurable)
        else:
            assert resolve_namespace("{user_id}", configurable) == auth
            assert resolve_namespace("memories.{user_id}", configurable) == f"memories.{auth}"
            # The owner is read off the name: a user written elsewhere in it could be spelled by another user too.
            with pytest.raises(TenantOverrideError):
                resolve_namespace("acme-{user_id}", configurable)
    # Without auth (the server puts an empty identity), the run's user_id is used.
    assert resolve_namespace("{user_id}", {"langgraph_auth_user_id": "", "user_id": "bob"}) == "bob"


def test_a_deployment_authority_is_the_only_tenant_source() -> None:
    assert resolve_namespace(None, {"user_id": "bob"}, authority="{user_id}") == "bob"
    assert resolve_namespace("{user_id}", {"user_id": "bob"}, authority="{user_id}") == "bob"
    for template, configurable in [
        ("alice", {"user_id": "bob"}),
        (None, {"user_id": "bob", "namespace": "alice"}),
        ("acme-{user_id}", {"user_id": "bob"}),
    ]:
        with pytest.raises(TenantOverrideError):
            resolve_namespace(template, configurable, authority="{user_id}")
    with pytest.raises(NamespaceRequiredError):
        resolve_namespace(None, {}, authority="{user_id}")


# -- the server reads no files of its own -------------------------------------------------------------------------


@pytest.fixture
def server_mode() -> Any:
    set_server_mode(True)
    yield
    set_server_mode(False)


def _hostile_paths(rng: random.Random, root: Path, outside: Path) -> list[str]:
    pool = [
        str(outside / "secret.json"),
        str(outside / "missing.json"),
        str(outside / "bad.json"),
        "/etc/passwd",
        "/etc/hostname",
        "/proc/self/environ",
        "../secret.json",
        "../../etc/passwd",
        str(root / ".." / "secret.json"),
        "link-out.json",
        "link-out-dir/secret.json",
        str(outside),
        "",
        "a\x00b",
        str(root),
        "~/x.json",
        "missing.json",
        "/nonexistent/dir/x.json",
    ]
    return [rng.choice(pool) for _ in range(N_PATHS)]


def test_the_server_reads_only_files_under_its_ingest_root(tmp_path: Path, server_mode: Any) -> None:
    outside, root = tmp_path / "outside", tmp_path / "root"
    outside.mkdir(), root.mkdir()
    (outside / "secret.json").write_text('{"secret": 1}')
    (outside / "bad.json").write_text("{not json")
    (root / "ok.json").write_text("[]")
    os.symlink(outside / "secret.json", root / "link-out.json")
    os.symlink(outside, root / "link-out-dir")
    rng = random.Random(11)
    for settings in (LogicMapSettings(), LogicMapSettings(ingest_root=root)):
        messages = set()
        for path in _hostile_paths(rng, root, outside):
            with pytest.raises(IngestPathRefused) as refused:
                server_readable_path(path, settings)
            messages.add(str(refused.value))
        assert len(messages) == 1, messages  # one error for every refused path: nothing to probe with
    assert server_readable_path("ok.json", LogicMapSettings(ingest_root=root)) == str(root / "ok.json")
    assert server_readable_path(str(root / "ok.json"), LogicMapSettings(ingest_root=root)) == str(root / "ok.json")
    set_server_mode(False)  # a Python caller reads what it names
    assert server_readable_path(str(outside / "secret.json"), LogicMapSettings()) == str(outside / "secret.json")


def test_the_ingest_graph_on_a_server_refuses_paths_and_writes_nothing(tmp_path: Path, server_mode: Any) -> None:
    res = make_resources(tmp_path / "memory")
    secret = tmp_path / "secret.json"
    secret.write_text("[]")
    for path in (str(secret), str(tmp_path / "missing.json"), "/etc/passwd"):
        with pytest.raises(IngestPathRefused):
            ingest.graph.invoke({"path": path}, context={"namespace": "bob", "resources": res, "policy": "heuristic"})
    assert res.store.namespaces() == []
    # Sessions in the request are the server's way in.
    conversation = marked_conversation("kiwi", sessions=1)
    ingest.graph.invoke(
        {"sessions": conversation.sessions}, context={"namespace": "bob", "resources": res, "policy": "heuristic"}
    )
    assert res.store.namespaces() == ["bob"]


# -- a thread stays with its tenant -------------------------------------------------------------------------------


def test_a_chatbot_thread_refuses_another_tenant_before_recall(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "memory")
    app = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    context = ChatContext(
        namespace="{user_id}", strategy="dense", policy="heuristic", remember_mode="sync", resources=res
    )
    rng = random.Random(5)
    tried = 0
    for i in range(6):
        owner = rng.choice(USERS)
        thread = {"thread_id": f"t{i}", "user_id": owner}
        app.invoke(
            {"messages": [("user", f"My locker code is {1000 + i}.")]}, {"configurable": thread}, context=context
        )
        for other in (u for u in USERS if u != owner):
            before = {ns: res.store.manifest(ns).generation for ns in res.store.namespaces()}
            with pytest.raises(ThreadTenantError):
                app.invoke(
                    {"messages": [("user", "What is my locker code?")]},
                    {"configurable": {"thread_id": f"t{i}", "user_id": other}},
                    context=context,
                )
            assert {ns: res.store.manifest(ns).generation for ns in res.store.namespaces()} == before
            tried += 1
        # The owner goes on using the thread.
        out = app.invoke({"messages": [("user", "Noted?")]}, {"configurable": thread}, context=context)
        assert out["memory_write"]["status"] == "stored"
    assert tried == 6 * (len(USERS) - 1)


# -- with auth on, a run's namespace is its user's, checked by every graph that touches memory ------------------


GRAPHED = ["forget", "list", "delete", "ingest", "rerank", "compass", "goalmem", "real", "reconstruct", "r2", "chatbot"]


def _memory_graph(name: str) -> tuple[Any, dict[str, Any]]:
    graphs = {n: (g, i) for n, g, i in _memory_graphs()}
    return graphs[name]


def _memory_graphs() -> list[tuple[str, Any, dict[str, Any]]]:
    from logicmap.graphs.strategies.registry import STRATEGIES
    from logicmap.graphs.surfaces.lifecycle import delete_graph, forget_graph, list_graph

    graphs = [
        ("forget", forget_graph, {"session_ids": ["S1"], "purge": True}),
        ("list", list_graph, {}),
        ("delete", delete_graph, {"confirm": True}),
        ("ingest", ingest.graph, {"sessions": marked_conversation("fig", sessions=1).sessions}),
    ]
    for name in ("rerank", "compass", "goalmem", "real", "reconstruct", "r2"):
        graphs.append((name, STRATEGIES[name].graph, {"question": "What did I say about kiwi?"}))
    from logicmap.graphs.chat.chatbot import graph as chatbot

    graphs.append(("chatbot", chatbot, {"messages": [("user", "What did I say about kiwi?")]}))
    return graphs


@pytest.mark.parametrize("name", GRAPHED)
def test_every_memory_graph_refuses_a_namespace_its_user_does_not_own(tmp_path: Path, name: str) -> None:
    """The check at run start inside the graph (``resolve_namespace``), whatever route started the run (a fixed
    assistant, a cron, the server's own MCP or A2A endpoints): bob's run on ``memories.alice`` is refused and
    alice's memory is untouched; alice's own run on it goes on."""
    graph, inputs = _memory_graph(name)
    res = make_resources(tmp_path / "memory")
    ingest.ingest_conversation(
        marked_conversation("kiwi", sessions=1),
        "memories.alice",
        resources=res,
        policy="heuristic",
        memory_manager="r2" if name == "r2" else None,
    )
    before = res.store.manifest("memories.alice").generation
    context: dict[str, Any] = {"namespace": "memories.alice", "resources": res}
    if name not in ("forget", "list", "delete"):
        context["policy"] = "heuristic"
    with pytest.raises(TenantOverrideError, match="not the authenticated user's"):
        graph.invoke(inputs, {"configurable": {"langgraph_auth_user_id": "bob"}}, context=context)
    assert res.store.namespaces() == ["memories.alice"]
    assert res.store.manifest("memories.alice").generation == before
    if name != "delete":
        graph.invoke(inputs, {"configurable": {"langgraph_auth_user_id": "alice"}}, context=context)


def test_a_store_put_under_a_deployment_template_writes_the_users_own_tenant(tmp_path: Path, server_mode: Any) -> None:
    """Issue 37 item 3: under LOGICMAP_SERVER_NAMESPACE every store put was a TenantOverrideError inside the ingest
    graph (a 500 on the server). The store's own graph runs take the namespace its caller named."""

    from logicmap.graphs.runtime.resources import default_resources, set_default_resources

    res = resources_for(
        LogicMapSettings(data_dir=tmp_path / "memory", embedding_provider="hashing", server_namespace="{user_id}")
    )
    previous = default_resources()
    set_default_resources(res)  # the server's process-wide resources carry the deployment's template
    try:
        _store_round_trip(res)
    finally:
        set_default_resources(previous)
    # A client's run still may not name a namespace under the deployment's template.
    with pytest.raises(TenantOverrideError):
        resolve_namespace("alice.notes", {"user_id": "alice"}, authority="{user_id}")


def _store_round_trip(res: Resources) -> None:
    from logicmap.graphs.surfaces.basestore import LogicMapStore

    store = LogicMapStore(resources=res, policy="heuristic", strategy="dense")
    store.put(("alice", "notes"), "home", {"content": "Alice keeps her spare key under the blue flowerpot."})
    store.put(("alice", "notes"), "home", {"content": "Alice moved the key to the mailbox."})
    assert store.get(("alice", "notes"), "home").value == {"content": "Alice moved the key to the mailbox."}
    assert [i.key for i in store.search(("alice",), query="where is the key")] == ["home"]
    store.delete(("alice", "notes"), "home")
    assert store.get(("alice", "notes"), "home") is None
