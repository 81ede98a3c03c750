"""The tenant authority on the API server's ``/store`` routes (``LogicMapStore`` or any store in ``langgraph.json``).

The server's store routes take a namespace from the client: ``PUT``/``GET``/``DELETE /store/items``, ``POST
/store/items/search`` (a prefix) and ``POST /store/namespaces`` (a prefix). ``store_problem`` applies the same
authority as runs (``memory.runtime.tenancy``, docs/studio-and-server.md):

- the deployment (``LOGICMAP_SERVER_NAMESPACE``, e.g. ``{user_id}`` or ``acme-{user_id}``), when set: the template
  is filled from the authenticated user and the namespace (or prefix) must start with that tenant's labels
  (``acme-alice`` -> ``("acme-alice", ...)``; a dotted tenant ``acme.alice`` -> ``("acme", "alice", ...)``). A
  template that needs a user on a server without auth refuses every store request;
- else the authenticated user (LangGraph auth on): the label at ``LOGICMAP_STORE_USER_LABEL`` (default 1, as in
  ``("memories", user_id, ...)``) must be the user's id;
- else (no auth, no template) nothing is checked: the server cannot tell clients apart.

The rule itself is ``memory.runtime.tenancy.tenant_problem``, the one runs and assistants obey too: a put, get or delete names
one namespace (its owner must be the user: ``("memories", "alice")``, or ``("alice",)`` alone); a search or a listing
names a prefix, which must reach the owner label. The guard reads each request once, strictly
(``studio/requests.py``): a repeated query parameter or JSON key, an unknown parameter, a route or method the store
does not serve (``HEAD`` is read as the ``GET`` it is) is refused, and the server is handed the request as the guard
read it, so the check sees exactly what the server acts on.

A refused request gets 403 with a message naming the rule, never whether the other tenant's item exists. The
``TenantGuard`` middleware applies it to every store route; ``authorize_store`` is the same check as LangGraph's
``@auth.on.store()`` handler, for a deployment's own auth module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from logicmap.memory.runtime.tenancy import tenant_problem
from logicmap.studio.requests import BadRequest, canonical_json, canonical_query, strict_json, strict_query

__all__ = ["StoreRequest", "authorize_store", "read_store_request", "store_problem"]

# (method, path) -> (the namespace field, whether it is a prefix, the query parameters the route takes)
STORE_ROUTES: dict[tuple[str, str], tuple[str | None, bool, frozenset[str]]] = {
    ("PUT", "/store/items"): ("namespace", False, frozenset()),
    ("GET", "/store/items"): (None, False, frozenset({"namespace", "key", "refresh_ttl"})),
    ("DELETE", "/store/items"): ("namespace", False, frozenset()),
    ("POST", "/store/items/search"): ("namespace_prefix", True, frozenset()),
    ("POST", "/store/namespaces"): ("prefix", True, frozenset()),
}


@dataclass(frozen=True)
class StoreRequest:
    """A ``/store`` request as the guard read it: the namespace (or prefix; None: every namespace) it names, and
    the query string and body the server is handed in place of the client's."""

    namespace: Any
    prefix: bool
    query: bytes
    body: bytes


def _labels(namespace: Any) -> tuple[str, ...] | None:
    if isinstance(namespace, list | tuple) and all(isinstance(label, str) for label in namespace):
        return tuple(namespace)
    return None


def store_problem(
    namespace: Sequence[str] | None,
    *,
    user_id: str | None,
    authority: str | None,
    user_label: int = 1,
    prefix: bool = True,
) -> str | None:
    """Why this tenant may not touch ``namespace`` (a store prefix, or one namespace when not ``prefix``; None:
    every namespace), or None. A value that is not a list of labels is refused when a rule applies."""
    labels = _labels(namespace) if namespace is not None else None
    if namespace is not None and labels is None:
        if not authority and not user_id:
            return None  # nothing is checked: the server answers 422 itself
        return "a store namespace is a list of string labels"
    return tenant_problem(labels, user_id=user_id, authority=authority, user_label=user_label, prefix=prefix)


def read_store_request(method: str, path: str, query: bytes, body: bytes) -> StoreRequest | None:
    """The ``/store`` request, read strictly (None: not a ``/store`` path). ``BadRequest`` for one the guard will
    not read: a route or method the store does not serve (404/405), a repeated or unknown query parameter, a
    repeated JSON key, a body that is not a JSON object."""
    path = path.rstrip("/") or "/"
    if path != "/store" and not path.startswith("/store/"):
        return None
    method = "GET" if method == "HEAD" else method
    route = STORE_ROUTES.get((method, path))
    if route is None:
        known = any(p == path for _, p in STORE_ROUTES)
        raise BadRequest(
            f"{method} is not a method of {path}" if known else f"{path} is not a store route", 405 if known else 404
        )
    field, prefix, params = route
    if field is None:  # GET: the namespace and key travel in the query
        read = strict_query(query, params)
        return StoreRequest(tuple(read.get("namespace", "").split(".")), False, canonical_query(read), b"")
    strict_query(query, params)  # no query parameters on the body routes
    payload = strict_json(body)
    if not isinstance(payload, dict):
        raise BadRequest("a store request body is a JSON object")
    return StoreRequest(payload.get(field), prefix, b"", canonical_json(payload))


async def authorize_store(ctx: Any, value: dict[str, Any]) -> None:
    """LangGraph's ``@auth.on.store()`` handler form of the same check (``auth.on.store()(authorize_store)``); it
    sees the namespace the server acts on."""
    from langgraph_sdk import Auth

    from logicmap.graphs.runtime.resources import default_resources

    settings = default_resources().settings
    user = getattr(ctx, "user", None)
    user_id = getattr(user, "identity", None) if getattr(user, "is_authenticated", False) else None
    action = getattr(ctx, "action", None)
    problem = store_problem(
        value.get("namespace"),
        user_id=user_id,
        authority=settings.server_namespace,
        user_label=settings.store_user_label,
        prefix=action not in ("put", "get", "delete"),
    )
    if problem:
        raise Auth.exceptions.HTTPException(status_code=403, detail=problem)
