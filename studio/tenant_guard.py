"""The API server's tenant guard: one authority names a run's tenant, and a thread stays with its tenant.

The LangGraph API server merges a run's ``context`` (or its ``config.configurable``, which it copies into the
context) over the assistant's, the run's values winning. An assistant created with
``context={"namespace": "{user_id}"}`` would otherwise be overridden by any run that sends its own
``namespace``. This ASGI middleware (installed by ``studio/server.py``'s app, which the server applies to every
route) reads each request that creates runs (``/runs``, ``/runs/stream``, ``/runs/wait``, ``/runs/batch``,
``/runs/crons`` and their ``/threads/{id}/...`` forms) before the server does, and refuses with 403:

- a run that names a ``namespace`` when the deployment fixes the tenant (``LOGICMAP_SERVER_NAMESPACE``) or
  when its assistant names one (context or configurable): the assistant's template, filled from the run's
  user identity, is the tenant;
- a run on a thread whose recorded tenant (the chatbot's ``tenant_key``) is not the run's: checked here,
  before the server streams the thread's state back, and again inside the graph.

With LangGraph auth on, a run's namespace must also belong to its user (``memory.runtime.tenancy.tenant_problem``: the
owner label is the user's id), checked here before the run starts (403) and again by the graph itself
(``resolve_namespace``), so runs the server starts by other routes (crons, its MCP and A2A endpoints) obey it too.
Assistants are checked when created or updated (``POST /assistants``, ``PATCH /assistants/{id}``): a fixed
namespace (``context.namespace`` or ``config.configurable.namespace``) must be the creator's, filled from the
creator's id (``{user_id}``, ``memories.{user_id}``), or the deployment's template; otherwise 403.

The ``/store`` routes (``PUT``/``GET``/``DELETE /store/items``, ``/store/items/search``, ``/store/namespaces``) pass
here too: the namespace a request names must be its tenant's (``studio/store_guard.py``; 403 otherwise).

The guard reads every request it checks once, strictly (``studio/requests.py``: a repeated JSON key or query
parameter is refused with 400), and hands the server the request as it read it: the server acts on exactly what
was checked.

Every graph's runs pass here, the memory lifecycle's (``forget``, ``list_memories``, ``delete_namespace``:
``graphs/surfaces/lifecycle.py``) included: a per-user assistant of ``forget`` cannot be pointed at another tenant either.
The graphs enforce the rest themselves (``memory.runtime.tenancy``): with auth on, the authenticated user fills
``{user_id}`` and a run claiming another ``user_id`` is refused.
"""

from __future__ import annotations

import json
import logging
import re
import string
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from logicmap.graphs.runtime.resources import default_resources
from logicmap.memory.runtime.tenancy import AUTH_USER_KEY, resolve_namespace, tenant_key, tenant_problem
from logicmap.studio.requests import BadRequest, canonical_json, strict_json

__all__ = ["TenantGuard", "assistant_problem", "run_problem"]

logger = logging.getLogger("logicmap.studio")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_RUN_PATH = re.compile(r"^/(?:threads/(?P<thread>[^/]+)/)?runs(?:/stream|/wait|/batch|/crons)?/?$")
_ASSISTANT_PATH = re.compile(r"^/assistants(?:/(?P<assistant>[^/]+))?/?$")
_PLACEHOLDER = "0"  # fills an assistant template's fields other than user_id when it is checked at creation
_MAX_BODY = 64 * 1024 * 1024  # the guard reads at most this much; larger requests are refused


def _namespace_named(payload: dict[str, Any]) -> Any:
    """The namespace a run's own context or configurable names (None when it names none)."""
    for holder in (payload.get("context"), (payload.get("config") or {}).get("configurable")):
        if isinstance(holder, dict) and holder.get("namespace") not in (None, ""):
            return holder["namespace"]
    return None


def _assistant_namespace(assistant: dict[str, Any]) -> Any:
    return _namespace_named({"context": assistant.get("context"), "config": assistant.get("config")})


