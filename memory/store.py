"""Namespaced memory on Chroma with snapshot isolation: the single way records are read and written.

Every record is stored as a version ``<id>@<generation>`` with ``born``/``died`` generations. A
namespace's manifest holds its committed generation G; readers see exactly the versions with
``born <= G < died`` (minus the ``void`` generations of writers that lost their lease). A session is
written as a new generation and becomes visible in one step, when the generation is linked to G
(``next@G``, added only if absent). A crashed writer leaves only invisible versions, which later
writers clear, so a re-run reaches exactly the state of an uninterrupted run.

The data directory is held by an OS lock on the directory itself (deleting the lock file changes
nothing), a store refuses to be used from a forked child, and a damaged or missing database of a
directory that held memory is reported in one line and never written over.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import logging
import os
import random
import struct
import threading
import time
import uuid
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, Field

from logicmap.memory.config import LogicMapSettings
from logicmap.memory.deadline import remaining_time
from logicmap.memory.r2 import FactRecord
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
from logicmap.memory.snapshot_file import (
    SnapshotFile,
    SnapshotFileError,
    VectorTable,
    gc_paused,
    read_snapshot_file,
    snapshot_path,
    write_snapshot_file,
)

__all__ = [
    "ChangeSet",
    "CommitLeaseLost",
    "EmbedderMismatchError",
    "GenerationConflict",
    "MAX_GENERATION",
    "MEMORY_MARKER",
    "Manifest",
    "MemoryStore",
    "NamespaceSnapshot",
    "StoreAccessError",
    "StoreDamagedError",
    "StoreError",
    "StoreForkedError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TurnIdConflictError",
    "UnknownNamespaceError",
    "embedder_identity",
]

_log = logging.getLogger(__name__)

SENTINEL = 2**31  # "still alive"
# The highest generation a commit can write: a live version (died = SENTINEL) is visible only at generations
# below SENTINEL. Chroma keeps born/died as int64 metadata, which SENTINEL fits.
MAX_GENERATION = SENTINEL - 1
COMMIT_LOCK_ID = "commit-lock"
COMMIT_LOCK_LEASE_S = 120.0  # a writer that died holding the lock blocks others at most this long
COMMIT_LOCK_WAIT_S = 300.0
MANIFEST_ID = "manifest"  # the latest committed manifest (a hint: readers follow next@ links past it)
MEMORY_MARKER = ".logicmap-memory"  # written in the data directory before the first commit
LOCK_FILE = ".logicmap.lock"
T = TypeVar("T")

_READ_PAGE = 10_000
# Readers search the snapshot's matrices; Chroma's vector index serves only ``MemoryStore.query``, so it is
# built cheaply (its default construction made each commit of a large namespace mostly index building).
# Collections created before keep their own settings.
_HNSW = {"space": "cosine", "ef_construction": 24, "max_neighbors": 8}
_PERSIST_MIN_DELTA = 1_000  # records committed since the snapshot file before it is saved again
_MAX_CLAIMS = 10_000
_MAX_LISTED = 256  # generations a delta read lists by number rather than as a range
# A record's JSON travels in this metadata key, not as a Chroma document: Chroma indexes every document for
# full-text search (trigrams), which made writing a record cost about twice as much, for a search nothing
# runs. Records written before keep their JSON in the document; readers take either.
_RECORD = "record"
_PLACEHOLDER = [1.0]  # records without a vector of their own (relations, tags)
_VECTOR_KINDS = ("turns", "events", "topics", "facts", "cues", "r2_facts")
_PLAIN_KINDS = ("relations", "tags")
_SNAPSHOT_VECTORS = {"turns": "turn_vectors", "events": "event_vectors", "facts": "fact_vectors", "cues": "cue_vectors",
                     "r2_facts": "r2_fact_vectors"}
_MODELS: dict[str, type[BaseModel]] = {
    "turns": Turn,
    "events": Event,
    "relations": Relation,
    "topics": Topic,
    "facts": Fact,
    "cues": Cue,
    "tags": Tag,
    "r2_facts": FactRecord,  # Memory-R2's managed fact memory (ingest with the r2 memory manager)
}


class StoreError(RuntimeError):
    """The store cannot be used as it is. The message is one line: what, where, and what to do."""


class StoreLockedError(StoreError):
    """Another process holds the embedded store; use Chroma server mode to share memory."""


class StoreDamagedError(StoreError):
    """The database of a data directory that held memory is damaged or missing; nothing is written over it."""


class StoreAccessError(StoreError):
    """The store's files cannot be used: the data directory is a file, the lock path a directory, the disk full."""


class StoreUnavailableError(StoreError):
    """The Chroma server stopped answering (killed, restarted, unreachable) in the middle of a store call."""


class StoreForkedError(StoreError):
    """A store opened before ``os.fork()`` used in the child (a Chroma client does not survive a fork)."""


class EmbedderMismatchError(StoreError):
    """A commit whose vectors come from another embedder than the namespace's (vector spaces would mix)."""


class UnknownNamespaceError(KeyError):
    """A namespace that has no committed memory.

    The message names only the namespace asked for: it is raised inside a tenant's request, so it never lists
    the other tenants (an operator lists them with ``logicmap namespaces``).
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        super().__init__(f"unknown namespace {namespace!r}: it holds no committed memory yet")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


class TurnIdConflictError(ValueError):
    """A commit that would overwrite a stored turn of another session (turn ids are unique per namespace)."""


class GenerationConflict(RuntimeError):
    """Another writer committed to the namespace since this change set was computed."""


class CommitLeaseLost(GenerationConflict):
    """A writer stalled past its commit lease and another writer took over: nothing of its change is visible."""


def embedder_identity(settings: LogicMapSettings) -> str:
    """What a namespace's vectors were made with, as recorded in its manifest."""
    if settings.embedding_provider == "hashing":
        return "hashing"
    if settings.embedding_provider == "minilm":
        return "minilm:all-MiniLM-L6-v2"  # the offline model is fixed (embedding_model names OpenAI's)
    return f"{settings.embedding_provider}:{settings.embedding_model}"


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
    retire: dict[str, list[str]] = Field(default_factory=dict, description="kind -> ids to retire")
    topic_steps: int | None = None
    embedder: str | None = Field(
        default=None, description="identity of the embedder of the vectors (default: the store's settings)"
    )
    source: str | None = Field(
        default=None, description="who writes it; recorded as the namespace's source when it has none yet"
    )


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
            "r2_facts": dump(self.r2_facts),
        }


def _order(snap: NamespaceSnapshot) -> None:
    """Turns in conversation order, events in graph order (every reader relies on it), and each kind's
    vector rows in its records' order (so the event graph and the ranker use the matrices as they are)."""
    snap.turns = dict(sorted(snap.turns.items(), key=lambda kv: kv[1].position))
    snap.events = dict(sorted(snap.events.items(), key=lambda kv: (kv[1].order, kv[0])))
    for kind, attribute in _SNAPSHOT_VECTORS.items():
        setattr(snap, attribute, VectorTable.of(getattr(snap, attribute)).ordered(list(getattr(snap, kind))))


# -- the process lock ------------------------------------------------------------------------------
@dataclass
class _HeldLock:
    dir_fd: int
    file_fd: int
    count: int
    pid: int


_PROCESS_LOCKS: dict[str, _HeldLock] = {}  # resolved data directory -> the lock this process holds
_PROCESS_LOCKS_GUARD = threading.Lock()


