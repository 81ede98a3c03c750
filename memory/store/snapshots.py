"""The snapshot cache: a namespace's committed records read whole, from its snapshot file, or as a delta.

A newer generation is read as a delta on the cached snapshot (the versions born and retired since); an embedded
store saves each namespace's snapshot to a file (``memory.indexes.snapshot_file``) and opens it from there next time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from logicmap.memory.indexes.snapshot_file import (
    SnapshotFile,
    SnapshotFileError,
    VectorTable,
    gc_paused,
    read_snapshot_file,
    snapshot_path,
    write_snapshot_file,
)
from logicmap.memory.records.kinds import RECORD_KINDS, RecordKind
from logicmap.memory.records.records import stable_hash
from logicmap.memory.store.core import StoreCore, store_call
from logicmap.memory.store.generations import _RECORD, PURGED_ID, _shown, _visible
from logicmap.memory.store.model import Manifest, NamespaceSnapshot
from logicmap.memory.store.model import ordered as _order

__all__ = ["SnapshotCache"]

_log = logging.getLogger(__name__)

_MODELS = {kind.field: kind.model for kind in RECORD_KINDS}  # a snapshot file's record sections
_PERSIST_MIN_DELTA = 1_000  # records committed since the snapshot file before it is saved again
_MAX_LISTED = 256  # generations a delta read lists by number rather than as a range
_KEPT = 8  # superseded snapshots kept for runs pinned to them (``snapshot_at``), the most recently read first
_KEPT_VECTOR_BYTES = 128 * 2**20  # and their vectors at most this many bytes together (the newest is always kept)


def _vector_bytes(snap: NamespaceSnapshot) -> int:
    """What a snapshot's vectors take in memory."""
    total = 0
    for kind in RECORD_KINDS:
        if kind.vector_field is not None:
            table = getattr(snap, kind.vector_field)
            total += (
                table.matrix.nbytes
                if isinstance(table, VectorTable)
                else sum(np.asarray(v).nbytes for v in table.values())
            )
    return total


