"""The ingest graph: per session segment -> relate -> fuse -> topics -> facts -> cues -> commit, into existing memory.

Sessions already committed are skipped, so re-running a file is a no-op and an interrupted ingest
resumes at the first uncommitted session. Studio loads ``graph`` from this module.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, FallbackRecord, add_cost
from logicmap.agents.coref import CandidatePair, judge_pairs, similarity_verdicts
from logicmap.agents.relations import chain_relations, extract_relations
from logicmap.agents.segmenter import changepoint_segments, finalize_times, segment_session
from logicmap.graphs import ingest_cues, ingest_facts
from logicmap.graphs.enrich import Enrichment, EnrichRequest, apply_enrichment
from logicmap.graphs.resources import (
    Resources,
    ResourcesField,
    default_resources,
    resources_field,
    resources_of,
    run_context,
    with_resources,
)
from logicmap.graphs.tracing import run_config, traced_graph
from logicmap.memory.graph import EventGraph
from logicmap.memory.loaders import Conversation, Session, load_conversations
from logicmap.memory.records import Event, Relation, SessionInfo, Turn, event_id, relation_id, validate_namespace
from logicmap.memory.store import ChangeSet, GenerationConflict, NamespaceSnapshot
from logicmap.memory.topics import TopicLayer

__all__ = [
    "IngestContext",
    "IngestReport",
    "IngestState",
    "SessionConflictError",
    "SessionReport",
    "build_ingest_graph",
    "builder",
    "commit",
    "cues",
    "facts",
    "fuse",
    "graph",
    "ingest_conversation",
    "prepare",
    "rebase",
    "relate",
    "route_after_commit",
    "route_after_prepare",
    "route_after_rebase",
    "segment",
    "topics",
]

MAX_COMMIT_CONFLICTS = 5
SHARED_PARTICIPANT_MIN_SIMILARITY = 0.3
SHARED_PARTICIPANT_LINKS = 2


class SessionConflictError(ValueError):
    """A session id already committed in the namespace with different content."""


@dataclass
class IngestContext:
    """Per-run settings of the ingest graph (shown as a form in Studio)."""

    policy: Literal["llm", "heuristic"] = "llm"
    merge_threshold: float = 0.9
    topic_delta: float = 0.9
    recluster_every: int = 4
    extract_facts: bool = True
    extract_cues: bool = True
    resources: ResourcesField = resources_field()


class SessionReport(BaseModel):
    """What ingesting one session did and cost."""

    session_id: str
    skipped: bool = False
    policy: str = "llm"
    turns: int = 0
    events: int = 0
    merged: int = 0
    linked: int = 0
    relations: int = 0
    topics_reclustered: bool = False
    fallbacks: list[str] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    generation: int = 0


class IngestReport(BaseModel):
    """The result of ingesting a conversation: per-session reports, fallbacks, total cost."""

    namespace: str
    sessions: list[SessionReport]
    fallbacks: list[FallbackRecord] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    wall_time_s: float = 0.0

    @property
    def llm_calls_per_session(self) -> float:
        done = [s for s in self.sessions if not s.skipped]
        return sum(s.cost.llm_calls for s in done) / len(done) if done else 0.0


class IngestState(TypedDict, total=False):
    namespace: str
    path: str | None
    sessions: list[Session]
    pending: list[Session]
    current: Session | None
    turns: list[Turn]
    events: list[Event]
    relations: list[Relation]
    change: ChangeSet | None
    base_generation: int
    session_cost: Cost
    session_fallbacks: list[FallbackRecord]
    session_stats: dict[str, Any]
    started: float
    conflicts: int
    fallbacks: Annotated[list[FallbackRecord], operator.add]
    reports: Annotated[list[SessionReport], operator.add]
    cost: Annotated[Cost, add_cost]


# -- helpers ----------------------------------------------------------------------------------------


def _ctx(runtime: Runtime[IngestContext] | None) -> IngestContext:
    return run_context(runtime, IngestContext)


def _policy_and_llm(ctx: IngestContext, res: Resources) -> tuple[str, Any]:
    """The policy a run really uses: the LLM one only when a chat model is configured."""
    if ctx.policy == "heuristic":
        return "heuristic", None
    llm = res.llm
    return ("llm", llm) if llm is not None else ("heuristic", None)


def _trace(state: IngestState, ctx: IngestContext) -> dict[str, Any]:
    return {
        "tags": ["strategy:ingest", f"policy:{ctx.policy}"],
        "metadata": {"namespace": state["namespace"], "session_id": state["current"].session_id},
    }


def _conflict(namespace: str, session_id: str) -> SessionConflictError:
    return SessionConflictError(
        f"namespace {namespace!r} already holds a different session {session_id!r}; "
        "ingest this conversation into a new namespace"
    )


def _advance(pending: list[Session]) -> dict[str, Any]:
    """The state update that makes the next pending session current."""
    return {"current": pending[0] if pending else None, "pending": pending[1:]}


def _sessions_of(state: IngestState) -> list[Session]:
    sessions = list(state.get("sessions") or [])
    if not sessions and state.get("path"):
        conversations = load_conversations(state["path"])
        if len(conversations) != 1:
            raise ValueError(f"{state['path']} holds {len(conversations)} conversations; ingest them one per namespace")
        sessions = conversations[0].sessions
    return [s if isinstance(s, Session) else Session.model_validate(s) for s in sessions]


def _session_turns(namespace: str, session: Session, offset: int) -> list[Turn]:
    return [
        Turn(
            namespace=namespace,
            session_id=session.session_id,
            dia_id=raw.dia_id,
            speaker=raw.speaker,
            text=raw.text,
            image_caption=raw.image_caption,
            session_time=session.timestamp,
            session_time_text=session.timestamp_text,
            position=offset + i,
        )
        for i, raw in enumerate(session.turns)
    ]


def _session_events(segmentation: Any, namespace: str, session: Session, turns: list[Turn], order_base: int,
                    source: str) -> list[Event]:
    return [
        Event(
            id=event_id(session.session_id, i + 1),
            namespace=namespace,
            session_id=session.session_id,
            summary=seg.summary.strip(),
            time=seg.date,
            time_phrase=seg.time_phrase,
            session_time=session.timestamp,
            order=order_base + i,
            participants=seg.participants or sorted({t.speaker for t in turns if t.dia_id in seg.turn_ids}),
            turn_ids=seg.turn_ids,
            sessions=[session.session_id],
            source=source,
        )
        for i, seg in enumerate(segmentation.events)
    ]


def _next_order(snapshot: NamespaceSnapshot) -> int:
    return 1 + max((e.order for e in snapshot.events.values()), default=-1)


@dataclass
class _Fusion:
    """What fusing a session's events with stored ones decided."""

    new_events: dict[str, Event]
    new_vectors: dict[str, Any]
    updated: dict[str, Event] = field(default_factory=dict)
    redirect: dict[str, str] = field(default_factory=dict)  # merged new event id -> stored event id
    extra: list[Relation] = field(default_factory=list)
    linked: int = 0


