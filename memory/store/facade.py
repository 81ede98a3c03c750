"""``MemoryStore``: the one way records are read and written, made of the store's rooms.

Reading is the snapshot cache's (``snapshots``), writing the commit protocol's (``commits``), both on the
connection and manifests of ``core``; physical removal is ``purge``'s; ``query`` searches a snapshot's vectors (``queries``).
"""

from __future__ import annotations

from collections.abc import Sequence

from logicmap.memory.store.core import store_call
from logicmap.memory.store.port import committed_nearest
from logicmap.memory.store.purge import StorePurge

__all__ = ["MemoryStore"]


class MemoryStore(StorePurge):
    """Reads and writes namespaced memory in Chroma (embedded by default, a server when configured)."""

    @store_call
    def query(self, namespace: str, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Nearest committed records of a kind to a vector: ``[(record id, cosine similarity)]``, best first.

        Exact: the snapshot's vectors are searched (``memory.store.queries``)."""
        return committed_nearest(self, namespace, kind, vector, k)
