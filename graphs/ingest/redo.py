"""Rebuilding the sessions whose roles fell back, once the model works: ``logicmap ingest --redo-fallbacks``.

A committed session whose manifest entry records fallbacks is segmented, related and enriched again by the
model, and its derived records are replaced in one commit under the same snapshot rules as any ingest:
its events (those it alone owns), its relations, the facts only its turns state and the tags of its events
are retired; its turns stay. Relations of other sessions that ended at a retired event are re-pointed at
the new event holding the same turn, so nothing dangles. Events shared with another session by fusion are
kept as they are, and the rebuilt session is not fused again, so other sessions' events never change (only
their order number, when the session grew more events than it had). Sessions built without a model by
choice (the no-LLM policy) record no fallbacks and are never rebuilt.

Each rebuilt session records the chat model of the pass (``SessionInfo.redone_with``) in the commit that
rebuilds it, and a pass with that model skips it: a pass killed halfway and run again rebuilds only the
sessions it had not reached, so it ends with exactly the memory of an uninterrupted pass, and a session that
still falls back is not rebuilt again by the same model (another model, or other model settings, retries it).
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from logicmap.graphs.ingest.nodes import (
    MAX_COMMIT_CONFLICTS,
    IngestContext,
    IngestState,
    SessionReport,
    advance,
    carry_topic_labels,
    commit,
    cues,
    facts,
    ingest_context,
    ingest_policy_of,
    relabel_topics,
    relate,
    segment,
    session_conflict,
    sessions_of,
)
from logicmap.graphs.runtime.resources import resources_of, run_namespace
from logicmap.memory.indexes.topics import TopicLayer, TopicUpdate
from logicmap.memory.records.records import Event, Relation, event_id, relation_id
from logicmap.memory.store import ChangeSet, NamespaceSnapshot

__all__ = [
    "NoModelForRedoError",
    "build_redo_graph",
    "builder",
    "graph",
    "prepare_redo",
    "redo_key",
    "replace",
    "route_after_redo_commit",
]


class NoModelForRedoError(ValueError):
    """``--redo-fallbacks`` without a chat model: there is nothing a rebuild could do better."""


@dataclass
class _Plan:
    """What replacing a session changes in the stored graph."""

    retired: set[str]  # events the session alone owned
    kept: set[str]  # the session's events shared with other sessions by fusion
    events: list[Event] = field(default_factory=list)  # the new events, final ids and orders
    shifted: list[Event] = field(default_factory=list)  # later events moved up to make room
    rename: dict[str, str] = field(default_factory=dict)  # segmented id -> final id


# -- helpers ----------------------------------------------------------------------------------------


def _plan(snapshot: NamespaceSnapshot, session_id: str, segmented: list[Event]) -> _Plan:
    """Ids and orders for the new events: free ids of the session, the retired events' order slots."""
    own = [e for e in snapshot.events.values() if e.session_id == session_id]
    plan = _Plan(
        retired={e.id for e in own if set(e.sessions) <= {session_id}},
        kept={e.id for e in own if not set(e.sessions) <= {session_id}},
    )
    ids = (event_id(session_id, k) for k in range(1, 10 * len(segmented) + len(own) + 2))
    free = [i for i in ids if i not in plan.kept]
    slots = sorted(e.order for e in own if e.id in plan.retired)
    extra = max(0, len(segmented) - len(slots))
    if slots:
        top = slots[-1]
        slots += [top + 1 + i for i in range(extra)]
        if extra:
            plan.shifted = [
                e.model_copy(update={"order": e.order + extra})
                for e in snapshot.events.values()
                if e.order > top and e.id not in plan.retired
            ]
    else:
        start = 1 + max((e.order for e in snapshot.events.values()), default=-1)
        slots = [start + i for i in range(len(segmented))]
    for event, new_id, order in zip(segmented, free, slots):
        plan.rename[event.id] = new_id
        plan.events.append(event.model_copy(update={"id": new_id, "order": order}))
    return plan


def _holder(events: list[Event], turn_id: str | None) -> str | None:
    return next((e.id for e in events if turn_id in e.turn_ids), events[-1].id if events else None)


def _handover(snapshot: NamespaceSnapshot, plan: _Plan, rel: Relation) -> tuple[str | None, str | None]:
    """Another session's relation re-pointed off retired events: a retired source hands over through its last
    turn, a retired target through its first (to the new event holding that turn)."""
    old = snapshot.events
    head = _holder(plan.events, _turn_at(old[rel.source].turn_ids, -1)) if rel.source in plan.retired else rel.source
    tail = _holder(plan.events, _turn_at(old[rel.target].turn_ids, 0)) if rel.target in plan.retired else rel.target
    return head, tail


