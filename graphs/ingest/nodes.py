"""The ingest graph's pieces: its context, state, input/output schemas, session reports, nodes and routers.

Shared by the ingest graph (``graphs.ingest.ingest``, which wires them and runs a conversation through them) and the
redo graph (``graphs.ingest.redo``, which rebuilds the sessions whose roles fell back), so neither of those two
imports the other.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Literal

import numpy as np
from langchain_core.language_models import BaseChatModel
from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, Field, with_config
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, FallbackRecord, add_cost
from logicmap.agents.coref import CandidatePair
from logicmap.agents.ingest_policy import IngestPolicy, ingest_policy
from logicmap.agents.segmenter import time_phrase_notes
from logicmap.agents.session_analyst import SessionLayers
from logicmap.agents.topic_abstractor import TopicCluster
from logicmap.agents.windowing import DEFAULT_CONTEXT_TOKENS, ContextBudget
from logicmap.graphs.ingest import cues as ingest_cues
from logicmap.graphs.ingest import facts as ingest_facts
from logicmap.graphs.ingest import r2 as ingest_r2
from logicmap.graphs.ingest.enrich import ENRICHERS, Enrichment, EnrichRequest, add_enrichments, apply_enrichment
from logicmap.graphs.runtime.context import RunContext
from logicmap.graphs.runtime.resources import Resources, resources_of, run_context, run_namespace, server_readable_path
from logicmap.memory.files.loaders import (
    MAX_SESSION_ID,
    Conversation,
    Session,
    check_sessions,
    conversation_namespace,
    load_conversations,
    session_turns,
)
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.indexes.topics import TopicLayer
from logicmap.memory.records.forgetting import with_replacement
from logicmap.memory.records.items import STORE_SOURCE
from logicmap.memory.records.records import (
    Event,
    Relation,
    SessionFallback,
    SessionInfo,
    Topic,
    Turn,
    distinct_turn_id,
    event_id,
    relation_id,
    stable_hash,
    validate_namespace,
)
from logicmap.memory.records.tombstones import FORGOTTEN_NOTE, Forgotten
from logicmap.memory.runtime.contention import MAX_CONFLICTS, NamespaceBusyError, wait_for_namespace
from logicmap.memory.store import ChangeSet, GenerationConflict, Manifest, NamespaceSnapshot, StoragePort
from logicmap.prompts.coref import CorefVerdict

__all__ = [
    "ContinuationError",
    "IngestContext",
    "IngestInput",
    "IngestOutput",
    "IngestReport",
    "IngestState",
    "MAX_COMMIT_CONFLICTS",
    "NamespaceSourceError",
    "SessionConflictError",
    "SessionReport",
    "advance",
    "check_continuation",
    "check_namespace_source",
    "commit",
    "conversation_source",
    "cues",
    "facts",
    "committed_as",
    "file_namespaces",
    "foreign_sessions",
    "fuse",
    "fusion_case",
    "ingest_context",
    "ingest_policy_of",
    "prepare",
    "r2",
    "rebase",
    "relate",
    "route_after_commit",
    "route_after_prepare",
    "route_after_rebase",
    "segment",
    "session_conflict",
    "sessions_of",
    "carry_topic_labels",
    "relabel_topics",
    "topics",
]

MAX_COMMIT_CONFLICTS = MAX_CONFLICTS  # a lost commit waits and recomputes (memory.contention), up to this often


class SessionConflictError(ValueError):
    """A session id already committed in the namespace with different content."""


class NamespaceSourceError(ValueError):
    """A namespace another source created (another conversation, the chat), which this ingest may not write into."""


class ContinuationError(NamespaceSourceError):
    """New sessions for a namespace that holds a conversation, from an input that shows no session of it and was
    not vouched for with ``append``; or an ``append`` into a namespace another conversation created."""


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class IngestContext(RunContext):
    """Per-run settings of the ingest graph (shown as a form in Studio)."""

    merge_threshold: float = 0.9
    """A new event at least this similar to a stored one goes to the coreference judge (merge, link or add)."""
    faithful: bool = False
    """The papers' construction. CompassMem's node fusion as the paper has it: EVERY new event goes to the judge
    with its most similar stored event e* (the Event Coreference & Overlap Prompt, one call per pair), which merges
    it only when the judge says "same event" and the similarity exceeds (>) ``merge_threshold``, links it to e* on
    an overlap (or a same-event verdict below the threshold), else adds it (off: only pairs at ``merge_threshold``
    or above are judged, in one batched call with the project's prompt). MRAgent's Dialogue Processing Prompt for
    the cue extractor and Memory-R2's extraction prompt (Fig. 6); each role its own call unless
    ``combined_extraction`` is set. The no-LLM construction is the same either way."""
    topic_delta: float = 0.9
    """A new event joins its most similar topic above this similarity, else opens a topic."""
    recluster_every: int = 4
    """Sessions between full re-clusterings of the topic layer."""
    extract_facts: bool = True
    """Extract REAL's temporal facts from each session."""
    extract_cues: bool = True
    """Extract MRAgent's cues and tags from each session."""
    abstract_topics: bool = True
    """MRAgent's topic abstraction (Eq. 18), part of its memory layer (with ``extract_cues``): one call per session
    gives each topic whose events changed a label and a description (LLM policy only; the no-LLM policy leaves
    topics unlabelled)."""
    memory_manager: Literal["none", "r2"] = "none"
    """r2: the Memory-R2 extractor and manager (ADD / UPDATE / DELETE / NOOP) maintain the namespace's R2 fact
    memory, session by session; the ``r2`` answering strategy reads it."""
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    """The chat model's context window in tokens: longer sessions are sent to each role in windows that fit."""
    combined_extraction: bool | None = None
    """Segment a session and extract its facts and cues in one call per window (false: one call per role, which
    small models may answer better); unset: the LOGICMAP_COMBINED_EXTRACTION setting (default true)."""
    cross_session_links: bool | None = None
    """Link each session's first event to the previous session's last (temporal_before) and, without an LLM,
    new events to similar stored ones sharing a participant: edges CompassMem's paper does not have (its
    relations are within a session, plus the fusion's links to the most similar stored event), so off in
    the paper-faithful construction; unset: the LOGICMAP_CROSS_SESSION_LINKS setting (default true)."""
    append: bool = False
    """Allow new sessions into a namespace that holds sessions none of which this input repeats (the operator
    vouches that it continues that conversation; CLI --append). Never into a namespace another conversation
    created."""
    source: SkipJsonSchema[str | None] = None
    """Who writes (Python callers only): recorded as the namespace's source when this run creates it; default
    the file's conversation (``conversation_source``), else 'api'."""
    exclusive: SkipJsonSchema[bool] = False
    """Refuse a namespace another source created (Python callers only; multi-conversation files)."""
    replace_sessions: SkipJsonSchema[tuple[str, ...]] = ()
    """Sessions this run replaces (Python callers only; ``LogicMapStore``'s replacing put): each is ingested even
    though its id is committed, and its commit also retires the old session's records (``graphs.forget
    .replacement_forget``), one generation for both."""
    purge_replaced: SkipJsonSchema[bool] = False
    """Purge what a replaced session retired (Python callers only; ``LogicMapStore(purge=True)``): its commit records
    the purge as owed, finished by the caller's ``MemoryStore.purge`` or, after a kill, by the next open or write."""
    allow_forgotten: SkipJsonSchema[bool] = False
    """Store turns a forget left a tombstone for (Python callers and the CLI's --allow-forgotten; default: they are
    left out, ``memory.records.tombstones``); the commit that stores one lifts the tombstones it matches."""
    consumes: SkipJsonSchema[tuple[tuple[str, int], ...]] = ()
    """Pending writes this run consolidates (Python callers only; ``graphs.writes.consolidate``): session id -> the
    sequence number of its write; the session's commit records it (``ChangeSet.consumes_through``), so the
    namespace's consolidated mark moves in the same generation as the records built from the write."""


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
    notes: list[str] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    generation: int = 0
    renamed: dict[str, str] = Field(
        default_factory=dict, description="dia id -> the id its turn is stored under (another session held the dia id)"
    )
    conflicts: int = Field(default=0, description="commits of this session lost to other writers, then recomputed")
    waited_s: float = Field(default=0.0, description="seconds from its first (lost) commit attempt to its commit")


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


@with_config(ConfigDict(use_attribute_docstrings=True))
class IngestInput(TypedDict, total=False):
    """What a caller supplies: a conversation file or its sessions (one of them). The namespace is the run's
    (context or config), never part of the input."""

    path: str | None
    """A LoCoMo, LongMemEval or JSONL file holding one conversation. In Python, any readable path (relative to
    the working directory). On the API server, only a file under LOGICMAP_INGEST_ROOT (relative to it); unset,
    the server reads no files and every path is refused with one message: send `sessions` instead."""
    sessions: list[Session]
    """The conversation's sessions, each {session_id, timestamp?, turns: [{dia_id, speaker, text}]}; wins over path."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class IngestOutput(TypedDict, total=False):
    """What an ingest run returns: one report per session, the fallbacks taken, what it cost."""

    namespace: str
    """The namespace the run wrote to, resolved from its context or config."""
    reports: Annotated[list[SessionReport], operator.add]
    """Per session: ingested or skipped (already committed), turns, events, merges, relations and cost."""
    fallbacks: Annotated[list[FallbackRecord], operator.add]
    """Roles that fell back to their deterministic rule, and why."""
    cost: Annotated[Cost, add_cost]
    """LLM calls and tokens the run spent."""


class IngestState(TypedDict, total=False):
    """The ingest run; ``namespace`` is the run's, resolved once by ``prepare`` (never an input)."""

    namespace: str
    path: str | None
    sessions: list[Session]
    source: str | None
    """Who writes (``conversation_source``, 'chat', 'api'): recorded as the namespace's source at its first commit."""
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
    policy: str
    """The run's policy name (``auto`` resolved), pinned by ``prepare``: every node builds its ``IngestPolicy`` from it."""
    redo_key: str | None
    """Set by a --redo-fallbacks pass (``graphs.ingest.redo``): recorded in each session it rebuilds."""
    layers: SessionLayers | None
    """The facts and cue parts of the session analyst's combined call (None: the enrichers call their roles)."""
    enrichments: Annotated[list[Enrichment], add_enrichments]
    started: float
    conflicts: int
    """Commits of the current session lost to other writers (each waited for, then recomputed)."""
    conflict_since: float
    """When the current session first tried the commit it lost (``time.monotonic()``; 0: not lost yet)."""
    fallbacks: Annotated[list[FallbackRecord], operator.add]
    reports: Annotated[list[SessionReport], operator.add]
    cost: Annotated[Cost, add_cost]


# -- helpers ----------------------------------------------------------------------------------------


def ingest_context(runtime: Runtime[IngestContext] | None) -> IngestContext:
    return run_context(runtime, IngestContext)


def ingest_policy_of(state: Mapping[str, Any], runtime: Runtime[IngestContext] | None) -> IngestPolicy:
    """The run's ``IngestPolicy`` (``agents.ingest_policy``) from its pinned policy name (the context's, ``auto``
    resolved, for a node run alone on a hand-made state), with the run's model settings and, once a session is
    current, its trace tags and metadata. The chat model is built only when the policy calls it."""
    ctx, res = ingest_context(runtime), resources_of(runtime)
    name = state.get("policy") or ctx.policy
    trace = _trace(state, ctx) if state.get("current") is not None else {}
    return ingest_policy(
        name,
        model=partial(_chat_model, res),
        method=res.method,
        budget=ContextBudget(ctx.context_tokens),
        paper_prompts=ctx.faithful,
        **trace,
    )


def _chat_model(res: Resources) -> BaseChatModel | None:
    return res.llm


def _trace(state: Mapping[str, Any], ctx: IngestContext) -> dict[str, Any]:
    session = state["current"]
    assert session is not None
    return {
        "tags": ["strategy:ingest", f"policy:{ctx.policy}"],
        "metadata": {"namespace": state["namespace"], "session_id": session.session_id},
    }


def session_conflict(namespace: str, session_id: str) -> SessionConflictError:
    return SessionConflictError(
        f"namespace {namespace!r} already holds a different session {session_id!r}; "
        "ingest this conversation into a new namespace"
    )


def advance(pending: list[Session]) -> dict[str, Any]:
    """The state update that makes the next pending session current."""
    return {"current": pending[0] if pending else None, "pending": pending[1:]}


def sessions_of(state: IngestState, source: str | None = None) -> tuple[list[Session], str]:
    """The sessions to ingest and who writes them (``source``, else a file's conversation, else 'api')."""
    sessions = list(state.get("sessions") or [])
    path = state.get("path")
    if not sessions and path:
        conversations = load_conversations(server_readable_path(path))
        if len(conversations) != 1:
            raise ValueError(f"{path} holds {len(conversations)} conversations; ingest them one per namespace")
        sessions, source = conversations[0].sessions, source or conversation_source(conversations[0])
    given = [s if isinstance(s, Session) else Session.model_validate(s) for s in sessions]
    return (check_sessions(given) if state.get("sessions") else given), source or "api"


def conversation_source(conversation: Conversation) -> str:
    """The source a conversation's namespace records: its format and id. A later export of the same
    conversation is the same source; another conversation, the chat ('chat') or a Python caller ('api') is not."""
    return f"{conversation.source_format}:{conversation.conversation_id}"


def check_namespace_source(manifest: Manifest, source: str, sessions: list[Session]) -> None:
    """Raise ``NamespaceSourceError`` when ``manifest``'s namespace exists and another source created it.

    A namespace without a recorded source (made before sources were recorded) counts as this source's
    only when every session it holds is one of ``sessions``, with the same content (an interrupted ingest
    of this very conversation); otherwise it is refused like any other source's namespace.
    """
    if manifest.generation == 0 or manifest.source == source:
        return
    if manifest.source is None:
        own = {s.session_id: s.content_hash() for s in sessions}
        if manifest.sessions and all(own.get(sid) == info.content_hash for sid, info in manifest.sessions.items()):
            return
        creator = "another source (not recorded; its sessions are not this conversation's)"
    else:
        creator = repr(manifest.source)
    raise NamespaceSourceError(
        f"namespace {manifest.namespace!r} exists and was created by {creator}, not by {source!r}; "
        "nothing was written: ingest this file under another namespace (-n)"
    )


def _is_conversation(source: str | None) -> bool:
    """A conversation's source (``<format>:<id>``), as opposed to the chat, a Python caller or none recorded."""
    return source is not None and ":" in source


def check_continuation(manifest: Manifest, source: str, sessions: list[Session], *, append: bool) -> None:
    """Raise ``ContinuationError`` unless writing ``sessions`` into ``manifest``'s namespace continues its conversation.

    Nothing to check when the namespace is new or every session is already committed (a re-run). Otherwise
    the input continues the namespace when one of its sessions is committed there (``_pending_sessions``
    already refused one with other content), or when the operator says so with ``append``; ``append`` never
    joins two conversations: a namespace another conversation created is refused even then.
    """
    stored = manifest.sessions
    if manifest.generation == 0 or not stored or all(s.session_id in stored for s in sessions):
        return
    if any(s.session_id in stored for s in sessions):
        return
    namespace, held = manifest.namespace, f"{len(stored)} sessions"
    if manifest.source is not None:
        held += f" of {manifest.source}"
    if not append:
        raise ContinuationError(
            f"namespace {namespace!r} holds {held} and this input repeats none of them, so nothing shows it "
            f"continues that conversation; nothing was written: re-run with --append (Python: append=True) if it "
            "does, else ingest it under another namespace (-n)"
        )
    if _is_conversation(manifest.source) and _is_conversation(source) and manifest.source != source:
        raise ContinuationError(
            f"namespace {namespace!r} holds {held}, another conversation than {source!r}; --append continues a "
            "conversation, it does not join two: nothing was written, ingest this one under another namespace (-n)"
        )


def _check_still_continues(state: IngestState, manifest: Manifest, ctx: IngestContext) -> None:
    """``check_continuation`` again on the generation a session is built on, for an exclusive ingest (the file
    chose the namespace): another writer may have created the namespace after ``prepare`` looked (the redo graph,
    which sets no source, appends nothing)."""
    source = state.get("source")
    if ctx.exclusive and source is not None:
        check_continuation(manifest, source, list(state.get("sessions") or []), append=ctx.append)


def foreign_sessions(manifest: Manifest, source: str, sessions: list[Session]) -> list[Session]:
    """The sessions with the ids they are stored under in ``manifest``'s namespace: their own, unless the
    namespace was created by another source, whose session ids they could reuse for other sessions (every
    LoCoMo file has an S1): then ``<id>@<hash of the source>``. Stable: the namespace's creator never changes, so a
    re-run maps to the same ids. The chat's ids are made from their messages and the store's from its keys
    (``memory.records.items.item_session_id``, which ``get``, ``delete`` and a replacing put look items up by): both never
    collide, and are kept, so store items and conversations share a namespace whoever created it."""
    if manifest.generation == 0 or manifest.source in (None, source) or source in ("chat", STORE_SOURCE):
        return sessions
    tag = stable_hash(source, length=8)
    return [s.model_copy(update={"session_id": f"{s.session_id[: MAX_SESSION_ID - 9]}@{tag}"}) for s in sessions]


def committed_as(manifest: Manifest, session: Session) -> SessionInfo | None:
    """The committed session this one is: the same id, else the same content under another id (a file exported
    again, a file ingested before its sessions had ids of their own)."""
    known = manifest.sessions.get(session.session_id)
    if known is not None:
        return known
    digest = session.content_hash()
    return next((info for info in manifest.sessions.values() if info.content_hash == digest), None)


def _pending_sessions(
    namespace: str, manifest: Manifest, sessions: list[Session], replace: tuple[str, ...] = ()
) -> list[Session]:
    """The sessions not committed yet (``committed_as``); ``SessionConflictError`` for a committed id with other
    content, and ``ValueError`` for a session naming one dia id twice (both before anything is written)."""
    pending = []
    for session in sessions:
        seen: set[str] = set()
        for raw in session.turns:
            if raw.dia_id in seen:
                raise ValueError(
                    f"session {session.session_id!r} holds the dia id {raw.dia_id!r} twice; nothing was written"
                )
            seen.add(raw.dia_id)
        known = None if session.session_id in replace else committed_as(manifest, session)
        if known is None:
            pending.append(session)
        elif known.content_hash != session.content_hash():
            raise session_conflict(namespace, session.session_id)
    return pending


def file_namespaces(
    conversations: list[Conversation], namespace: str, store: StoragePort, *, append: bool = False
) -> list[tuple[Conversation, str]]:
    """Where each conversation of a file goes, checked for the whole file before anything is written.

    One conversation goes to ``namespace``, which the operator named: its sessions are added to what the
    namespace holds (a session another source's id would reuse is stored under its own, ``foreign_sessions``);
    only a committed session of the same conversation whose content changed is refused (``SessionConflictError``:
    an edit would otherwise be lost or stored twice). Several go to ``<namespace>.<conversation id>`` each: there
    the file chose the namespace, so a namespace another source created is refused (``NamespaceSourceError``),
    as are new sessions for a namespace that holds none of the file's sessions, unless ``append``
    (``ContinuationError``, see ``check_continuation``): a file cannot pour itself into another tenant's memory.
    """
    many = len(conversations) > 1
    targets = [
        (conv, conversation_namespace(namespace, conv.conversation_id) if many else validate_namespace(namespace))
        for conv in conversations
    ]
    for conv, target in targets:
        manifest, source = store.manifest(target), conversation_source(conv)
        if many:
            check_namespace_source(manifest, source, conv.sessions)
            _pending_sessions(target, manifest, conv.sessions)
            check_continuation(manifest, source, conv.sessions, append=append)
        else:
            _pending_sessions(target, manifest, foreign_sessions(manifest, source, conv.sessions))
    return targets


def _turn_ids(session: Session, stored: dict[str, Turn]) -> list[str]:
    """The id each turn of the session is stored under: its dia id, or a distinct one when a stored turn of
    another session holds it (a stored turn is never overwritten)."""
    own: dict[str, None] = dict.fromkeys(raw.dia_id for raw in session.turns)
    taken: ChainMap[str, Any] = ChainMap(stored, own)
    ids = []
    for raw in session.turns:
        held = stored.get(raw.dia_id)
        if held is None or held.session_id == session.session_id:
            ids.append(raw.dia_id)
            continue
        ids.append(distinct_turn_id(raw.dia_id, session.session_id, taken))
        own[ids[-1]] = None
    return ids


def _session_events(
    segmentation: Any, namespace: str, session: Session, turns: list[Turn], order_base: int, source: str
) -> list[Event]:
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


def _memory_turns(turns: list[Turn]) -> list[Turn]:
    """The turns memory is derived from: all of a conversation file's; of a chat, those ``Turn.evidence`` allows."""
    return [t for t in turns if t.evidence]


def _next_order(snapshot: NamespaceSnapshot) -> int:
    return 1 + max((e.order for e in snapshot.events.values()), default=-1)


def _next_position(snapshot: NamespaceSnapshot) -> int:
    """After the last turn's position (not the count of turns: after a forget that would repeat a kept turn's)."""
    return 1 + max((t.position for t in snapshot.turns.values()), default=-1)


@dataclass
class _Fusion:
    """What fusing a session's events with stored ones decided."""

    new_events: dict[str, Event]
    new_vectors: dict[str, Any]
    updated: dict[str, Event] = field(default_factory=dict)
    redirect: dict[str, str] = field(default_factory=dict)  # merged new event id -> stored event id
    extra: list[Relation] = field(default_factory=list)
    linked: int = 0


def _merge_candidates(
    events: list[Event], vectors: np.ndarray, event_graph: EventGraph, threshold: float
) -> list[CandidatePair]:
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


def fusion_case(verdict: Any, similarity: float, threshold: float | None) -> Literal["merge", "link", "new"]:
    """The paper's three cases for a new event and e*: merge, an edge, or a new node. ``threshold`` None: the
    default's (every judged pair is at the threshold or above; the verdict decides). Else ``faithful``'s: a merge
    also needs the similarity to exceed the threshold (App. B), a same-event verdict below it becomes an edge."""
    if verdict.same_event and (threshold is None or similarity > threshold):
        return "merge"
    if verdict.has_overlap or verdict.same_event:
        return "link"
    return "new"


def _apply_verdicts(
    fusion: _Fusion,
    verdicts: list[Any],
    pairs: list[CandidatePair],
    event_graph: EventGraph,
    namespace: str,
    session_id: str,
    threshold: float | None = None,
) -> None:
    """Same event -> merge into the stored one; overlap -> an edge to it; else the new event stays
    (``fusion_case``; ``threshold``: ``faithful``'s merge threshold)."""
    for verdict, pair in zip(verdicts, pairs):
        new = fusion.new_events[pair.new_id]
        case = fusion_case(verdict, pair.similarity, threshold)
        if case == "merge":
            stored = fusion.updated.get(pair.stored_id) or event_graph.events[pair.stored_id].model_copy(deep=True)
            _merge_into(stored, new, session_id)
            fusion.updated[stored.id] = stored
            fusion.redirect[new.id] = stored.id
            del fusion.new_events[new.id]
        elif case == "link":
            label = (verdict.relation_type or "elaboration").strip().lower().replace(" ", "_") or "elaboration"
            fusion.extra.append(
                Relation(
                    id=relation_id(new.id, label, pair.stored_id),
                    namespace=namespace,
                    source=new.id,
                    target=pair.stored_id,
                    label=label,
                    turn_ids=new.turn_ids[:2],
                    session_id=session_id,
                )
            )
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


def _link_to_previous(
    relations: dict[str, Relation], kept: list[Event], event_graph: EventGraph, namespace: str, session_id: str
) -> None:
    """Continuity: the previous session's last event precedes this session's first event."""
    if not kept or not event_graph.ids:
        return
    last = max(event_graph.events.values(), key=lambda e: (e.order, e.id))
    rid = relation_id(last.id, "temporal_before", kept[0].id)
    relations.setdefault(
        rid,
        Relation(
            id=rid,
            namespace=namespace,
            source=last.id,
            target=kept[0].id,
            label="temporal_before",
            turn_ids=[*last.turn_ids[-1:], *kept[0].turn_ids[:1]],
            session_id=session_id,
        ),
    )


def _fused_change(
    state: IngestState, snapshot: NamespaceSnapshot, fusion: _Fusion, relations: dict[str, Relation], res: Resources
) -> ChangeSet:
    """The session's change set: its turns, its new and updated events (with vectors), its relations."""
    now = datetime.now(UTC)
    written = [*fusion.new_events.values(), *fusion.updated.values()]
    for e in written:
        e.created_at = e.created_at or now
    written_vectors = [fusion.new_vectors[e.id] for e in fusion.new_events.values()]
    if fusion.updated:
        written_vectors += list(res.embeddings.embed_documents([e.summary for e in fusion.updated.values()]))
    turn_vectors = res.embeddings.embed_documents([t.render() for t in state["turns"]])
    # The base is the generation the session's turn positions, ids and event orders were numbered against
    # (by segment or rebase), not this later read: if another writer committed in between, the commit must
    # lose and rebase, or two sessions would share positions.
    return ChangeSet(
        namespace=state["namespace"],
        base_generation=state.get("base_generation", snapshot.generation),
        turns=state["turns"],
        turn_vectors=[list(map(float, v)) for v in turn_vectors],
        events=written,
        event_vectors=[list(map(float, v)) for v in written_vectors],
        relations=list(relations.values()),
    )


def _masked(snapshot: NamespaceSnapshot, retire: dict[str, list[str]]) -> NamespaceSnapshot:
    """The snapshot without the facts, cues and tags a change retires (a rebuilt session's old ones)."""
    kinds = [k for k in ("facts", "cues", "tags") if retire.get(k)]
    if not kinds:
        return snapshot
    updates: dict[str, Any] = {}
    for kind in kinds:
        gone = set(retire[kind])
        updates[kind] = {k: v for k, v in getattr(snapshot, kind).items() if k not in gone}
        if kind in ("facts", "cues"):
            vectors = getattr(snapshot, f"{kind[:-1]}_vectors")
            updates[f"{kind[:-1]}_vectors"] = {k: v for k, v in vectors.items() if k not in gone}
    return dataclasses.replace(snapshot, **updates, _derived={})


def _enrich(
    kind: str, enrich: Callable[[EnrichRequest], Enrichment], state: IngestState, runtime: Runtime[IngestContext]
) -> dict[str, Any]:
    """Run an enricher (``graphs.ingest.facts`` or ``graphs.ingest.cues``); commit adds its records to the change.

    Facts and cues run as parallel branches, so each returns its own ``Enrichment`` (merged by a reducer).
    """
    ctx, res = ingest_context(runtime), resources_of(runtime)
    change, session = state["change"], state["current"]
    assert change is not None and session is not None
    if not _memory_turns(state["turns"]):  # a chat part of questions and untrusted replies: nothing to derive
        return {"enrichments": [Enrichment(kind=kind)]}
    policy = ingest_policy_of(state, runtime)
    request = EnrichRequest(
        namespace=state["namespace"],
        session=session,
        turns=_memory_turns(state["turns"]),
        events=list(change.events),
        snapshot=_masked(res.store.snapshot(state["namespace"]), change.retire),
        policy=policy.name,
        llm=policy.llm,
        embeddings=res.embeddings,
        method=res.method,
        budget=ContextBudget(ctx.context_tokens),
        layers=state.get("layers"),
        paper_prompts=ctx.faithful,
        **_trace(state, ctx),
    )
    return {"enrichments": [enrich(request).model_copy(update={"kind": kind})]}


def _with_enrichments(state: IngestState) -> tuple[ChangeSet, Cost, list[FallbackRecord], list[str]]:
    """The session's change set, cost, fallbacks and notes with the enrichers' results, in a fixed order."""
    change = state["change"]
    assert change is not None
    cost = state.get("session_cost") or Cost()
    fallbacks = list(state.get("session_fallbacks", []))
    notes = list(state.get("session_stats", {}).get("notes", []))
    for enrichment in sorted(state.get("enrichments") or [], key=lambda e: ENRICHERS.index(e.kind)):
        change = apply_enrichment(change, enrichment)
        cost, fallbacks, notes = (
            cost + enrichment.cost,
            [*fallbacks, *enrichment.fallbacks],
            [*notes, *enrichment.notes],
        )
    return change, cost, fallbacks, notes


def _session_fallbacks(fallbacks: list[FallbackRecord]) -> list[SessionFallback]:
    """What the manifest keeps of a session's fallbacks: one entry per role, its first errors, how many calls."""
    by_role: dict[str, SessionFallback] = {}
    for record in fallbacks:
        kept = by_role.get(record.role)
        if kept is None:
            by_role[record.role] = SessionFallback(
                role=record.role, reason=record.reason, errors=[e[:500] for e in record.errors[:2]], calls=1
            )
        else:
            kept.calls += 1
    return list(by_role.values())


def _session_info(
    change: ChangeSet, session: Session, stats: dict[str, Any], fallbacks: list[FallbackRecord], notes: list[str]
) -> SessionInfo:
    return SessionInfo(
        session_id=session.session_id,
        content_hash=session.content_hash(),
        generation=0,
        policy=stats.get("policy", "llm"),
        events=sum(1 for e in change.events if e.session_id == session.session_id),
        relations=len(change.relations),
        fallbacks=_session_fallbacks(fallbacks),
        notes=notes[:20],
        memory_manager=None,  # set by commit for a session the Memory-R2 manager maintained
        redone_with=None,  # set by commit in a --redo-fallbacks pass
    )


def _session_report(
    change: ChangeSet,
    session: Session,
    stats: dict[str, Any],
    fallbacks: list[FallbackRecord],
    cost: Cost,
    generation: int,
    notes: list[str],
) -> SessionReport:
    return SessionReport(
        session_id=session.session_id,
        policy=stats.get("policy", "llm"),
        turns=int(stats.get("turns", len(change.turns))),
        events=change.session.events if change.session else 0,
        merged=int(stats.get("merged", 0)),
        linked=int(stats.get("linked", 0)),
        relations=len(change.relations),
        topics_reclustered=bool(stats.get("topics_reclustered")),
        fallbacks=[f"{f.role}: {f.reason}" for f in fallbacks],
        notes=notes,
        cost=cost,
        generation=generation,
        renamed={t.source_dia_id: t.dia_id for t in change.turns if t.source_dia_id},
    )


def _combined(ctx: IngestContext, res: Resources) -> bool:
    """Whether the session analyst's combined call replaces the segmenter's, facts' and cues' own calls."""
    # faithful: each role's own call (the papers' prompts), unless the run asks for the combined one
    default = False if ctx.faithful else res.settings.combined_extraction
    wanted = ctx.combined_extraction if ctx.combined_extraction is not None else default
    return bool(wanted) and (ctx.extract_facts or ctx.extract_cues)


# -- nodes ------------------------------------------------------------------------------------------


def prepare(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Resolve the run's namespace, skip sessions already committed, refuse a different session under a known id
    (and, for an exclusive ingest, a namespace another source created): all before anything is written."""
    res = resources_of(runtime)
    namespace = run_namespace(ingest_context(runtime).namespace)
    manifest = res.store.manifest(namespace)
    ctx = ingest_context(runtime)
    sessions, source = sessions_of(state, ctx.source)
    if ctx.exclusive:  # the file chose the namespace (one of a many-conversation file's)
        check_namespace_source(manifest, source, sessions)
        check_continuation(manifest, source, sessions, append=ctx.append)
    else:  # the caller named the namespace (its own tenant on the server): the sessions are added to it
        sessions = foreign_sessions(manifest, source, sessions)
    pending = _pending_sessions(namespace, manifest, sessions, ctx.replace_sessions)
    reports = [
        SessionReport(session_id=s.session_id, skipped=True, policy=known.policy, generation=known.generation)
        for s in sessions
        if s not in pending and (known := committed_as(manifest, s)) is not None
    ]
    forgotten = _tombstones(res, namespace, manifest, ctx, pending)
    reports += [
        SessionReport(
            session_id=s.session_id, skipped=True, policy=ctx.policy, notes=[f"every turn left out: {FORGOTTEN_NOTE}"]
        )
        for s in pending
        if not forgotten.admitted(s).turns
    ]
    pending = [s for s in pending if forgotten.admitted(s).turns]
    update: dict[str, Any] = {
        "namespace": namespace,
        "reports": reports,
        "source": source,
        "sessions": sessions,
        "policy": ctx.policy,
        **advance(pending),
    }
    unavailable = ingest_policy_of(update, runtime).run_fallbacks() if pending else []
    if unavailable:
        update["fallbacks"] = unavailable
    return update


def segment(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Split the current session into events (LLM segmenter or session analyst, or change points of turn embeddings)."""
    ctx, res = ingest_context(runtime), resources_of(runtime)
    namespace, session = state["namespace"], state["current"]
    assert session is not None
    started = time.perf_counter()
    snapshot = res.store.snapshot(namespace)
    _check_still_continues(state, snapshot.manifest, ctx)
    admitted = session if ctx.allow_forgotten else Forgotten.of(snapshot.tombstones).admitted(session)
    turns = session_turns(namespace, admitted, _next_position(snapshot), _turn_ids(admitted, snapshot.turns))
    # Events, relations, facts and cues are made from the turns recall may return (``Turn.evidence``): a user's
    # question and an untrusted model reply are stored as turns, never as memory derived from them.
    memory = _memory_turns(turns)
    vectors = np.asarray(res.embeddings.embed_documents([t.render() for t in memory]), dtype=np.float32)
    policy = ingest_policy_of(state, runtime)
    outcome, layers = policy.segment(
        memory, vectors, session.timestamp, combined=_combined(ctx, res), facts=ctx.extract_facts, cues=ctx.extract_cues
    )
    segmentation, cost, notes = outcome.output, outcome.cost, outcome.notes
    fallbacks = list(outcome.fallbacks)
    events = _session_events(
        segmentation, namespace, session, memory, _next_order(snapshot), "fallback" if fallbacks else policy.name
    )
    notes = [*notes, *time_phrase_notes(turns, session.timestamp)]
    if len(admitted.turns) < len(session.turns):
        notes.append(f"{len(session.turns) - len(admitted.turns)} turns left out: {FORGOTTEN_NOTE}")
    return {
        "turns": turns,
        "events": events,
        "base_generation": snapshot.generation,
        "started": started,
        "session_cost": cost,
        "session_fallbacks": fallbacks,
        "session_stats": {"policy": policy.name, "notes": notes},
        "layers": layers,
        "conflicts": 0,
    }


def relate(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Logical relations between the session's events (LLM extractor, or a temporal chain)."""
    session = state["current"]
    assert session is not None
    events, turns = state["events"], _memory_turns(state["turns"])
    keys = [f"E{i + 1}" for i in range(len(events))]
    by_key = dict(zip(keys, events))
    fallbacks = list(state.get("session_fallbacks", []))
    stats = dict(state.get("session_stats", {}))
    outcome = ingest_policy_of(state, runtime).relate([e.summary for e in events], [e.turn_ids for e in events], turns)
    extracted, cost = outcome.output, (state.get("session_cost") or Cost()) + outcome.cost
    fallbacks.extend(outcome.fallbacks)
    stats["notes"] = [*stats.get("notes", []), *outcome.notes]
    relations: dict[str, Relation] = {}
    for rel in extracted.relations:
        src, tgt = by_key[rel.source].id, by_key[rel.target].id
        rid = relation_id(src, rel.label, tgt)
        relations[rid] = Relation(
            id=rid,
            namespace=state["namespace"],
            source=src,
            target=tgt,
            label=rel.label,
            turn_ids=rel.turn_ids,
            session_id=session.session_id,
        )
    return {
        "relations": list(relations.values()),
        "session_cost": cost,
        "session_fallbacks": fallbacks,
        "session_stats": stats,
    }


def fuse(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Fuse the session's events with stored ones (coreference judge above the merge threshold) into a change set."""
    ctx, res = ingest_context(runtime), resources_of(runtime)
    namespace, session = state["namespace"], state["current"]
    assert session is not None
    snapshot = res.store.snapshot(namespace)
    event_graph = EventGraph.of(snapshot)
    events = [e.model_copy(deep=True) for e in state["events"]]
    vectors = np.asarray(res.embeddings.embed_documents([e.summary for e in events]), dtype=np.float32)
    # faithful: every new event with its e* (the paper compares each with its most similar stored event)
    pairs = _merge_candidates(events, vectors, event_graph, -np.inf if ctx.faithful else ctx.merge_threshold)
    if session.session_id in ctx.replace_sessions:  # never fuse into the events the session replaces
        pairs = [p for p in pairs if not _replaced_event(snapshot, p.stored_id, session.session_id)]
    policy = ingest_policy_of(state, runtime)
    fallbacks = list(state.get("session_fallbacks", []))
    cost = state.get("session_cost") or Cost()
    verdicts: list[CorefVerdict] = []
    if pairs:
        outcome = policy.judge_paper(pairs, ctx.merge_threshold) if ctx.faithful else policy.judge(pairs)
        verdicts, cost = outcome.output.verdicts, cost + outcome.cost
        if outcome.fallback:
            fallbacks.append(outcome.fallback)
    fusion = _Fusion(new_events={e.id: e for e in events}, new_vectors={e.id: v for e, v in zip(events, vectors)})
    _apply_verdicts(
        fusion,
        verdicts,
        pairs,
        event_graph,
        namespace,
        session.session_id,
        ctx.merge_threshold if ctx.faithful else None,
    )
    relations = _redirected_relations([*state.get("relations", []), *fusion.extra], fusion.redirect)
    kept = [e for e in events if e.id in fusion.new_events]
    links = ctx.cross_session_links if ctx.cross_session_links is not None else res.settings.cross_session_links
    if links:  # the project's cross-session edges (an extension of the paper's construction)
        _link_to_previous(relations, kept, event_graph, namespace, session.session_id)
        for rel in policy.participant_links(kept, fusion.new_vectors, event_graph, namespace, session.session_id):
            relations.setdefault(rel.id, rel)
    change = _fused_change(state, snapshot, fusion, relations, res)
    stats = {**state.get("session_stats", {}), "merged": len(fusion.redirect), "linked": fusion.linked}
    return {
        "change": change,
        "session_cost": cost,
        "session_fallbacks": fallbacks,
        "session_stats": stats,
        "enrichments": None,
    }


def _replaced_event(snapshot: NamespaceSnapshot, event_id: str, session_id: str) -> bool:
    event = snapshot.events.get(event_id)
    return event is not None and any(
        (turn := snapshot.turns.get(t)) is not None and turn.session_id == session_id for t in event.turn_ids
    )


def _with_replaced(change: ChangeSet, res: Resources, session_id: str, purge: bool = False) -> ChangeSet:
    """The change also retiring the stored session it replaces, computed on the snapshot it commits on."""
    from logicmap.graphs.writes.replacement import replacement_forget

    snap = res.store.snapshot(change.namespace)
    if snap.generation != change.base_generation:
        return change  # the commit loses (GenerationConflict) and is recomputed on the new state
    forgotten = replacement_forget(res, snap, [session_id], purge=purge)
    return change if forgotten is None else with_replacement(change, forgotten, snap)


def topics(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Topic evolution: new events join the nearest topic or open one; a full re-clustering every few steps."""
    ctx, res = ingest_context(runtime), resources_of(runtime)
    change = state["change"]
    assert change is not None
    snapshot = res.store.snapshot(state["namespace"])
    vectors = dict(snapshot.event_vectors)
    for event, vector in zip(change.events, change.event_vectors):
        vectors[event.id] = np.asarray(vector, dtype=np.float32)
    new_ids = [e.id for e in change.events if e.id not in snapshot.events]
    layer = TopicLayer(delta=ctx.topic_delta, recluster_every=ctx.recluster_every)
    update = layer.update(state["namespace"], snapshot.topics, vectors, new_ids, snapshot.manifest.topic_steps)
    changed = carry_topic_labels(snapshot.topics, update.topics)
    stats = {**state.get("session_stats", {}), "topics_reclustered": update.reclustered}
    out: dict[str, Any] = {"session_stats": stats}
    events = ChainMap({e.id: e for e in change.events}, snapshot.events)
    out.update(relabel_topics(state, runtime, changed, events, vectors))
    out["change"] = change.model_copy(
        update={
            "topics": update.topics,
            "topic_steps": update.steps,
            "retire": {**change.retire, "topics": update.retired},
        }
    )
    return out


def carry_topic_labels(before: dict[str, Topic], after: list[Topic]) -> list[Topic]:
    """Keep the abstraction of each topic whose members did not change (a re-clustering rebuilds topics without
    it); return the topics whose members changed (new topics included), which the topic abstractor relabels."""
    changed = []
    for topic in after:
        old = before.get(topic.id)
        if old is not None and sorted(old.members) == sorted(topic.members):
            topic.label, topic.description, topic.label_source = old.label, old.description, old.label_source
        else:
            changed.append(topic)
    return changed


def relabel_topics(
    state: IngestState,
    runtime: Runtime[IngestContext],
    changed: list[Topic],
    events: Mapping[str, Event],
    vectors: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    """MRAgent's topic abstraction (with the cue layer and ``abstract_topics`` on): the run's policy labels the
    ``changed`` topics in place, from their events' summaries, most central first; the session's cost and
    fallbacks with its call (an empty update when the policy leaves topics unlabelled or nothing changed).
    Shared by ingest's ``topics`` node and the redo graph's ``replace``, so both label topics alike."""
    ctx = ingest_context(runtime)
    if not (ctx.abstract_topics and ctx.extract_cues and changed):
        return {}
    outcome = ingest_policy_of(state, runtime).label_topics(changed, partial(_clusters, changed, events, vectors))
    if outcome is None:
        return {}
    out: dict[str, Any] = {"session_cost": (state.get("session_cost") or Cost()) + outcome.cost}
    if outcome.fallback:
        out["session_fallbacks"] = [*state.get("session_fallbacks", []), outcome.fallback]
    return out


def _clusters(
    topics: list[Topic], events: Mapping[str, Event], vectors: Mapping[str, np.ndarray]
) -> list[TopicCluster]:
    return [_cluster(topic, events, vectors) for topic in topics]


def _cluster(topic: Topic, events: Mapping[str, Event], vectors: Mapping[str, np.ndarray]) -> TopicCluster:
    """The topic's event summaries, the most central first (cosine to the centroid; ties by event id)."""
    centroid = np.asarray(topic.centroid, dtype=np.float32)
    centroid = centroid / (float(np.linalg.norm(centroid)) or 1.0)
    members = [m for m in topic.members if m in events and m in vectors]
    rows = np.asarray([vectors[m] for m in members], dtype=np.float32).reshape(len(members), -1)
    norms = np.linalg.norm(rows, axis=1)
    closeness = (rows @ centroid) / np.where(norms > 0, norms, 1.0) if members else np.zeros(0)
    ranked = sorted(range(len(members)), key=lambda i: (-float(closeness[i]), members[i]))
    return TopicCluster(topic_id=topic.id, summaries=tuple(events[members[i]].summary for i in ranked))


def facts(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """REAL's temporal facts for the session (graphs/ingest/facts.py)."""
    if not ingest_context(runtime).extract_facts:
        return {}
    return _enrich("facts", ingest_facts.enrich, state, runtime)


def cues(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """MRAgent's cue-tag records for the session (graphs/ingest/cues.py)."""
    if not ingest_context(runtime).extract_cues:
        return {}
    return _enrich("cues", ingest_cues.enrich, state, runtime)


def r2(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Memory-R2's managed fact memory for the session (graphs/ingest/r2.py), only with that memory manager."""
    if ingest_context(runtime).memory_manager != "r2":
        return {}
    return _enrich("r2", ingest_r2.enrich, state, runtime)


def commit(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """Write the session's change set atomically, then move on to the next session (or count a conflict)."""
    session = state["current"]
    assert session is not None
    stats = state.get("session_stats", {})
    change, session_cost, fallbacks, notes = _with_enrichments(state)
    info = _session_info(change, session, stats, fallbacks, notes)
    if any(e.kind == "r2" for e in state.get("enrichments") or []):
        info.memory_manager = "r2"
    info.redone_with = state.get("redo_key")
    change = change.model_copy(update={"session": info, "source": state.get("source")})
    res = resources_of(runtime)
    if session.session_id in ingest_context(runtime).replace_sessions:
        change = _with_replaced(change, res, session.session_id, ingest_context(runtime).purge_replaced)
    if ingest_context(runtime).allow_forgotten:
        change = _lifting_tombstones(change, res)
    consumed = dict(ingest_context(runtime).consumes).get(session.session_id)
    if consumed is not None:
        change = change.model_copy(update={"consumes_through": consumed})
    tried = time.monotonic()
    try:
        manifest = res.store.commit(change)
    except GenerationConflict:
        return lost_commit(state, res, tried)
    cost = session_cost.model_copy()
    cost.wall_time_s = time.perf_counter() - state.get("started", time.perf_counter())
    report = _session_report(change, session, stats, fallbacks, cost, manifest.generation, notes)
    report = report.model_copy(update=_contention(state))
    return {
        "reports": [report],
        "fallbacks": fallbacks,
        "cost": cost,
        **advance(list(state.get("pending", []))),
        "change": None,
        "conflicts": 0,
        "conflict_since": 0.0,
    }


def _tombstones(
    res: Resources, namespace: str, manifest: Manifest, ctx: IngestContext, pending: list[Session]
) -> Forgotten:
    """The namespace's tombstones an ingest leaves turns out for (none with ``allow_forgotten``)."""
    if ctx.allow_forgotten or manifest.generation == 0 or not pending:
        return Forgotten()
    return Forgotten.of(res.store.snapshot(namespace).tombstones)


def _lifting_tombstones(change: ChangeSet, res: Resources) -> ChangeSet:
    """A deliberate re-add (``allow_forgotten``) retires, in its own commit, the tombstones its turns match: the
    namespace (and a later backup of it) then holds the turn without a tombstone refusing it."""
    if change.base_generation == 0:
        return change
    lifted = Forgotten.of(res.store.snapshot(change.namespace).tombstones).lifted(change.turns)
    if not lifted:
        return change
    return change.model_copy(update={"retire": {**change.retire, "tombstones": lifted}})


def lost_commit(state: IngestState, res: Resources, tried: float) -> dict[str, Any]:
    """Another writer committed first (the commit was tried at ``tried``, monotonic): wait for the namespace
    (full-jitter backoff within the run's deadline, ``memory.runtime.contention``), then recompute on its new state.
    Shared by ingest and ``--redo-fallbacks``."""
    conflicts = state.get("conflicts", 0) + 1
    since = state.get("conflict_since") or tried
    if conflicts > MAX_COMMIT_CONFLICTS:
        raise NamespaceBusyError(state["namespace"], conflicts, time.monotonic() - since)
    wait_for_namespace(state["namespace"], conflicts, since, bound_s=res.settings.run_deadline_s)
    return {"conflicts": conflicts, "conflict_since": since, "change": None}


def _contention(state: IngestState) -> dict[str, Any]:
    """A committed session's ``conflicts`` and ``waited_s`` for its report."""
    since = state.get("conflict_since") or 0.0
    return {"conflicts": state.get("conflicts", 0), "waited_s": time.monotonic() - since if since else 0.0}


def rebase(state: IngestState, runtime: Runtime[IngestContext]) -> dict[str, Any]:
    """After a GenerationConflict: skip the session if another writer committed it meanwhile, else
    renumber its turns and events after what that writer added, then fuse again."""
    namespace, session = state["namespace"], state["current"]
    assert session is not None
    snapshot = resources_of(runtime).store.snapshot(namespace)
    known = (
        None
        if session.session_id in ingest_context(runtime).replace_sessions
        else committed_as(snapshot.manifest, session)
    )
    if known is not None:
        if known.content_hash != session.content_hash():
            raise session_conflict(namespace, session.session_id)
        report = SessionReport(
            session_id=session.session_id,
            skipped=True,
            policy=known.policy,
            generation=known.generation,
            **_contention(state),
        )
        return {
            "reports": [report],
            **advance(list(state.get("pending", []))),
            "change": None,
            "conflicts": 0,
            "conflict_since": 0.0,
        }
    _check_still_continues(state, snapshot.manifest, ingest_context(runtime))
    offset, order_base = _next_position(snapshot), _next_order(snapshot)
    # The other writer may have stored turns under ids this session took: choose its ids again.
    said = {t.source_dia_id or t.dia_id for t in state["turns"]}  # the turns segment admitted (tombstones)
    session = session.model_copy(update={"turns": [raw for raw in session.turns if raw.dia_id in said]})
    turns = session_turns(namespace, session, offset, _turn_ids(session, snapshot.turns))
    moved = {old.dia_id: new.dia_id for old, new in zip(state["turns"], turns) if old.dia_id != new.dia_id}
    return {
        "turns": turns,
        "events": [
            e.model_copy(update={"order": order_base + i, "turn_ids": [moved.get(t, t) for t in e.turn_ids]})
            for i, e in enumerate(state["events"])
        ],
        "relations": [
            r.model_copy(update={"turn_ids": [moved.get(t, t) for t in r.turn_ids]}) for r in state.get("relations", [])
        ],
        "layers": layers.renamed(moved) if (layers := state.get("layers")) is not None else None,
        "base_generation": snapshot.generation,
    }


# -- routers ----------------------------------------------------------------------------------------


def route_after_prepare(state: IngestState) -> Literal["segment", "__end__"]:
    return "segment" if state.get("current") is not None else "__end__"


def route_after_commit(state: IngestState) -> Literal["rebase", "segment", "__end__"]:
    if state.get("change") is None and state.get("conflicts", 0) > 0:
        return "rebase"
    return "segment" if state.get("current") is not None else "__end__"


def route_after_rebase(state: IngestState) -> Literal["fuse", "segment", "__end__"]:
    if state.get("conflicts", 0) > 0:
        return "fuse"
    return "segment" if state.get("current") is not None else "__end__"


# -- the graph --------------------------------------------------------------------------------------
