"""Which tenant a run belongs to: a namespace resolved at run time, never a silent default.

A run names its namespace in its context (``namespace="acme"``) or as a template filled from the run's
``configurable`` (``namespace="{user_id}"`` or ``"acme-{user_id}"``, as LangMem fills ``{langgraph_user_id}``),
or in ``configurable["namespace"]``. Values filled into a template come from the caller's config and are
untrusted: each must be one plain name segment (letters, digits, ``_`` and ``-``), so a ``user_id`` can never
reach into another tenant's dotted namespace (``acme.bob``) or spoof one.

One authority per run. When the run carries an authenticated user (``langgraph_auth_user_id``, set by the
LangGraph API server when auth is on), that identity fills ``{user_id}`` and a different ``user_id`` in the
run's config is refused. When a deployment fixes the tenant template (``authority``, the API server's
``LOGICMAP_SERVER_NAMESPACE``), a run that names any other namespace is refused (``TenantOverrideError``).
A thread records a fingerprint of its tenant (``tenant_key``): a run of another tenant on it is refused.

Ownership (``tenant_problem``, the one rule every surface applies: runs, assistants, the ``/store`` routes, the
graphs themselves). With a deployment template, a namespace belongs to the user when it starts with the template's
labels filled from the user (``acme-{user_id}`` -> ``acme-alice`` and ``acme-alice.notes``; a run must name
exactly it). Else, with an authenticated user, a namespace's owner is its label at ``user_label``
(``LOGICMAP_STORE_USER_LABEL``, default 1: ``memories.alice`` and ``memories.alice.notes`` are alice's), or its
only label (``alice``, what ``{user_id}`` gives); a prefix (a store search or listing) must reach the owner
label, so it can cover no one else's namespace. The owner is read off the name, never off how it was written:
a template that puts the user anywhere else (``acme-{user_id}``, ``{user_id}.x``) is refused under auth, since
another user could write the same name another way (``bob.{user_id}`` and ``{user_id}.alice``).

Python callers name their namespace themselves (``answer(q, "memories.alice")``, ``LogicMapStore.put``): the
graphs they start trust that namespace (``python_caller``), as the API server's own store trusts its caller's
code. A run a client starts is never trusted: only code in this process can mark a namespace.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from logicmap.memory.records.records import stable_hash, validate_namespace

__all__ = [
    "AUTH_USER_KEY",
    "NamespaceRequiredError",
    "TenantOverrideError",
    "ThreadTenantError",
    "python_caller",
    "resolve_namespace",
    "tenant_key",
    "tenant_problem",
]

AUTH_USER_KEY = "langgraph_auth_user_id"
"""The key under which the LangGraph API server puts the authenticated user's identity in a run's configurable."""

_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_PYTHON_CALLER: ContextVar[frozenset[str]] = ContextVar("logicmap_python_caller", default=frozenset())


class NamespaceRequiredError(ValueError):
    """A run that names no namespace, or whose template refers to a value the run's config does not carry."""


class TenantOverrideError(PermissionError):
    """A run that names a tenant its deployment, assistant or authenticated user does not allow it."""


class ThreadTenantError(PermissionError):
    """A run on a thread that another tenant's runs created."""


def tenant_key(namespace: str) -> str:
    """A thread's record of its tenant: a fingerprint of the namespace, never the name (thread state is shown
    to whoever holds the thread)."""
    return stable_hash("tenant", namespace, length=20)