def _turn_at(turn_ids: list[str], index: int) -> str | None:
    return turn_ids[index] if turn_ids else None


def _relations(state: IngestState, snapshot: NamespaceSnapshot, plan: _Plan) -> tuple[list[Relation], list[str]]:
    """The session's new relations, other sessions' relations re-pointed off retired events, and what to retire."""
    session = state["current"]
    assert session is not None
    namespace, session_id = state["namespace"], session.session_id
    written: dict[str, Relation] = {}
    for rel in state.get("relations", []):
        src, tgt = plan.rename[rel.source], plan.rename[rel.target]
        rid = relation_id(src, rel.label, tgt)
        written[rid] = rel.model_copy(update={"id": rid, "source": src, "target": tgt})
    retire = []
    for rel in snapshot.relations.values():
        if rel.session_id == session_id:
            retire.append(rel.id)
        elif rel.source in plan.retired or rel.target in plan.retired:
            retire.append(rel.id)
            head, tail = _handover(snapshot, plan, rel)
            if head and tail and head != tail:
                rid = relation_id(head, rel.label, tail)
                written.setdefault(rid, rel.model_copy(update={"id": rid, "source": head, "target": tail}))
    if plan.events:
        first = plan.events[0]
        before = [
            e
            for e in snapshot.events.values()
            if e.order < first.order and e.id not in plan.retired and e.session_id != session_id
        ]
        if before:
            last = max(before, key=lambda e: (e.order, e.id))
            rid = relation_id(last.id, "temporal_before", first.id)
            written.setdefault(
                rid,
                Relation(
                    id=rid,
                    namespace=namespace,
                    source=last.id,
                    target=first.id,
                    label="temporal_before",
                    session_id=session_id,
                    turn_ids=[*last.turn_ids[-1:], *first.turn_ids[:1]],
                ),
            )
    return list(written.values()), retire


def _topics(
    state: IngestState,
    runtime: Runtime[IngestContext],
    snapshot: NamespaceSnapshot,
    plan: _Plan,
    vectors: list[list[float]],
) -> tuple[TopicUpdate, dict[str, Any]]:
    """Topic step: retired events leave their topics, new ones join the nearest topic (or open one); then the
    topics are labelled as ingest labels them (``ingest_nodes.relabel_topics``), from the rebuilt events. Returns
    the update and the session's cost and fallbacks with the labelling call."""
    ctx = ingest_context(runtime)
    rebuilt = {e.id for e in plan.events}
    known = {k: v for k, v in snapshot.event_vectors.items() if k not in plan.retired or k in rebuilt}
    known.update({e.id: np.asarray(v, dtype=np.float32) for e, v in zip(plan.events, vectors)})
    layer = TopicLayer(delta=ctx.topic_delta, recluster_every=ctx.recluster_every)
    update = layer.update(
        state["namespace"], snapshot.topics, known, [e.id for e in plan.events], snapshot.manifest.topic_steps
    )
    changed = carry_topic_labels(snapshot.topics, update.topics)  # a topic whose members stay keeps its abstraction
    # ... unless it holds a rebuilt event: same id, new summary (the one its label was abstracted from fell back).
    written = {t.id for t in update.topics}
    stale = [
        t.model_copy(deep=True)
        for tid, t in snapshot.topics.items()
        if tid not in written and tid not in update.retired and rebuilt.intersection(t.members)
    ]
    relabel = {t.id for t in changed}
    changed += [t for t in update.topics if t.id not in relabel and rebuilt.intersection(t.members)]
    events = ChainMap({e.id: e for e in plan.events}, snapshot.events)
    labelled = relabel_topics(state, runtime, [*changed, *stale], events, known)
    if labelled:
        update.topics.extend(stale)
    return update, labelled


def _retired_records(snapshot: NamespaceSnapshot, session_id: str, plan: _Plan) -> dict[str, list[str]]:
    """The facts only this session's turns state, and the tags of its old events."""
    turns = {t.dia_id for t in snapshot.turns.values() if t.session_id == session_id}
    old = plan.retired | set(plan.rename.values())
    return {
        "facts": [f.id for f in snapshot.facts.values() if f.turn_ids and set(f.turn_ids) <= turns],
        "tags": [t.id for t in snapshot.tags.values() if t.target_kind == "event" and t.target_id in old],
    }


def redo_key(ctx: IngestContext, res: Any) -> str:
    """What a redo pass records in the sessions it rebuilds: the chat model and the settings that shape its
    calls. A pass with the same key skips them (a resumed pass); a pass with another key rebuilds them."""
    llm, settings = res.llm, res.settings
    model = settings.chat_model or getattr(llm, "model_name", None) or type(llm).__name__
    combined = ctx.combined_extraction if ctx.combined_extraction is not None else settings.combined_extraction
    where = settings.openai_base_url or "default"
    return f"{model}@{where};context={ctx.context_tokens};combined={bool(combined)}"[:300]


