"""The storage port: what the rest of LogicMap needs of a memory store, declared once, and the rules every backend
shares.

Code outside ``memory/store/`` types against ``StoragePort``; a backend implements it:

| backend | module | for |
| --- | --- | --- |
| Chroma (embedded, or a Chroma server) | ``facade`` (``MemoryStore``) and its rooms | the default: one process per data directory, or many on a server |
| in process | ``inmemory`` (``InProcessStore``) | unit tests and ephemeral agents: nothing on disk, gone with the process |
| PostgreSQL + pgvector | ``postgres`` (``PostgresStore``) | many processes on one memory, with real transactions |

A commit writes a ``ChangeSet`` as the namespace's next generation, all or nothing, and only if the namespace is
still at ``change.base_generation`` (else ``GenerationConflict``: the writer recomputes on the new generation). A
backend with real transactions does that with a transaction and a compare-and-swap on the generation; the Chroma
backend, which has none, with its lease-and-fence protocol (``commits``); the PostgreSQL backend does the former. Readers see committed generations only:
``snapshot`` the latest, ``snapshot_at`` one a run pinned. ``purge`` removes what no reader of the committed
generation sees (retired versions); ``drop_namespace`` removes a namespace. Record kinds come from
``memory.records.kinds.RECORD_KINDS`` only: a backend loops over them and never names one. Every operation that takes a
namespace refuses one that is no valid name (``records.validate_namespace``) before it reads or writes: the store is
a boundary, and callers hand it a caller's namespace as it came.

A backend may keep a pending log (``pending_log``: fast writes until the consolidator commits them; ``fast_writes``
says whether it does): the embedded Chroma store and the in-process one do, the Chroma server and PostgreSQL not yet.
Readers see committed records plus pending writes through ``live.live_snapshot``.

``tests/unit/test_storage_port.py`` is the one conformance suite every backend passes (atomicity, generation
conflicts, snapshot isolation, purge, drop, every kind round-tripped, concurrent writers).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from logicmap.memory.store.errors import EmbedderMismatchError, GenerationConflict, StoreError
from logicmap.memory.store.generations import MAX_GENERATION
from logicmap.memory.store.model import ChangeSet, Manifest, NamespaceSnapshot, PendingHead, PendingWrite, PurgeReport
from logicmap.memory.store.queries import check_queryable, nearest
from logicmap.settings import LogicMapSettings

__all__ = ["StoragePort", "check_commit", "check_restore", "committed_nearest", "next_manifest", "purge_requested"]


@runtime_checkable
class StoragePort(Protocol):
    """A memory store: namespaced records at committed generations (see the module docstring)."""

    settings: LogicMapSettings
    embedder: str
    """The identity of the embedder this store writes vectors with (``model.embedder_identity``)."""

    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        """The latest committed records of ``namespace`` (an empty snapshot at generation 0 when it has none)."""
        ...

    def snapshot_at(self, namespace: str, generation: int) -> NamespaceSnapshot:
        """The records at a committed ``generation`` (``ValueError`` for one never committed or purged away)."""
        ...

    def manifest(self, namespace: str) -> Manifest:
        """The committed manifest (generation 0 for a namespace with no commit)."""
        ...

    def namespaces(self, under: str | None = None) -> list[str]:
        """The namespaces with a commit, sorted; ``under``: that namespace and those below it (``acme.bob``)."""
        ...

    def has_namespace(self, namespace: str) -> bool: ...

    def require_namespace(self, namespace: str) -> Manifest:
        """The manifest, or ``UnknownNamespaceError`` (which names no other namespace)."""
        ...

    def commit(self, change: ChangeSet) -> Manifest:
        """Write ``change`` as the next generation, all or nothing, if the namespace is at its base generation."""
        ...

    def restore(self, change: ChangeSet, manifest: Manifest) -> Manifest:
        """Write a whole exported namespace into an empty one in one commit, with the exported manifest."""
        ...

    def purge(self, namespace: str) -> PurgeReport:
        """Remove every retired version of ``namespace``."""
        ...

    def drop_namespace(self, namespace: str) -> dict[str, Any]:
        """Delete ``namespace`` and all it holds (``UnknownNamespaceError`` when it holds nothing)."""
        ...

    def query(self, namespace: str, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """The ``k`` committed records of ``kind`` nearest to ``vector``: ``[(id, cosine similarity)]``."""
        ...

    def close(self) -> None: ...

    # The pending log (``memory.store.pending_log``): fast writes until the consolidator commits them.
    @property
    def fast_writes(self) -> bool:
        """Whether this store keeps a pending log (else every write is ingested and committed at once)."""
        ...

    def append_pending(self, writes: Sequence[PendingWrite]) -> list[int]:
        """Record fast writes durably, in order, all or none; their sequence numbers."""
        ...

    def pending_writes(
        self, namespace: str, after: int | None = None, seqs: Sequence[int] | None = None
    ) -> list[PendingWrite]:
        """The writes of ``namespace`` not consolidated yet (above ``Manifest.consolidated_through``; those numbered
        ``seqs``, when given), in order."""
        ...

    def pending_heads(self, namespace: str, after: int | None = None) -> list[PendingHead]:
        """The heads (sequence number, session, turns) of ``pending_writes``, without their turns and vectors."""
        ...

    def drop_pending(self, namespace: str, *, through: int | None = None, seqs: Sequence[int] = ()) -> int:
        """Delete pending writes (consolidated ones up to ``through``, or the numbered ``seqs``)."""
        ...

    def pending_namespaces(self) -> list[str]:
        """The namespaces holding a pending write."""
        ...


def check_commit(change: ChangeSet, manifest: Manifest, embedder: str, *, restored: Manifest | None = None) -> int:
    """The generation ``change`` commits as, or why it may not: ``GenerationConflict`` (the namespace moved),
    ``EmbedderMismatchError``, ``StoreError`` (no generation left). Checked before anything is written."""
    namespace = manifest.namespace
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
    wanted = restored.generation if restored is not None else manifest.generation + 1
    if wanted > MAX_GENERATION:
        raise StoreError(
            f"namespace {namespace!r}: generation {wanted} is past the last one this store can make visible "
            f"({MAX_GENERATION}); nothing was written"
        )
    return wanted


def next_manifest(
    manifest: Manifest, change: ChangeSet, generation: int, embedder: str, void: Sequence[int] = ()
) -> Manifest:
    """The manifest after ``change`` commits as ``generation``: its session, topic steps, source, dropped sessions
    and forget audit applied (the same for every backend)."""
    new_manifest = manifest.model_copy(deep=True)
    new_manifest.generation = generation
    new_manifest.void = list(void)
    new_manifest.embedder = embedder
    new_manifest.source = manifest.source or change.source
    new_manifest.updated_at = datetime.now(UTC)
    for info in ([change.session] if change.session is not None else []) + list(change.sessions):
        session = info.model_copy(update={"generation": generation})
        new_manifest.sessions[session.session_id] = session
    if change.topic_steps is not None:
        new_manifest.topic_steps = change.topic_steps
    for session_id in change.drop_sessions:
        new_manifest.sessions.pop(session_id, None)
    for forget in ([change.forget] if change.forget is not None else []) + list(change.forgets):
        new_manifest.forgets.append(forget.model_copy(update={"generation": generation}))
    if change.consumes_through is not None:
        new_manifest.consolidated_through = max(manifest.consolidated_through, change.consumes_through)
    if purge_requested(change):  # recorded with the forget: a purge killed before it finished is owed
        new_manifest.purge_requested = generation
    return new_manifest


def purge_requested(change: ChangeSet) -> bool:
    """Whether a change asks for its retired versions to be purged (its forget's audit record says so)."""
    return any(f.purged for f in ([change.forget] if change.forget is not None else []) + list(change.forgets))


def check_restore(change: ChangeSet, manifest: Manifest) -> None:
    """A restore writes an exported namespace, at generation >= 1, into an empty one (base generation 0)."""
    if change.base_generation != 0 or manifest.generation < 1:
        raise ValueError("a restore writes generation >= 1 on an empty namespace (base generation 0)")


def committed_nearest(
    store: StoragePort, namespace: str, kind: str, vector: Sequence[float], k: int
) -> list[tuple[str, float]]:
    """``StoragePort.query`` for every backend: exact cosine search over the latest snapshot's vectors
    (``memory.store.queries``); nothing for a namespace with no commit."""
    check_queryable(kind)
    if k <= 0 or store.manifest(namespace).generation == 0:
        return []
    return nearest(store.snapshot(namespace), kind, vector, k)