def _merge_candidates(events: list[Event], vectors: np.ndarray, event_graph: EventGraph,
                      threshold: float) -> list[CandidatePair]:
    """Each new event with its most similar stored event, when they are similar enough to be one event."""
    pairs: list[CandidatePair] = []
    for event, vector in zip(events, vectors):
        best = event_graph.top_k(vector, 1)
        if best and best[0][1] >= threshold:
            stored = event_graph.events[best[0][0]]
            pairs.append(CandidatePair(event.id, event.render(), stored.id, stored.render(), best[0][1]))
    return pairs


def _merge_into(stored: Event, new: Event, session_id: str) -> None:
    if new.summary not in stored.summary:
        stored.summary = f"{stored.summary} {new.summary}"
    stored.turn_ids = list(dict.fromkeys([*stored.turn_ids, *new.turn_ids]))
    stored.participants = list(dict.fromkeys([*stored.participants, *new.participants]))[:3]
    stored.sessions = list(dict.fromkeys([*stored.sessions, session_id]))
    stored.time = stored.time or new.time
    stored.time_phrase = stored.time_phrase or new.time_phrase


def _apply_verdicts(fusion: _Fusion, verdicts: list[Any], pairs: list[CandidatePair], event_graph: EventGraph,
                    namespace: str, session_id: str) -> None:
    """Same event -> merge into the stored one; overlap -> an edge to it; else the new event stays."""
    for verdict, pair in zip(verdicts, pairs):
        new = fusion.new_events[pair.new_id]
        if verdict.same_event:
            stored = fusion.updated.get(pair.stored_id) or event_graph.events[pair.stored_id].model_copy(deep=True)
            _merge_into(stored, new, session_id)
            fusion.updated[stored.id] = stored
            fusion.redirect[new.id] = stored.id
            del fusion.new_events[new.id]
        elif verdict.has_overlap:
            label = (verdict.relation_type or "elaboration").strip().lower().replace(" ", "_") or "elaboration"
            fusion.extra.append(Relation(id=relation_id(new.id, label, pair.stored_id), namespace=namespace,
                                         source=new.id, target=pair.stored_id, label=label,
                                         turn_ids=new.turn_ids[:2], session_id=session_id))
            fusion.linked += 1


