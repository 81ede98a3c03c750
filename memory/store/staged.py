"""A staged store: many commits of one namespace gathered in memory and written to the real store as one.

The consolidator (``graphs.writes.consolidate``) ingests a batch of pending sessions through the ingest graph, which commits
once per session and reads each commit back (positions, fusion, topics). On ``StagedStore`` those commits apply to an
in-memory snapshot (``live.applied``), so each session sees the ones before it exactly as if they were committed;
``write()`` then commits the difference between the base snapshot and the staged one as ONE change set on the real
store, at the base generation: all the batch's sessions visible at once, or none (a ``GenerationConflict`` when
another writer moved the namespace meanwhile: the batch is recomputed). Every other namespace, and every other
operation, goes to the real store. A batch of ``RELEASE_AFTER`` sessions or more, once written, hands the memory its
staged views freed back to the system (``memory.runtime.heap``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from logicmap.memory.indexes.snapshot_file import VectorTable
from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.runtime.heap import return_freed_memory
from logicmap.memory.store.errors import GenerationConflict
from logicmap.memory.store.live import applied
from logicmap.memory.store.model import ChangeSet, ForgetAudit, Manifest, NamespaceSnapshot
from logicmap.memory.store.port import StoragePort, check_commit, next_manifest

__all__ = ["RELEASE_AFTER", "StagedStore"]

RELEASE_AFTER = 10  # staged commits (sessions) from which a written batch returns freed memory to the system


class StagedStore:
    """``store`` with the commits of ``namespace`` staged in memory until ``write()`` (see the module docstring)."""

    def __init__(self, store: StoragePort, namespace: str) -> None:
        self.store, self.namespace = store, namespace
        self.base = store.snapshot(namespace)  # the real store refuses an invalid name
        self.view = self.base
        self.staged = 0
        self._forgets: list[ForgetAudit] = []
        self._consumed: int | None = None
        self._drop: set[str] = set()

    def __getattr__(self, name: str) -> Any:  # everything not staged is the real store's
        return getattr(self.store, name)

    # -- what the ingest graph reads and writes -----------------------------------------------------------------

    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        return self.view if namespace == self.namespace else self.store.snapshot(namespace)

    def manifest(self, namespace: str) -> Manifest:
        return self.view.manifest if namespace == self.namespace else self.store.manifest(namespace)

    def has_namespace(self, namespace: str) -> bool:
        return self.manifest(namespace).generation > 0

    def require_namespace(self, namespace: str) -> Manifest:
        if namespace != self.namespace:
            return self.store.require_namespace(namespace)
        return self.view.manifest

    def commit(self, change: ChangeSet) -> Manifest:
        if change.namespace != self.namespace:
            return self.store.commit(change)
        generation = check_commit(change, self.view.manifest, self.store.embedder)
        manifest = next_manifest(
            self.view.manifest, change, generation, self.store.embedder, void=self.view.manifest.void
        )
        self.view = applied(self.view, change, manifest)
        self.staged += 1
        if change.forget is not None:
            self._forgets.append(change.forget)
        if change.consumes_through is not None:
            self._consumed = max(self._consumed or 0, change.consumes_through)
        self._drop.update(change.drop_sessions)
        return manifest

    # -- the one real commit -------------------------------------------------------------------------------------

    def change(self) -> ChangeSet:
        """What the staged commits changed, as one change set on the base generation."""
        out = ChangeSet(
            namespace=self.namespace,
            base_generation=self.base.generation,
            source=self.view.manifest.source,
            topic_steps=self.view.manifest.topic_steps,
            consumes_through=self._consumed,
            drop_sessions=sorted(self._drop),
        )
        for kind in RECORD_KINDS:
            before: dict[str, Any] = getattr(self.base, kind.field)
            after: dict[str, Any] = getattr(self.view, kind.field)
            written = [rid for rid, record in after.items() if before.get(rid) is not record]
            gone = sorted(rid for rid in before if rid not in after)
            setattr(out, kind.field, [after[rid] for rid in written])
            if kind.vector_field is not None:
                table = VectorTable.of(getattr(self.view, kind.vector_field))
                rows = [rid for rid in written if rid in table]
                if len(rows) == len(written):
                    setattr(out, kind.vector_field, _rows(table, rows))
            if gone:
                out.retire[kind.field] = gone
        sessions = self.view.manifest.sessions
        out.sessions = [s for sid, s in sessions.items() if self.base.manifest.sessions.get(sid) != s]
        out.forgets = list(self._forgets)
        return out

    def write(self) -> Manifest | None:
        """Commit what was staged to the real store in one change set (None: nothing was staged)."""
        if not self.staged:
            return None
        if self.store.manifest(self.namespace).generation != self.base.generation:
            raise GenerationConflict(f"namespace {self.namespace!r} moved while a consolidation batch was staged")
        manifest = self.store.commit(self.change())
        if self.staged >= RELEASE_AFTER:
            return_freed_memory()
        return manifest


def _rows(table: VectorTable, ids: Sequence[str]) -> list[list[float]]:
    matrix = table.rows_of(list(ids)) if ids else np.zeros((0, 0), dtype=np.float32)
    return [list(map(float, row)) for row in matrix]
