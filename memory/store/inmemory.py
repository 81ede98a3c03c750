"""``InProcessStore``: the storage port in this process's memory, for unit tests and ephemeral agents.

Nothing reaches disk and nothing outlives the process. Each record is kept as versions with the generations they
were born and retired at (as the Chroma backend keeps them), so a run pinned to a generation reads it however many
commits land meanwhile (a retired version is kept packed: ``_Version.retire``); a commit is checked whole (``port.check_commit``, turn ids) before one version is written,
then applied under the store's lock, so it is all or nothing and a reader sees the old generation or the new one.
``purge`` drops the retired versions; ``drop_namespace`` the namespace.

Stores opened with the same ``LOGICMAP_STORE_URL`` (``memory://`` or ``memory://NAME``) in one process share one
memory, as two stores on one Chroma directory would.
"""

from __future__ import annotations

import pickle
import sys
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from pydantic import BaseModel

from logicmap.memory.indexes.snapshot_file import VectorTable
from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.store.errors import TurnIdConflictError, UnknownNamespaceError
from logicmap.memory.store.generations import SENTINEL
from logicmap.memory.store.model import (
    ChangeSet,
    Manifest,
    NamespaceSnapshot,
    PurgeReport,
    embedder_identity,
    ordered,
)
from logicmap.memory.store.pending_log import MemoryPendingLog, PendingWrites
from logicmap.memory.store.port import check_commit, check_restore, committed_nearest, next_manifest
from logicmap.settings import LogicMapSettings

__all__ = ["InProcessStore", "clear_in_process_memory"]


@dataclass
class _Version:
    """One version of a record: the record itself while it is live; once retired, packed (``retire``)."""

    held: BaseModel | bytes
    vector: np.ndarray | None
    born: int
    died: int = SENTINEL

    def seen_at(self, generation: int) -> bool:
        return self.born <= generation < self.died

    @property
    def record(self) -> BaseModel:
        return self.held if isinstance(self.held, BaseModel) else _unpack(self.held, self.vector)

    def retire(self, generation: int) -> None:
        """Retired at ``generation``: only a run pinned to an older one reads it again, so it is kept packed (as
        the Chroma backend keeps it on disk until a purge), not as objects (``_pack``). A topic's 384 centroid
        floats take 12 kB as Python objects and nothing packed (they are its float32 vector's); a topic is
        rewritten at every re-clustering. Its vector, a row of the latest snapshot's table while it was live
        (``InProcessStore._read``), becomes a copy of its own: a retired version keeps no whole table alive."""
        self.died = generation
        if self.vector is not None and self.vector.base is not None:
            self.vector = self.vector.copy()
        if isinstance(self.held, BaseModel):
            self.held = _pack(self.held, self.vector)


_CENTROID = "centroid"  # a topic's centroid: float32 values (``memory.indexes.topics``) kept as Python floats
_SAME = b""  # a packed centroid equal to the version's own vector (a topic's is): not kept twice


def _pack(record: BaseModel, vector: np.ndarray | None) -> bytes:
    """A record as compressed pickle bytes. A centroid whose floats are all float32 values travels as float32
    bytes, or not at all when it is the version's own vector (``_unpack`` gives back the very same floats);
    any other record as it is."""
    centroid = getattr(record, _CENTROID, None)
    packed: bytes | None = None
    if isinstance(centroid, list) and centroid:
        narrow = np.asarray(centroid, dtype=np.float32)
        if narrow.astype(np.float64).tolist() == centroid:
            same = vector is not None and vector.dtype == np.float32 and np.array_equal(narrow, vector)
            record, packed = record.model_copy(update={_CENTROID: []}), _SAME if same else narrow.tobytes()
    return zlib.compress(pickle.dumps((record, packed), protocol=pickle.HIGHEST_PROTOCOL), 1)


def _unpack(held: bytes, vector: np.ndarray | None) -> BaseModel:
    record, packed = pickle.loads(zlib.decompress(held))
    if packed is not None:
        narrow = np.frombuffer(packed, dtype=np.float32) if packed != _SAME or vector is None else vector
        record = record.model_copy(update={_CENTROID: narrow.astype(np.float64).tolist()})
    return cast(BaseModel, record)


def _share_rows(space: _Space, latest: NamespaceSnapshot) -> None:
    """Each live version's vector becomes its row of the latest snapshot's table (a view, equal values): the
    vectors are held once, not once in the versions and again in the table (1.5 kB a vector)."""
    for kind in RECORD_KINDS:
        if kind.vector_field is None:
            continue
        table: VectorTable = getattr(latest, kind.vector_field)
        for rid, versions in space.versions[kind.field].items():
            live = versions[-1]
            if live.died == SENTINEL and live.vector is not None and rid in table:
                live.vector = table[rid]


_FIELDS_SETS: dict[tuple[type, frozenset[str]], set[str]] = {}


