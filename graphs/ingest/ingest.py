"""The ingest graph: per session segment -> relate -> fuse -> topics -> facts | cues -> commit, into existing memory.

With the fact and cue layers on, ``segment`` asks the session analyst for the events, facts and cue units in
one call per window (``IngestContext.combined_extraction``), and ``facts`` and ``cues`` build their records
from those parts: three or four calls per session (segment, relate, the coreference judge when needed, and
MRAgent's topic abstraction in ``topics``: one call naming every topic whose events changed; it needs the clustered
events, so it cannot ride in the analyst's call).

Sessions already committed are skipped, so re-running a file is a no-op and an interrupted ingest
resumes at the first uncommitted session. Studio loads ``graph`` from this module.

The context, state, reports and nodes live in ``graphs.ingest.nodes`` (shared with the redo graph,
``graphs.ingest.redo``) and are re-exported here; this module wires them and runs conversations through them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from logicmap.agents.base import Cost, FallbackRecord
from logicmap.agents.provider import run_scope
from logicmap.graphs.ingest import redo as ingest_redo
from logicmap.graphs.ingest.nodes import (
    MAX_COMMIT_CONFLICTS,
    ContinuationError,
    IngestContext,
    IngestInput,
    IngestOutput,
    IngestReport,
    IngestState,
    NamespaceSourceError,
    SessionConflictError,
    SessionReport,
    check_continuation,
    check_namespace_source,
    commit,
    committed_as,
    conversation_source,
    cues,
    facts,
    file_namespaces,
    foreign_sessions,
    fuse,
    prepare,
    r2,
    rebase,
    relate,
    route_after_commit,
    route_after_prepare,
    route_after_rebase,
    segment,
    topics,
)
from logicmap.graphs.runtime.entry import checked_keywords, with_caller_config
from logicmap.graphs.runtime.resources import Resources, default_resources, with_resources
from logicmap.graphs.runtime.tracing import run_config, traced_graph
from logicmap.memory.files.loaders import Conversation, load_conversations
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.runtime.blocking import run_blocking
from logicmap.memory.runtime.heap import return_freed_memory
from logicmap.memory.runtime.tenancy import python_caller

__all__ = [
    "ContinuationError",
    "IngestContext",
    "IngestInput",
    "IngestOutput",
    "IngestReport",
    "IngestState",
    "NamespaceSourceError",
    "SessionConflictError",
    "SessionReport",
    "aingest_conversation",
    "build_ingest_graph",
    "builder",
    "check_continuation",
    "check_namespace_source",
    "commit",
    "committed_as",
    "conversation_source",
    "cues",
    "facts",
    "file_namespaces",
    "foreign_sessions",
    "fuse",
    "graph",
    "ingest_conversation",
    "prepare",
    "r2",
    "rebase",
    "relate",
    "route_after_commit",
    "route_after_prepare",
    "route_after_rebase",
    "segment",
    "topics",
]


def build_ingest_graph() -> StateGraph[IngestState, IngestContext, IngestInput, IngestOutput]:
    """The ingest ``StateGraph`` (uncompiled); nodes find their resources in the run's context."""
    builder = StateGraph(
        IngestState, context_schema=IngestContext, input_schema=IngestInput, output_schema=IngestOutput
    )
    for name, node in [
        ("prepare", prepare),
        ("segment", segment),
        ("relate", relate),
        ("fuse", fuse),
        ("topics", topics),
        ("facts", facts),
        ("cues", cues),
        ("r2", r2),
        ("commit", commit),
        ("rebase", rebase),
    ]:
        builder.add_node(name, node)
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", route_after_prepare, ["segment", END])
    builder.add_edge("segment", "relate")
    builder.add_edge("relate", "fuse")
    builder.add_edge("fuse", "topics")
    builder.add_edge("topics", "facts")  # facts, cues and r2 do not depend on each other: parallel branches
    builder.add_edge("topics", "cues")
    builder.add_edge("topics", "r2")
    builder.add_edge(["facts", "cues", "r2"], "commit")
    builder.add_conditional_edges("commit", route_after_commit, ["rebase", "segment", END])
    builder.add_conditional_edges("rebase", route_after_rebase, ["fuse", "segment", END])
    return builder


# -- the Python entry point -------------------------------------------------------------------------


def _one_conversation(conversation: Conversation | str | Path) -> Conversation:
    if isinstance(conversation, Conversation):
        return conversation
    conversations = load_conversations(conversation)
    if len(conversations) != 1:
        raise ValueError(f"{conversation} holds {len(conversations)} conversations; pass one")
    return conversations[0]


def _tick(bar: Any, report: SessionReport) -> None:
    bar.update(1)
    bar.set_postfix(events=report.events, calls=report.cost.llm_calls)


def _progress_sink(
    progress: bool | Callable[[SessionReport], None], sessions: int, namespace: str
) -> tuple[Callable[[SessionReport], None] | None, Any]:
    """``(callback per session report, tqdm bar or None)`` for ``ingest_conversation``'s ``progress``."""
    if progress is True:
        from tqdm import tqdm

        bar = tqdm(total=sessions, desc=f"ingest {namespace}", unit="session")
        return partial(_tick, bar), bar
    return (progress if callable(progress) else None), None


RELEASE_EVERY = 10
"""Sessions between two returns of freed memory to the system during one ingest (``memory.runtime.heap``)."""


