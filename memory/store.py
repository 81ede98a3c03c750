"""Namespaced memory on Chroma with snapshot isolation: the single way records are read and written.

Every record is stored as a version ``<id>@<generation>`` with ``born``/``died`` generations. A
namespace's manifest holds its committed generation G; readers see exactly the versions with
``born <= G < died``. A session is written as generation G+1 and becomes visible in one step, when
the manifest is updated. A crashed writer leaves only invisible versions, which the next writer
clears before it writes, so a re-run reaches exactly the state of an uninterrupted run.
"""

from __future__ import annotations

import fcntl
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, Field

from logicmap.memory.config import LogicMapSettings
from logicmap.memory.records import (
    Cue,
    Event,
    Fact,
    Relation,
    SessionInfo,
    Tag,
    Topic,
    Turn,
    stable_hash,
    validate_namespace,
)

__all__ = [
    "ChangeSet",
    "GenerationConflict",
    "Manifest",
    "MemoryStore",
    "NamespaceSnapshot",
    "StoreLockedError",
    "UnknownNamespaceError",
]

SENTINEL = 2**31  # "still alive"
COMMIT_LOCK_ID = "commit-lock"
COMMIT_LOCK_LEASE_S = 120.0  # a writer that died holding the lock blocks others at most this long
COMMIT_LOCK_WAIT_S = 300.0
T = TypeVar("T")

_READ_PAGE = 10_000
_PLACEHOLDER = [1.0]  # records without a vector of their own (relations, tags)
_VECTOR_KINDS = ("turns", "events", "topics", "facts", "cues")
_PLAIN_KINDS = ("relations", "tags")
_SNAPSHOT_VECTORS = {"turns": "turn_vectors", "events": "event_vectors", "facts": "fact_vectors", "cues": "cue_vectors"}
_MODELS: dict[str, type[BaseModel]] = {
    "turns": Turn,
    "events": Event,
    "relations": Relation,
    "topics": Topic,
    "facts": Fact,
    "cues": Cue,
    "tags": Tag,
}


class StoreLockedError(RuntimeError):
    """Another process holds the embedded store; use Chroma server mode to share memory."""


class UnknownNamespaceError(KeyError):
    """A namespace that has no committed memory."""

    def __init__(self, namespace: str, known: Sequence[str]) -> None:
        self.namespace = namespace
        self.known = list(known)
        hint = ", ".join(self.known[:10]) or "none yet"
        super().__init__(f"unknown namespace {namespace!r} (known namespaces: {hint})")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


class GenerationConflict(RuntimeError):
    """Another writer committed to the namespace since this change set was computed."""


class Manifest(BaseModel):
    """The committed state of a namespace: its generation and its sessions."""

    namespace: str
    generation: int = 0
    sessions: dict[str, SessionInfo] = Field(default_factory=dict)
    topic_steps: int = 0
    updated_at: datetime | None = None


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
    retire: dict[str, list[str]] = Field(default_factory=dict, description="kind -> ids to retire")
    topic_steps: int | None = None


@dataclass
class NamespaceSnapshot:
    """All committed records of a namespace at one generation, with their vectors."""

    namespace: str
    manifest: Manifest
    turns: dict[str, Turn] = field(default_factory=dict)
    turn_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    event_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    relations: dict[str, Relation] = field(default_factory=dict)
    topics: dict[str, Topic] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    fact_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    cues: dict[str, Cue] = field(default_factory=dict)
    cue_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    tags: dict[str, Tag] = field(default_factory=dict)
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
                return self._derived[build]
        value = build(self)
        with self._derived_lock:
            return self._derived.setdefault(build, value)

    def fingerprint(self) -> dict[str, Any]:
        """Comparable content of the snapshot (used to prove crash recovery is exact)."""
        def dump(records: dict[str, BaseModel]) -> dict[str, Any]:
            return {k: v.model_dump(mode="json", exclude={"created_at"}) for k, v in sorted(records.items())}

        return {
            "generation": self.manifest.generation,
            "sessions": sorted(self.manifest.sessions),
            "turns": dump(self.turns),
            "events": dump(self.events),
            "relations": dump(self.relations),
            "topics": {k: sorted(v.members) for k, v in sorted(self.topics.items())},
            "facts": dump(self.facts),
            "cues": dump(self.cues),
            "tags": dump(self.tags),
        }


