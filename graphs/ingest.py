"""The ingest graph: per session segment -> relate -> fuse -> topics -> commit, into existing memory.

Sessions already committed are skipped, so re-running a file is a no-op and an interrupted ingest
resumes at the first uncommitted session. Studio loads ``graph`` from this module.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
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
from logicmap.graphs.enrich import EnrichRequest, apply_enrichment
from logicmap.graphs.resources import Resources, default_resources, run_context
from logicmap.memory.graph import EventGraph
from logicmap.memory.loaders import Conversation, Session, load_conversations
from logicmap.memory.records import Event, Relation, SessionInfo, Turn, event_id, relation_id, validate_namespace
from logicmap.memory.store import ChangeSet, GenerationConflict
from logicmap.memory.topics import TopicLayer

__all__ = [
    "IngestContext",
    "IngestReport",
    "IngestState",
    "SessionConflictError",
    "SessionReport",
    "build_ingest_graph",
    "builder",
    "graph",
    "ingest_conversation",
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


def _ctx(runtime: Runtime[IngestContext] | None) -> IngestContext:
    return run_context(runtime, IngestContext)


def build_ingest_graph(resources: Resources | None = None) -> StateGraph:
    """The ingest ``StateGraph`` (uncompiled). Resources default to the process-wide settings."""

    def res() -> Resources:
        return resources or default_resources()

    def policy_and_llm(ctx: IngestContext) -> tuple[str, Any]:
        if ctx.policy == "heuristic":
            return "heuristic", None
        llm = res().llm
        return ("llm", llm) if llm is not None else ("heuristic", None)

    def trace(state: IngestState, ctx: IngestContext) -> dict[str, Any]:
        return {
            "tags": ["strategy:ingest", f"policy:{ctx.policy}"],
            "metadata": {"namespace": state["namespace"], "session_id": state["current"].session_id},
        }

    def prepare(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
        namespace = validate_namespace(state.get("namespace"))
        sessions = list(state.get("sessions") or [])
        if not sessions and state.get("path"):
            conversations = load_conversations(state["path"])
            if len(conversations) != 1:
                raise ValueError(f"{state['path']} holds {len(conversations)} conversations; ingest them one per namespace")
            sessions = conversations[0].sessions
        sessions = [s if isinstance(s, Session) else Session.model_validate(s) for s in sessions]
        manifest = res().store.manifest(namespace)
        pending, reports = [], []
        for session in sessions:
            known = manifest.sessions.get(session.session_id)
            if known is None:
                pending.append(session)
            elif known.content_hash == session.content_hash():
                reports.append(SessionReport(session_id=session.session_id, skipped=True, policy=known.policy, generation=known.generation))
            else:
                raise SessionConflictError(
                    f"namespace {namespace!r} already holds a different session {session.session_id!r}; "
                    "ingest this conversation into a new namespace"
                )
        update: dict[str, Any] = {"reports": reports, "pending": pending[1:], "current": pending[0] if pending else None}
        ctx = _ctx(runtime)
        if pending and ctx.policy == "llm" and res().llm is None:
            update["fallbacks"] = [FallbackRecord(role="ingest", reason="no chat model configured: heuristic policy used")]
        return update

    def segment(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        namespace, session = state["namespace"], state["current"]
        assert session is not None
        started = time.perf_counter()
        snapshot = res().store.snapshot(namespace)
        offset = len(snapshot.turns)
        turns = [
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
        vectors = np.asarray(res().embeddings.embed_documents([t.render() for t in turns]), dtype=np.float32)
        policy, llm = policy_and_llm(ctx)
        fallbacks: list[FallbackRecord] = []
        cost = Cost()
        if policy == "heuristic":
            segmentation = finalize_times(changepoint_segments(turns, vectors), turns, session.timestamp)
        else:
            outcome = segment_session(llm, turns, vectors, session_time=session.timestamp, method=res().method, **trace(state, ctx))
            segmentation, cost = outcome.output, outcome.cost
            if outcome.fallback:
                fallbacks.append(outcome.fallback)
        order_base = 1 + max((e.order for e in snapshot.events.values()), default=-1)
        events = [
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
                source="fallback" if fallbacks else policy,
            )
            for i, seg in enumerate(segmentation.events)
        ]
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
        ctx = _ctx(runtime)
        events, turns = state["events"], state["turns"]
        keys = [f"E{i + 1}" for i in range(len(events))]
        by_key = dict(zip(keys, events))
        turn_lists = [e.turn_ids for e in events]
        policy, llm = policy_and_llm(ctx)
        fallbacks = list(state.get("session_fallbacks", []))
        cost = state.get("session_cost") or Cost()
        if policy == "heuristic":
            extracted = chain_relations(keys, turn_lists)
        else:
            text = "\n".join(f"{k}: {e.summary} (turns {', '.join(e.turn_ids)})" for k, e in by_key.items())
            outcome = extract_relations(llm, text, keys, turn_lists, turns, method=res().method, **trace(state, ctx))
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
        ctx = _ctx(runtime)
        namespace, session = state["namespace"], state["current"]
        store, embeddings = res().store, res().embeddings
        snapshot = store.snapshot(namespace)
        graph = EventGraph.of(snapshot)
        events = [e.model_copy(deep=True) for e in state["events"]]
        vectors = np.asarray(embeddings.embed_documents([e.summary for e in events]), dtype=np.float32)
        pairs: list[CandidatePair] = []
        for event, vector in zip(events, vectors):
            best = graph.top_k(vector, 1)
            if best and best[0][1] >= ctx.merge_threshold:
                stored = graph.events[best[0][0]]
                pairs.append(CandidatePair(event.id, event.render(), stored.id, stored.render(), best[0][1]))
        policy, llm = policy_and_llm(ctx)
        fallbacks = list(state.get("session_fallbacks", []))
        cost = state.get("session_cost") or Cost()
        if not pairs:
            verdicts = []
        elif policy == "heuristic":
            verdicts = similarity_verdicts(pairs).verdicts
        else:
            outcome = judge_pairs(llm, pairs, method=res().method, **trace(state, ctx))
            verdicts, cost = outcome.output.verdicts, cost + outcome.cost
            if outcome.fallback:
                fallbacks.append(outcome.fallback)

        new_events = {e.id: e for e in events}
        new_vectors = {e.id: v for e, v in zip(events, vectors)}
        updated: dict[str, Event] = {}
        redirect: dict[str, str] = {}
        extra: list[Relation] = []
        linked = 0
        for verdict, pair in zip(verdicts, pairs):
            new = new_events[pair.new_id]
            if verdict.same_event:
                stored = updated.get(pair.stored_id) or graph.events[pair.stored_id].model_copy(deep=True)
                if new.summary not in stored.summary:
                    stored.summary = f"{stored.summary} {new.summary}"
                stored.turn_ids = list(dict.fromkeys([*stored.turn_ids, *new.turn_ids]))
                stored.participants = list(dict.fromkeys([*stored.participants, *new.participants]))[:3]
                stored.sessions = list(dict.fromkeys([*stored.sessions, session.session_id]))
                stored.time = stored.time or new.time
                stored.time_phrase = stored.time_phrase or new.time_phrase
                updated[stored.id] = stored
                redirect[new.id] = stored.id
                del new_events[new.id]
            elif verdict.has_overlap:
                label = (verdict.relation_type or "elaboration").strip().lower().replace(" ", "_") or "elaboration"
                extra.append(Relation(id=relation_id(new.id, label, pair.stored_id), namespace=namespace, source=new.id,
                                      target=pair.stored_id, label=label, turn_ids=new.turn_ids[:2], session_id=session.session_id))
                linked += 1
        relations: dict[str, Relation] = {}
        for rel in [*state.get("relations", []), *extra]:
            src, tgt = redirect.get(rel.source, rel.source), redirect.get(rel.target, rel.target)
            if src == tgt:
                continue
            rid = relation_id(src, rel.label, tgt)
            relations[rid] = rel.model_copy(update={"id": rid, "source": src, "target": tgt})
        # Continuity: the previous session's last event precedes this session's first event.
        kept = [e for e in events if e.id in new_events]
        if kept and graph.ids:
            last = max(graph.events.values(), key=lambda e: (e.order, e.id))
            rid = relation_id(last.id, "temporal_before", kept[0].id)
            relations.setdefault(rid, Relation(id=rid, namespace=namespace, source=last.id, target=kept[0].id,
                                               label="temporal_before", turn_ids=[*last.turn_ids[-1:], *kept[0].turn_ids[:1]],
                                               session_id=session.session_id))
        if policy == "heuristic" and graph.ids:
            for event in kept:
                sims = graph.similarities(new_vectors[event.id])
                ranked = np.argsort(-sims, kind="stable")
                links = 0
                for index in ranked:
                    if sims[index] < SHARED_PARTICIPANT_MIN_SIMILARITY or links >= SHARED_PARTICIPANT_LINKS:
                        break
                    other = graph.events[graph.ids[index]]
                    if set(other.participants) & set(event.participants):
                        rid = relation_id(other.id, "shared_participant", event.id)
                        relations.setdefault(rid, Relation(id=rid, namespace=namespace, source=other.id, target=event.id,
                                                           label="shared_participant", turn_ids=[], session_id=session.session_id))
                        links += 1
        now = datetime.now(UTC)
        written = [*new_events.values(), *updated.values()]
        for e in written:
            e.created_at = e.created_at or now
        written_vectors = [new_vectors[e.id] for e in new_events.values()]
        if updated:
            written_vectors += list(embeddings.embed_documents([e.summary for e in updated.values()]))
        turn_vectors = embeddings.embed_documents([t.render() for t in state["turns"]])
        change = ChangeSet(
            namespace=namespace,
            base_generation=snapshot.generation,
            turns=state["turns"],
            turn_vectors=[list(map(float, v)) for v in turn_vectors],
            events=written,
            event_vectors=[list(map(float, v)) for v in written_vectors],
            relations=list(relations.values()),
        )
        stats = {**state.get("session_stats", {}), "merged": len(redirect), "linked": linked}
        return {"change": change, "session_cost": cost, "session_fallbacks": fallbacks, "session_stats": stats}

    def topics(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        change = state["change"]
        assert change is not None
        snapshot = res().store.snapshot(state["namespace"])
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

    def enrich_with(module: str, state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
        import importlib

        ctx = _ctx(runtime)
        change, session = state["change"], state["current"]
        assert change is not None and session is not None
        policy, llm = policy_and_llm(ctx)
        snapshot = res().store.snapshot(state["namespace"])
        merged_ids = {e.id for e in change.events}
        request = EnrichRequest(
            namespace=state["namespace"], session=session, turns=state["turns"],
            events=[e for e in change.events if e.id in merged_ids], snapshot=snapshot, policy=policy, llm=llm,
            embeddings=res().embeddings, method=res().method, **trace(state, ctx),
        )
        enrichment = importlib.import_module(module).enrich(request)
        return {
            "change": apply_enrichment(change, enrichment),
            "session_cost": (state.get("session_cost") or Cost()) + enrichment.cost,
            "session_fallbacks": [*state.get("session_fallbacks", []), *enrichment.fallbacks],
        }

    def facts(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
        """REAL's temporal facts for the session (graphs/ingest_facts.py)."""
        if not _ctx(runtime).extract_facts:
            return {}
        return enrich_with("logicmap.graphs.ingest_facts", state, runtime)

    def cues(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
        """MRAgent's cue-tag records for the session (graphs/ingest_cues.py)."""
        if not _ctx(runtime).extract_cues:
            return {}
        return enrich_with("logicmap.graphs.ingest_cues", state, runtime)

    def commit(state: IngestState) -> dict[str, Any]:
        change, session = state["change"], state["current"]
        assert change is not None and session is not None
        stats = state.get("session_stats", {})
        fallbacks = state.get("session_fallbacks", [])
        change = change.model_copy(update={"session": SessionInfo(
            session_id=session.session_id,
            content_hash=session.content_hash(),
            generation=0,
            policy=stats.get("policy", "llm"),
            events=sum(1 for e in change.events if e.session_id == session.session_id),
            relations=len(change.relations),
            fallbacks=[f"{f.role}: {f.reason}" for f in fallbacks],
        )})
        try:
            manifest = res().store.commit(change)
        except GenerationConflict:
            conflicts = state.get("conflicts", 0) + 1
            if conflicts > MAX_COMMIT_CONFLICTS:
                raise
            return {"conflicts": conflicts, "change": None}
        cost = (state.get("session_cost") or Cost()).model_copy()
        cost.wall_time_s = time.perf_counter() - state.get("started", time.perf_counter())
        report = SessionReport(
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
            generation=manifest.generation,
        )
        pending = list(state.get("pending", []))
        return {
            "reports": [report],
            "fallbacks": fallbacks,
            "cost": cost,
            "current": pending[0] if pending else None,
            "pending": pending[1:],
            "change": None,
            "conflicts": 0,
        }

    def rebase(state: IngestState) -> dict[str, Any]:
        """After a GenerationConflict: skip the session if another writer committed it meanwhile, else
        renumber its turns and events after what that writer added, then fuse again."""
        namespace, session = state["namespace"], state["current"]
        assert session is not None
        snapshot = res().store.snapshot(namespace)
        known = snapshot.manifest.sessions.get(session.session_id)
        if known is not None:
            if known.content_hash != session.content_hash():
                raise SessionConflictError(
                    f"namespace {namespace!r} already holds a different session {session.session_id!r}; "
                    "ingest this conversation into a new namespace"
                )
            pending = list(state.get("pending", []))
            report = SessionReport(session_id=session.session_id, skipped=True, policy=known.policy, generation=known.generation)
            return {"reports": [report], "current": pending[0] if pending else None, "pending": pending[1:],
                    "change": None, "conflicts": 0}
        offset = len(snapshot.turns)
        order_base = 1 + max((e.order for e in snapshot.events.values()), default=-1)
        return {
            "turns": [t.model_copy(update={"position": offset + i}) for i, t in enumerate(state["turns"])],
            "events": [e.model_copy(update={"order": order_base + i}) for i, e in enumerate(state["events"])],
            "base_generation": snapshot.generation,
        }

    def after_rebase(state: IngestState) -> str:
        if state.get("conflicts", 0) > 0:
            return "fuse"
        return "segment" if state.get("current") is not None else END

    def after_prepare(state: IngestState) -> str:
        return "segment" if state.get("current") is not None else END

    def after_commit(state: IngestState) -> str:
        if state.get("change") is None and state.get("conflicts", 0) > 0:
            return "rebase"
        return "segment" if state.get("current") is not None else END

    builder = StateGraph(IngestState, context_schema=IngestContext)
    builder.add_node("prepare", prepare)
    builder.add_node("segment", segment)
    builder.add_node("relate", relate)
    builder.add_node("fuse", fuse)
    builder.add_node("topics", topics)
    builder.add_node("facts", facts)
    builder.add_node("cues", cues)
    builder.add_node("commit", commit)
    builder.add_node("rebase", rebase)
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", after_prepare, ["segment", END])
    builder.add_edge("segment", "relate")
    builder.add_edge("relate", "fuse")
    builder.add_edge("fuse", "topics")
    builder.add_edge("topics", "facts")
    builder.add_edge("facts", "cues")
    builder.add_edge("cues", "commit")
    builder.add_conditional_edges("commit", after_commit, ["rebase", "segment", END])
    builder.add_conditional_edges("rebase", after_rebase, ["fuse", "segment", END])
    return builder


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
    if not isinstance(conversation, Conversation):
        conversations = load_conversations(conversation)
        if len(conversations) != 1:
            raise ValueError(f"{conversation} holds {len(conversations)} conversations; pass one")
        conversation = conversations[0]
    validate_namespace(namespace)
    resources = resources or default_resources()
    compiled = resources.compiled("ingest", build_ingest_graph)
    ctx = context or IngestContext(
        policy=policy,
        merge_threshold=resources.settings.merge_threshold,
        topic_delta=resources.settings.topic_delta,
        recluster_every=resources.settings.recluster_every,
    )
    started = time.perf_counter()
    bar = None
    if progress is True:
        from tqdm import tqdm

        bar = tqdm(total=len(conversation.sessions), desc=f"ingest {namespace}", unit="session")
    final: dict[str, Any] = {}
    reports: list[SessionReport] = []
    fallbacks: list[FallbackRecord] = []
    from logicmap.graphs.tracing import run_config

    config = run_config(
        "ingest", namespace=namespace, policy=ctx.policy, budgets=ctx,
        metadata={"sessions": len(conversation.sessions)},
        recursion_limit=20 + 10 * len(conversation.sessions),
    )  # fmt: skip
    for update in compiled.stream(
        {"namespace": namespace, "sessions": conversation.sessions}, config=config, context=ctx, stream_mode="updates"
    ):
        for node, delta in update.items():
            if not delta:
                continue
            for report in delta.get("reports", []) or []:
                reports.append(report)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(events=report.events, calls=report.cost.llm_calls)
                elif callable(progress):
                    progress(report)
            fallbacks.extend(delta.get("fallbacks", []) or [])
            final[node] = delta
    if bar is not None:
        bar.close()
    total = Cost()
    for report in reports:
        total = total + report.cost
    return IngestReport(
        namespace=namespace, sessions=reports, fallbacks=fallbacks, cost=total, wall_time_s=time.perf_counter() - started
    )


builder = build_ingest_graph()
graph = builder.compile()
