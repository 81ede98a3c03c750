"""The tenant authority on the API server's ``/store`` routes (``LogicMapStore`` or any store in ``langgraph.json``).

The server's store routes take a namespace from the client: ``PUT``/``GET``/``DELETE /store/items``, ``POST
/store/items/search`` (a prefix) and ``POST /store/namespaces`` (a prefix). ``store_problem`` applies the same
authority as runs (``memory.tenancy``, docs/studio-and-server.md):

- the deployment (``LOGICMAP_SERVER_NAMESPACE``, e.g. ``{user_id}`` or ``acme-{user_id}``), when set: the template
  is filled from the authenticated user and the namespace (or prefix) must start with that tenant's labels
  (``acme-alice`` -> ``("acme-alice", ...)``; a dotted tenant ``acme.alice`` -> ``("acme", "alice", ...)``). A
  template that needs a user on a server without auth refuses every store request;
- else the authenticated user (LangGraph auth on): the label at ``LOGICMAP_STORE_USER_LABEL`` (default 1, as in
  ``("memories", user_id, ...)``) must be the user's id;
- else (no auth, no template) nothing is checked: the server cannot tell clients apart.

A refused request gets 403 with a message naming the rule, never whether the other tenant's item exists. The
``TenantGuard`` middleware applies it to every store route; ``authorize_store`` is the same check as LangGraph's
``@auth.on.store()`` handler, for a deployment's own auth module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

from logicmap.memory.tenancy import AUTH_USER_KEY, resolve_namespace

__all__ = ["authorize_store", "store_namespace_of_request", "store_problem"]

STORE_ROUTES = {("PUT", "/store/items"), ("GET", "/store/items"), ("DELETE", "/store/items"),
                ("POST", "/store/items/search"), ("POST", "/store/namespaces")}


def _labels(namespace: Any) -> tuple[str, ...] | None:
    if isinstance(namespace, list | tuple) and all(isinstance(label, str) for label in namespace):
        return tuple(namespace)
    return None


def store_problem(namespace: Sequence[str] | None, *, user_id: str | None, authority: str | None,
                  user_label: int = 1) -> str | None:
    """Why this tenant may not touch ``namespace`` (a store namespace or prefix; None: every namespace), or None."""
    labels = _labels(namespace) if namespace is not None else ()
    if labels is None:
        return None  # not a namespace: the server answers 422 itself
    if authority:
        try:
            tenant = resolve_namespace(authority, {AUTH_USER_KEY: user_id} if user_id else {})
        except (ValueError, PermissionError):
            return ("this deployment's tenant template (LOGICMAP_SERVER_NAMESPACE) needs the authenticated user: "
                    "the store routes are refused without LangGraph auth")
        own = tuple(tenant.split("."))
        if labels[: len(own)] != own:
            return (f"this deployment names the tenant (LOGICMAP_SERVER_NAMESPACE): a store namespace or prefix "
                    f"must start with {list(own)}")
        return None
    if user_id:
        if len(labels) <= user_label or labels[user_label] != str(user_id):
            return (f"a store namespace or prefix must carry the authenticated user's id as label {user_label} "
                    f"(LOGICMAP_STORE_USER_LABEL), e.g. ['memories', '<your id>', ...]")
    return None


def store_namespace_of_request(method: str, path: str, query: bytes, body: bytes) -> tuple[bool, Any]:
    """(whether this is a store route, the namespace or prefix it names)."""
    path = path.rstrip("/") or "/"
    if (method, path) not in STORE_ROUTES:
        return False, None
    if method == "GET":
        raw = parse_qs(query.decode("latin-1")).get("namespace", [""])[0]
        return True, tuple(raw.split("."))
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return True, None
    if not isinstance(payload, dict):
        return True, None
    if path == "/store/items/search":
        return True, payload.get("namespace_prefix")
    if path == "/store/namespaces":
        return True, payload.get("prefix")
    return True, payload.get("namespace")


async def authorize_store(ctx: Any, value: dict[str, Any]) -> None:
    """LangGraph's ``@auth.on.store()`` handler form of the same check (``auth.on.store()(authorize_store)``)."""
    from langgraph_sdk import Auth

    from logicmap.graphs.resources import default_resources

    settings = default_resources().settings
    user = getattr(ctx, "user", None)
    user_id = getattr(user, "identity", None) if getattr(user, "is_authenticated", False) else None
    problem = store_problem(value.get("namespace"), user_id=user_id, authority=settings.server_namespace,
                            user_label=settings.store_user_label)
    if problem:
        raise Auth.exceptions.HTTPException(status_code=403, detail=problem)
