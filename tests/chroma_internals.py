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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from logicmap.memory.kinds import RECORD_KINDS
from logicmap.memory.store import _PLACEHOLDER, COMMIT_LOCK_ID, SENTINEL, _visible

__all__ = [
    "collection",
    "claims",
    "hold_lease",
    "lease_held",
    "pending_retirements",
    "register_raw",
    "registered",
    "registry",
    "uncommitted_versions",
    "visible_duplicates",
    "wrap_collections",
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


def wrap_collections(store: Any, namespace: str, wrap: Callable[[Any], Any],
                     kinds: Iterable[str] = ("meta", *KINDS)) -> Callable[[], None]:
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
    collection(store, namespace, "meta").add(ids=[COMMIT_LOCK_ID], embeddings=[[1.0]], documents=[owner],
                                             metadatas=[{"owner": owner, "expires": time.time() + seconds}])


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


def uncommitted_versions(store: Any, namespace: str, kinds: Iterable[str] = KINDS, generation: int | None = None) -> int:
    """Versions written after the committed generation (a crashed or racing writer's leftovers)."""
    generation = store.manifest(namespace).generation if generation is None else generation
    return sum(len(collection(store, namespace, kind).get(where={"born": {"$gt": generation}}, include=[])["ids"])
               for kind in kinds)


def pending_retirements(store: Any, namespace: str, kinds: Iterable[str] = KINDS, generation: int | None = None) -> int:
    """Versions retired at a generation past the committed one (a crashed writer's retirements, not yet visible)."""
    generation = store.manifest(namespace).generation if generation is None else generation
    pending = {"$and": [{"died": {"$gt": generation}}, {"died": {"$lt": SENTINEL}}]}
    return sum(len(collection(store, namespace, kind).get(where=pending, include=[])["ids"]) for kind in kinds)