class SnapshotCache(StoreCore):
    """Reads committed snapshots: cached per namespace, advanced by deltas, persisted to files (embedded)."""

    # -- reading --------------------------------------------------------------------------------
    @store_call
    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        """The committed records of a namespace (cached until its generation changes).

        A newer generation is read as a delta on the cached snapshot (the versions born and retired
        since), so a commit costs a reader what the commit wrote, not the whole namespace again. The
        cached snapshot is never changed: readers holding it keep their consistent view. An embedded
        store opens a namespace from its persisted snapshot file plus the delta since the file's
        generation (``memory.indexes.snapshot_file``); a file it cannot trust is ignored and the namespace read whole.
        """
        cached = self._snapshots.get(namespace)
        if cached is not None and self._unchanged_since(namespace, cached):
            return cached
        commits = self._commit_count(namespace)
        manifest = self.manifest(namespace)
        if cached is not None and cached.manifest.generation == manifest.generation:
            self._verified[namespace] = commits
            return cached
        with gc_paused():
            if (
                cached is not None
                and 0 < cached.manifest.generation < manifest.generation
                and not self._purged_since(namespace, cached.manifest.generation)
            ):
                snap = self._advance(cached, manifest)
                self._since_file[namespace] = self._since_file.get(namespace, 0) + self._delta_size(cached, snap)
            else:
                opened = self._open_persisted(manifest) if manifest.generation > 0 else None
                if opened is None:
                    opened = self._read_whole(manifest)
                    self._since_file[namespace] = -1  # no file to build on
                snap = opened
        if cached is not None and cached is not snap:
            self._keep(cached)
        self._snapshots[namespace] = snap
        self._verified[namespace] = commits
        self._persist(snap)
        return snap

    @store_call
    def snapshot_at(self, namespace: str, generation: int) -> NamespaceSnapshot:
        """The committed records of a namespace at ``generation``: what a run pinned to that generation reads
        (``graphs.runtime.pin``), however many commits land while it runs.

        The cached snapshot when it is that generation, else one of the few superseded snapshots kept, else the
        namespace read at that generation from its versions (a version retired later is still stored, unless a
        purge removed it: what was purged stays forgotten). ``ValueError`` for a generation never committed."""
        cached = self._snapshots.get(namespace)
        if cached is not None and cached.generation == generation:
            return cached
        kept = self._kept.get((namespace, generation))
        if kept is not None:
            self._kept.move_to_end((namespace, generation))
            return kept
        latest = self.snapshot(namespace)
        if latest.generation == generation:
            return latest
        void = [n for n in latest.manifest.void if n <= generation]
        if not 0 < generation < latest.generation or generation in void:
            raise ValueError(
                f"namespace {namespace!r} has no committed generation {generation} (it is at {latest.generation})"
            )
        with gc_paused():
            snap = self._read_whole(latest.manifest.model_copy(update={"generation": generation, "void": void}))
        held = {t.session_id for t in snap.turns.values()}
        snap.manifest.sessions = {k: v for k, v in snap.manifest.sessions.items() if k in held}
        self._keep(snap)
        return snap

    def _drop_kept(self, namespace: str) -> None:
        kept = self._kept
        for key in [k for k in kept if k[0] == namespace]:
            del kept[key]

    def _keep(self, snap: NamespaceSnapshot) -> None:
        """Keep a superseded snapshot a while: a run pinned to it reads it without reading the namespace again."""
        kept = self._kept
        kept[(snap.namespace, snap.generation)] = snap
        kept.move_to_end((snap.namespace, snap.generation))
        # Each kept snapshot owns its vector matrices: eight of a large namespace, superseded one commit after the
        # other by a long write (a large add_messages), held gigabytes.
        while len(kept) > _KEPT or (len(kept) > 1 and sum(map(_vector_bytes, kept.values())) > _KEPT_VECTOR_BYTES):
            kept.popitem(last=False)

    def _purged_since(self, namespace: str, generation: int) -> bool:
        """Whether a purge removed retired versions after ``generation``: a delta read from there would miss the
        retirements it removed, so the namespace is read whole (``purge``)."""
        got = self._collection(namespace, "meta").get(ids=[PURGED_ID], include=["metadatas"])
        return bool(got["ids"]) and int(got["metadatas"][0].get("generation", 0)) > generation

    def _read_whole(self, manifest: Manifest) -> NamespaceSnapshot:
        snap = NamespaceSnapshot(namespace=manifest.namespace, manifest=manifest)
        if manifest.generation > 0:
            for kind in RECORD_KINDS:
                records, vectors = self._read_kind(manifest.namespace, kind, manifest.generation, void=manifest.void)
                setattr(snap, kind.field, records)
                if kind.vector_field is not None:
                    setattr(snap, kind.vector_field, vectors)
            _order(snap)
        return snap

    # -- persisted snapshots (embedded store only) ----------------------------------------------
    def _unchanged_since(self, namespace: str, cached: NamespaceSnapshot) -> bool:
        """Whether the cached snapshot is still the committed state without reading the manifest: only an
        embedded store holding its directory lock knows every commit (they are made in this process)."""
        if self._directory is None or self._lock_path is None:
            return False
        verified = self._verified.get(namespace)
        return verified is not None and verified == self._commit_count(namespace)

    @staticmethod
    def _delta_size(old: NamespaceSnapshot, new: NamespaceSnapshot) -> int:
        return sum(abs(len(getattr(new, kind)) - len(getattr(old, kind))) for kind in _MODELS) + 1

    def _snapshot_file(self, namespace: str) -> Path | None:
        if self._directory is None:
            return None
        return snapshot_path(self._directory, stable_hash(namespace, length=16))

    def _link_token(self, namespace: str, generation: int) -> str | None:
        """The token of the commit that made ``generation`` visible (its ``next@`` link), None if there is none."""
        got = self._collection(namespace, "meta").get(
            where={"$and": [{"kind": "next"}, {"generation": generation}]}, include=["metadatas"]
        )
        owners = {m.get("owner") for m in got["metadatas"]}
        return owners.pop() if len(owners) == 1 else None

    def _open_persisted(self, manifest: Manifest) -> NamespaceSnapshot | None:
        """The namespace from its snapshot file plus the delta since; None when there is no file to trust."""
        path = self._snapshot_file(manifest.namespace)
        if path is None or not path.exists():
            return None
        try:
            saved = read_snapshot_file(path, manifest.namespace, _MODELS)
            if not 0 < saved.generation <= manifest.generation or saved.generation in manifest.void:
                raise SnapshotFileError(f"{path}: generation {saved.generation}, namespace at {manifest.generation}")
            if self._link_token(manifest.namespace, saved.generation) != saved.link:
                raise SnapshotFileError(f"{path}: generation {saved.generation} of another history")
            base = self._from_file(saved, manifest)
        except SnapshotFileError as exc:
            _log.warning("ignoring the persisted snapshot (%s); reading the namespace from its records", exc)
            return None
        if base.manifest.generation == manifest.generation:
            self._since_file[manifest.namespace] = 0
            return base
        snap = self._advance(base, manifest)
        self._since_file[manifest.namespace] = self._delta_size(base, snap)
        return snap

    @staticmethod
    def _from_file(saved: SnapshotFile, manifest: Manifest) -> NamespaceSnapshot:
        try:
            saved_manifest = Manifest.model_validate(saved.manifest)
        except ValueError as exc:
            raise SnapshotFileError(f"bad manifest ({str(exc).splitlines()[0]})") from exc
        if saved_manifest.namespace != manifest.namespace or saved_manifest.generation != saved.generation:
            raise SnapshotFileError("its manifest is of another namespace or generation")
        snap = NamespaceSnapshot(namespace=manifest.namespace, manifest=saved_manifest)
        for kind in RECORD_KINDS:
            records = {kind.record_id(r): r for r in saved.records[kind.field]}
            if any(getattr(r, "namespace", manifest.namespace) != manifest.namespace for r in records.values()):
                raise SnapshotFileError("it holds records of another namespace")
            setattr(snap, kind.field, records)
            if kind.vector_field is not None:
                table = saved.vectors.get(kind.field, VectorTable([]))
                if set(table.ids) - set(records):
                    raise SnapshotFileError(f"{kind.field}: vectors without records")
                setattr(snap, kind.vector_field, table)
        widths = {len(t.centroid) for t in snap.topics.values()}
        widths |= {t.matrix.shape[1] for t in saved.vectors.values() if len(t)}
        if len(widths) > 1:
            raise SnapshotFileError(f"vectors of different widths {sorted(widths)}")
        _order(snap)
        return snap

    def _persist(self, snap: NamespaceSnapshot) -> None:
        """Save the snapshot when the file lags by a lot (none, or more than a tenth of the namespace since).

        A failure to save costs only the next open's time: it is logged, never raised."""
        namespace, since = snap.namespace, self._since_file.get(snap.namespace, -1)
        size = sum(len(getattr(snap, kind)) for kind in _MODELS)
        if snap.generation == 0 or (0 <= since and since < max(_PERSIST_MIN_DELTA, size // 10)):
            return
        path = self._snapshot_file(namespace)
        if path is None:
            return
        try:
            link = self._link_token(namespace, snap.generation)
            if link is None:
                return
            write_snapshot_file(
                path,
                namespace=namespace,
                generation=snap.generation,
                link=link,
                manifest=snap.manifest.model_dump(mode="json"),
                records={kind.field: (kind.model, list(getattr(snap, kind.field).values())) for kind in RECORD_KINDS},
                vectors={
                    kind.field: VectorTable.of(getattr(snap, kind.vector_field))
                    for kind in RECORD_KINDS
                    if kind.vector_field is not None
                },
            )
            self._since_file[namespace] = 0
        except OSError as exc:
            _log.warning(
                "could not save the snapshot of a namespace to %s (%s); it is read from its records next time",
                path,
                exc.strerror or exc,
            )

    def _advance(self, base: NamespaceSnapshot, manifest: Manifest) -> NamespaceSnapshot:
        """``base`` moved to ``manifest``'s generation: drop what was retired since, add what was born since."""
        old, new = base.manifest.generation, manifest.generation
        snap = NamespaceSnapshot(namespace=base.namespace, manifest=manifest)
        for kind in RECORD_KINDS:
            records = dict(getattr(base, kind.field))
            retired = self._retired_between(base.namespace, kind.field, old, new, manifest.void)
            for rid in retired:
                records.pop(rid, None)
            born, born_vectors = self._read_kind(base.namespace, kind, new, born_after=old, void=manifest.void)
            records.update(born)
            setattr(snap, kind.field, records)
            if kind.vector_field is not None:
                vectors = VectorTable.of(getattr(base, kind.vector_field))
                setattr(snap, kind.vector_field, vectors.changed(retired, born_vectors))
        _order(snap)
        return snap

    def _retired_between(self, namespace: str, kind: str, old: int, new: int, void: Sequence[int] = ()) -> set[str]:
        """Ids of records whose version visible at ``old`` was retired by generation ``new``."""
        col = self._collection(namespace, kind)
        where: dict[str, Any] = {"$and": [{"died": {"$gt": old}}, {"died": {"$lte": new}}]}
        if void:
            where["$and"].append({"died": {"$nin": sorted(void)}})
        if new - old <= _MAX_LISTED:  # a range over died matches every live version; the numbers each match few
            numbers = [n for n in range(old + 1, new + 1) if n not in set(void)]
            if not numbers:
                return set()
            where = {"died": {"$in": numbers}}
        rids: set[str] = set()
        offset = 0
        while True:
            got = col.get(where=where, include=["metadatas"], limit=self._read_page, offset=offset)
            rids.update(meta["rid"] for meta in got["metadatas"])
            if len(got["ids"]) < self._read_page:
                return rids
            offset += self._read_page

    def _read_kind(
        self,
        namespace: str,
        kind: RecordKind,
        generation: int,
        *,
        born_after: int | None = None,
        void: Sequence[int] = (),
    ) -> tuple[dict[str, Any], VectorTable]:
        include = ["documents", "metadatas"] + (["embeddings"] if kind.has_vectors else [])
        col = self._collection(namespace, kind.field)
        model = kind.model
        records: dict[str, Any] = {}
        rows: dict[str, int] = {}
        pages: list[np.ndarray] = []
        voids = frozenset(void)
        if born_after is None:
            where, check = _visible(generation, void), False
        else:  # the versions born since: few, and visibility checked on each
            where, check = {"$and": [{"born": {"$gt": born_after}}, {"born": {"$lte": generation}}]}, True
        offset = 0
        while True:
            # Paged: one unbounded get() of >32k records exceeds SQLite's variable limit in Chroma.
            got = col.get(where=where, include=include, limit=self._read_page, offset=offset)
            embeddings = got.get("embeddings") if kind.has_vectors else None
            if embeddings is not None and len(got["ids"]):
                pages.append(np.asarray(embeddings, dtype=np.float32).reshape(len(got["ids"]), -1))
            for i, (doc, meta) in enumerate(zip(got["documents"], got["metadatas"])):
                if check and not _shown(meta, generation, voids):
                    continue
                rid = meta["rid"]
                records[rid] = model.model_validate_json(meta.get(_RECORD) or doc)
                rows[rid] = offset + i
            if len(got["ids"]) < self._read_page:
                break
            offset += self._read_page
        if not pages:
            return records, VectorTable([])
        matrix = np.vstack(pages) if len(pages) > 1 else pages[0]
        ids = list(rows)
        return records, VectorTable(ids, matrix[np.fromiter(rows.values(), dtype=np.int64)])
