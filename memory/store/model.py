"""What the store reads and writes: a namespace's ``Manifest``, a commit's ``ChangeSet``, a ``NamespaceSnapshot``.

The record fields of ``ChangeSet`` and ``NamespaceSnapshot`` are those of ``memory.records.kinds.RECORD_KINDS`` (a test
checks that every one is registered).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, NamedTuple, TypeVar, cast

import numpy as np
from pydantic import BaseModel, Field, PlainSerializer, PlainValidator

from logicmap.memory.indexes.snapshot_file import VectorTable
from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.records.r2 import FactRecord
from logicmap.memory.records.records import Cue, Event, Fact, Relation, SessionInfo, Tag, Topic, Turn
from logicmap.memory.records.tombstones import Tombstone
from logicmap.settings import LogicMapSettings

__all__ = [
    "ChangeSet",
    "ForgetAudit",
    "Manifest",
    "NamespaceSnapshot",
    "PendingHead",
    "PendingWrite",
    "PurgeReport",
    "VectorMatrix",
    "embedder_identity",
    "ordered",
    "vector_matrix",
]

T = TypeVar("T")


def embedder_identity(settings: LogicMapSettings) -> str:
    """What a namespace's vectors were made with, as recorded in its manifest."""
    if settings.embedding_provider == "hashing":
        return "hashing"
    if settings.embedding_provider == "minilm":
        return "minilm:all-MiniLM-L6-v2"  # the offline model is fixed (embedding_model names OpenAI's)
    return f"{settings.embedding_provider}:{settings.embedding_model}"


class ForgetAudit(BaseModel):
    """One forget, as the namespace remembers it: what kinds and how many records went, when, asked from where.

    Never the text, never the ids of what was forgotten."""

    at: datetime
    surface: str = Field(description="who asked: python, cli, tool, api")
    generation: int = Field(description="the generation the forget committed")
    removed: dict[str, int] = Field(default_factory=dict, description="kind -> records retired (or rewritten)")
    sessions_emptied: int = 0
    purged: bool = Field(default=False, description="whether the retired versions were physically removed")
    notes: list[str] = Field(default_factory=list, description="what the forget had to adapt (rebuilt events)")


class Manifest(BaseModel):
    """The committed state of a namespace: its generation and its sessions."""

    namespace: str
    generation: int = 0
    sessions: dict[str, SessionInfo] = Field(default_factory=dict)
    topic_steps: int = 0
    updated_at: datetime | None = None
    void: list[int] = Field(
        default_factory=list,
        description="generation numbers claimed by writers that lost their lease: their versions are never visible",
    )
    embedder: str | None = Field(default=None, description="the embedder whose vectors this namespace holds")
    source: str | None = Field(
        default=None,
        description="who created the namespace: a conversation ('locomo:<sample id>'), 'chat', 'api'; None for "
        "a namespace older than this field until a writer that names its source commits to it",
    )
    forgets: list[ForgetAudit] = Field(default_factory=list, description="the audit record of every forget")
    purge_requested: int = Field(
        default=0,
        description="the generation of the last commit that asked for a purge (a forget, delete, replace or update "
        "with purge): a purge that completes at this generation or later finishes it (``memory.store.purge``)",
    )
    consolidated_through: int = Field(
        default=0,
        exclude_if=lambda v: not v,
        description="the pending-write sequence number this namespace has consolidated through "
        "(``memory.store.live``): a pending write at or below it is in the committed records, and is never "
        "shown or consolidated again",
    )


