"""The API server's guard sees exactly what the server acts on (issue 37, item 1), tried as a hostile client would.

Requests are generated from hostile pieces (repeated, re-cased and percent-encoded parameter names; dotted,
encoded and smuggled namespace values; repeated JSON keys at the top and inside ``context``) and sent through the
real ``TenantGuard`` middleware, authenticated as alice, in front of an app that parses what it is handed the way
the LangGraph API server does (Starlette's ``QueryParams``, ``orjson``). Whatever the guard lets through must name
only alice's namespaces as the server reads it; everything else is refused with one line (400, 403, 404 or 405).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.datastructures import QueryParams

from logicmap.memory.runtime.tenancy import tenant_problem
from logicmap.studio.requests import BadRequest, strict_json, strict_query
from logicmap.studio.tenant_guard import TenantGuard

NAMES = ["namespace", "Namespace", "NAMESPACE", "%6eamespace", "namespac%65", "key", "k%65y", "refresh_ttl", "other"]
VALUES = [
    "memories.alice",
    "memories.bob",
    "memories%2Ebob",
    "memories.alice%26namespace%3Dmemories.bob",
    "memories",
    "",
    "memories.alice.Note",
    "alice",
    "bob",
    "memories.%62ob",
    "home",
]
LABELS = [
    ["memories", "alice"],
    ["memories", "bob"],
    ["memories"],
    [],
    ["alice"],
    ["memories", "alice", "x"],
    ["memories", "*"],
    "memories.bob",
    None,
]


@pytest.fixture(autouse=True, scope="module")
def _no_server_left_behind() -> Iterator[None]:
    """The guard asks the server's own API in process (``langgraph_sdk.get_client(url=None)``), which imports
    ``langgraph_api``; a process that has it loaded counts as the API server (``graphs.runtime.resources.server_mode``), so
    it is unloaded after this module, as it was before, for the tests that follow."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name == "langgraph_api" or name.startswith("langgraph_api."):
            del sys.modules[name]
    from logicmap.graphs.runtime.resources import server_mode

    assert not server_mode()


class _User:
    identity = "alice"
    is_authenticated = True