def _order(snap: NamespaceSnapshot) -> None:
    """Turns in conversation order, events in graph order (every reader relies on it)."""
    snap.turns = dict(sorted(snap.turns.items(), key=lambda kv: kv[1].position))
    snap.events = dict(sorted(snap.events.items(), key=lambda kv: (kv[1].order, kv[0])))


_PROCESS_LOCKS: dict[str, tuple[int, int]] = {}  # path -> (fd, refcount)
_PROCESS_LOCKS_GUARD = threading.Lock()


def _acquire_process_lock(directory: Path) -> str:
    lock_path = str((directory / ".logicmap.lock").resolve())
    with _PROCESS_LOCKS_GUARD:
        if lock_path in _PROCESS_LOCKS:
            fd, count = _PROCESS_LOCKS[lock_path]
            _PROCESS_LOCKS[lock_path] = (fd, count + 1)
            return lock_path
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLockedError(
                f"the embedded store at {directory} is in use by another process (pid {holder}). "
                "The embedded store serves one process at a time; to share memory between processes "
                "run a Chroma server (`chroma run --path DIR --port 8000`) and set LOGICMAP_CHROMA_HOST "
                "(and LOGICMAP_CHROMA_PORT)."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        _PROCESS_LOCKS[lock_path] = (fd, 1)
        return lock_path


def _release_process_lock(lock_path: str) -> None:
    with _PROCESS_LOCKS_GUARD:
        if lock_path not in _PROCESS_LOCKS:
            return
        fd, count = _PROCESS_LOCKS[lock_path]
        if count > 1:
            _PROCESS_LOCKS[lock_path] = (fd, count - 1)
            return
        del _PROCESS_LOCKS[lock_path]
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _visible(generation: int) -> dict[str, Any]:
    return {"$and": [{"born": {"$lte": generation}}, {"died": {"$gt": generation}}]}


class MemoryStore:
    """Reads and writes namespaced memory in Chroma (embedded by default, a server when configured)."""

    def __init__(self, settings: LogicMapSettings | None = None, *, client: Any = None) -> None:
        self.settings = settings or LogicMapSettings()
        self._lock_path: str | None = None
        if client is not None:
            self.client = client
        elif self.settings.chroma_host:
            import chromadb

            self.client = chromadb.HttpClient(host=self.settings.chroma_host, port=self.settings.chroma_port)
        else:
            import chromadb
            from chromadb.config import Settings as ChromaSettings

            directory = Path(self.settings.data_dir)
            directory.mkdir(parents=True, exist_ok=True)
            self._lock_path = _acquire_process_lock(directory)
            self.client = chromadb.PersistentClient(
                path=str(directory / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
            )
        self._collections: dict[str, Any] = {}
        self._namespace_locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()
        self._snapshots: dict[str, NamespaceSnapshot] = {}
        self._max_batch = int(getattr(self.client, "get_max_batch_size", lambda: 5000)() or 5000)

    # -- plumbing ---------------------------------------------------------------------------
    def close(self) -> None:
        if self._lock_path:
            _release_process_lock(self._lock_path)
            self._lock_path = None

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def namespace_lock(self, namespace: str) -> threading.RLock:
        """The lock a writer of this namespace holds while it commits."""
        with self._guard:
            return self._namespace_locks.setdefault(namespace, threading.RLock())

    def _collection(self, namespace: str, kind: str) -> Any:
        name = f"lm-{stable_hash(namespace, length=16)}-{kind}"
        with self._guard:
            col = self._collections.get(name)
            if col is None:
                col = self.client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"namespace": namespace, "kind": kind},
                )
                self._collections[name] = col
        return col

    def _registry(self) -> Any:
        with self._guard:
            col = self._collections.get("lm-namespaces")
            if col is None:
                col = self.client.get_or_create_collection("lm-namespaces", embedding_function=None)
                self._collections["lm-namespaces"] = col
        return col

    def _batched(self, items: Sequence[Any]) -> Iterable[Sequence[Any]]:
        step = max(1, self._max_batch)
        for start in range(0, len(items), step):
            yield items[start : start + step]

    # -- manifest -----------------------------------------------------------------------------
    def manifest(self, namespace: str) -> Manifest:
        validate_namespace(namespace)
        got = self._collection(namespace, "meta").get(ids=["manifest"], include=["documents"])
        if not got["ids"]:
            return Manifest(namespace=namespace)
        return Manifest.model_validate_json(got["documents"][0])

    def namespaces(self) -> list[str]:
        got = self._registry().get(include=[])
        # Registered before their first commit: list only namespaces whose manifest is committed.
        return sorted(ns for ns in got["ids"] if self.manifest(ns).generation > 0)

    def has_namespace(self, namespace: str) -> bool:
        return self.manifest(namespace).generation > 0

    def require_namespace(self, namespace: str) -> Manifest:
        """The namespace's manifest, or ``UnknownNamespaceError`` naming the known ones."""
        manifest = self.manifest(namespace)
        if manifest.generation == 0:
            raise UnknownNamespaceError(namespace, self.namespaces())
        return manifest

    # -- reading --------------------------------------------------------------------------------
    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        """The committed records of a namespace (cached until its generation changes).

        A newer generation is read as a delta on the cached snapshot (the versions born and retired
        since), so a commit costs a reader what the commit wrote, not the whole namespace again. The
        cached snapshot is never changed: readers holding it keep their consistent view.
        """
        manifest = self.manifest(namespace)
        cached = self._snapshots.get(namespace)
        if cached is not None and cached.manifest.generation == manifest.generation:
            return cached
        if cached is not None and 0 < cached.manifest.generation < manifest.generation:
            snap = self._advance(cached, manifest)
        else:
            snap = NamespaceSnapshot(namespace=namespace, manifest=manifest)
            if manifest.generation > 0:
                for kind in _MODELS:
                    records, vectors = self._read_kind(namespace, kind, manifest.generation)
                    setattr(snap, kind, records)
                    if kind in _SNAPSHOT_VECTORS:
                        setattr(snap, _SNAPSHOT_VECTORS[kind], vectors)
                _order(snap)
        self._snapshots[namespace] = snap
        return snap

    def _advance(self, base: NamespaceSnapshot, manifest: Manifest) -> NamespaceSnapshot:
        """``base`` moved to ``manifest``'s generation: drop what was retired since, add what was born since."""
        old, new = base.manifest.generation, manifest.generation
        snap = NamespaceSnapshot(namespace=base.namespace, manifest=manifest)
        for kind in _MODELS:
            records = dict(getattr(base, kind))
            vectors = dict(getattr(base, _SNAPSHOT_VECTORS[kind])) if kind in _SNAPSHOT_VECTORS else {}
            for rid in self._retired_between(base.namespace, kind, old, new):
                records.pop(rid, None)
                vectors.pop(rid, None)
            born, born_vectors = self._read_kind(base.namespace, kind, new, born_after=old)
            records.update(born)
            vectors.update(born_vectors)
            setattr(snap, kind, records)
            if kind in _SNAPSHOT_VECTORS:
                setattr(snap, _SNAPSHOT_VECTORS[kind], vectors)
        _order(snap)
        return snap

    def _retired_between(self, namespace: str, kind: str, old: int, new: int) -> set[str]:
        """Ids of records whose version visible at ``old`` was retired by generation ``new``."""
        col = self._collection(namespace, kind)
        where = {"$and": [{"died": {"$gt": old}}, {"died": {"$lte": new}}]}
        rids: set[str] = set()
        offset = 0
        while True:
            got = col.get(where=where, include=["metadatas"], limit=_READ_PAGE, offset=offset)
            rids.update(meta["rid"] for meta in got["metadatas"])
            if len(got["ids"]) < _READ_PAGE:
                return rids
            offset += _READ_PAGE

    def _read_kind(
        self, namespace: str, kind: str, generation: int, *, born_after: int | None = None
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        include = ["documents", "metadatas"] + (["embeddings"] if kind in _VECTOR_KINDS else [])
        col = self._collection(namespace, kind)
        model = _MODELS[kind]
        records: dict[str, Any] = {}
        vectors: dict[str, np.ndarray] = {}
        where = _visible(generation)
        if born_after is not None:
            where = {"$and": [*where["$and"], {"born": {"$gt": born_after}}]}
        offset = 0
        while True:
            # Paged: one unbounded get() of >32k records exceeds SQLite's variable limit in Chroma.
            got = col.get(where=where, include=include, limit=_READ_PAGE, offset=offset)
            embeddings = got.get("embeddings") if kind in _VECTOR_KINDS else None
            for i, (doc, meta) in enumerate(zip(got["documents"], got["metadatas"])):
                rid = meta["rid"]
                records[rid] = model.model_validate_json(doc)
                if embeddings is not None:
                    vectors[rid] = np.asarray(embeddings[i], dtype=np.float32)
            if len(got["ids"]) < _READ_PAGE:
                return records, vectors
            offset += _READ_PAGE

    def query(self, namespace: str, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Nearest committed records of a kind to a vector: ``[(record id, cosine similarity)]``."""
        manifest = self.manifest(namespace)
        if manifest.generation == 0 or k <= 0:
            return []
        col = self._collection(namespace, kind)
        got = col.query(
            query_embeddings=[list(map(float, vector))],
            n_results=k,
            where=_visible(manifest.generation),
            include=["metadatas", "distances"],
        )
        return [(m["rid"], 1.0 - float(d)) for m, d in zip(got["metadatas"][0], got["distances"][0])]

    # -- writing --------------------------------------------------------------------------------
    def commit(self, change: ChangeSet) -> Manifest:
        """Write a change set as the next generation and make it visible atomically.

        Raises ``GenerationConflict`` when another writer committed since ``base_generation``.
        """
        namespace = validate_namespace(change.namespace)
        with self.namespace_lock(namespace), self._server_commit_lock(namespace):
            manifest = self.manifest(namespace)
            if manifest.generation != change.base_generation:
                raise GenerationConflict(
                    f"namespace {namespace!r} moved from generation {change.base_generation} "
                    f"to {manifest.generation} while this change was computed"
                )
            generation = manifest.generation + 1
            # Registered first, so a crash right after the manifest write cannot leave it unlisted.
            self._registry().upsert(
                ids=[namespace], embeddings=[_PLACEHOLDER], documents=[namespace], metadatas=[{"ns": namespace}]
            )
            self._clear_uncommitted(namespace, manifest.generation)
            self._write(namespace, "turns", change.turns, change.turn_vectors, generation)
            self._write(namespace, "events", change.events, change.event_vectors, generation)
            self._write(namespace, "relations", change.relations, None, generation)
            self._write(
                namespace, "topics", change.topics, [t.centroid for t in change.topics], generation
            )
            self._write(namespace, "facts", change.facts, change.fact_vectors, generation)
            self._write(namespace, "cues", change.cues, change.cue_vectors, generation)
            self._write(namespace, "tags", change.tags, None, generation)
            for kind, ids in change.retire.items():
                self._retire(namespace, kind, ids, generation, manifest.generation)

            new_manifest = manifest.model_copy(deep=True)
            new_manifest.generation = generation
            new_manifest.updated_at = datetime.now(UTC)
            if change.session is not None:
                session = change.session.model_copy(update={"generation": generation})
                new_manifest.sessions[session.session_id] = session
            if change.topic_steps is not None:
                new_manifest.topic_steps = change.topic_steps
            # The one write that makes the generation visible.
            self._collection(namespace, "meta").upsert(
                ids=["manifest"],
                embeddings=[_PLACEHOLDER],
                documents=[new_manifest.model_dump_json()],
                metadatas=[{"generation": generation}],
            )
            return new_manifest

    @contextmanager
    def _server_commit_lock(self, namespace: str):  # noqa: ANN202
        """Server mode: one writer per namespace across processes (a lock record added only if absent)."""
        if not self.settings.chroma_host:
            yield  # embedded: the file lock makes this process the only writer
            return
        col = self._collection(namespace, "meta")
        token = uuid.uuid4().hex
        deadline = time.monotonic() + COMMIT_LOCK_WAIT_S
        while True:
            now = time.time()
            # Chroma ignores an add whose id exists: the first writer's record stays, so reading it back
            # tells who holds the lock.
            col.add(ids=[COMMIT_LOCK_ID], embeddings=[_PLACEHOLDER], documents=[token],
                    metadatas=[{"owner": token, "expires": now + COMMIT_LOCK_LEASE_S}])
            got = col.get(ids=[COMMIT_LOCK_ID], include=["metadatas"])
            holder = got["metadatas"][0] if got["ids"] else None
            if holder is not None and holder.get("owner") == token:
                break
            if holder is not None and float(holder.get("expires", 0)) < now:
                col.delete(ids=[COMMIT_LOCK_ID], where={"owner": holder["owner"]})  # a dead writer's lease
                continue
            if time.monotonic() > deadline:
                raise GenerationConflict(f"namespace {namespace!r}: another process holds the commit lock")
            time.sleep(0.02 + random.random() * 0.08)
        try:
            yield
        finally:
            col.delete(ids=[COMMIT_LOCK_ID], where={"owner": token})

    def _clear_uncommitted(self, namespace: str, generation: int) -> None:
        """Undo what a crashed writer left: versions born after G, and retirements after G."""
        for kind in _MODELS:
            col = self._collection(namespace, kind)
            while True:
                born = col.get(where={"born": {"$gt": generation}}, include=[], limit=_READ_PAGE)
                if not born["ids"]:
                    break
                col.delete(ids=born["ids"])
            while True:
                killed = col.get(
                    where={"$and": [{"died": {"$gt": generation}}, {"died": {"$lt": SENTINEL}}]},
                    include=["metadatas"],
                    limit=min(_READ_PAGE, self._max_batch),
                )
                if not killed["ids"]:
                    break
                col.update(ids=killed["ids"], metadatas=[{**m, "died": SENTINEL} for m in killed["metadatas"]])

    def _retire(self, namespace: str, kind: str, rids: Sequence[str], generation: int, previous: int) -> None:
        if not rids:
            return
        col = self._collection(namespace, kind)
        for chunk in self._batched(list(rids)):
            got = col.get(
                where={"$and": [{"rid": {"$in": list(chunk)}}, *_visible(previous)["$and"]]},
                include=["metadatas"],
            )
            if got["ids"]:
                col.update(ids=got["ids"], metadatas=[{**m, "died": generation} for m in got["metadatas"]])

    def _write(
        self,
        namespace: str,
        kind: str,
        records: Sequence[BaseModel],
        vectors: Sequence[Sequence[float]] | None,
        generation: int,
    ) -> None:
        if not records:
            return
        rids = [self._rid(kind, r) for r in records]
        if len(set(rids)) != len(rids):
            raise ValueError(f"duplicate {kind} ids in one change set")
        if vectors is not None and len(vectors) != len(records):
            raise ValueError(f"{kind}: {len(records)} records but {len(vectors)} vectors")
        self._retire(namespace, kind, rids, generation, generation - 1)
        col = self._collection(namespace, kind)
        docs = [r.model_dump_json() for r in records]
        metas = [{"rid": rid, "born": generation, "died": SENTINEL, **self._extra_meta(r)} for rid, r in zip(rids, records)]
        embeds = [list(map(float, v)) for v in vectors] if vectors is not None else [_PLACEHOLDER] * len(records)
        ids = [f"{rid}@{generation}" for rid in rids]
        for start in range(0, len(ids), self._max_batch):
            end = start + self._max_batch
            col.upsert(ids=ids[start:end], embeddings=embeds[start:end], documents=docs[start:end], metadatas=metas[start:end])

    @staticmethod
    def _rid(kind: str, record: BaseModel) -> str:
        return record.dia_id if kind == "turns" else record.id  # type: ignore[attr-defined]

    @staticmethod
    def _extra_meta(record: BaseModel) -> dict[str, Any]:
        session = getattr(record, "session_id", None)
        return {"session_id": session} if isinstance(session, str) else {}

