"""The things graphs run against: settings, the memory store, the embedder and the chat model.

Resolved lazily, so importing a graph module (as LangGraph Studio does) loads no model.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from pydantic.json_schema import SkipJsonSchema

from logicmap.agents.models import make_chat_model
from logicmap.memory.indexes.embeddings import CachedEmbeddings, make_embeddings
from logicmap.memory.runtime.tenancy import resolve_namespace
from logicmap.memory.store import StoragePort, open_store
from logicmap.settings import LogicMapSettings

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Raised for every path the server refuses to read, whatever the reason: a client learns nothing about
# which server files exist.
_PATH_REFUSED = "this server does not read that file: send the conversation's `sessions` in the request{hint}"

__all__ = [
    "NAMESPACE_DESCRIPTION",
    "POLICY_DESCRIPTION",
    "Resources",
    "ResourcesField",
    "context_for_run",
    "default_resources",
    "namespace_field",
    "policy_field",
    "resolve_policy",
    "resources_field",
    "resources_of",
    "run_context",
    "run_namespace",
    "server_mode",
    "server_readable_path",
    "set_default_resources",
    "set_server_mode",
    "with_resources",
    "IngestPathRefused",
]


class _Unset:
    """The chat model of ``Resources`` before it is first asked for (None is a valid value: no model)."""


_UNSET = _Unset()
C = TypeVar("C", bound="DataclassInstance")  # a graph's context class (a dataclass)


@dataclass
class Resources:
    """Shared, lazily built resources. Pass your own chat model or embedder to override settings."""

    settings: LogicMapSettings = field(default_factory=LogicMapSettings)
    store_: StoragePort | None = None
    embeddings_: Embeddings | None = None
    llm_: BaseChatModel | None | _Unset = _UNSET
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def store(self) -> StoragePort:
        with self._lock:
            if self.store_ is None:
                self.store_ = open_store(self.settings)
            return self.store_

    @property
    def embeddings(self) -> Embeddings:
        with self._lock:
            if self.embeddings_ is None:
                self.embeddings_ = make_embeddings(self.settings)
            elif not isinstance(self.embeddings_, CachedEmbeddings):
                self.embeddings_ = CachedEmbeddings(self.embeddings_)
            return self.embeddings_

    @property
    def llm(self) -> BaseChatModel | None:
        with self._lock:
            if isinstance(self.llm_, _Unset):
                self.llm_ = make_chat_model(self.settings)
            return self.llm_

    @property
    def method(self) -> str:
        return self.settings.structured_output


_default: Resources | None = None
_default_lock = threading.Lock()


def default_resources() -> Resources:
    """Process-wide resources built from ``LOGICMAP_*`` settings on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Resources()
        return _default


def set_default_resources(resources: Resources | None) -> None:
    global _default
    with _default_lock:
        _default = resources


# The type of a context's ``resources`` field: Python callers pass a ``Resources``; hidden from the JSON
# schema, so Studio's context forms never show it (a form user cannot fill in a store or a model).
ResourcesField = SkipJsonSchema[Any]


def resources_field() -> Any:
    """The ``resources`` field every graph's context declares (``resources: ResourcesField = resources_field()``)."""
    return field(
        default=None,
        metadata={
            "description": "Resources for this run (Python callers only); "
            "unset = the process-wide defaults from LOGICMAP_* settings."
        },
    )


NAMESPACE_DESCRIPTION = (
    "The tenant this run reads and writes: a name, or a template such as '{user_id}' filled from "
    "config['configurable']; unset = config['configurable']['namespace']. A run that names none fails "
    "(NamespaceRequiredError), it never falls back to a default namespace."
)
POLICY_DESCRIPTION = (
    "auto = the LLM policy when a chat model is configured (LOGICMAP_CHAT_MODEL), else the no-LLM path; "
    "llm = the LLM roles (each records a fallback when no model answers); heuristic = no LLM call at all."
)


def namespace_field() -> Any:
    """The ``namespace`` field every graph's context declares (``namespace: str | None = namespace_field()``)."""
    return field(default=None, metadata={"description": NAMESPACE_DESCRIPTION})


def policy_field() -> Any:
    """The ``policy`` field every graph's context declares, defaulting to ``auto``."""
    return field(default="auto", metadata={"description": POLICY_DESCRIPTION})


POLICIES = ("auto", "llm", "heuristic")
"""The policy names a run may ask for (``POLICY_DESCRIPTION``)."""


def check_policy(policy: str) -> str:
    """``policy`` when it is one of ``POLICIES``, else one clear ``ValueError``."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose auto, llm or heuristic")
    return policy


def resolve_policy(policy: str, resources: Resources) -> str:
    """``auto`` resolved: ``llm`` when the run has a chat model, else ``heuristic``; other policies unchanged.
    The one rule for ``auto``: each method's policy factory (``agents.*_policy``) gets the name it returns."""
    if check_policy(policy) == "auto":
        return "llm" if resources.llm is not None else "heuristic"
    return policy


