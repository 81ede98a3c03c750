"""The memory lifecycle as graphs, for the API server: ``forget``, ``list_memories`` and ``delete_namespace``.

Each graph is one node over ``graphs.writes.forget`` (the same code as ``logicmap.forget``, the CLI and the tools), so a
deployment's clients forget, list and delete through runs, under the tenant authority of every other run: the
namespace is the run's (``context.namespace`` or its template, else ``configurable["namespace"]``; on the server the
deployment's ``LOGICMAP_SERVER_NAMESPACE`` or the assistant's namespace wins, and ``studio/tenant_guard.py`` refuses
a run that names its own on such an assistant). It is never part of the input: a ``namespace`` key there is
dropped with the other unknown keys. Forgets are audited with surface ``server`` (``graph`` outside the server),
shown by ``logicmap stats``. ``forget`` with ``purge: true`` and nothing named purges the namespace: every retired
version it holds is removed from disk (``logicmap.purge``; store deletes, replaced values, unpurged forgets and
updates, a purge a stopped process left unfinished). Studio loads ``forget_graph``, ``list_graph`` and ``delete_graph`` from this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from logicmap.graphs.runtime.resources import (
    ResourcesField,
    namespace_field,
    resources_field,
    resources_of,
    run_context,
    run_namespace,
    server_mode,
)
from logicmap.graphs.runtime.tracing import traced_graph
from logicmap.graphs.writes.forget import ForgetReport, MemoryKind, delete_namespace, forget, list_memories, purge

__all__ = [
    "DeleteInput",
    "DeleteState",
    "ForgetInput",
    "ForgetState",
    "LifecycleContext",
    "ListInput",
    "ListState",
    "build_delete_graph",
    "build_forget_graph",
    "build_list_graph",
    "delete_graph",
    "delete_memory_namespace",
    "forget_graph",
    "forget_turns",
    "list_graph",
    "list_page",
]


@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class LifecycleContext:
    """Per-run settings of the lifecycle graphs: the tenant (as every graph's) and the resources."""

    namespace: str | None = namespace_field()
    resources: ResourcesField = resources_field()


@with_config(ConfigDict(use_attribute_docstrings=True))
class ForgetInput(TypedDict):
    """What to forget in the run's namespace: turn ids, whole sessions, or every turn said before a date (only
    ``purge: true``: purge the namespace, every retired version it holds removed from disk)."""

    turn_ids: NotRequired[Annotated[list[str], Field(description="Turn ids (dia ids, as list_memories shows them).")]]
    session_ids: NotRequired[Annotated[list[str], Field(description="Every turn of these sessions.")]]
    before: NotRequired[Annotated[str | None, Field(description="Every turn said before this date (YYYY-MM-DD).")]]
    purge: NotRequired[
        Annotated[
            bool,
            Field(
                description="Then remove the forgotten records from disk for good; "
                "alone, remove every retired version of the namespace."
            ),
        ]
    ]


class ForgetState(ForgetInput, total=False):
    """The request and what the forget did (``graphs.writes.forget.ForgetReport`` as JSON)."""

    forgotten: dict[str, Any]


@with_config(ConfigDict(use_attribute_docstrings=True))
class ListInput(TypedDict):
    """Which page of the run's namespace's memories to list."""

    kind: NotRequired[
        Annotated[
            MemoryKind,
            Field(
                description=(
                    "turns, events, facts (REAL's temporal facts), r2_facts (Memory-R2's facts) or items (store items, by key)."
                )
            ),
        ]
    ]
    limit: NotRequired[Annotated[int, Field(description="At most this many records (default 50).")]]
    cursor: NotRequired[Annotated[str | None, Field(description="The next_cursor of the page before.")]]


class ListState(ListInput, total=False):
    """The request and the page (``graphs.writes.forget.MemoryPage`` as JSON: items and next_cursor)."""

    page: dict[str, Any]


@with_config(ConfigDict(use_attribute_docstrings=True))
class DeleteInput(TypedDict):
    """Delete the run's namespace and purge it (its children, ``acme.bob`` of ``acme``, are kept)."""

    confirm: Annotated[bool, Field(description="Must be true: the namespace and all its memory are removed for good.")]


class DeleteState(DeleteInput, total=False):
    """The request and what was deleted."""

    deleted: dict[str, Any]


def _surface() -> str:
    return "server" if server_mode() else "graph"


def forget_turns(state: ForgetState, runtime: Runtime[LifecycleContext]) -> dict[str, Any]:
    """Forget the named turns of the run's namespace (``logicmap.forget``), purging them when asked."""
    ctx = run_context(runtime, LifecycleContext)
    namespace = run_namespace(ctx.namespace)
    named = state.get("turn_ids") or state.get("session_ids") or state.get("before")
    if state.get("purge") and not named:  # purge alone: every retired version of the namespace
        purged = purge(namespace, resources=resources_of(runtime))
        report = ForgetReport(namespace=namespace, generation=purged.generation, purge=purged)
    else:
        report = forget(
            namespace,
            turn_ids=state.get("turn_ids") or (),
            session_ids=state.get("session_ids") or (),
            before=state.get("before"),
            purge=bool(state.get("purge")),
            surface=_surface(),
            resources=resources_of(runtime),
        )
    return {"forgotten": report.model_dump(mode="json")}


def list_page(state: ListState, runtime: Runtime[LifecycleContext]) -> dict[str, Any]:
    """One page of the run's namespace's memories (``logicmap.list_memories``)."""
    ctx = run_context(runtime, LifecycleContext)
    page = list_memories(
        run_namespace(ctx.namespace),
        kind=state.get("kind") or "turns",
        limit=state.get("limit") or 50,
        cursor=state.get("cursor"),
        resources=resources_of(runtime),
    )
    return {"page": page.model_dump(mode="json")}


def delete_memory_namespace(state: DeleteState, runtime: Runtime[LifecycleContext]) -> dict[str, Any]:
    """Delete the run's namespace and purge it (``logicmap.delete_namespace``); only with ``confirm: true``."""
    if state.get("confirm") is not True:
        raise ValueError('delete_namespace removes the namespace for good: send {"confirm": true} to do it')
    ctx = run_context(runtime, LifecycleContext)
    return {"deleted": delete_namespace(run_namespace(ctx.namespace), resources=resources_of(runtime))}


LifecycleGraph = StateGraph[Any, LifecycleContext, Any, Any]
"""A lifecycle graph's builder: one node over its state, run with a ``LifecycleContext``."""


def _one_node(state: type, input_schema: type, output: str, node: Any) -> LifecycleGraph:
    builder: LifecycleGraph = StateGraph(state, context_schema=LifecycleContext, input_schema=input_schema)
    builder.add_node(output, node)
    builder.add_edge(START, output)
    builder.add_edge(output, END)
    return builder


def build_forget_graph() -> LifecycleGraph:
    return _one_node(ForgetState, ForgetInput, "forget", forget_turns)


def build_list_graph() -> LifecycleGraph:
    return _one_node(ListState, ListInput, "list", list_page)


def build_delete_graph() -> LifecycleGraph:
    return _one_node(DeleteState, DeleteInput, "delete", delete_memory_namespace)


forget_graph = traced_graph(build_forget_graph().compile(name="forget"))
list_graph = traced_graph(build_list_graph().compile(name="list_memories"))
delete_graph = traced_graph(build_delete_graph().compile(name="delete_namespace"))