def _bound_to_user(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """``configurable`` with the authenticated user (when there is one) as ``user_id``; a run that claims
    another ``user_id`` is refused."""
    values = dict(configurable)
    auth_id = values.get(AUTH_USER_KEY)
    if auth_id is None or auth_id == "":
        return values
    claimed = values.get("user_id")
    if claimed is not None and claimed != "" and str(claimed) != str(auth_id):
        raise TenantOverrideError(
            "this run's config['configurable']['user_id'] differs from its authenticated user; the authenticated "
            "user names the tenant (drop user_id from the run's config)"
        )
    values["user_id"] = auth_id
    return values


@contextmanager
def python_caller(namespace: str) -> Iterator[None]:
    """While the block runs (in this thread or task, and the graph runs it starts), ``namespace`` is the one a Python
    caller named: ``resolve_namespace`` takes it as it is (no deployment template, no owner check)."""
    token = _PYTHON_CALLER.set(_PYTHON_CALLER.get() | {namespace})
    try:
        yield
    finally:
        _PYTHON_CALLER.reset(token)


def _owner(labels: Sequence[str], user_label: int) -> str | None:
    if len(labels) > user_label:
        return labels[user_label]
    return labels[0] if len(labels) == 1 else None


def tenant_problem(
    labels: Sequence[str] | None,
    *,
    user_id: str | None,
    authority: str | None,
    user_label: int = 1,
    prefix: bool = False,
) -> str | None:
    """Why the user may not touch the namespace ``labels`` (a prefix when ``prefix``; None: every namespace), or
    None when it may. ``authority``: the deployment's template; ``user_id``: the authenticated user (None: no auth,
    and with no authority nothing is checked). The one ownership rule (see the module docstring)."""
    if authority:
        try:
            tenant = _resolve(authority, {AUTH_USER_KEY: user_id} if user_id else {}, None)
        except (ValueError, PermissionError):
            return (
                "this deployment's tenant template (LOGICMAP_SERVER_NAMESPACE) needs the authenticated user: "
                "the request is refused without LangGraph auth"
            )
        own = tuple(tenant.split("."))
        if labels is None or tuple(labels[: len(own)]) != own:
            return (
                f"this deployment names the tenant (LOGICMAP_SERVER_NAMESPACE): a namespace or prefix must "
                f"start with {list(own)}"
            )
        return None
    if not user_id:
        return None
    owned = labels is not None and (
        (len(labels) > user_label and labels[user_label] == str(user_id))
        if prefix
        else _owner(labels, user_label) == str(user_id)
    )
    if not owned:
        return (
            f"a namespace must carry the authenticated user's id as label {user_label} "
            f"(LOGICMAP_STORE_USER_LABEL), e.g. 'memories.<your id>' / ['memories', '<your id>', ...], or be "
            f"the id alone ('{{user_id}}')"
        )
    return None


def resolve_namespace(
    template: str | None,
    configurable: Mapping[str, Any] | None = None,
    *,
    authority: str | None = None,
    user_label: int = 1,
) -> str:
    """The run's namespace: ``template`` filled from ``configurable``, else ``configurable["namespace"]``.

    ``authority`` (a deployment's fixed template) replaces both: a run whose ``template`` or
    ``configurable["namespace"]`` names anything else is refused with ``TenantOverrideError``. With an
    authenticated user (``configurable[AUTH_USER_KEY]``) and no ``authority``, the namespace must be the user's
    (``tenant_problem``; ``TenantOverrideError`` otherwise). A ``template`` a Python caller named
    (``python_caller``) is taken as it is. Raises ``NamespaceRequiredError`` when nothing names one, ``ValueError``
    when the result is not a valid name.
    """
    if isinstance(template, str) and template in _PYTHON_CALLER.get():
        return validate_namespace(template)
    namespace = _resolve(template, configurable, authority)
    auth_id = (configurable or {}).get(AUTH_USER_KEY)
    if not authority and auth_id not in (None, ""):
        problem = tenant_problem(namespace.split("."), user_id=str(auth_id), authority=None, user_label=user_label)
        if problem:
            raise TenantOverrideError(f"namespace {namespace!r} is not the authenticated user's: {problem}")
    return namespace


def _resolve(template: str | None, configurable: Mapping[str, Any] | None, authority: str | None) -> str:
    configurable = _bound_to_user(configurable or {})
    if authority:
        named = [v for v in (template, configurable.get("namespace")) if v is not None and v != ""]
        if any(v != authority for v in named):
            raise TenantOverrideError(
                "this deployment names every run's tenant itself (LOGICMAP_SERVER_NAMESPACE); a run may not name "
                "its own namespace: drop `namespace` from the run's context and config"
            )
        template = authority
    if not template:
        template = configurable.get("namespace")
        if template is None or template == "":
            raise NamespaceRequiredError(
                "this run names no namespace: set `namespace` in the run's context (a name, or a template such "
                "as '{user_id}' filled from config['configurable']) or config['configurable']['namespace']"
            )
        return validate_namespace(template)
    if not isinstance(template, str):
        return validate_namespace(template)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"invalid namespace template {template!r}: {exc}") from None
    if not fields:
        return validate_namespace(template)
    values: dict[str, str] = {}
    for name in fields:
        if not name.isidentifier():
            raise ValueError(f"invalid namespace template {template!r}: a field must be a plain name, got {name!r}")
        value = configurable.get(name)
        if value is None or value == "":
            raise NamespaceRequiredError(
                f"the namespace template {template!r} needs config['configurable'][{name!r}], which this run "
                "does not carry"
            )
        if not isinstance(value, str | int) or isinstance(value, bool) or not _SEGMENT.fullmatch(str(value)):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:50] + "..."
            raise ValueError(
                f"invalid value for namespace field {name!r}: {shown}; use 1-64 ASCII letters, digits, _ and -, "
                "starting with a letter or digit"
            )
        values[name] = str(value)
    return validate_namespace(template.format(**values))