class _Server:
    """Stands where the LangGraph API server stands: records what it was handed, parsed as the server parses it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, QueryParams, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        parsed = orjson.loads(body) if body else None
        self.seen.append((scope["method"], scope["path"], QueryParams(scope["query_string"].decode("latin-1")), parsed))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _send(method: str, path: str, query: bytes, body: bytes) -> tuple[int, str, _Server]:
    server = _Server()
    guard = TenantGuard(server)
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query,
        "user": _User(),
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    out: dict[str, Any] = {"body": b""}
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
        else:
            out["body"] += message.get("body", b"")

    asyncio.run(guard(scope, receive, send))
    detail = json.loads(out["body"]).get("detail", "") if out["status"] != 200 else ""
    return out["status"], detail, server


def _alices(labels: Any, *, prefix: bool) -> bool:
    return (
        isinstance(labels, list | tuple)
        and all(isinstance(x, str) for x in labels)
        and tenant_problem(tuple(labels), user_id="alice", authority=None, prefix=prefix) is None
    )


def _refused_in_one_line(status: int, detail: str) -> bool:
    return status in (400, 403, 404, 405) and bool(detail) and "\n" not in detail and "Traceback" not in detail


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)), min_size=1, max_size=4),
    st.sampled_from(["&", ";"]),
    st.sampled_from(["GET", "HEAD"]),
)
def test_a_get_is_refused_or_read_by_the_server_as_the_guard_read_it(
    pairs: list[tuple[str, str]], sep: str, method: str
) -> None:
    query = sep.join(f"{name}={value}" for name, value in pairs).encode()
    status, detail, server = _send(method, "/store/items", query, b"")
    if status != 200:
        assert _refused_in_one_line(status, detail), (status, detail)
        return
    [(_, _, params, _)] = server.seen
    assert len(params.getlist("namespace")) == 1 and len(params.getlist("key")) <= 1
    assert _alices(params["namespace"].split("."), prefix=False), params


def _object(pairs: list[tuple[str, Any]]) -> str:
    return (
        "{"
        + ", ".join(
            f"{json.dumps(k)}: {v if isinstance(v, str) and v.startswith('{') else json.dumps(v)}" for k, v in pairs
        )
        + "}"
    )


ROUTES = [
    ("PUT", "/store/items", "namespace", False),
    ("DELETE", "/store/items", "namespace", False),
    ("POST", "/store/items/search", "namespace_prefix", True),
    ("POST", "/store/namespaces", "prefix", True),
    ("POST", "/store/items/search/", "namespace_prefix", True),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(ROUTES),
    st.lists(st.sampled_from(LABELS), min_size=0, max_size=3),
    st.sampled_from(["", "namespace=memories.bob", "prefix=memories.bob"]),
)
def test_a_body_route_is_refused_or_read_by_the_server_as_the_guard_read_it(
    route: tuple[str, str, str, bool], namespaces: list[Any], query: str
) -> None:
    method, path, field, prefix = route
    body = _object([(field, ns) for ns in namespaces] + [("key", "home"), ("value", {"content": "x"})]).encode()
    status, detail, server = _send(method, path, query.encode(), body)
    if status != 200:
        assert _refused_in_one_line(status, detail), (status, detail)
        return
    [(_, _, params, parsed)] = server.seen
    assert not params and len(namespaces) <= 1
    named = parsed.get(field)
    if field == "prefix" and named is None:
        pytest.fail("a listing of every namespace went through")
    assert _alices(named, prefix=prefix), parsed


RUN_BODIES = [
    (
        '{"assistant_id": "rerank", "input": {}, "context": {"namespace": "memories.alice"}, '
        '"context": {"namespace": "memories.bob"}}'
    ),
    '{"assistant_id": "rerank", "input": {}, "context": {"namespace": "memories.alice", "namespace": "memories.bob"}}',
    '{"assistant_id": "rerank", "input": {}, "config": {"configurable": {"namespace": "memories.bob"}}}',
    '{"assistant_id": "rerank", "input": {}, "context": {"namespace": "{user_id}.bob"}}',
    '[{"assistant_id": "rerank", "input": {}, "context": {"namespace": "memories.alice"}}, '
    '{"assistant_id": "rerank", "input": {}, "context": {"namespace": "memories.bob"}}]',
]


@pytest.mark.parametrize("path", ["/runs/wait", "/runs", "/runs/stream", "/runs/batch", "/runs/crons"])
@pytest.mark.parametrize("body", RUN_BODIES)
def test_a_run_naming_another_users_namespace_any_way_is_refused(path: str, body: str) -> None:
    status, detail, server = _send("POST", path, b"", body.encode())
    assert _refused_in_one_line(status, detail) and not server.seen, (status, detail)


@pytest.mark.parametrize(
    "body",
    [
        '{"graph_id": "rerank", "context": {"namespace": "memories.bob"}}',
        '{"graph_id": "forget", "config": {"configurable": {"namespace": "memories.bob"}}}',
        '{"graph_id": "rerank", "context": {"namespace": "memories.alice", "namespace": "memories.bob"}}',
        '{"graph_id": "rerank", "context": {"namespace": "memories.{team}"}}',
        '{"graph_id": "rerank", "context": {"namespace": "{user_id}.bob"}}',
        '{"graph_id": "rerank", "context": {"namespace": ["memories", "bob"]}}',
    ],
)
@pytest.mark.parametrize("how", [("POST", "/assistants"), ("PATCH", "/assistants/0a1b")])
def test_an_assistant_fixed_to_another_users_namespace_is_refused(body: str, how: tuple[str, str]) -> None:
    status, detail, server = _send(*how, b"", body.encode())
    assert _refused_in_one_line(status, detail) and not server.seen, (status, detail)


@pytest.mark.parametrize(
    "namespace", ["memories.{user_id}", "{user_id}", "memories.alice", "memories.{user_id}.{topic}"]
)
def test_an_assistant_fixed_to_the_creators_namespace_is_created(namespace: str) -> None:
    status, _, server = _send(
        "POST", "/assistants", b"", json.dumps({"graph_id": "rerank", "context": {"namespace": namespace}}).encode()
    )
    assert status == 200 and server.seen[0][3]["context"]["namespace"] == namespace


def test_the_parser_names_what_it_refuses() -> None:
    with pytest.raises(BadRequest, match="repeats the parameter 'namespace'"):
        strict_query(b"namespace=a&namespac%65=b", {"namespace"})
    with pytest.raises(BadRequest, match="unknown query parameter 'Namespace'"):
        strict_query(b"Namespace=a", {"namespace"})
    with pytest.raises(BadRequest, match="repeats the key 'k'"):
        strict_json(b'{"a": {"k": 1, "k": 2}}')
    with pytest.raises(BadRequest, match="nested deeper than 100"):
        strict_json(b"[" * 3000 + b"]" * 3000)
    with pytest.raises(BadRequest, match="nested deeper than 100"):
        strict_json(b"[" * 101 + b"]" * 101)
    assert strict_json(b"[" * 100 + b"]" * 100) is not None
    with pytest.raises(BadRequest, match="not valid JSON"):
        strict_json(b"{'a': 1}")