def _compact(record: BaseModel) -> BaseModel:
    """The stored record holding what it shares with other stored records once. Pydantic's set of its explicitly
    set fields is shared with every stored record of its model that set the same ones (a set of 7 names takes 728
    bytes, a relation 1.4 kB in all); its strings, and those of its lists of strings, are interned (an event's id
    is its relations' source or target and its tags' target, a turn's session id its event's). Stored records are
    read, never changed in place (a snapshot hands the same objects to every reader); a copy of one
    (``model_copy``) gets a set of its own."""
    fields = record.__pydantic_fields_set__
    shared = _FIELDS_SETS.setdefault((type(record), frozenset(fields)), fields)
    if shared is not fields:
        object.__setattr__(record, "__pydantic_fields_set__", shared)
    values = record.__dict__
    for name, value in values.items():
        if type(value) is str:
            values[name] = sys.intern(value)
        elif type(value) is list and value and all(type(v) is str for v in value):
            value[:] = [sys.intern(v) for v in value]
    return record


@dataclass
class _Space:
    """One namespace: its manifest and, per kind, each record id's versions (oldest first)."""

    manifest: Manifest
    versions: dict[str, dict[str, list[_Version]]] = field(
        default_factory=lambda: {kind.field: {} for kind in RECORD_KINDS}
    )
    committed: set[int] = field(default_factory=set)
    latest: NamespaceSnapshot | None = None