def _dicts(*values: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for value in values:
        if isinstance(value, dict):
            merged.update(value)
    return merged


def run_problem(
    payload: dict[str, Any],
    assistant: dict[str, Any] | None,
    thread_key: str | None,
    *,
    authority: str | None,
    user_id: str | None = None,
    user_label: int = 1,
) -> str | None:
    """Why a run must be refused (None: it may go on). ``assistant`` is the run's assistant (None: unknown,
    the server answers that itself), ``thread_key`` the tenant fingerprint its thread records, ``user_id`` the
    authenticated user (whose namespace the run's must be)."""
    assistant = assistant or {}
    named = _namespace_named(payload)
    fixed = _assistant_namespace(assistant)
    if named is not None and authority:
        return (
            "this deployment names every run's tenant (LOGICMAP_SERVER_NAMESPACE): a run may not name its own "
            "namespace; drop `namespace` from the run's context and config"
        )
    if named is not None and fixed is not None:
        return (
            "this run's assistant names the tenant: a run may not name its own namespace; drop `namespace` from "
            "the run's context and config (the assistant's template is filled from the run's user_id)"
        )
    if not thread_key and not user_id:
        return None
    configurable = _dicts(
        (assistant.get("config") or {}).get("configurable"),
        assistant.get("context"),
        (payload.get("config") or {}).get("configurable"),
        payload.get("context"),
    )
    if user_id:
        configurable[AUTH_USER_KEY] = user_id
    try:  # as the graph will resolve it (memory.tenancy), from the merged context and config
        namespace = resolve_namespace(
            configurable.get("namespace"), configurable, authority=authority, user_label=user_label
        )
    except PermissionError as exc:
        return str(exc)
    except ValueError as exc:
        if not thread_key:
            return None  # names no namespace, or a bad one: the graph answers that itself
        return f"this thread belongs to a tenant and this run names none it may use: {exc}"
    if thread_key and tenant_key(namespace) != thread_key:
        return "this thread belongs to another tenant: start a new thread (a thread is bound to its first tenant)"
    return None


def assistant_problem(payload: Any, *, authority: str | None, user_id: str | None, user_label: int = 1) -> str | None:
    """Why an assistant may not be created or updated with this body (None: it may): a fixed namespace must be the
    deployment's template, or, with auth on, one the creator owns once filled from the creator's id."""
    if not isinstance(payload, dict):
        return None  # the server answers 422 itself
    named = _namespace_named(payload)
    if named is None or (not authority and not user_id):
        return None
    if not isinstance(named, str):
        return "an assistant's namespace is a string (a name or a template such as 'memories.{user_id}')"
    if authority:
        if named != authority:
            return (
                "this deployment names every run's tenant (LOGICMAP_SERVER_NAMESPACE): an assistant may not fix "
                "another namespace; drop `namespace` from its context and config"
            )
        return None
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(named) if name}
        filled = named.format(**{name: _PLACEHOLDER for name in fields if name.isidentifier()} | {"user_id": user_id})
    except (ValueError, KeyError, IndexError, AttributeError) as exc:
        return f"invalid namespace template {named!r}: {exc}"
    problem = tenant_problem(filled.split("."), user_id=user_id, authority=None, user_label=user_label)
    if problem:
        return f"an assistant's namespace must be its creator's ({named!r} is not yours once filled): {problem}"
    return None


async def _receive_all(receive: Receive) -> tuple[bytes, list[Message]] | None:
    chunks: list[bytes] = []
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return b"".join(chunks), messages
        body = message.get("body", b"")
        size += len(body)
        if size > _MAX_BODY:
            return None
        chunks.append(body)
        if not message.get("more_body", False):
            return b"".join(chunks), messages