def _stream_reports(
    compiled: Any,
    inputs: dict[str, Any],
    config: Any,
    ctx: IngestContext,
    resources: Resources,
    on_report: Callable[[SessionReport], None] | None,
) -> tuple[list[SessionReport], list[FallbackRecord]]:
    """Run the ingest graph, collecting each session's report as it commits; each session gets the run
    deadline afresh."""
    reports: list[SessionReport] = []
    fallbacks: list[FallbackRecord] = []
    with run_scope(resources.settings) as scope:
        for update in compiled.stream(inputs, config=config, context=ctx, stream_mode="updates"):
            for delta in update.values():
                for report in (delta or {}).get("reports", []) or []:
                    reports.append(report)
                    scope.restart()
                    if not report.skipped and len(reports) % RELEASE_EVERY == 0:
                        return_freed_memory()
                    if on_report is not None:
                        on_report(report)
                fallbacks.extend((delta or {}).get("fallbacks", []) or [])
    return reports, fallbacks


def _default_context(resources: Resources, policy: Literal["auto", "llm", "heuristic"]) -> IngestContext:
    settings = resources.settings
    return IngestContext(
        policy=policy,
        merge_threshold=settings.merge_threshold,
        topic_delta=settings.topic_delta,
        recluster_every=settings.recluster_every,
        context_tokens=settings.context_tokens,
    )


@checked_keywords
def ingest_conversation(
    conversation: Conversation | str | Path,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: Literal["auto", "llm", "heuristic"] = "auto",
    context: IngestContext | None = None,
    progress: bool | Callable[[SessionReport], None] = False,
    source: str | None = None,
    exclusive: bool = False,
    append: bool = False,
    redo_fallbacks: bool = False,
    memory_manager: Literal["none", "r2"] | None = None,
    replace_sessions: Sequence[str] = (),
    purge_replaced: bool = False,
    allow_forgotten: bool = False,
    consumes: Mapping[str, int] | None = None,
    config: RunnableConfig | None = None,
) -> IngestReport:
    """Ingest every session of a conversation into ``namespace``; committed sessions are skipped.

    ``source`` (default: ``conversation_source(conversation)``) is recorded as the namespace's source when
    it creates it; ``exclusive`` refuses a namespace another source created (``NamespaceSourceError``); new
    sessions must continue the namespace's conversation or come with ``append`` (``check_continuation``).
    A turn whose dia id another session already holds in the namespace is stored under a distinct id
    (``SessionReport.renamed``). ``redo_fallbacks``: instead, rebuild the committed sessions whose roles
    fell back (``graphs.ingest.redo``). ``memory_manager="r2"``: the Memory-R2 manager also maintains the
    namespace's R2 fact memory (``IngestContext.memory_manager``; overrides ``context``'s). ``replace_sessions``:
    ``IngestContext.replace_sessions`` (committed sessions ingested again, the old retired in the same commit);
    ``purge_replaced``: ``IngestContext.purge_replaced`` (that commit records a purge of what it retired as owed).
    Turns a forget left a tombstone for are left out (``memory.records.tombstones``) unless ``allow_forgotten``.
    ``config``: a LangChain ``RunnableConfig`` merged into the ingest graph's run (its callbacks see the run, its
    tags and metadata join the run's, its ``run_name`` names it).
    """
    conversation = _one_conversation(conversation)
    validate_namespace(namespace)
    carried = context.resources if context is not None else None
    resources = resources or (carried if isinstance(carried, Resources) else default_resources())
    ctx = dataclasses.replace(
        context or _default_context(resources, policy),
        source=source or conversation_source(conversation),
        exclusive=exclusive,
        **_overrides(
            append=append,
            replace_sessions=tuple(replace_sessions),
            purge_replaced=purge_replaced,
            allow_forgotten=allow_forgotten,
            memory_manager=memory_manager,
            consumes=tuple((consumes or {}).items()),
        ),
    )
    ctx, resources = with_resources(ctx, resources, namespace=namespace)
    config = with_caller_config(
        run_config(
            "ingest",
            namespace=namespace,
            policy=ctx.policy,
            budgets=ctx,
            metadata={"sessions": len(conversation.sessions)},
            recursion_limit=20 + 10 * len(conversation.sessions) + 8 * MAX_COMMIT_CONFLICTS,
        ),
        config,
    )
    on_report, bar = _progress_sink(progress, len(conversation.sessions), namespace)
    started = time.perf_counter()
    compiled: CompiledStateGraph[Any, Any, Any, Any] = ingest_redo.graph if redo_fallbacks else graph
    with python_caller(namespace):  # the caller named it: the graph takes it as it is (memory.tenancy)
        reports, fallbacks = _stream_reports(
            compiled, {"sessions": conversation.sessions}, config, ctx, resources, on_report
        )
    if bar is not None:
        bar.close()
    return IngestReport(
        namespace=namespace,
        sessions=reports,
        fallbacks=fallbacks,
        cost=sum((report.cost for report in reports), Cost()),
        wall_time_s=time.perf_counter() - started,
    )


def _overrides(**given: Any) -> dict[str, Any]:
    """The ``IngestContext`` fields a caller's arguments set: those given (not false, empty or None) win over
    ``context``'s; the others keep ``context``'s (or the defaults)."""
    return {name: value for name, value in given.items() if value}


async def aingest_conversation(conversation: Conversation | str | Path, namespace: str, **kwargs: Any) -> IngestReport:
    """``ingest_conversation`` awaited: the ingest (file reads, embeddings, Chroma commits, sync model calls) goes to
    the shared bounded executor (``memory.runtime.blocking``); the event loop keeps running and no call adds a thread.
    ``ingest_conversation`` checks the namespace (a bad one raises from the await, as the sync call raises)."""
    return await run_blocking(ingest_conversation, conversation, namespace, **kwargs)


builder = build_ingest_graph()
graph = traced_graph(builder.compile(name="ingest"))
