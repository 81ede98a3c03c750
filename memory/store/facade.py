"""``MemoryStore``: the one way records are read and written, made of the store's rooms.

Reading is the snapshot cache's (``snapshots``), writing the commit protocol's (``commits``), both on the
connection and manifests of ``core``; ``query`` searches a snapshot's vectors (``queries``).
"""

from __future__ import annotations

from collections.abc import Sequence

from logicmap.memory.store.commits import CommitProtocol
from logicmap.memory.store.core import store_call
from logicmap.memory.store.queries import check_queryable, nearest
from logicmap.memory.store.snapshots import SnapshotCache

__all__ = ["MemoryStore"]


class MemoryStore(CommitProtocol, SnapshotCache):
    """Reads and writes namespaced memory in Chroma (embedded by default, a server when configured)."""

    @store_call
    def query(self, namespace: str, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Nearest committed records of a kind to a vector: ``[(record id, cosine similarity)]``, best first.

        Exact: the snapshot's vectors are searched (``memory.store.queries``)."""
        check_queryable(kind)
        if k <= 0 or self.manifest(namespace).generation == 0:
            return []
        return nearest(self.snapshot(namespace), kind, vector, k)