def _policy_resolved(ctx: C, resources: Resources) -> C:
    """``ctx`` with its ``auto`` policy resolved (``ctx`` itself when there is nothing to resolve)."""
    policy = getattr(ctx, "policy", None)
    if policy is None:
        return ctx
    resolved = resolve_policy(policy, resources)
    return ctx if resolved == policy else replace(ctx, policy=resolved)


def resources_of(runtime: Any) -> Resources:
    """The resources a node runs against: those its run's context carries, else the process-wide defaults.

    The one resolver every node uses, so a node is a plain module-level function of ``(state, runtime)``.
    """
    ctx = getattr(runtime, "context", None)
    found = ctx.get("resources") if isinstance(ctx, dict) else getattr(ctx, "resources", None)
    return found if isinstance(found, Resources) else default_resources()


def run_context(runtime: Any, cls: type[C]) -> C:
    """A node's per-run settings as ``cls``: the context object itself, a dict (Studio's form), the
    shared fields of a parent graph's context, or the defaults when the run was given none; an ``auto``
    policy resolved against the run's resources (``resolve_policy``)."""
    ctx = getattr(runtime, "context", None)
    names = {f.name for f in fields(cls)}
    if isinstance(ctx, cls):
        found = ctx
    elif isinstance(ctx, dict):
        found = cls(**{k: v for k, v in ctx.items() if k in names})
    elif ctx is not None:
        found = cls(**{n: getattr(ctx, n) for n in names if hasattr(ctx, n)})
    else:
        found = cls()
    return _policy_resolved(found, resources_of(runtime))


def with_resources(ctx: C, resources: Resources | None, *, namespace: str | None = None) -> tuple[C, Resources]:
    """``ctx`` carrying the resources a call runs against: ``resources`` when given, else those ``ctx``
    already carries, else the process-wide defaults; its ``auto`` policy resolved against them, and
    ``namespace`` (a Python caller's argument) as the run's namespace when given."""
    carried = getattr(ctx, "resources", None)
    res = resources or (carried if isinstance(carried, Resources) else default_resources())
    updates: dict[str, Any] = {"resources": res}
    if namespace is not None:
        updates["namespace"] = namespace
    return _policy_resolved(replace(ctx, **updates), res), res


def context_for_run(cls: type[C], context: C | None, policy: str, options: dict[str, Any]) -> C:
    """The context an ``answer()`` call runs with: ``context`` when given, else ``cls`` built from the
    policy and the options that name its fields."""
    if context is not None:
        return context
    check_policy(policy)
    names = {f.name for f in fields(cls)} - {"policy"}
    given: dict[str, Any] = {k: v for k, v in options.items() if k in names}
    given["policy"] = policy
    return cls(**given)


_server = False


def set_server_mode(on: bool = True) -> None:
    """Mark this process as the LangGraph API server (``studio/server.py``'s lifespan does): runs then take
    their tenant from the deployment's authority and ingest reads no server files."""
    global _server
    _server = on


def server_mode() -> bool:
    """Whether this process serves graphs to remote clients: marked by the server app, or ``langgraph_api``
    (the LangGraph API server) loaded in the process."""
    return _server or "langgraph_api" in sys.modules


class IngestPathRefused(PermissionError):
    """A ``path`` input the API server will not read (one message for every refused path)."""


def server_readable_path(path: str, settings: LogicMapSettings | None = None) -> str:
    """``path`` as the ingest graph may read it. Outside the API server, unchanged. On the server, only a file
    under ``LOGICMAP_INGEST_ROOT`` (symlinks resolved; relative paths against that directory); any other path,
    missing or not, is refused with the same ``IngestPathRefused``."""
    if not server_mode():
        return path
    root = (settings or default_resources().settings).ingest_root
    refused = IngestPathRefused(
        _PATH_REFUSED.format(hint=" or a path under the server's ingest directory" if root else "")
    )
    if root is None or not isinstance(path, str) or not path or "\x00" in path:
        raise refused
    try:
        base = Path(root).resolve(strict=True)
        target = (base / path).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise refused from None
    if not target.is_relative_to(base) or not target.is_file():
        raise refused
    return str(target)


def run_namespace(template: str | None) -> str:
    """The namespace of the running graph: ``template`` (a context's ``namespace``) filled from the run's
    ``configurable``, else ``configurable["namespace"]``; ``NamespaceRequiredError`` when the run names none.
    On the API server a deployment template (``LOGICMAP_SERVER_NAMESPACE``) is the one authority."""
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # called outside a run: only the template can name it
        configurable = {}
    settings = default_resources().settings
    authority = settings.server_namespace if server_mode() else None
    return resolve_namespace(template, configurable, authority=authority, user_label=settings.store_user_label)