class ChangeSet(BaseModel):
    """Everything one commit writes. Records listed here replace their earlier versions."""

    namespace: str
    base_generation: int
    session: SessionInfo | None = None
    turns: list[Turn] = Field(default_factory=list)
    turn_vectors: list[list[float]] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    event_vectors: list[list[float]] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)
    topics: list[Topic] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    fact_vectors: list[list[float]] = Field(default_factory=list)
    cues: list[Cue] = Field(default_factory=list)
    cue_vectors: list[list[float]] = Field(default_factory=list)
    tags: list[Tag] = Field(default_factory=list)
    r2_facts: list[FactRecord] = Field(default_factory=list, description="Memory-R2 fact records the manager wrote")
    r2_fact_vectors: list[list[float]] = Field(default_factory=list)
    tombstones: list[Tombstone] = Field(default_factory=list, description="what a forget leaves (memory.tombstones)")
    retire: dict[str, list[str]] = Field(default_factory=dict, description="kind -> ids to retire")
    topic_steps: int | None = None
    embedder: str | None = Field(
        default=None, description="identity of the embedder of the vectors (default: the store's settings)"
    )
    source: str | None = Field(
        default=None, description="who writes it; recorded as the namespace's source when it has none yet"
    )
    forget: ForgetAudit | None = Field(default=None, description="a forget's audit record (memory.forgetting)")
    drop_sessions: list[str] = Field(default_factory=list, description="sessions a forget emptied of turns")
    consumes_through: int | None = Field(
        default=None, description="the pending write this commit consolidates (``Manifest.consolidated_through``)"
    )
    sessions: list[SessionInfo] = Field(
        default_factory=list, description="more sessions this commit writes (a staged batch: ``memory.store.staged``)"
    )
    forgets: list[ForgetAudit] = Field(default_factory=list, description="more forgets' audit records (a staged batch)")


def vector_matrix(value: Any) -> np.ndarray:
    """Vectors as one float32 matrix, a row per vector (an empty list: a 0 x 0 matrix). A list of 384 Python floats
    takes 12 kB, its float32 row 1.5 kB: 100,000 pending chat messages held 1.2 GB as lists (issue 37, item 11).
    Every local embedder's floats are float32 values, so the row holds them exactly."""
    matrix = np.asarray(value, dtype=np.float32)
    if matrix.size == 0:
        return np.zeros((0, 0), dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"vectors must be a matrix (one row per turn), not an array of {matrix.ndim} dimensions")
    return matrix


VectorMatrix = Annotated[
    np.ndarray, PlainValidator(vector_matrix), PlainSerializer(lambda m: m.tolist(), return_type=list[list[float]])
]


class PendingWrite(BaseModel):
    """A fast write (``LogicMapStore.put``, ``add_messages``): one session's turns and their vectors, durable in the
    store's pending log and shown by the live view until the consolidator commits them into the event graph
    (``memory.store.live``)."""

    seq: int = Field(
        default=0, description="the log's sequence number (set by ``append_pending``): the order of writes"
    )
    namespace: str
    session: dict[str, Any] = Field(description="the session as ``memory.files.loaders.Session`` dumps it (JSON)")
    vectors: VectorMatrix = Field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32),
        description="one float32 row per turn, of the turn's render",
    )
    embedder: str | None = Field(
        default=None,
        description="the identity of the embedder that made ``vectors`` (``embedder_identity``; None: a write logged "
        "before it was recorded). Its vectors are shown and reused only by a store with the same embedder",
    )
    key: str | None = Field(default=None, description="the store key the session holds (None: a chat's turns)")
    policy: str = "heuristic"
    source: str | None = None
    purge: bool = Field(default=False, description="what this write replaces is purged when it is consolidated")
    at: datetime

    @property
    def head(self) -> PendingHead:
        """Its sequence number, session and number of turns."""
        return PendingHead(self.seq, str(self.session.get("session_id")), len(self.session.get("turns", ())))


class PendingHead(NamedTuple):
    """What the consolidator needs to choose its batch, without a pending write's turns and vectors: its sequence
    number, session and number of turns (``StoragePort.pending_heads``)."""

    seq: int
    session_id: str
    turns: int


