"""The one place in ``tests/`` that knows the Chroma backend's internals: its collections, its namespace registry and
the records of its commit protocol.

Every other test reads and writes memory through the storage port (``memory/store/port.py``: snapshot, manifest,
commit, purge, drop, query), which every backend implements. The tests that call these helpers are the Chroma
backend's own: what they prove cannot be seen through the port, because it is how Chroma holds the records
(a version per generation, born and died in its metadata; the ``lm-namespaces`` registry; leases, claims and
``next@`` links in a namespace's ``meta`` collection) or because they inject a fault between two collection writes
of the commit protocol (``memory/store/commits.py``), which a backend with real transactions does not have.
``tests/unit/test_test_boundaries.py`` fails when a test file other than this one reaches into them.

| helper | for |
| --- | --- |
| ``collection``, ``registry`` | the Chroma collection of a namespace's kind (``meta``: manifests, leases, claims), the registry |
| ``registered``, ``register_raw`` | whether a name is in the registry; a name written there as an older version did |
| ``wrap_collections`` | fault injection: a namespace's collections replaced by wrappers, until undone |
| ``lease_held``, ``hold_lease``, ``claims`` | the commit protocol's lease record and generation claims |
| ``visible_duplicates``, ``uncommitted_versions``, ``pending_retirements`` | versions the snapshot's dicts would hide |
| ``write_versions``, ``retire_versions`` | a writer's collection writes before its manifest moves (what a crash leaves) |
| ``version_writer``, ``replace_version_writer`` | fault injection: every Chroma store's version writes replaced |
| ``read_in_pages_of`` | the Chroma store's page size for its reads (records per ``get``) |
| ``whole_reads`` | the namespaces the Chroma store reads whole (not from a snapshot file, not as a delta) |
| ``forget_snapshots``, ``snapshot_file`` | the snapshot cache emptied (the next read opens the namespace again); its file |
| ``kept_generations``, ``forget_kept``, ``keep`` | the superseded snapshots kept for pinned runs |
| ``server_commit_lock``, ``mark_memory`` | a Chroma server's commit lease; the embedded store's "holds memory" marker |
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.store import _PLACEHOLDER, COMMIT_LOCK_ID, SENTINEL, MemoryStore, NamespaceSnapshot, _visible

if TYPE_CHECKING:
    import pytest

__all__ = [
    "collection",
    "claims",
    "forget_kept",
    "forget_snapshots",
    "hold_lease",
    "keep",
    "kept_generations",
    "lease_held",
    "mark_memory",
    "pending_retirements",
    "read_in_pages_of",
    "register_raw",
    "registered",
    "registry",
    "replace_version_writer",
    "retire_versions",
    "server_commit_lock",
    "snapshot_file",
    "uncommitted_versions",
    "version_writer",
    "visible_duplicates",
    "whole_reads",
    "wrap_collections",
    "write_versions",
]

REGISTRY = "lm-namespaces"
KINDS = tuple(kind.field for kind in RECORD_KINDS)


def collection(store: Any, namespace: str, kind: str) -> Any:
    """The Chroma collection that holds ``kind`` of ``namespace`` (``meta``: its manifests and commit records),
    created on first use."""
    return store._collection(namespace, kind)


def registry(store: Any) -> Any:
    """The ``lm-namespaces`` collection: one row per namespace a writer registered (committed or not)."""
    return store._registry()


def registered(store: Any, namespace: str) -> bool:
    return bool(registry(store).get(ids=[namespace])["ids"])


def register_raw(store: Any, name: str) -> None:
    """Register ``name`` unchecked, as a version that matched names without their end could ("acme\\n")."""
    registry(store).add(ids=[name], embeddings=[_PLACEHOLDER], documents=[name], metadatas=[{"ns": name}])


def wrap_collections(
    store: Any, namespace: str, wrap: Callable[[Any], Any], kinds: Iterable[str] = ("meta", *KINDS)
) -> Callable[[], None]:
    """Replace ``store``'s collections of ``namespace`` (those of ``kinds``) by ``wrap(collection)``, so a test can
    stall or kill a writer between two collection writes; returns what puts the originals back."""
    originals = {}
    for kind in kinds:
        col = collection(store, namespace, kind)  # created before it is wrapped
        name = next(k for k, v in store._collections.items() if v is col)
        originals[name] = col
        store._collections[name] = wrap(col)

    def undo() -> None:
        store._collections.update(originals)

    return undo


def lease_held(store: Any, namespace: str) -> bool:
    """Whether a writer's commit lease record is on ``namespace`` (a live writer's, or a dead one's left behind)."""
    return bool(collection(store, namespace, "meta").get(ids=[COMMIT_LOCK_ID])["ids"])


def hold_lease(store: Any, namespace: str, owner: str, seconds: float) -> None:
    """Play another writer: its commit lease on ``namespace`` for ``seconds``."""
    collection(store, namespace, "meta").add(
        ids=[COMMIT_LOCK_ID],
        embeddings=[[1.0]],
        documents=[owner],
        metadatas=[{"owner": owner, "expires": time.time() + seconds}],
    )