def _redirected_relations(relations: list[Relation], redirect: dict[str, str]) -> dict[str, Relation]:
    """Relations re-pointed at the stored events new ones merged into (self-loops dropped)."""
    out: dict[str, Relation] = {}
    for rel in relations:
        src, tgt = redirect.get(rel.source, rel.source), redirect.get(rel.target, rel.target)
        if src == tgt:
            continue
        rid = relation_id(src, rel.label, tgt)
        out[rid] = rel.model_copy(update={"id": rid, "source": src, "target": tgt})
    return out


def _link_to_previous(relations: dict[str, Relation], kept: list[Event], event_graph: EventGraph, namespace: str,
                      session_id: str) -> None:
    """Continuity: the previous session's last event precedes this session's first event."""
    if not kept or not event_graph.ids:
        return
    last = max(event_graph.events.values(), key=lambda e: (e.order, e.id))
    rid = relation_id(last.id, "temporal_before", kept[0].id)
    relations.setdefault(rid, Relation(id=rid, namespace=namespace, source=last.id, target=kept[0].id,
                                       label="temporal_before", turn_ids=[*last.turn_ids[-1:], *kept[0].turn_ids[:1]],
                                       session_id=session_id))


def _link_shared_participants(relations: dict[str, Relation], kept: list[Event], fusion: _Fusion,
                              event_graph: EventGraph, namespace: str, session_id: str) -> None:
    """Without an LLM: link each new event to up to two similar stored events that share a participant."""
    if not event_graph.ids:
        return
    for event in kept:
        sims = event_graph.similarities(fusion.new_vectors[event.id])
        links = 0
        for index in np.argsort(-sims, kind="stable"):
            if sims[index] < SHARED_PARTICIPANT_MIN_SIMILARITY or links >= SHARED_PARTICIPANT_LINKS:
                break
            other = event_graph.events[event_graph.ids[index]]
            if set(other.participants) & set(event.participants):
                rid = relation_id(other.id, "shared_participant", event.id)
                relations.setdefault(rid, Relation(id=rid, namespace=namespace, source=other.id, target=event.id,
                                                   label="shared_participant", turn_ids=[], session_id=session_id))
                links += 1


