"""Namespaced memory with snapshot isolation: the single way records are read and written.

Code outside this package types against ``StoragePort`` (``port``) and opens a store with ``open_store``. The
Chroma backend (the default) works as follows.

Every record is stored as a version ``<id>@<generation>`` with ``born``/``died`` generations. A
namespace's manifest holds its committed generation G; readers see exactly the versions with
``born <= G < died`` (minus the ``void`` generations of writers that lost their lease). A session is
written as a new generation and becomes visible in one step, when the generation is linked to G
(``next@G``, added only if absent). A crashed writer leaves only invisible versions, which later
writers clear, so a re-run reaches exactly the state of an uninterrupted run.

The data directory is held by an OS lock on the directory itself (deleting the lock file changes
nothing), a store refuses to be used from a forked child, and a damaged or missing database of a
directory that held memory is reported in one line and never written over.

| module | owns |
| --- | --- |
| ``port`` | ``StoragePort``: the operations the rest of LogicMap uses, and the commit rules every backend shares |
| ``backends`` | ``open_store``: the backend ``LOGICMAP_STORE_URL`` names (Chroma by default) |
| ``inmemory`` | ``InProcessStore``: the port in process memory (unit tests, ephemeral agents) |
| ``postgres`` | ``PostgresStore``: the port on PostgreSQL + pgvector (one transaction per commit, versioned migrations) |
| ``facade`` | ``MemoryStore``, the Chroma backend, made of the rooms below |
| ``process`` | the data directory's process lock; refusing a store used in a forked child |
| ``health`` | damaged or missing databases (SQLite's checks), full disks, unreachable servers, as one-line errors |
| ``core`` | the connection: Chroma client, collections, namespace locks, committed manifests, ``store_call`` |
| ``generations`` | version ids, visibility of a generation, the commit lease's wait note and the fence |
| ``commits`` | the commit protocol: leases, claims, fences, the ``next@`` link, collection of retired versions |
| ``snapshots`` | the snapshot cache: whole reads, delta reads, snapshot files, a pinned generation's snapshot |
| ``pinned`` | ``PinnedStore``: one namespace at one generation, what every node of a run reads |
| ``purge`` | removing retired versions from disk (collections rebuilt, SQLite compacted), deleting a namespace |
| ``queries`` | exact vector queries over a snapshot |
| ``model`` | ``Manifest``, ``ChangeSet``, ``NamespaceSnapshot``, ``ForgetAudit`` |
| ``errors`` | the store's exceptions |

The record kinds every room loops over are declared once in ``memory.records.kinds``.
"""

from __future__ import annotations

from logicmap.memory.store.backends import open_store
from logicmap.memory.store.errors import (
    CommitLeaseLost,
    EmbedderMismatchError,
    GenerationConflict,
    StoreAccessError,
    StoreDamagedError,
    StoreError,
    StoreForkedError,
    StoreLockedError,
    StoreUnavailableError,
    TurnIdConflictError,
    UnknownMemoryError,
    UnknownNamespaceError,
)
from logicmap.memory.store.facade import MemoryStore

# Internal names tests import from here, kept importable from the path they had before the store became a package.
from logicmap.memory.store.generations import _PLACEHOLDER as _PLACEHOLDER
from logicmap.memory.store.generations import _RECORD as _RECORD
from logicmap.memory.store.generations import COMMIT_LOCK_ID as COMMIT_LOCK_ID
from logicmap.memory.store.generations import MAX_GENERATION
from logicmap.memory.store.generations import SENTINEL as SENTINEL
from logicmap.memory.store.generations import _visible as _visible
from logicmap.memory.store.health import MEMORY_MARKER
from logicmap.memory.store.inmemory import InProcessStore
from logicmap.memory.store.model import (
    ChangeSet,
    ForgetAudit,
    Manifest,
    NamespaceSnapshot,
    PurgeReport,
    embedder_identity,
)
from logicmap.memory.store.pinned import PinnedStore, SnapshotReader
from logicmap.memory.store.port import StoragePort
from logicmap.memory.store.snapshots import _MODELS as _MODELS

__all__ = [
    "ChangeSet",
    "CommitLeaseLost",
    "EmbedderMismatchError",
    "ForgetAudit",
    "GenerationConflict",
    "InProcessStore",
    "MAX_GENERATION",
    "MEMORY_MARKER",
    "Manifest",
    "MemoryStore",
    "NamespaceSnapshot",
    "PinnedStore",
    "PurgeReport",
    "SnapshotReader",
    "StoreAccessError",
    "StoreDamagedError",
    "StoreError",
    "StoreForkedError",
    "StoreLockedError",
    "StoragePort",
    "StoreUnavailableError",
    "TurnIdConflictError",
    "UnknownMemoryError",
    "UnknownNamespaceError",
    "embedder_identity",
    "open_store",
]
