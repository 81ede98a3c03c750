"""Vector queries: the records of a snapshot nearest to a vector, by exact cosine similarity.

Exact: the snapshot's vectors are searched (Chroma's own index is built cheaply, being approximate and used by no
reader, so asking it for every record could leave some out).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from logicmap.memory.indexes.snapshot_file import VectorTable
from logicmap.memory.records.kinds import BY_FIELD, RECORD_KINDS
from logicmap.memory.store.model import NamespaceSnapshot

__all__ = ["QUERYABLE", "check_queryable", "nearest"]

QUERYABLE = tuple(kind.field for kind in RECORD_KINDS if kind.has_vectors)  # the kinds ``query`` accepts


def check_queryable(kind: str) -> None:
    if kind not in QUERYABLE:
        raise ValueError(f"{kind!r} records have no vectors; ask for one of {', '.join(QUERYABLE)}")


def nearest(snap: NamespaceSnapshot, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
    """``[(record id, cosine similarity)]`` of the ``k`` records of ``kind`` nearest to ``vector``, best first."""
    check_queryable(kind)
    table = _table(snap, kind)
    if k <= 0 or not len(table):
        return []
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    if query.shape[0] != table.matrix.shape[1]:
        raise ValueError(
            f"a query vector of width {query.shape[0]} for {kind} vectors of width {table.matrix.shape[1]}"
        )
    sims = _unit_rows(table.matrix) @ _unit_rows(query[None, :])[0]
    top = np.argsort(-sims, kind="stable")[:k]
    return [(table.ids[i], float(sims[i])) for i in top]


def _table(snap: NamespaceSnapshot, kind: str) -> VectorTable:
    record_kind = BY_FIELD[kind]
    if record_kind.vector_field is not None:
        return VectorTable.of(getattr(snap, record_kind.vector_field))
    centroid = record_kind.centroid_field or ""
    return VectorTable.of({rid: getattr(r, centroid) for rid, r in getattr(snap, kind).items()})


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)