@dataclass
class _Memory:
    """What the stores of one URL share."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    spaces: dict[str, _Space] = field(default_factory=dict)
    pending: MemoryPendingLog = field(default_factory=MemoryPendingLog)


_MEMORIES: dict[str, _Memory] = {}
_MEMORIES_GUARD = threading.Lock()


class InProcessStore(PendingWrites):
    """The storage port in process memory (see the module docstring)."""

    def __init__(self, settings: LogicMapSettings | None = None, *, name: str = "") -> None:
        self.settings = settings or LogicMapSettings()
        self.embedder = embedder_identity(self.settings)
        with _MEMORIES_GUARD:
            self._memory = _MEMORIES.setdefault(name, _Memory())
        self._pending_log = self._memory.pending

    # -- reading ---------------------------------------------------------------------------------------------

    def manifest(self, namespace: str) -> Manifest:
        namespace = validate_namespace(namespace)
        with self._memory.lock:
            space = self._memory.spaces.get(namespace)
            return space.manifest.model_copy(deep=True) if space else Manifest(namespace=namespace)

    def namespaces(self, under: str | None = None) -> list[str]:
        with self._memory.lock:
            names = [ns for ns, space in self._memory.spaces.items() if space.manifest.generation > 0]
        return sorted(ns for ns in names if under is None or ns == under or ns.startswith(under + "."))

    def has_namespace(self, namespace: str) -> bool:
        namespace = validate_namespace(namespace)
        with self._memory.lock:  # no copy of the manifest (its sessions grow with the namespace) to read one number
            space = self._memory.spaces.get(namespace)
            return space is not None and space.manifest.generation > 0

    def require_namespace(self, namespace: str) -> Manifest:
        manifest = self.manifest(namespace)
        if manifest.generation == 0:
            raise UnknownNamespaceError(namespace)
        return manifest

    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        namespace = validate_namespace(namespace)
        with self._memory.lock:
            space = self._memory.spaces.get(namespace)
            if space is None:
                return NamespaceSnapshot(namespace=namespace, manifest=Manifest(namespace=namespace))
            if space.latest is None:
                space.latest = self._read(space, space.manifest)
                _share_rows(space, space.latest)
            return space.latest

    def snapshot_at(self, namespace: str, generation: int) -> NamespaceSnapshot:
        namespace = validate_namespace(namespace)
        with self._memory.lock:
            space = self._memory.spaces.get(namespace)
            latest = space.manifest.generation if space else 0
            if space is None or generation not in space.committed:
                raise ValueError(
                    f"namespace {namespace!r} has no committed generation {generation} (it is at {latest})"
                )
            if generation == latest:
                return self.snapshot(namespace)
            manifest = space.manifest.model_copy(deep=True, update={"generation": generation})
            snap = self._read(space, manifest)
        held = {t.session_id for t in snap.turns.values()}
        snap.manifest.sessions = {k: v for k, v in snap.manifest.sessions.items() if k in held}
        return snap

    @staticmethod
    def _read(space: _Space, manifest: Manifest) -> NamespaceSnapshot:
        snap = NamespaceSnapshot(namespace=manifest.namespace, manifest=manifest)
        for kind in RECORD_KINDS:
            records: dict[str, Any] = {}
            vectors: dict[str, np.ndarray] = {}
            for rid, versions in space.versions[kind.field].items():
                seen = next((v for v in reversed(versions) if v.seen_at(manifest.generation)), None)
                if seen is None:
                    continue
                records[rid] = seen.record
                if kind.vector_field is not None and seen.vector is not None:
                    vectors[rid] = seen.vector
            setattr(snap, kind.field, records)
            if kind.vector_field is not None:
                setattr(snap, kind.vector_field, VectorTable.of(vectors))
        ordered(snap)
        return snap

    def query(self, namespace: str, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        return committed_nearest(self, namespace, kind, vector, k)

    # -- writing ---------------------------------------------------------------------------------------------

    def commit(self, change: ChangeSet) -> Manifest:
        return self._commit(change)

    def restore(self, change: ChangeSet, manifest: Manifest) -> Manifest:
        check_restore(change, manifest)
        return self._commit(change, restored=manifest)

    def _commit(self, change: ChangeSet, restored: Manifest | None = None) -> Manifest:
        namespace = validate_namespace(change.namespace)
        embedder = change.embedder or self.embedder
        writes = self._writes(change)
        with self._memory.lock:
            space = self._memory.spaces.get(namespace) or _Space(Manifest(namespace=namespace))
            generation = check_commit(change, space.manifest, embedder, restored=restored)
            self._check_turn_ids(change, space)
            for kind_field, ids in change.retire.items():
                for rid in ids:
                    live = self._live(space, kind_field, rid)
                    if live is not None:
                        live.retire(generation)
            for kind_field, rid, record, vector in writes:
                live = self._live(space, kind_field, rid)
                if live is not None:
                    live.retire(generation)
                space.versions[kind_field].setdefault(rid, []).append(_Version(record, vector, generation))
            if restored is None:
                space.manifest = next_manifest(space.manifest, change, generation, embedder)
            else:
                space.manifest = restored.model_copy(
                    deep=True,
                    update={"namespace": namespace, "generation": generation, "void": [], "embedder": embedder},
                )
            space.committed.add(generation)
            space.latest = None
            self._memory.spaces[namespace] = space
            return space.manifest.model_copy(deep=True)

    @staticmethod
    def _writes(change: ChangeSet) -> list[tuple[str, str, BaseModel, np.ndarray | None]]:
        """Every record the change writes, with its vector: checked (one vector per record) before any is."""
        writes = []
        for kind in RECORD_KINDS:
            records = list(getattr(change, kind.field))
            vectors = kind.stored_vectors(change)
            if vectors is not None and len(vectors) != len(records):
                raise ValueError(f"{kind.field}: {len(records)} records but {len(vectors)} vectors")
            for i, record in enumerate(records):
                vector = np.asarray(vectors[i], dtype=np.float32) if vectors is not None else None
                writes.append((kind.field, kind.record_id(record), _compact(record.model_copy(deep=True)), vector))
        return writes

    @staticmethod
    def _live(space: _Space, kind_field: str, rid: str) -> _Version | None:
        versions = space.versions.get(kind_field, {}).get(rid)
        if versions and versions[-1].died == SENTINEL:
            return versions[-1]
        return None

    def _check_turn_ids(self, change: ChangeSet, space: _Space) -> None:
        """Refuse a change that would replace a stored turn of another session (unless it retires it)."""
        retired = set(change.retire.get("turns", ()))
        for turn in change.turns:
            live = self._live(space, "turns", turn.dia_id)
            stored = getattr(live.record, "session_id", None) if live is not None else None
            if live is not None and turn.dia_id not in retired and stored != turn.session_id:
                raise TurnIdConflictError(
                    f"namespace {change.namespace!r}: turn {turn.dia_id!r} of session {turn.session_id!r} would "
                    f"overwrite the stored turn {turn.dia_id!r} of session {stored!r}; nothing was written: give "
                    "the turn another id"
                )

    # -- removing --------------------------------------------------------------------------------------------

    def purge(self, namespace: str) -> PurgeReport:
        namespace = validate_namespace(namespace)
        with self._memory.lock:
            manifest = self.require_namespace(namespace)
            space = self._memory.spaces[namespace]
            report = PurgeReport(namespace=namespace, generation=manifest.generation)
            for kind_field, by_id in space.versions.items():
                removed = 0
                for rid in list(by_id):
                    kept = [v for v in by_id[rid] if v.died == SENTINEL]
                    removed += len(by_id[rid]) - len(kept)
                    if kept:
                        by_id[rid] = kept
                    else:
                        del by_id[rid]
                if removed:
                    report.versions_removed[kind_field] = removed
            space.committed = {manifest.generation}  # what was purged is not served to a pinned run either
            space.latest = None
        return report

    def drop_namespace(self, namespace: str) -> dict[str, Any]:
        namespace = validate_namespace(namespace)
        with self._memory.lock:
            self._memory.pending.delete(namespace, through=2**62)
            space = self._memory.spaces.pop(namespace, None)
        if space is None or space.manifest.generation == 0:
            raise UnknownNamespaceError(namespace)
        return {"namespace": namespace, "generation": space.manifest.generation, "collections": 0, "compacted": False}

    def close(self) -> None:
        """Nothing to release: the memory stays while the process (or another store of its URL) lives."""

    def __enter__(self) -> InProcessStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def clear_in_process_memory(name: str | None = None) -> None:
    """Forget the in-process memory of one URL name (every one when None): for tests."""
    with _MEMORIES_GUARD:
        for key in [k for k in _MEMORIES if name is None or k == name]:
            del _MEMORIES[key]