def _fused_change(state: IngestState, snapshot: NamespaceSnapshot, fusion: _Fusion, relations: dict[str, Relation],
                  res: Resources) -> ChangeSet:
    """The session's change set: its turns, its new and updated events (with vectors), its relations."""
    now = datetime.now(UTC)
    written = [*fusion.new_events.values(), *fusion.updated.values()]
    for e in written:
        e.created_at = e.created_at or now
    written_vectors = [fusion.new_vectors[e.id] for e in fusion.new_events.values()]
    if fusion.updated:
        written_vectors += list(res.embeddings.embed_documents([e.summary for e in fusion.updated.values()]))
    turn_vectors = res.embeddings.embed_documents([t.render() for t in state["turns"]])
    return ChangeSet(
        namespace=state["namespace"],
        base_generation=snapshot.generation,
        turns=state["turns"],
        turn_vectors=[list(map(float, v)) for v in turn_vectors],
        events=written,
        event_vectors=[list(map(float, v)) for v in written_vectors],
        relations=list(relations.values()),
    )


def _enrich(enrich: Callable[[EnrichRequest], Enrichment], state: IngestState,
            runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Run an enricher (``graphs.ingest_facts`` or ``graphs.ingest_cues``) and add its records to the change."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    change, session = state["change"], state["current"]
    assert change is not None and session is not None
    policy, llm = _policy_and_llm(ctx, res)
    request = EnrichRequest(
        namespace=state["namespace"], session=session, turns=state["turns"], events=list(change.events),
        snapshot=res.store.snapshot(state["namespace"]), policy=policy, llm=llm,
        embeddings=res.embeddings, method=res.method, **_trace(state, ctx),
    )
    enrichment = enrich(request)
    return {
        "change": apply_enrichment(change, enrichment),
        "session_cost": (state.get("session_cost") or Cost()) + enrichment.cost,
        "session_fallbacks": [*state.get("session_fallbacks", []), *enrichment.fallbacks],
    }


def _session_info(change: ChangeSet, session: Session, stats: dict[str, Any],
                  fallbacks: list[FallbackRecord]) -> SessionInfo:
    return SessionInfo(
        session_id=session.session_id,
        content_hash=session.content_hash(),
        generation=0,
        policy=stats.get("policy", "llm"),
        events=sum(1 for e in change.events if e.session_id == session.session_id),
        relations=len(change.relations),
        fallbacks=[f"{f.role}: {f.reason}" for f in fallbacks],
    )


def _session_report(change: ChangeSet, session: Session, stats: dict[str, Any], fallbacks: list[FallbackRecord],
                    cost: Cost, generation: int) -> SessionReport:
    return SessionReport(
        session_id=session.session_id,
        policy=stats.get("policy", "llm"),
        turns=len(change.turns),
        events=change.session.events if change.session else 0,
        merged=int(stats.get("merged", 0)),
        linked=int(stats.get("linked", 0)),
        relations=len(change.relations),
        topics_reclustered=bool(stats.get("topics_reclustered")),
        fallbacks=[f"{f.role}: {f.reason}" for f in fallbacks],
        cost=cost,
        generation=generation,
    )


# -- nodes ------------------------------------------------------------------------------------------


def prepare(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Validate the namespace, skip sessions already committed, refuse a different session under a known id."""
    res = resources_of(runtime)
    namespace = validate_namespace(state.get("namespace"))
    manifest = res.store.manifest(namespace)
    pending, reports = [], []
    for session in _sessions_of(state):
        known = manifest.sessions.get(session.session_id)
        if known is None:
            pending.append(session)
        elif known.content_hash == session.content_hash():
            reports.append(SessionReport(session_id=session.session_id, skipped=True, policy=known.policy,
                                         generation=known.generation))
        else:
            raise _conflict(namespace, session.session_id)
    update: dict[str, Any] = {"reports": reports, **_advance(pending)}
    if pending and _ctx(runtime).policy == "llm" and res.llm is None:
        update["fallbacks"] = [FallbackRecord(role="ingest", reason="no chat model configured: heuristic policy used")]
    return update


def segment(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Split the current session into events (LLM segmenter, or change points of turn embeddings)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    namespace, session = state["namespace"], state["current"]
    assert session is not None
    started = time.perf_counter()
    snapshot = res.store.snapshot(namespace)
    turns = _session_turns(namespace, session, len(snapshot.turns))
    vectors = np.asarray(res.embeddings.embed_documents([t.render() for t in turns]), dtype=np.float32)
    policy, llm = _policy_and_llm(ctx, res)
    fallbacks: list[FallbackRecord] = []
    cost = Cost()
    if policy == "heuristic":
        segmentation = finalize_times(changepoint_segments(turns, vectors), turns, session.timestamp)
    else:
        outcome = segment_session(llm, turns, vectors, session_time=session.timestamp, method=res.method,
                                  **_trace(state, ctx))
        segmentation, cost = outcome.output, outcome.cost
        if outcome.fallback:
            fallbacks.append(outcome.fallback)
    events = _session_events(segmentation, namespace, session, turns, _next_order(snapshot),
                             "fallback" if fallbacks else policy)
    return {
        "turns": turns,
        "events": events,
        "base_generation": snapshot.generation,
        "started": started,
        "session_cost": cost,
        "session_fallbacks": fallbacks,
        "session_stats": {"policy": policy},
        "conflicts": 0,
    }


def relate(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Logical relations between the session's events (LLM extractor, or a temporal chain)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    events, turns = state["events"], state["turns"]
    keys = [f"E{i + 1}" for i in range(len(events))]
    by_key = dict(zip(keys, events))
    turn_lists = [e.turn_ids for e in events]
    policy, llm = _policy_and_llm(ctx, res)
    fallbacks = list(state.get("session_fallbacks", []))
    cost = state.get("session_cost") or Cost()
    if policy == "heuristic":
        extracted = chain_relations(keys, turn_lists)
    else:
        text = "\n".join(f"{k}: {e.summary} (turns {', '.join(e.turn_ids)})" for k, e in by_key.items())
        outcome = extract_relations(llm, text, keys, turn_lists, turns, method=res.method, **_trace(state, ctx))
        extracted, cost = outcome.output, cost + outcome.cost
        if outcome.fallback:
            fallbacks.append(outcome.fallback)
    relations: dict[str, Relation] = {}
    for rel in extracted.relations:
        src, tgt = by_key[rel.source].id, by_key[rel.target].id
        rid = relation_id(src, rel.label, tgt)
        relations[rid] = Relation(
            id=rid, namespace=state["namespace"], source=src, target=tgt, label=rel.label,
            turn_ids=rel.turn_ids, session_id=state["current"].session_id,
        )
    return {"relations": list(relations.values()), "session_cost": cost, "session_fallbacks": fallbacks}


def fuse(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Fuse the session's events with stored ones (coreference judge above the merge threshold) into a change set."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    namespace, session = state["namespace"], state["current"]
    assert session is not None
    snapshot = res.store.snapshot(namespace)
    event_graph = EventGraph.of(snapshot)
    events = [e.model_copy(deep=True) for e in state["events"]]
    vectors = np.asarray(res.embeddings.embed_documents([e.summary for e in events]), dtype=np.float32)
    pairs = _merge_candidates(events, vectors, event_graph, ctx.merge_threshold)
    policy, llm = _policy_and_llm(ctx, res)
    fallbacks = list(state.get("session_fallbacks", []))
    cost = state.get("session_cost") or Cost()
    if not pairs:
        verdicts = []
    elif policy == "heuristic":
        verdicts = similarity_verdicts(pairs).verdicts
    else:
        outcome = judge_pairs(llm, pairs, method=res.method, **_trace(state, ctx))
        verdicts, cost = outcome.output.verdicts, cost + outcome.cost
        if outcome.fallback:
            fallbacks.append(outcome.fallback)
    fusion = _Fusion(new_events={e.id: e for e in events}, new_vectors={e.id: v for e, v in zip(events, vectors)})
    _apply_verdicts(fusion, verdicts, pairs, event_graph, namespace, session.session_id)
    relations = _redirected_relations([*state.get("relations", []), *fusion.extra], fusion.redirect)
    kept = [e for e in events if e.id in fusion.new_events]
    _link_to_previous(relations, kept, event_graph, namespace, session.session_id)
    if policy == "heuristic":
        _link_shared_participants(relations, kept, fusion, event_graph, namespace, session.session_id)
    change = _fused_change(state, snapshot, fusion, relations, res)
    stats = {**state.get("session_stats", {}), "merged": len(fusion.redirect), "linked": fusion.linked}
    return {"change": change, "session_cost": cost, "session_fallbacks": fallbacks, "session_stats": stats}


def topics(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Topic evolution: new events join the nearest topic or open one; a full re-clustering every few steps."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    change = state["change"]
    assert change is not None
    snapshot = res.store.snapshot(state["namespace"])
    vectors = dict(snapshot.event_vectors)
    for event, vector in zip(change.events, change.event_vectors):
        vectors[event.id] = np.asarray(vector, dtype=np.float32)
    new_ids = [e.id for e in change.events if e.id not in snapshot.events]
    layer = TopicLayer(delta=ctx.topic_delta, recluster_every=ctx.recluster_every)
    update = layer.update(state["namespace"], snapshot.topics, vectors, new_ids, snapshot.manifest.topic_steps)
    change = change.model_copy(update={"topics": update.topics, "topic_steps": update.steps,
                                       "retire": {**change.retire, "topics": update.retired}})
    stats = {**state.get("session_stats", {}), "topics_reclustered": update.reclustered}
    return {"change": change, "session_stats": stats}


def facts(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """REAL's temporal facts for the session (graphs/ingest_facts.py)."""
    if not _ctx(runtime).extract_facts:
        return {}
    return _enrich(ingest_facts.enrich, state, runtime)


def cues(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """MRAgent's cue-tag records for the session (graphs/ingest_cues.py)."""
    if not _ctx(runtime).extract_cues:
        return {}
    return _enrich(ingest_cues.enrich, state, runtime)


def commit(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Write the session's change set atomically, then move on to the next session (or count a conflict)."""
    change, session = state["change"], state["current"]
    assert change is not None and session is not None
    stats = state.get("session_stats", {})
    fallbacks = state.get("session_fallbacks", [])
    change = change.model_copy(update={"session": _session_info(change, session, stats, fallbacks)})
    try:
        manifest = resources_of(runtime).store.commit(change)
    except GenerationConflict:
        conflicts = state.get("conflicts", 0) + 1
        if conflicts > MAX_COMMIT_CONFLICTS:
            raise
        return {"conflicts": conflicts, "change": None}
    cost = (state.get("session_cost") or Cost()).model_copy()
    cost.wall_time_s = time.perf_counter() - state.get("started", time.perf_counter())
    report = _session_report(change, session, stats, fallbacks, cost, manifest.generation)
    return {"reports": [report], "fallbacks": fallbacks, "cost": cost, **_advance(list(state.get("pending", []))),
            "change": None, "conflicts": 0}


def rebase(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """After a GenerationConflict: skip the session if another writer committed it meanwhile, else
    renumber its turns and events after what that writer added, then fuse again."""
    namespace, session = state["namespace"], state["current"]
    assert session is not None
    snapshot = resources_of(runtime).store.snapshot(namespace)
    known = snapshot.manifest.sessions.get(session.session_id)
    if known is not None:
        if known.content_hash != session.content_hash():
            raise _conflict(namespace, session.session_id)
        report = SessionReport(session_id=session.session_id, skipped=True, policy=known.policy,
                               generation=known.generation)
        return {"reports": [report], **_advance(list(state.get("pending", []))), "change": None, "conflicts": 0}
    offset, order_base = len(snapshot.turns), _next_order(snapshot)
    return {
        "turns": [t.model_copy(update={"position": offset + i}) for i, t in enumerate(state["turns"])],
        "events": [e.model_copy(update={"order": order_base + i}) for i, e in enumerate(state["events"])],
        "base_generation": snapshot.generation,
    }


# -- routers ----------------------------------------------------------------------------------------


def route_after_prepare(state: IngestState) -> Literal["segment", "__end__"]:
    return "segment" if state.get("current") is not None else END


def route_after_commit(state: IngestState) -> Literal["rebase", "segment", "__end__"]:
    if state.get("change") is None and state.get("conflicts", 0) > 0:
        return "rebase"
    return "segment" if state.get("current") is not None else END


def route_after_rebase(state: IngestState) -> Literal["fuse", "segment", "__end__"]:
    if state.get("conflicts", 0) > 0:
        return "fuse"
    return "segment" if state.get("current") is not None else END


# -- the graph --------------------------------------------------------------------------------------


def build_ingest_graph() -> StateGraph:
    """The ingest ``StateGraph`` (uncompiled); nodes find their resources in the run's context."""
    builder = StateGraph(IngestState, context_schema=IngestContext)
    for name, node in [("prepare", prepare), ("segment", segment), ("relate", relate), ("fuse", fuse),
                       ("topics", topics), ("facts", facts), ("cues", cues), ("commit", commit), ("rebase", rebase)]:
        builder.add_node(name, node)
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", route_after_prepare, ["segment", END])
    builder.add_edge("segment", "relate")
    builder.add_edge("relate", "fuse")
    builder.add_edge("fuse", "topics")
    builder.add_edge("topics", "facts")
    builder.add_edge("facts", "cues")
    builder.add_edge("cues", "commit")
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


def _progress_sink(progress: bool | Callable[[SessionReport], None], sessions: int,
                   namespace: str) -> tuple[Callable[[SessionReport], None] | None, Any]:
    """``(callback per session report, tqdm bar or None)`` for ``ingest_conversation``'s ``progress``."""
    if progress is True:
        from tqdm import tqdm

        bar = tqdm(total=sessions, desc=f"ingest {namespace}", unit="session")
        return partial(_tick, bar), bar
    return (progress if callable(progress) else None), None


def ingest_conversation(
    conversation: Conversation | str | Path,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: Literal["llm", "heuristic"] = "llm",
    context: IngestContext | None = None,
    progress: bool | Callable[[SessionReport], None] = False,
) -> IngestReport:
    """Ingest every session of a conversation into ``namespace``; committed sessions are skipped."""
    conversation = _one_conversation(conversation)
    validate_namespace(namespace)
    carried = context.resources if context is not None else None
    resources = resources or (carried if isinstance(carried, Resources) else default_resources())
    ctx = context or IngestContext(
        policy=policy,
        merge_threshold=resources.settings.merge_threshold,
        topic_delta=resources.settings.topic_delta,
        recluster_every=resources.settings.recluster_every,
    )
    ctx, resources = with_resources(ctx, resources)
    config = run_config(
        "ingest", namespace=namespace, policy=ctx.policy, budgets=ctx,
        metadata={"sessions": len(conversation.sessions)},
        recursion_limit=20 + 10 * len(conversation.sessions),
    )  # fmt: skip
    on_report, bar = _progress_sink(progress, len(conversation.sessions), namespace)
    started = time.perf_counter()
    reports: list[SessionReport] = []
    fallbacks: list[FallbackRecord] = []
    for update in graph.stream({"namespace": namespace, "sessions": conversation.sessions}, config=config,
                               context=ctx, stream_mode="updates"):
        for delta in update.values():
            for report in (delta or {}).get("reports", []) or []:
                reports.append(report)
                if on_report is not None:
                    on_report(report)
            fallbacks.extend((delta or {}).get("fallbacks", []) or [])
    if bar is not None:
        bar.close()
    total = Cost()
    for report in reports:
        total = total + report.cost
    return IngestReport(
        namespace=namespace, sessions=reports, fallbacks=fallbacks, cost=total, wall_time_s=time.perf_counter() - started
    )


builder = build_ingest_graph()
graph = traced_graph(builder.compile(name="ingest"))