def claims(store: Any, namespace: str) -> dict[str, Any]:
    """The generation claims (``claim@n``) on ``namespace``, as Chroma's ``get`` returns them."""
    return dict(collection(store, namespace, "meta").get(where={"kind": "claim"}))


def visible_duplicates(store: Any, namespace: str) -> list[str]:
    """Record ids with more than one visible version (the snapshot's dicts would hide them)."""
    generation = store.manifest(namespace).generation
    found = []
    for kind in KINDS:
        got = collection(store, namespace, kind).get(where=_visible(generation), include=["metadatas"])
        rids = [m["rid"] for m in got["metadatas"]]
        found += [f"{kind}:{r}" for r in sorted({r for r in rids if rids.count(r) > 1})]
    return found


def uncommitted_versions(
    store: Any, namespace: str, kinds: Iterable[str] = KINDS, generation: int | None = None
) -> int:
    """Versions written after the committed generation (a crashed or racing writer's leftovers)."""
    generation = store.manifest(namespace).generation if generation is None else generation
    return sum(
        len(collection(store, namespace, kind).get(where={"born": {"$gt": generation}}, include=[])["ids"])
        for kind in kinds
    )


def pending_retirements(store: Any, namespace: str, kinds: Iterable[str] = KINDS, generation: int | None = None) -> int:
    """Versions retired at a generation past the committed one (a crashed writer's retirements, not yet visible)."""
    generation = store.manifest(namespace).generation if generation is None else generation
    pending = {"$and": [{"died": {"$gt": generation}}, {"died": {"$lt": SENTINEL}}]}
    return sum(len(collection(store, namespace, kind).get(where=pending, include=[])["ids"]) for kind in kinds)


def write_versions(
    store: Any,
    namespace: str,
    kind: str,
    records: Sequence[BaseModel],
    vectors: Sequence[Sequence[float]] | None,
    generation: int,
) -> None:
    """Write ``records`` as versions of ``generation`` the way a commit does before its manifest moves (a writer
    that dies there leaves them: invisible, cleared by the next commit)."""
    store._write(namespace, kind, records, vectors, generation)


def retire_versions(store: Any, namespace: str, kind: str, rids: Sequence[str], generation: int, previous: int) -> None:
    """Mark the versions of ``rids`` visible at ``previous`` as retired at ``generation``, as a commit does before its
    manifest moves."""
    store._retire(namespace, kind, rids, generation, previous)


def version_writer() -> Callable[..., None]:
    """The Chroma store's version write (``write_versions``'s method), for a test that wraps it."""
    writer: Callable[..., None] = MemoryStore._write
    return writer


def replace_version_writer(monkeypatch: pytest.MonkeyPatch, writer: Callable[..., None]) -> None:
    """Fault injection: every Chroma store writes its versions with ``writer`` (``writer(store, namespace, kind,
    records, vectors, generation, **fence)``) until the test ends or puts ``version_writer()``'s back."""
    monkeypatch.setattr(MemoryStore, "_write", writer)


def forget_snapshots(store: Any) -> None:
    """Empty ``store``'s snapshot cache: its next read of a namespace opens it again (from the namespace's snapshot
    file when it has one, else read whole from the collections)."""
    store._snapshots.clear()


def snapshot_file(store: Any, namespace: str) -> Path | None:
    """Where an embedded store persists ``namespace``'s snapshot (None for a store on a Chroma server)."""
    path: Path | None = store._snapshot_file(namespace)
    return path


def kept_generations(store: Any) -> list[tuple[str, int]]:
    """The superseded snapshots ``store`` keeps for pinned runs, as (namespace, generation), oldest read first."""
    return list(store._kept)


def forget_kept(store: Any) -> None:
    """Drop the superseded snapshots ``store`` keeps (as after many commits): a pinned read reads its versions."""
    store._kept.clear()


def keep(store: Any, snap: NamespaceSnapshot) -> None:
    """Keep ``snap`` as a superseded snapshot for pinned runs, within the store's count and vector budget."""
    store._keep(snap)


def server_commit_lock(store: Any, namespace: str) -> contextlib.AbstractContextManager[str]:
    """A store on a Chroma server: its commit lease on ``namespace`` (held while the context is open)."""
    lease: contextlib.AbstractContextManager[str] = store._server_commit_lock(namespace)
    return lease


def mark_memory(store: Any) -> None:
    """The embedded store's marker that its directory holds memory, written (if it is not there yet)."""
    store._mark_memory()


def whole_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The list every Chroma store appends a namespace to when it reads it whole (no snapshot file to open, no cached
    snapshot to advance), until the test ends."""
    calls: list[str] = []
    original = MemoryStore._read_whole

    def counted(self: MemoryStore, manifest: Any) -> NamespaceSnapshot:
        calls.append(manifest.namespace)
        return original(self, manifest)

    monkeypatch.setattr(MemoryStore, "_read_whole", counted)
    return calls


def read_in_pages_of(monkeypatch: pytest.MonkeyPatch, records: int) -> None:
    """Every Chroma store reads its collections ``records`` at a time until the test ends (its page is 10,000)."""
    monkeypatch.setattr(MemoryStore, "_read_page", records)
