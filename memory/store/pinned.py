"""A run's pinned view of one namespace: every read sees the generation the run started on.

``PinnedStore(store, namespace, generation, through=seq)`` (with the fast writes up to ``seq``) answers ``snapshot``/``require_namespace``/``manifest`` as the store
does, at that generation (``SnapshotCache.snapshot_at``), so retrievers, backbones and memory tools built on it
read one consistent memory however many commits land while the run goes on.
"""

from __future__ import annotations

from typing import Protocol, cast

from logicmap.memory.store.model import Manifest, NamespaceSnapshot

__all__ = ["PinnedStore", "SnapshotReader"]


class SnapshotReader(Protocol):
    """What a reader of committed memory needs: a namespace's snapshot (``MemoryStore`` or a ``PinnedStore``)."""

    def snapshot(self, namespace: str) -> NamespaceSnapshot: ...


class _AtGeneration(Protocol):
    def snapshot_at(self, namespace: str, generation: int) -> NamespaceSnapshot: ...


class PinnedStore:
    """One namespace of ``store`` at one generation, read-only. Another namespace is refused (a run reads its own)."""

    def __init__(self, store: _AtGeneration, namespace: str, generation: int, *, through: int | None = None) -> None:
        self.store, self.namespace, self.generation, self.through = store, namespace, generation, through

    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        if namespace != self.namespace:
            raise ValueError(f"this run is pinned to namespace {self.namespace!r}; it does not read {namespace!r}")
        if self.through:  # the fast writes the run started with, on top (``memory.store.live``)
            from logicmap.memory.store.live import LiveReader, live_snapshot

            return live_snapshot(
                cast(LiveReader, self.store), namespace, generation=self.generation, through=self.through
            )
        return self.store.snapshot_at(namespace, self.generation)

    def manifest(self, namespace: str) -> Manifest:
        return self.snapshot(namespace).manifest

    def require_namespace(self, namespace: str) -> Manifest:
        """The pinned generation's manifest (a pinned namespace was known when the run started)."""
        return self.manifest(namespace)

    def has_namespace(self, namespace: str) -> bool:
        return namespace == self.namespace and self.generation > 0