def _locked_error(directory: Path) -> StoreLockedError:
    try:
        holder = (directory / LOCK_FILE).read_text(errors="replace").strip()[:32] or "unknown"
    except OSError:
        holder = "unknown"
    return StoreLockedError(
        f"the embedded store at {directory} is in use by another process (pid {holder}). "
        "The embedded store serves one process at a time; to share memory between processes "
        "run a Chroma server (`chroma run --path DIR --port 8000`) and set LOGICMAP_CHROMA_HOST "
        "(and LOGICMAP_CHROMA_PORT)."
    )


def _acquire_process_lock(directory: Path) -> str:
    """Lock the data directory for this process: an OS lock held by open descriptors, not by a file's presence.

    The lock is taken on the directory itself, so deleting or replacing ``.logicmap.lock`` while a
    process holds the store admits no second writer. The lock file is locked too (older versions of
    LogicMap lock only the file) and names the holder's pid for the error message. A lock inherited
    through ``fork`` belongs to the parent: the child neither reuses nor releases it.
    """
    key = str(directory.resolve())
    lock_path = directory / LOCK_FILE
    with _PROCESS_LOCKS_GUARD:
        held = _PROCESS_LOCKS.get(key)
        if held is not None and held.pid == os.getpid():
            held.count += 1
            return key
        dir_fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
        file_fd = -1
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                file_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except IsADirectoryError:
                raise StoreAccessError(
                    f"the lock path {lock_path} is a directory, not a file; remove it (rmdir {lock_path}) and re-run"
                ) from None
            fcntl.flock(file_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(file_fd, 0)
            os.pwrite(file_fd, str(os.getpid()).encode(), 0)
        except BlockingIOError:
            _close_quietly(file_fd, dir_fd)
            raise _locked_error(directory) from None
        except BaseException:
            _close_quietly(file_fd, dir_fd)
            raise
        _PROCESS_LOCKS[key] = _HeldLock(dir_fd, file_fd, 1, os.getpid())
        return key


def _close_quietly(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def _release_process_lock(key: str) -> None:
    with _PROCESS_LOCKS_GUARD:
        held = _PROCESS_LOCKS.get(key)
        if held is None or held.pid != os.getpid():
            return  # not ours (a forked child): unlocking would release the parent's lock
        held.count -= 1
        if held.count > 0:
            return
        del _PROCESS_LOCKS[key]
        for fd in (held.file_fd, held.dir_fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
        _close_quietly(held.file_fd, held.dir_fd)


# -- damaged, missing and unusable stores ----------------------------------------------------------
_DAMAGE_SIGNS = ("database disk image is malformed", "file is not a database", "(code: 11)", "(code: 26)")
_FULL_BELOW_BYTES = 2 * 1024 * 1024  # free space under which a failed Chroma write is a full disk
_FULL_SIGNS = ("database or disk is full", "no space left on device", "(code: 13)", "os error 28")


def _prepare_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise StoreAccessError(
            f"the data directory {directory} is a file, not a directory; "
            "set LOGICMAP_DATA_DIR (or --data-dir) to a directory"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StoreAccessError(
            f"the data directory {directory} cannot be created: a part of its path is a file; "
            "set LOGICMAP_DATA_DIR (or --data-dir) to a directory"
        ) from None
    except OSError as exc:
        raise _os_error(exc, directory) from exc


def _os_error(exc: OSError, where: Path) -> StoreError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(where, exc.strerror or str(exc))
    return StoreAccessError(f"the memory store at {where} cannot be used ({exc.strerror or exc}); "
                            "check the path and its permissions, then re-run")


def _disk_full(where: Path | str, reason: str) -> StoreAccessError:
    return StoreAccessError(f"the disk of the memory store at {where} is full ({reason}); nothing more was "
                            "committed and committed sessions are kept: free disk space and re-run")


def _damaged(database: Path, reason: str) -> StoreDamagedError:
    return StoreDamagedError(
        f"the memory store {database} is damaged ({reason}); nothing was written to it: restore it "
        f"from a backup, or move {database.parent.parent} aside to start an empty store"
    )


def _check_database(directory: Path) -> None:
    """Refuse a data directory whose database is damaged, or missing although the directory held memory.

    The file's bytes only raise a suspicion; SQLite decides. A process killed inside a transaction leaves a
    hot rollback journal (or a WAL) beside a database whose header counts pages it never wrote: SQLite rolls
    it back on open and the store is whole. So a store is damaged only when SQLite, after its own recovery,
    says so."""
    database = directory / "chroma" / "chroma.sqlite3"
    marker = directory / MEMORY_MARKER
    if database.is_dir():
        raise _damaged(database, "it is a directory")
    size = database.stat().st_size if database.exists() else 0
    if size == 0:
        if marker.exists():
            what = "is empty" if database.exists() else "is missing"
            raise StoreDamagedError(
                f"the memory store {database} {what} but {directory} held memory ({marker} exists); "
                f"nothing was written: restore {database.name} from a backup, or delete {marker} to start "
                "an empty store there"
            )
        return
    suspicion = _header_suspicion(database, size)
    if suspicion is None and not _has_recovery_file(database):
        return
    problem = _integrity_problem(database, recover=True)
    if problem is not None:
        raise _damaged(database, f"{suspicion}; SQLite: {problem}" if suspicion else problem)


def _header_suspicion(database: Path, size: int) -> str | None:
    """What the database file's first 100 bytes say is wrong with it (None: nothing)."""
    with database.open("rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return "not a SQLite database"
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    pages = struct.unpack(">I", header[28:32])[0]
    # The page count in the header is valid when its "version-valid-for" number equals the change counter.
    if header[92:96] == header[24:28] and pages and size < page_size * pages:
        return f"truncated: {size} of {page_size * pages} bytes"
    return None


def _has_recovery_file(database: Path) -> bool:
    """A rollback journal or WAL beside the database: SQLite replays or rolls it back when it opens it."""
    for suffix in ("-journal", "-wal"):
        extra = database.with_name(database.name + suffix)
        try:
            if extra.stat().st_size > 0:
                return True
        except OSError:
            continue
    return False


def _translated(exc: BaseException, directory: Path | None) -> StoreError | None:
    """The one-line store error for a low-level failure (None: not a store failure we know)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(directory or "the server", exc.strerror or str(exc))
    text = str(exc)
    lowered = text.lower()
    if any(sign in lowered for sign in _FULL_SIGNS):
        return _disk_full(directory or "the server", text.splitlines()[0][:200] if text else "disk full")
    if any(sign in lowered for sign in _DAMAGE_SIGNS):
        database = (directory / "chroma" / "chroma.sqlite3") if directory else Path("the server's database")
        return _damaged(database, text.splitlines()[0][:200])
    if directory is not None and type(exc).__module__.startswith("chromadb"):
        if _nearly_full(directory):
            # Chroma reports a full disk as a failed compaction or log write, without saying why.
            return _disk_full(directory, text.splitlines()[0][:200] if text else "no space left")
        database = directory / "chroma" / "chroma.sqlite3"
        damage = _integrity_problem(database)
        if damage is not None:
            return _damaged(database, damage)
    return None


def _unreachable(exc: BaseException, settings: LogicMapSettings) -> StoreUnavailableError | None:
    """The one-line error for a Chroma server that stopped answering: the class of transport failures (the
    connection refused, reset or closed mid-response, a timeout), whatever the call was doing."""
    if not settings.chroma_host:
        return None
    try:
        import httpx
    except ImportError:  # pragma: no cover - chromadb's HTTP client brings it
        return None
    if not isinstance(exc, (httpx.TransportError, ConnectionError)):
        return None
    server = f"{settings.chroma_host}:{settings.chroma_port}"
    reason = str(exc).splitlines()[0][:160] if str(exc) else "no answer"
    return StoreUnavailableError(
        f"the Chroma server at {server} does not answer ({type(exc).__name__}: {reason}); nothing uncommitted became "
        "visible and committed sessions are kept: start the server and re-run"
    )


def _integrity_problem(database: Path, *, recover: bool = False) -> str | None:
    """SQLite's own quick check of the database (run only when something looks wrong, so it costs nothing
    otherwise). ``recover``: opened for writing, so SQLite first rolls back a hot journal (or replays a WAL)
    left by a killed writer, as it would when Chroma opens it; read-only, it could not."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"file:{database}?mode={'rw' if recover else 'ro'}", uri=True)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        found = [str(row[0]) for row in connection.execute("PRAGMA quick_check").fetchmany(3)]
        if found != ["ok"]:
            return "; ".join(found)[:200]
        # Bytes overwritten inside a record keep the file's structure but not its text.
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for _ in connection.execute(f'SELECT * FROM "{table}"'):
                pass
    except sqlite3.Error as exc:
        return str(exc)[:200]
    finally:
        connection.close()
    return None


def _nearly_full(directory: Path) -> bool:
    try:
        stats = os.statvfs(directory)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < _FULL_BELOW_BYTES


def _store_call(method: Callable[..., T]) -> Callable[..., T]:
    """A public store method: refused in a forked child, and low-level failures become one-line errors."""

    @functools.wraps(method)
    def call(self: MemoryStore, *args: Any, **kwargs: Any) -> T:
        self._check_process()
        try:
            return method(self, *args, **kwargs)
        except (StoreError, GenerationConflict, UnknownNamespaceError, ValueError):
            raise
        except Exception as exc:
            error = _translated(exc, self._directory) or _unreachable(exc, self.settings)
            if error is None:
                raise
            if self._directory is not None:
                # After a failed write an embedded Chroma client can hang on its next call: refuse instead.
                self._broken = error
            raise error from exc

    return call


def _visible(generation: int, void: Sequence[int] = ()) -> dict[str, Any]:
    """Versions of committed generations up to ``generation`` not retired by one of them."""
    if not void:
        return {"$and": [{"born": {"$lte": generation}}, {"died": {"$gt": generation}}]}
    void = sorted(void)
    return {"$and": [{"born": {"$lte": generation}}, {"born": {"$nin": void}},
                     {"$or": [{"died": {"$gt": generation}}, {"died": {"$in": void}}]}]}


def _embedding_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors as one float32 matrix: Chroma takes it as it is (no Python float per number)."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"vectors must be lists of numbers of one width ({str(exc).splitlines()[0][:120]})") from None
    if matrix.ndim != 2 or not np.isfinite(matrix).all():
        raise ValueError("vectors must be lists of finite numbers of one width")
    return matrix


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def _shown(meta: Mapping[str, Any], generation: int, void: Container[int]) -> bool:
    """``_visible`` for one version's metadata. A read that has a selective condition of its own (the ids
    asked for, the versions born since a generation) checks visibility here: Chroma evaluates each condition
    of a filter over the whole collection, so adding ``_visible``'s made such a read scan every version."""
    born, died = meta["born"], meta["died"]
    return born <= generation and born not in void and (died > generation or died in void)


def _next_id(generation: int) -> str:
    return f"next@{generation}"


def _manifest_id(generation: int) -> str:
    return f"manifest@{generation}"


def _claim_id(generation: int) -> str:
    return f"claim@{generation}"


_NAMESPACE_LOCKS: dict[tuple[str, str], threading.RLock] = {}
_COMMITS: dict[tuple[str, str], int] = {}  # (location, namespace) -> commits tried in this process (under the guard)
_NAMESPACE_LOCKS_GUARD = threading.Lock()


class _LeaseWait:
    """Says why a writer waits for a namespace's commit lease: once it has waited a little, then now and then."""

    FIRST_S, EVERY_S = 2.0, 15.0

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.started = time.monotonic()
        self.said: float | None = None

    def note(self, holder: Mapping[str, Any] | None, now: float) -> None:
        waited = time.monotonic() - self.started
        if holder is None or waited < self.FIRST_S or (self.said is not None and waited - self.said < self.EVERY_S):
            return
        self.said = waited
        left = max(0.0, float(holder.get("expires", now)) - now)
        _log.warning("namespace %r: waiting for its commit lease, held by writer %s, for %.0f s so far; the lease "
                     "expires in %.0f s if that writer does not finish (a writer that died holding it blocks others "
                     "until then)", self.namespace, str(holder.get("owner", "?"))[:8], waited, left)


# -- fencing ----------------------------------------------------------------------------------------
# Server mode has no transactions, so a writer's lease (the commit-lock record) cannot be checked
# atomically with its writes. What makes a commit safe is a compare-and-set that Chroma does have:
# ``add`` of an id that exists is ignored, so the first writer's record stays and reading it back
# says who won.
#
# 1. Generation numbers are claimed, ``claim@n`` added only if absent, scanning up from G+1: every
#    number is owned by one writer forever, so versions ``<id>@n`` are only ever written by n's owner
#    and two writers never write (or overwrite) the same version.
# 2. A commit becomes visible by adding ``next@G`` (G = the generation it was computed on) naming n.
#    Only one ``next@G`` can exist, so only one writer can commit on top of G: a writer that stalled
#    past its lease while another took over finds ``next@G`` taken and aborts (``CommitLeaseLost``).
#    The committed generations are the chain of next@ links; readers follow it from the manifest hint.
# 3. The numbers a writer skipped while claiming (owned by writers that lost their lease or died)
#    go into the manifest's ``void`` list; readers never show versions born in a void generation and
#    ignore retirements made by one. So whatever a stalled writer writes after it lost the lease stays
#    invisible, whenever it lands; later commits garbage-collect it.
# 4. A writer checks its fence (lease still its own, next@G still free) before every batch it writes,
#    so a stalled writer stops at its next batch. The one thing those checks cannot exclude is a stall
#    of more than the lease *inside* one retirement update (between its check and the update landing):
#    that update can overwrite the retirement marks a newer writer just set on the same records.
#    Everything else a stalled writer does is invisible by (1)-(3).
# Embedded mode is one process (the directory lock) whose writers of a namespace share one in-process
# lock, so it uses n = G+1 without claims; the same next@ link makes its commits visible.
@dataclass
class _Fence:
    """What one commit owns: the generation it builds on, the number it writes, and how to prove it."""

    meta: Any
    namespace: str
    base: int
    generation: int
    void: list[int]
    skipped: list[int]
    token: str
    leased: bool
    lease_s: float

    def check(self, *, lease_only: bool = False) -> None:
        """Raise ``CommitLeaseLost`` when another writer took the lease or committed on top of ``base``."""
        if not self.leased:
            return
        ids = [COMMIT_LOCK_ID] if lease_only else [_next_id(self.base), COMMIT_LOCK_ID]
        got = self.meta.get(ids=ids, include=["metadatas"])
        found = dict(zip(got["ids"], got["metadatas"]))
        link = found.get(_next_id(self.base))
        if link is not None and link.get("owner") != self.token:
            raise self.lost(f"another writer committed generation {link.get('generation')} on top of it")
        lock = found.get(COMMIT_LOCK_ID)
        if lock is None or lock.get("owner") != self.token:
            raise self.lost("another writer took the commit lease")

    def lost(self, what: str) -> CommitLeaseLost:
        return CommitLeaseLost(
            f"namespace {self.namespace!r}: this writer held its commit lease longer than {self.lease_s:g}s and "
            f"{what}; nothing of this change (generation {self.generation} on {self.base}) is visible: re-run it"
        )


class MemoryStore:
    """Reads and writes namespaced memory in Chroma (embedded by default, a server when configured)."""

    def __init__(
        self, settings: LogicMapSettings | None = None, *, client: Any = None, embedder: str | None = None
    ) -> None:
        self.settings = settings or LogicMapSettings()
        self.embedder = embedder or embedder_identity(self.settings)
        self.commit_lease_s = self.settings.commit_lease_s
        self._pid = os.getpid()
        self._broken: StoreError | None = None
        self._lock_path: str | None = None
        self._directory: Path | None = None
        self._marker: Path | None = None
        if client is not None:
            self.client = client
            self._location = f"client:{id(client)}"
        elif self.settings.chroma_host:
            import chromadb

            try:
                self.client = chromadb.HttpClient(host=self.settings.chroma_host, port=self.settings.chroma_port)
            except Exception as exc:
                # Chroma says "Could not connect to a Chroma server" without saying which one.
                refused = _unreachable(exc.__cause__ or exc, self.settings)
                if refused is None and "could not connect" in str(exc).lower():
                    refused = _unreachable(ConnectionError(str(exc)), self.settings)
                if refused is None:
                    raise
                raise refused from exc
            # Per store object: writers on a server are serialized by the lease and fenced by next@ links.
            self._location = f"server:{id(self)}"
        else:
            self.client = self._open_embedded(Path(self.settings.data_dir))
            self._location = f"dir:{self._lock_path}"
        self._collections: dict[str, Any] = {}
        self._guard = threading.Lock()
        self._snapshots: dict[str, NamespaceSnapshot] = {}
        self._verified: dict[str, int] = {}  # namespace -> commit count when its cached snapshot was last checked
        self._since_file: dict[str, int] = {}  # namespace -> records read since its snapshot file (-1: no file)
        self._max_batch = int(getattr(self.client, "get_max_batch_size", lambda: 5000)() or 5000)
        if self._marker is not None and not self._marker.exists():
            self._adopt_legacy_store()

    def _open_embedded(self, directory: Path) -> Any:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        _prepare_directory(directory)
        try:
            self._lock_path = _acquire_process_lock(directory)
        except OSError as exc:
            raise _os_error(exc, directory) from exc
        self._directory, self._marker = directory, directory / MEMORY_MARKER
        try:
            _check_database(directory)
            return chromadb.PersistentClient(
                path=str(directory / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
            )
        except BaseException as exc:
            self.close()
            error = _translated(exc, directory) if isinstance(exc, Exception) else None
            if error is None:
                raise
            raise error from exc

    def _adopt_legacy_store(self) -> None:
        """A store written before the memory marker existed: mark it when it holds namespaces."""
        try:
            if self._registry().count() > 0:
                self._mark_memory()
        except Exception as exc:
            error = _translated(exc, self._directory)
            self.close()
            if error is None:
                raise
            raise error from exc

    def _mark_memory(self) -> None:
        """Record that this directory holds memory, so a lost database is reported instead of recreated."""
        if self._marker is None or self._marker.exists():
            return
        # One temporary file per thread: two threads of one process may mark a new store at once.
        tmp = self._marker.with_name(f"{MEMORY_MARKER}.{os.getpid()}.{threading.get_ident()}.tmp")
        body = {"what": "LogicMap memory lives in chroma/chroma.sqlite3 beside this file",
                "since": datetime.now(UTC).isoformat()}
        try:
            tmp.write_text(json.dumps(body) + "\n", encoding="utf-8")
            os.replace(tmp, self._marker)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise _os_error(exc, self._marker.parent) from exc

    # -- plumbing ---------------------------------------------------------------------------
    def close(self) -> None:
        if self._lock_path and os.getpid() == self._pid:
            _release_process_lock(self._lock_path)
        self._lock_path = None

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_process(self) -> None:
        if self._broken is not None:
            raise type(self._broken)(str(self._broken))
        if os.getpid() != self._pid:
            raise StoreForkedError(
                f"this memory store was opened by process {self._pid} and used in its forked child "
                f"{os.getpid()}; a Chroma client does not survive fork: open the store in the child "
                "after the parent closed it (or use a Chroma server), or start children with 'spawn'"
            )

    def namespace_lock(self, namespace: str) -> threading.RLock:
        """The lock a writer of this namespace holds while it commits (shared by every store on one location)."""
        self._check_process()
        with _NAMESPACE_LOCKS_GUARD:
            return _NAMESPACE_LOCKS.setdefault((self._location, namespace), threading.RLock())

    def _collection(self, namespace: str, kind: str) -> Any:
        name = f"lm-{stable_hash(namespace, length=16)}-{kind}"
        with self._guard:
            col = self._collections.get(name)
            if col is None:
                col = self.client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": _HNSW},
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
    @_store_call
    def manifest(self, namespace: str) -> Manifest:
        """The committed manifest: the hint record, then the chain of next@ links past it."""
        validate_namespace(namespace)
        meta = self._collection(namespace, "meta")
        for _ in range(100):
            got = meta.get(ids=[MANIFEST_ID], include=["documents"])
            hint = Manifest.model_validate_json(got["documents"][0]) if got["ids"] else Manifest(namespace=namespace)
            head = hint.generation
            while True:
                link = meta.get(ids=[_next_id(head)], include=["metadatas"])
                if not link["ids"]:
                    break
                head = int(link["metadatas"][0]["generation"])
            if head == hint.generation:
                return hint
            body = meta.get(ids=[_manifest_id(head)], include=["documents"])
            if body["ids"]:
                return Manifest.model_validate_json(body["documents"][0])
            # A newer commit removed it after moving past it: the chain has grown, walk it again.
        raise GenerationConflict(f"namespace {namespace!r}: the manifest kept moving while it was read")

    @_store_call
    def namespaces(self) -> list[str]:
        got = self._registry().get(include=[])
        names = []
        for ns in got["ids"]:
            try:
                validate_namespace(ns)
            except ValueError:
                # Registered by a version that matched names without their end ("acme\n"): unreadable now.
                _log.warning("skipping namespace %r: not a valid name, so it can no longer be read", ns)
                continue
            names.append(ns)
        # Registered before their first commit: list only namespaces whose manifest is committed.
        return sorted(ns for ns in names if self.manifest(ns).generation > 0)

    @_store_call
    def has_namespace(self, namespace: str) -> bool:
        return self.manifest(namespace).generation > 0

    @_store_call
    def require_namespace(self, namespace: str) -> Manifest:
        """The namespace's manifest, or ``UnknownNamespaceError`` (which names no other namespace)."""
        manifest = self.manifest(namespace)
        if manifest.generation == 0:
            raise UnknownNamespaceError(namespace)
        return manifest

    # -- reading --------------------------------------------------------------------------------
    @_store_call
    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        """The committed records of a namespace (cached until its generation changes).

        A newer generation is read as a delta on the cached snapshot (the versions born and retired
        since), so a commit costs a reader what the commit wrote, not the whole namespace again. The
        cached snapshot is never changed: readers holding it keep their consistent view. An embedded
        store opens a namespace from its persisted snapshot file plus the delta since the file's
        generation (``memory.snapshot_file``); a file it cannot trust is ignored and the namespace read whole.
        """
        cached = self._snapshots.get(namespace)
        if cached is not None and self._unchanged_since(namespace, cached):
            return cached
        commits = self._commit_count(namespace)
        manifest = self.manifest(namespace)
        if cached is not None and cached.manifest.generation == manifest.generation:
            self._verified[namespace] = commits
            return cached
        with gc_paused():
            if cached is not None and 0 < cached.manifest.generation < manifest.generation:
                snap = self._advance(cached, manifest)
                self._since_file[namespace] = self._since_file.get(namespace, 0) + self._delta_size(cached, snap)
            else:
                snap = self._open_persisted(manifest) if manifest.generation > 0 else None
                if snap is None:
                    snap = self._read_whole(manifest)
                    self._since_file[namespace] = -1  # no file to build on
        self._snapshots[namespace] = snap
        self._verified[namespace] = commits
        self._persist(snap)
        return snap

    def _read_whole(self, manifest: Manifest) -> NamespaceSnapshot:
        snap = NamespaceSnapshot(namespace=manifest.namespace, manifest=manifest)
        if manifest.generation > 0:
            for kind in _MODELS:
                records, vectors = self._read_kind(manifest.namespace, kind, manifest.generation, void=manifest.void)
                setattr(snap, kind, records)
                if kind in _SNAPSHOT_VECTORS:
                    setattr(snap, _SNAPSHOT_VECTORS[kind], vectors)
            _order(snap)
        return snap

    # -- persisted snapshots (embedded store only) ----------------------------------------------
    def _commit_count(self, namespace: str) -> int:
        with _NAMESPACE_LOCKS_GUARD:
            return _COMMITS.get((self._location, namespace), 0)

    def _unchanged_since(self, namespace: str, cached: NamespaceSnapshot) -> bool:
        """Whether the cached snapshot is still the committed state without reading the manifest: only an
        embedded store holding its directory lock knows every commit (they are made in this process)."""
        if self._directory is None or self._lock_path is None:
            return False
        verified = self._verified.get(namespace)
        return verified is not None and verified == self._commit_count(namespace)

    @staticmethod
    def _delta_size(old: NamespaceSnapshot, new: NamespaceSnapshot) -> int:
        return sum(abs(len(getattr(new, kind)) - len(getattr(old, kind))) for kind in _MODELS) + 1

    def _snapshot_file(self, namespace: str) -> Path | None:
        if self._directory is None:
            return None
        return snapshot_path(self._directory, stable_hash(namespace, length=16))

    def _link_token(self, namespace: str, generation: int) -> str | None:
        """The token of the commit that made ``generation`` visible (its ``next@`` link), None if there is none."""
        got = self._collection(namespace, "meta").get(
            where={"$and": [{"kind": "next"}, {"generation": generation}]}, include=["metadatas"])
        owners = {m.get("owner") for m in got["metadatas"]}
        return owners.pop() if len(owners) == 1 else None

    def _open_persisted(self, manifest: Manifest) -> NamespaceSnapshot | None:
        """The namespace from its snapshot file plus the delta since; None when there is no file to trust."""
        path = self._snapshot_file(manifest.namespace)
        if path is None or not path.exists():
            return None
        try:
            saved = read_snapshot_file(path, manifest.namespace, _MODELS)
            if not 0 < saved.generation <= manifest.generation or saved.generation in manifest.void:
                raise SnapshotFileError(f"{path}: generation {saved.generation}, namespace at {manifest.generation}")
            if self._link_token(manifest.namespace, saved.generation) != saved.link:
                raise SnapshotFileError(f"{path}: generation {saved.generation} of another history")
            base = self._from_file(saved, manifest)
        except SnapshotFileError as exc:
            _log.warning("ignoring the persisted snapshot (%s); reading the namespace from its records", exc)
            return None
        if base.manifest.generation == manifest.generation:
            self._since_file[manifest.namespace] = 0
            return base
        snap = self._advance(base, manifest)
        self._since_file[manifest.namespace] = self._delta_size(base, snap)
        return snap

    @staticmethod
    def _from_file(saved: SnapshotFile, manifest: Manifest) -> NamespaceSnapshot:
        try:
            saved_manifest = Manifest.model_validate(saved.manifest)
        except ValueError as exc:
            raise SnapshotFileError(f"bad manifest ({str(exc).splitlines()[0]})") from exc
        if saved_manifest.namespace != manifest.namespace or saved_manifest.generation != saved.generation:
            raise SnapshotFileError("its manifest is of another namespace or generation")
        snap = NamespaceSnapshot(namespace=manifest.namespace, manifest=saved_manifest)
        for kind in _MODELS:
            records = {MemoryStore._rid(kind, r): r for r in saved.records[kind]}
            if any(getattr(r, "namespace", manifest.namespace) != manifest.namespace for r in records.values()):
                raise SnapshotFileError("it holds records of another namespace")
            setattr(snap, kind, records)
            if kind in _SNAPSHOT_VECTORS:
                table = saved.vectors.get(kind, VectorTable([]))
                if set(table.ids) - set(records):
                    raise SnapshotFileError(f"{kind}: vectors without records")
                setattr(snap, _SNAPSHOT_VECTORS[kind], table)
        widths = {len(t.centroid) for t in snap.topics.values()}
        widths |= {t.matrix.shape[1] for t in saved.vectors.values() if len(t)}
        if len(widths) > 1:
            raise SnapshotFileError(f"vectors of different widths {sorted(widths)}")
        _order(snap)
        return snap

    def _persist(self, snap: NamespaceSnapshot) -> None:
        """Save the snapshot when the file lags by a lot (none, or more than a tenth of the namespace since).

        A failure to save costs only the next open's time: it is logged, never raised."""
        namespace, since = snap.namespace, self._since_file.get(snap.namespace, -1)
        size = sum(len(getattr(snap, kind)) for kind in _MODELS)
        if snap.generation == 0 or (0 <= since and since < max(_PERSIST_MIN_DELTA, size // 10)):
            return
        path = self._snapshot_file(namespace)
        if path is None:
            return
        try:
            link = self._link_token(namespace, snap.generation)
            if link is None:
                return
            write_snapshot_file(
                path, namespace=namespace, generation=snap.generation, link=link,
                manifest=snap.manifest.model_dump(mode="json"),
                records={kind: (_MODELS[kind], list(getattr(snap, kind).values())) for kind in _MODELS},
                vectors={kind: VectorTable.of(getattr(snap, attr)) for kind, attr in _SNAPSHOT_VECTORS.items()},
            )
            self._since_file[namespace] = 0
        except OSError as exc:
            _log.warning("could not save the snapshot of a namespace to %s (%s); it is read from its records next "
                         "time", path, exc.strerror or exc)

    def _advance(self, base: NamespaceSnapshot, manifest: Manifest) -> NamespaceSnapshot:
        """``base`` moved to ``manifest``'s generation: drop what was retired since, add what was born since."""
        old, new = base.manifest.generation, manifest.generation
        snap = NamespaceSnapshot(namespace=base.namespace, manifest=manifest)
        for kind in _MODELS:
            records = dict(getattr(base, kind))
            retired = self._retired_between(base.namespace, kind, old, new, manifest.void)
            for rid in retired:
                records.pop(rid, None)
            born, born_vectors = self._read_kind(base.namespace, kind, new, born_after=old, void=manifest.void)
            records.update(born)
            setattr(snap, kind, records)
            if kind in _SNAPSHOT_VECTORS:
                vectors = VectorTable.of(getattr(base, _SNAPSHOT_VECTORS[kind]))
                setattr(snap, _SNAPSHOT_VECTORS[kind], vectors.changed(retired, born_vectors))
        _order(snap)
        return snap

    def _retired_between(self, namespace: str, kind: str, old: int, new: int, void: Sequence[int] = ()) -> set[str]:
        """Ids of records whose version visible at ``old`` was retired by generation ``new``."""
        col = self._collection(namespace, kind)
        where: dict[str, Any] = {"$and": [{"died": {"$gt": old}}, {"died": {"$lte": new}}]}
        if void:
            where["$and"].append({"died": {"$nin": sorted(void)}})
        if new - old <= _MAX_LISTED:  # a range over died matches every live version; the numbers each match few
            numbers = [n for n in range(old + 1, new + 1) if n not in set(void)]
            if not numbers:
                return set()
            where = {"died": {"$in": numbers}}
        rids: set[str] = set()
        offset = 0
        while True:
            got = col.get(where=where, include=["metadatas"], limit=_READ_PAGE, offset=offset)
            rids.update(meta["rid"] for meta in got["metadatas"])
            if len(got["ids"]) < _READ_PAGE:
                return rids
            offset += _READ_PAGE

    def _read_kind(
        self, namespace: str, kind: str, generation: int, *, born_after: int | None = None, void: Sequence[int] = ()
    ) -> tuple[dict[str, Any], VectorTable]:
        include = ["documents", "metadatas"] + (["embeddings"] if kind in _VECTOR_KINDS else [])
        col = self._collection(namespace, kind)
        model = _MODELS[kind]
        records: dict[str, Any] = {}
        rows: dict[str, int] = {}
        pages: list[np.ndarray] = []
        voids = frozenset(void)
        if born_after is None:
            where, check = _visible(generation, void), False
        else:  # the versions born since: few, and visibility checked on each
            where, check = {"$and": [{"born": {"$gt": born_after}}, {"born": {"$lte": generation}}]}, True
        offset = 0
        while True:
            # Paged: one unbounded get() of >32k records exceeds SQLite's variable limit in Chroma.
            got = col.get(where=where, include=include, limit=_READ_PAGE, offset=offset)
            embeddings = got.get("embeddings") if kind in _VECTOR_KINDS else None
            if embeddings is not None and len(got["ids"]):
                pages.append(np.asarray(embeddings, dtype=np.float32).reshape(len(got["ids"]), -1))
            for i, (doc, meta) in enumerate(zip(got["documents"], got["metadatas"])):
                if check and not _shown(meta, generation, voids):
                    continue
                rid = meta["rid"]
                records[rid] = model.model_validate_json(meta.get(_RECORD) or doc)
                rows[rid] = offset + i
            if len(got["ids"]) < _READ_PAGE:
                break
            offset += _READ_PAGE
        if not pages:
            return records, VectorTable([])
        matrix = np.vstack(pages) if len(pages) > 1 else pages[0]
        ids = list(rows)
        return records, VectorTable(ids, matrix[np.fromiter(rows.values(), dtype=np.int64)])

    @_store_call
    def query(self, namespace: str, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Nearest committed records of a kind to a vector: ``[(record id, cosine similarity)]``, best first.

        Exact: the snapshot's vectors are searched (Chroma's own index is built cheaply, being approximate
        and used by no reader, so asking it for every record could leave some out)."""
        if kind not in _VECTOR_KINDS:
            raise ValueError(f"{kind!r} records have no vectors; ask for one of {', '.join(_VECTOR_KINDS)}")
        if k <= 0 or self.manifest(namespace).generation == 0:
            return []
        snap = self.snapshot(namespace)
        if kind == "topics":
            table = VectorTable.of({t.id: t.centroid for t in snap.topics.values()})
        else:
            table = VectorTable.of(getattr(snap, _SNAPSHOT_VECTORS[kind]))
        if not len(table):
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != table.matrix.shape[1]:
            raise ValueError(
                f"a query vector of width {query.shape[0]} for {kind} vectors of width {table.matrix.shape[1]}"
            )
        sims = _unit_rows(table.matrix) @ _unit_rows(query[None, :])[0]
        top = np.argsort(-sims, kind="stable")[:k]
        return [(table.ids[i], float(sims[i])) for i in top]

    # -- writing --------------------------------------------------------------------------------
    @_store_call
    def commit(self, change: ChangeSet) -> Manifest:
        """Write a change set as the next generation and make it visible atomically.

        Raises ``GenerationConflict`` when another writer committed since ``base_generation``
        (``CommitLeaseLost`` when this writer stalled past its lease and another took over), and
        ``EmbedderMismatchError`` when the namespace holds vectors of another embedder.
        """
        return self._commit(change)

    @_store_call
    def restore(self, change: ChangeSet, manifest: Manifest) -> Manifest:
        """Write a whole exported namespace into an empty one in one commit (``memory.backup``).

        The change set holds every record with its vectors and ``base_generation`` 0; the namespace
        gets ``manifest`` (its sessions, topic steps, generation number) so it reads exactly as it did
        where it was exported. Like any commit it is all or nothing: a crash leaves the namespace empty.
        Raises ``GenerationConflict`` when the namespace is not empty.
        """
        if change.base_generation != 0 or manifest.generation < 1:
            raise ValueError("a restore writes generation >= 1 on an empty namespace (base generation 0)")
        return self._commit(change, restored=manifest)

    def _commit(self, change: ChangeSet, restored: Manifest | None = None) -> Manifest:
        namespace = validate_namespace(change.namespace)
        try:
            return self._commit_locked(namespace, change, restored)
        finally:  # after the commit is visible (or failed): cached snapshots of this location are checked again
            with _NAMESPACE_LOCKS_GUARD:
                key = (self._location, namespace)
                _COMMITS[key] = _COMMITS.get(key, 0) + 1

    def _commit_locked(self, namespace: str, change: ChangeSet, restored: Manifest | None) -> Manifest:
        embedder = change.embedder or self.embedder
        with self.namespace_lock(namespace), self._server_commit_lock(namespace) as token:
            manifest = self.manifest(namespace)
            if manifest.generation != change.base_generation:
                raise GenerationConflict(
                    f"namespace {namespace!r} moved from generation {change.base_generation} "
                    f"to {manifest.generation} while this change was computed"
                )
            if manifest.embedder is not None and manifest.embedder != embedder:
                raise EmbedderMismatchError(
                    f"namespace {namespace!r} holds vectors of the embedder {manifest.embedder!r}, not "
                    f"{embedder!r}; mixing them would corrupt search: set LOGICMAP_EMBEDDING_PROVIDER "
                    "(and LOGICMAP_EMBEDDING_MODEL) back, or ingest into a new namespace"
                )
            self._check_turn_ids(change, manifest)
            self._check_generation_room(namespace, manifest, restored)
            self._mark_memory()
            fence = self._claim(namespace, manifest, token, at=restored.generation if restored else None)
            try:
                # Registered first, so a crash right after the commit cannot leave the namespace unlisted.
                self._registry().upsert(
                    ids=[namespace], embeddings=[_PLACEHOLDER], documents=[namespace], metadatas=[{"ns": namespace}]
                )
                self._clear_uncommitted(namespace, manifest.generation, fence)
                self._write_change(change, fence)
                if restored is None:
                    new_manifest = self._next_manifest(manifest, change, fence, embedder)
                else:
                    new_manifest = restored.model_copy(
                        deep=True, update={"namespace": namespace, "generation": fence.generation,
                                           "void": fence.void, "embedder": embedder})  # fmt: skip
                self._move(fence, new_manifest)
            except CommitLeaseLost:
                self._abandon(fence)
                raise
            self._collect(fence)
            return new_manifest

    def _check_generation_room(self, namespace: str, manifest: Manifest, restored: Manifest | None) -> None:
        """Refuse, before anything is written or registered, a generation its versions could not be seen at."""
        wanted = restored.generation if restored is not None else manifest.generation + 1
        if wanted > MAX_GENERATION:
            raise StoreError(
                f"namespace {namespace!r}: generation {wanted} is past the last one this store can make visible "
                f"({MAX_GENERATION}); nothing was written"
            )

    def _check_turn_ids(self, change: ChangeSet, manifest: Manifest) -> None:
        """Refuse a change that would replace a stored turn of another session (unless it retires it)."""
        if not change.turns or manifest.generation == 0:
            return
        retired = set(change.retire.get("turns", ()))
        sessions = {t.dia_id: t.session_id for t in change.turns if t.dia_id not in retired}
        col = self._collection(change.namespace, "turns")
        void = frozenset(manifest.void)
        for chunk in self._batched(sorted(sessions)):
            got = col.get(where={"rid": {"$in": list(chunk)}}, include=["metadatas", "documents"])
            for meta, doc in zip(got["metadatas"], got["documents"]):
                if not _shown(meta, manifest.generation, void):
                    continue
                rid = meta["rid"]
                stored = meta.get("session_id") or Turn.model_validate_json(meta.get(_RECORD) or doc).session_id
                if stored != sessions[rid]:
                    raise TurnIdConflictError(
                        f"namespace {change.namespace!r}: turn {rid!r} of session {sessions[rid]!r} would overwrite "
                        f"the stored turn {rid!r} of session {stored!r}; nothing was written: give the turn another id"
                    )

    def _write_change(self, change: ChangeSet, fence: _Fence) -> None:
        ns, generation, base = fence.namespace, fence.generation, fence.base
        extra = {"base": base, "void": fence.void, "fence": fence}
        self._write(ns, "turns", change.turns, change.turn_vectors, generation, **extra)
        self._write(ns, "events", change.events, change.event_vectors, generation, **extra)
        self._write(ns, "relations", change.relations, None, generation, **extra)
        self._write(ns, "topics", change.topics, [t.centroid for t in change.topics], generation, **extra)
        self._write(ns, "facts", change.facts, change.fact_vectors, generation, **extra)
        self._write(ns, "cues", change.cues, change.cue_vectors, generation, **extra)
        self._write(ns, "tags", change.tags, None, generation, **extra)
        self._write(ns, "r2_facts", change.r2_facts, change.r2_fact_vectors, generation, **extra)
        for kind, ids in change.retire.items():
            self._retire(ns, kind, ids, generation, base, void=fence.void, fence=fence)

    @staticmethod
    def _next_manifest(manifest: Manifest, change: ChangeSet, fence: _Fence, embedder: str) -> Manifest:
        new_manifest = manifest.model_copy(deep=True)
        new_manifest.generation = fence.generation
        new_manifest.void = fence.void
        new_manifest.embedder = embedder
        new_manifest.source = manifest.source or change.source
        new_manifest.updated_at = datetime.now(UTC)
        if change.session is not None:
            session = change.session.model_copy(update={"generation": fence.generation})
            new_manifest.sessions[session.session_id] = session
        if change.topic_steps is not None:
            new_manifest.topic_steps = change.topic_steps
        return new_manifest

    def _claim(self, namespace: str, manifest: Manifest, token: str, at: int | None = None) -> _Fence:
        """The generation number this commit writes: G+1 embedded, the first free claim above G on a server.

        ``at`` (a restore) asks for that number: on a server every number below it is claimed too, so no
        stalled writer can later land versions there, and those others own are void."""
        meta = self._collection(namespace, "meta")
        base = manifest.generation
        leased = bool(self.settings.chroma_host)
        fence = _Fence(meta=meta, namespace=namespace, base=base, generation=at or base + 1, void=list(manifest.void),
                       skipped=[], token=token, leased=leased, lease_s=self.commit_lease_s)
        if not leased:
            return fence
        if at is not None:
            return self._claim_up_to(fence, at)
        for number in range(base + 1, min(base + 1 + _MAX_CLAIMS, MAX_GENERATION + 1)):
            meta.add(ids=[_claim_id(number)], embeddings=[_PLACEHOLDER], documents=[token],
                     metadatas=[{"kind": "claim", "owner": token}])
            got = meta.get(ids=[_claim_id(number)], include=["metadatas"])
            if got["ids"] and got["metadatas"][0].get("owner") == token:
                fence.generation = number
                break
            fence.skipped.append(number)  # owned by a writer that lost its lease or died
        else:
            raise GenerationConflict(f"namespace {namespace!r}: no free generation number above {base}")
        fence.void = sorted(set(fence.void) | set(fence.skipped))
        fence.check()
        return fence

    def _claim_up_to(self, fence: _Fence, at: int) -> _Fence:
        """Claim ``at`` and every number below it that a writer building on the same base could claim.

        A writer scans at most ``_MAX_CLAIMS`` numbers above its base, so numbers past that are never claimed
        by anyone building on this base: a restore of generation 10^9 claims about 10^4 numbers, not 10^9.
        Claimed in batches: ``add`` keeps an existing id's first owner, so reading the batch back says who won."""
        numbers = [*range(fence.base + 1, min(at, fence.base + 1 + _MAX_CLAIMS)), at]
        for chunk in self._batched(numbers):
            ids = [_claim_id(n) for n in chunk]
            fence.meta.add(ids=ids, embeddings=[_PLACEHOLDER] * len(ids), documents=[fence.token] * len(ids),
                           metadatas=[{"kind": "claim", "owner": fence.token}] * len(ids))  # fmt: skip
            got = fence.meta.get(ids=ids, include=["metadatas"])
            owners = {rid: meta.get("owner") for rid, meta in zip(got["ids"], got["metadatas"])}
            for number, rid in zip(chunk, ids):
                if owners.get(rid) == fence.token:
                    continue
                if number == at:
                    raise GenerationConflict(f"namespace {fence.namespace!r}: generation {at} is claimed by another writer")
                fence.skipped.append(number)
        fence.void = sorted(set(fence.void) | set(fence.skipped))
        fence.check()
        return fence

    def _move(self, fence: _Fence, manifest: Manifest) -> None:
        """The one step that makes the generation visible: link it to its base, if no one else has."""
        meta, body = fence.meta, manifest.model_dump_json()
        fence.check()
        meta.add(ids=[_manifest_id(fence.generation)], embeddings=[_PLACEHOLDER], documents=[body],
                 metadatas=[{"kind": "manifest", "generation": fence.generation}])
        fence.check()
        meta.add(ids=[_next_id(fence.base)], embeddings=[_PLACEHOLDER], documents=[fence.token],
                 metadatas=[{"kind": "next", "owner": fence.token, "generation": fence.generation}])
        got = meta.get(ids=[_next_id(fence.base)], include=["metadatas"])
        link = got["metadatas"][0] if got["ids"] else {}
        if link.get("owner") != fence.token:
            raise fence.lost(f"another writer committed generation {link.get('generation')} on top of it")
        # The hint readers start from (they follow next@ links past a stale one).
        meta.upsert(ids=[MANIFEST_ID], embeddings=[_PLACEHOLDER], documents=[body],
                    metadatas=[{"generation": fence.generation}])

    def _collect(self, fence: _Fence) -> None:
        """After a won commit: drop what the skipped (now void) generations left, and superseded manifests."""
        if fence.skipped:
            try:
                self._clear_versions(fence.namespace, {"born": {"$in": fence.skipped}},
                                     {"died": {"$in": fence.skipped}}, check=lambda: fence.check(lease_only=True))
            except CommitLeaseLost:
                pass  # committed already; the next writer collects what is left
        fence.meta.delete(where={"$and": [{"kind": "manifest"}, {"generation": {"$lt": fence.generation}}]})

    def _abandon(self, fence: _Fence) -> None:
        """A lost commit removes what it wrote (best effort: it is invisible anyway, being void)."""
        if not fence.leased:
            return
        try:
            number = fence.generation
            self._clear_versions(fence.namespace, {"born": number}, {"died": number})
        except Exception:  # noqa: BLE001 - the lost-lease error is what the caller needs to see
            pass

    @contextmanager
    def _server_commit_lock(self, namespace: str) -> Iterator[str]:
        """Server mode: one writer per namespace across processes (a lock record added only if absent).

        The lease only keeps writers from wasting work; correctness comes from the fence (see ``_Fence``).
        """
        token = uuid.uuid4().hex
        if not self.settings.chroma_host:
            yield token  # embedded: the directory lock makes this process the only writer
            return
        col = self._collection(namespace, "meta")
        waiting = _LeaseWait(namespace)
        left = remaining_time()  # the run's deadline bounds this wait too (then memory.contention waits on)
        deadline = time.monotonic() + (COMMIT_LOCK_WAIT_S if left is None else max(0.0, min(COMMIT_LOCK_WAIT_S, left)))
        while True:
            now = time.time()
            col.add(ids=[COMMIT_LOCK_ID], embeddings=[_PLACEHOLDER], documents=[token],
                    metadatas=[{"owner": token, "expires": now + self.commit_lease_s}])
            got = col.get(ids=[COMMIT_LOCK_ID], include=["metadatas"])
            holder = got["metadatas"][0] if got["ids"] else None
            if holder is not None and holder.get("owner") == token:
                break
            if holder is not None and float(holder.get("expires", 0)) < now:
                col.delete(ids=[COMMIT_LOCK_ID], where={"owner": holder["owner"]})  # a dead or stalled writer's lease
                continue
            waiting.note(holder, now)
            if time.monotonic() > deadline:
                raise GenerationConflict(f"namespace {namespace!r}: another process holds the commit lock")
            time.sleep(0.02 + random.random() * 0.08)
        try:
            yield token
        finally:
            col.delete(ids=[COMMIT_LOCK_ID], where={"owner": token})

    def _clear_uncommitted(self, namespace: str, generation: int, fence: _Fence | None = None) -> None:
        """Undo what crashed or stalled writers left: embedded, every version born after G (and retirement
        after G); on a server, only what void generations left (a claim above G may belong to a live writer)."""
        void = list(fence.void) if fence is not None else []
        if fence is not None and fence.leased:
            if void:
                self._clear_versions(namespace, {"born": {"$in": void}}, {"died": {"$in": void}}, check=fence.check)
            return
        born: dict[str, Any] = {"born": {"$gt": generation}}
        died: dict[str, Any] = {"$and": [{"died": {"$gt": generation}}, {"died": {"$lt": SENTINEL}}]}
        if void:
            born = {"$or": [born, {"born": {"$in": void}}]}
            died = {"$or": [died, {"died": {"$in": void}}]}
        self._clear_versions(namespace, born, died)
        self._collection(namespace, "meta").delete(
            where={"$and": [{"kind": "manifest"}, {"generation": {"$gt": generation}}]}
        )

    def _clear_versions(
        self, namespace: str, born: dict[str, Any], died: dict[str, Any], check: Callable[[], None] | None = None
    ) -> None:
        """Delete the versions matching ``born`` and make those matching ``died`` alive again.

        ``check`` runs before each update: a writer that lost its lease must not reset marks it read
        before a newer writer retired the same versions."""
        for kind in _MODELS:
            col = self._collection(namespace, kind)
            while True:
                found = col.get(where=born, include=[], limit=_READ_PAGE)
                if not found["ids"]:
                    break
                col.delete(ids=found["ids"])
            while True:
                killed = col.get(where=died, include=["metadatas"], limit=min(_READ_PAGE, self._max_batch))
                if not killed["ids"]:
                    break
                if check is not None:
                    check()
                col.update(ids=killed["ids"], metadatas=[{**m, "died": SENTINEL} for m in killed["metadatas"]])

    def _retire(
        self,
        namespace: str,
        kind: str,
        rids: Sequence[str],
        generation: int,
        previous: int,
        *,
        void: Sequence[int] = (),
        fence: _Fence | None = None,
    ) -> None:
        if not rids:
            return
        col = self._collection(namespace, kind)
        voids = frozenset(void)
        for chunk in self._batched(list(rids)):
            got = col.get(
                where={"$and": [{"rid": {"$in": list(chunk)}}, {"died": {"$gt": previous}}]}, include=["metadatas"]
            )
            shown = [(i, m) for i, m in zip(got["ids"], got["metadatas"]) if _shown(m, previous, voids)]
            if shown:
                if fence is not None:
                    fence.check()
                col.update(ids=[i for i, _ in shown], metadatas=[{**m, "died": generation} for _, m in shown])

    def _write(
        self,
        namespace: str,
        kind: str,
        records: Sequence[BaseModel],
        vectors: Sequence[Sequence[float]] | None,
        generation: int,
        *,
        base: int | None = None,
        void: Sequence[int] = (),
        fence: _Fence | None = None,
    ) -> None:
        if not records:
            return
        rids = [self._rid(kind, r) for r in records]
        if len(set(rids)) != len(rids):
            raise ValueError(f"duplicate {kind} ids in one change set")
        if vectors is not None and len(vectors) != len(records):
            raise ValueError(f"{kind}: {len(records)} records but {len(vectors)} vectors")
        self._retire(namespace, kind, rids, generation, generation - 1 if base is None else base,
                     void=void, fence=fence)
        col = self._collection(namespace, kind)
        metas = [
            {"rid": rid, "born": generation, "died": SENTINEL, _RECORD: r.model_dump_json(), **self._extra_meta(r)}
            for rid, r in zip(rids, records)
        ]
        embeds = _embedding_rows(vectors) if vectors is not None else [_PLACEHOLDER] * len(records)
        ids = [f"{rid}@{generation}" for rid in rids]
        for start in range(0, len(ids), self._max_batch):
            end = start + self._max_batch
            if fence is not None:
                fence.check()
            col.upsert(ids=ids[start:end], embeddings=embeds[start:end], metadatas=metas[start:end])

    @staticmethod
    def _rid(kind: str, record: BaseModel) -> str:
        return record.dia_id if kind == "turns" else record.id  # type: ignore[attr-defined]

    @staticmethod
    def _extra_meta(record: BaseModel) -> dict[str, Any]:
        session = getattr(record, "session_id", None)
        return {"session_id": session} if isinstance(session, str) else {}