# -- nodes ------------------------------------------------------------------------------------------


def prepare_redo(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """The file's sessions whose manifest entry records fallbacks; the rest are reported as skipped."""
    res, ctx = resources_of(runtime), ingest_context(runtime)
    namespace = run_namespace(ctx.namespace)
    if ingest_policy_of({"policy": ctx.policy}, runtime).llm is None:
        raise NoModelForRedoError(
            "--redo-fallbacks rebuilds sessions with the chat model and none is configured (set "
            "LOGICMAP_CHAT_MODEL); sessions built without a model by choice have no fallbacks to repair"
        )
    manifest = res.store.require_namespace(namespace)
    key = redo_key(ctx, res)
    pending, reports = [], []
    for session in sessions_of(state)[0]:
        known = manifest.sessions.get(session.session_id)
        if known is not None and known.content_hash != session.content_hash():
            raise session_conflict(namespace, session.session_id)
        if known is not None and known.fallbacks and known.redone_with != key:
            pending.append(session)
        else:
            reports.append(
                SessionReport(
                    session_id=session.session_id,
                    skipped=True,
                    policy=known.policy if known else "none",
                    generation=known.generation if known else 0,
                )
            )
    return {"namespace": namespace, "reports": reports, "redo_key": key, "policy": ctx.policy, **advance(pending)}


def replace(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """The change set that replaces the session's derived records with the rebuilt ones (turns kept)."""
    res = resources_of(runtime)
    namespace, session = state["namespace"], state["current"]
    assert session is not None
    snapshot = res.store.snapshot(namespace)
    plan = _plan(snapshot, session.session_id, state["events"])
    now = datetime.now(UTC)
    for event in plan.events:
        event.created_at = event.created_at or now
    vectors = [list(map(float, v)) for v in res.embeddings.embed_documents([e.summary for e in plan.events])]
    relations, retired_relations = _relations(state, snapshot, plan)
    update, labelled = _topics(state, runtime, snapshot, plan, vectors)
    shifted_vectors = [list(map(float, snapshot.event_vectors[e.id])) for e in plan.shifted]
    change = ChangeSet(
        namespace=namespace,
        base_generation=snapshot.generation,
        events=[*plan.events, *plan.shifted],
        event_vectors=[*vectors, *shifted_vectors],
        relations=relations,
        topics=update.topics,
        topic_steps=update.steps,
        retire={
            "events": sorted(plan.retired),
            "relations": retired_relations,
            "topics": update.retired,
            **_retired_records(snapshot, session.session_id, plan),
        },
    )
    stats = {
        **state.get("session_stats", {}),
        "turns": len(state["turns"]),
        "merged": 0,
        "linked": 0,
        "topics_reclustered": update.reclustered,
    }
    return {"change": change, "session_stats": stats, "enrichments": None, **labelled}


# -- routers and the graph --------------------------------------------------------------------------


def route_after_prepare_redo(state: IngestState) -> Literal["segment", "__end__"]:
    return "segment" if state.get("current") is not None else "__end__"


def route_after_redo_commit(state: IngestState) -> Literal["replace", "segment", "__end__"]:
    """A commit that lost a race waits for the namespace (``ingest_nodes.lost_commit``), then is recomputed on the new snapshot."""
    if state.get("change") is None and 0 < state.get("conflicts", 0) <= MAX_COMMIT_CONFLICTS:
        return "replace"
    return "segment" if state.get("current") is not None else "__end__"


def build_redo_graph() -> StateGraph[IngestState, IngestContext, IngestState, IngestState]:
    """prepare_redo -> segment -> relate -> replace -> (facts | cues) -> commit, per session with fallbacks."""
    builder = StateGraph(IngestState, context_schema=IngestContext)
    for name, node in [
        ("prepare_redo", prepare_redo),
        ("segment", segment),
        ("relate", relate),
        ("replace", replace),
        ("facts", facts),
        ("cues", cues),
        ("commit", commit),
    ]:
        builder.add_node(name, node)
    builder.add_edge(START, "prepare_redo")
    builder.add_conditional_edges("prepare_redo", route_after_prepare_redo, ["segment", END])
    builder.add_edge("segment", "relate")
    builder.add_edge("relate", "replace")
    builder.add_edge("replace", "facts")
    builder.add_edge("replace", "cues")
    builder.add_edge(["facts", "cues"], "commit")
    builder.add_conditional_edges("commit", route_after_redo_commit, ["replace", "segment", END])
    return builder


builder = build_redo_graph()
graph = builder.compile(name="ingest_redo")