class TenantGuard:
    """ASGI middleware: refuses run-creating requests that would cross tenants (see the module docstring)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        method = scope.get("method")
        if path == "/store" or path.startswith("/store/"):
            await self._checked(scope, receive, send, self._store)
            return
        assistant = _ASSISTANT_PATH.match(path)
        if assistant and (method, bool(assistant.group("assistant"))) in (("POST", False), ("PATCH", True)):
            await self._checked(scope, receive, send, self._assistant)
            return
        if method == "POST" and _RUN_PATH.match(path):
            await self._checked(scope, receive, send, self._run)
            return
        await self.app(scope, receive, send)

    async def _checked(self, scope: Scope, receive: Receive, send: Send, check: Callable[..., Awaitable[Any]]) -> None:
        """Read the request's body, let ``check`` refuse it or name the scope and body the server is handed."""
        read = await _receive_all(receive)
        if read is None:
            await _refuse(send, 413, "request body too large")
            return
        body, messages = read
        try:
            verdict = await check(scope, body)
        except BadRequest as exc:
            logger.warning("refused a request on %s: %s", scope.get("path"), exc.detail)
            await _refuse(send, exc.status, exc.detail)
            return
        if isinstance(verdict, str):
            logger.warning("refused a request on %s: %s", scope.get("path"), verdict)
            await _refuse(send, 403, verdict)
            return
        if verdict is None:  # nothing to check: the client's request as it came
            await self._forward(scope, messages, receive, send)
            return
        scope, body = verdict
        await self._forward(
            _with_body(scope, body), [{"type": "http.request", "body": body, "more_body": False}], receive, send
        )

    async def _forward(self, scope: Scope, messages: list[Message], receive: Receive, send: Send) -> None:
        """Hand the request on to the server, its body replayed from the messages the guard read."""
        replay = iter(messages)

        async def replayed() -> Message:
            try:
                return next(replay)
            except StopIteration:
                return await receive()

        await self.app(scope, replayed, send)

    async def _store(self, scope: Scope, body: bytes) -> str | tuple[Scope, bytes] | None:
        """A ``/store`` route: the namespace it names must be the tenant's (``studio/store_guard.py``)."""
        from logicmap.studio.store_guard import read_store_request, store_problem

        settings = default_resources().settings
        user_id = _user_id(scope)
        if not user_id and not settings.server_namespace:
            return None  # no rule applies: nothing is checked
        request = read_store_request(
            scope.get("method", ""), scope.get("path", ""), scope.get("query_string", b""), body
        )
        if request is None:
            return None
        problem = store_problem(
            request.namespace,
            user_id=user_id,
            authority=settings.server_namespace,
            user_label=settings.store_user_label,
            prefix=request.prefix,
        )
        return problem or ({**scope, "query_string": request.query}, request.body)

    async def _assistant(self, scope: Scope, body: bytes) -> str | tuple[Scope, bytes] | None:
        """``POST /assistants`` and ``PATCH /assistants/{id}``: a fixed namespace must be the creator's."""
        settings = default_resources().settings
        payload = strict_json(body)
        problem = assistant_problem(
            payload, authority=settings.server_namespace, user_id=_user_id(scope), user_label=settings.store_user_label
        )
        return problem or (scope, canonical_json(payload))

    async def _run(self, scope: Scope, body: bytes) -> str | tuple[Scope, bytes] | None:
        match = _RUN_PATH.match(scope.get("path", ""))
        payload = strict_json(body)
        problem = await self._problem(scope, payload, match.group("thread") if match else None)
        return problem or (scope, canonical_json(payload))

    async def _problem(self, scope: Scope, payload: Any, thread_id: str | None) -> str | None:
        payloads = payload if isinstance(payload, list) else [payload]
        settings = default_resources().settings
        authority = settings.server_namespace
        user_id = _user_id(scope)
        from langgraph_sdk import get_client  # the server's own API, in process (no network, no auth)

        client = get_client(url=None)
        thread_key = await _thread_key(client, thread_id) if thread_id else None
        for run in payloads:
            if not isinstance(run, dict):
                continue
            assistant = await _assistant(client, run.get("assistant_id"))
            problem = run_problem(
                run, assistant, thread_key, authority=authority, user_id=user_id, user_label=settings.store_user_label
            )
            if problem:
                return problem
        return None


async def _assistant(client: Any, assistant_id: Any) -> dict[str, Any] | None:
    if not isinstance(assistant_id, str) or not assistant_id:
        return None
    try:
        return dict(await client.assistants.get(assistant_id))
    except Exception:  # an unknown assistant: the server itself answers 404
        try:  # a graph id names the graph's default assistant
            found = await client.assistants.search(graph_id=assistant_id, metadata={"created_by": "system"}, limit=1)
            return dict(found[0]) if found else None
        except Exception:
            return None


async def _thread_key(client: Any, thread_id: str) -> str | None:
    try:
        state = await client.threads.get_state(thread_id)
    except Exception:  # a new or unknown thread records no tenant
        return None
    values = state.get("values") if isinstance(state, dict) else None
    key = values.get("tenant_key") if isinstance(values, dict) else None
    return key if isinstance(key, str) and key else None


def _user_id(scope: Scope) -> str | None:
    """The authenticated user's identity (LangGraph auth, ``middleware_order: auth_first``), or None."""
    user = scope.get("user")
    identity = getattr(user, "identity", None) if getattr(user, "is_authenticated", False) else None
    return str(identity) if identity not in (None, "") else None


def _with_body(scope: Scope, body: bytes) -> Scope:
    """``scope`` with its content-length the length of ``body`` (the body the guard hands on)."""
    headers = [
        (k, v) for k, v in scope.get("headers", []) if k.lower() not in (b"content-length", b"transfer-encoding")
    ]
    return {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