class PurgeReport(BaseModel):
    """What a purge removed."""

    namespace: str
    generation: int
    versions_removed: dict[str, int] = Field(default_factory=dict, description="kind -> dead versions deleted")
    collections_rebuilt: int = 0
    compacted: bool = Field(default=False, description="whether the SQLite file was compacted (embedded mode)")
    limits: str | None = Field(default=None, description="what this mode cannot guarantee (server mode)")


@dataclass
class NamespaceSnapshot:
    """All committed records of a namespace at one generation, with their vectors.

    The store gives the vectors of each kind as a ``VectorTable`` (one matrix, rows in record order); any
    mapping of id -> vector is accepted where a snapshot is built by hand."""

    namespace: str
    manifest: Manifest
    turns: dict[str, Turn] = field(default_factory=dict)
    turn_vectors: Mapping[str, np.ndarray] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    event_vectors: Mapping[str, np.ndarray] = field(default_factory=dict)
    relations: dict[str, Relation] = field(default_factory=dict)
    topics: dict[str, Topic] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    fact_vectors: Mapping[str, np.ndarray] = field(default_factory=dict)
    cues: dict[str, Cue] = field(default_factory=dict)
    cue_vectors: Mapping[str, np.ndarray] = field(default_factory=dict)
    tags: dict[str, Tag] = field(default_factory=dict)
    r2_facts: dict[str, FactRecord] = field(default_factory=dict)
    r2_fact_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    tombstones: dict[str, Tombstone] = field(default_factory=dict)
    _derived: dict[Callable[..., Any], Any] = field(default_factory=dict, repr=False, compare=False)
    _derived_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def generation(self) -> int:
        return self.manifest.generation

    def topic_of(self, event_id: str) -> str | None:
        for topic in self.topics.values():
            if event_id in topic.members:
                return topic.id
        return None

    def derived(self, build: Callable[[NamespaceSnapshot], T]) -> T:
        """``build(self)``, computed once per snapshot (a snapshot never changes): the one cache for what is
        derived from committed records (the event graph, BM25 and cue indexes, the ranker's arrays).
        The builder function itself is the key, so the value's type is the builder's return type."""
        with self._derived_lock:
            if build in self._derived:
                return cast(T, self._derived[build])
        value = build(self)
        with self._derived_lock:
            return cast(T, self._derived.setdefault(build, value))

    def fingerprint(self) -> dict[str, Any]:
        """Comparable content of the snapshot (used to prove crash recovery is exact)."""

        def dump(records: dict[str, BaseModel]) -> dict[str, Any]:
            return {k: v.model_dump(mode="json", exclude={"created_at"}) for k, v in sorted(records.items())}

        def members(topics: dict[str, Topic]) -> dict[str, Any]:
            # A topic's centroid is float arithmetic over its members: its members are what must be equal.
            return {k: sorted(v.members) for k, v in sorted(topics.items())}

        found: dict[str, Any] = {"generation": self.manifest.generation, "sessions": sorted(self.manifest.sessions)}
        for kind in RECORD_KINDS:
            records = getattr(self, kind.field)
            if kind.model is Tombstone and not records:
                continue  # a namespace never forgotten fingerprints as it did before tombstones existed
            found[kind.field] = members(records) if kind.model is Topic else dump(records)
        return found


def ordered(snap: NamespaceSnapshot) -> None:
    """Turns in conversation order, events in graph order (every reader relies on it), and each kind's
    vector rows in its records' order (so the event graph and the ranker use the matrices as they are)."""
    snap.turns = dict(sorted(snap.turns.items(), key=lambda kv: kv[1].position))
    snap.events = dict(sorted(snap.events.items(), key=lambda kv: (kv[1].order, kv[0])))
    for kind in RECORD_KINDS:
        if kind.vector_field is not None:
            table = VectorTable.of(getattr(snap, kind.vector_field))
            setattr(snap, kind.vector_field, table.ordered(list(getattr(snap, kind.field))))
