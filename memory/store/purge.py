"""Purging: the retired versions of a namespace physically removed, and whole namespaces deleted.

A forget retires records (they stay as versions no reader sees); ``purge`` removes every version not visible at
the committed generation, then makes sure no file keeps their bytes:

- the namespace's snapshot file is deleted before anything else and written again from the purged records;
- embedded mode: each collection that lost rows is rebuilt (its kept rows copied to a new collection that then
  takes its name), which drops Chroma's write-ahead log entries and its HNSW segment files, the SQLite file is
  compacted (``VACUUM``) and the segment directories Chroma leaves behind for deleted collections are removed;
- server mode: the rows are deleted through the API; what the server keeps on its disk (its log, its HNSW
  segments until they compact, its SQLite free pages) is the server's, and the API cannot compact it.

Every step can be repeated: a purge killed at any point is completed by running it again, and a collection
killed between its copy and its rename is found by its name (``StoreCore._collection`` takes the complete copy).

A purge a commit asks for (a forget, delete, replace or update with ``purge``; ``commits.purge_requested``) is
owed until it completes, so a process killed between the commit and the end of its purge leaves it to the next:

- embedded: the commit writes ``.purge-owed-<hash>.json`` (the namespace's name) before it becomes visible, every
  purge writes it again when it starts and removes it as its last step; opening the data directory, and the next
  commit to the namespace, finish every purge such a file names;
- server: the manifest records the request (``Manifest.purge_requested``, in the same commit), the purge marks
  the ``purged`` record complete as its last step; the next commit to the namespace finishes a purge the manifest
  asked for that no complete purge covers (a purge killed on its own is finished by the next purge).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sqlite3
import struct
from pathlib import Path
from typing import Any

from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.records.records import stable_hash, validate_namespace
from logicmap.memory.store.commits import CommitProtocol, purge_requested
from logicmap.memory.store.core import _HNSW, PURGE_SUFFIX, store_call
from logicmap.memory.store.errors import UnknownNamespaceError
from logicmap.memory.store.generations import _PLACEHOLDER, PURGED_ID
from logicmap.memory.store.model import ChangeSet, Manifest, PurgeReport
from logicmap.memory.store.snapshots import SnapshotCache
from logicmap.settings import LogicMapSettings

__all__ = ["PurgeReport", "StorePurge"]

_log = logging.getLogger(__name__)
_OWED = ".purge-owed-"  # embedded: a purge asked for (or started) and not finished, named by the namespace's hash
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class StorePurge(CommitProtocol, SnapshotCache):
    """``purge`` and ``drop_namespace``: physical removal, on top of the commit protocol and the snapshot cache."""

    def __init__(
        self, settings: LogicMapSettings | None = None, *, client: Any = None, embedder: str | None = None
    ) -> None:
        super().__init__(settings, client=client, embedder=embedder)
        self._purged_through: dict[str, int] = {}  # namespace -> generation of a purge seen complete (server)
        try:
            self._finish_owed_purges()
        except BaseException:
            self.close()
            raise

    @store_call
    def purge(self, namespace: str) -> PurgeReport:
        """Remove every version of ``namespace`` that no reader of its committed generation sees (see the module)."""
        namespace = validate_namespace(namespace)
        with self.namespace_lock(namespace), self._server_commit_lock(namespace):
            report = self._purge_locked(namespace, self.require_namespace(namespace))
            if self._pending_log is not None:  # deleted pending writes: gone from the log's files too
                self._pending_log.compact()
        self.snapshot(namespace)  # read again from the purged records, and saved to a new snapshot file
        return report

    @store_call
    def purge_owed(self, namespace: str) -> bool:
        """Whether a purge a commit asked for (or a purge that was killed) has not finished yet (see the module)."""
        namespace = validate_namespace(namespace)
        return self._owes_purge(namespace, self.manifest(namespace))

    def _purge_locked(self, namespace: str, manifest: Manifest) -> PurgeReport:
        """``purge`` under the namespace's lock (and, on a server, its commit lease)."""
        if self._directory is not None:
            self._note_owed(namespace)  # a purge killed from here on is finished by the next open or commit
        self._drop_snapshot_file(namespace)
        report = PurgeReport(namespace=namespace, generation=manifest.generation)
        void = set(manifest.void)
        # First: a reader holding an older snapshot must not advance it by deltas over removed retirements.
        self._mark_purged(namespace, manifest.generation, complete=False)
        pending = self._pending_rebuilds(namespace)
        for kind in RECORD_KINDS:
            if self._directory is not None:  # noted first: a purge killed after the delete still rebuilds it
                self._note_rebuild(namespace, pending | {kind.field})
            removed = self._delete_dead(namespace, kind.field, manifest.generation, void)
            if removed:
                report.versions_removed[kind.field] = removed
            if self._directory is not None and (
                removed or kind.field in pending or self._has_copy(namespace, kind.field)
            ):
                self._rebuild_collection(namespace, kind.field)
                report.collections_rebuilt += 1
            pending.discard(kind.field)
        if self._directory is not None:
            report.compacted = self._compact()
            self._pending_path(namespace).unlink(missing_ok=True)
            self._owed_path(namespace).unlink(missing_ok=True)  # the last step: the purge is complete
        else:
            report.limits = (
                "server mode: rows are deleted through Chroma's API; the server's own log, HNSW "
                "segments and SQLite free pages keep their bytes until the server compacts them"
            )
            self._mark_purged(namespace, manifest.generation, complete=True)  # the last step
        self._purged_through[namespace] = manifest.generation
        self._snapshots.pop(namespace, None)
        self._drop_kept(namespace)  # what was purged is not served from memory either
        self._since_file[namespace] = -1
        return report

    # -- owed purges ----------------------------------------------------------------------------
    def _before_commit(self, namespace: str, manifest: Manifest, change: ChangeSet) -> None:
        """A commit first finishes a purge its namespace owes, then notes the one it asks for (embedded)."""
        if self._owes_purge(namespace, manifest):
            _log.warning(
                "namespace %r: finishing a purge that did not complete (the process was stopped), before "
                "the next commit",
                namespace,
            )
            self._purge_locked(namespace, manifest)
        if self._directory is not None and purge_requested(change):
            self._note_owed(namespace)  # before the commit is visible: a kill after it leaves the purge owed

    def _owes_purge(self, namespace: str, manifest: Manifest) -> bool:
        if manifest.generation == 0:
            return False
        if self._directory is not None:
            return self._owed_path(namespace).exists()
        if manifest.purge_requested <= self._purged_through.get(namespace, 0):
            return False
        got = self._collection(namespace, "meta").get(ids=[PURGED_ID], include=["metadatas"])
        last = got["metadatas"][0] if got["ids"] else {}
        if last.get("complete") is not True:
            return True
        done = int(last.get("generation", 0))
        self._purged_through[namespace] = max(done, self._purged_through.get(namespace, 0))
        return manifest.purge_requested > done

    def _finish_owed_purges(self) -> None:
        """Opening a data directory finishes every purge a stopped process left owed (embedded)."""
        if self._directory is None:
            return
        for path in sorted(self._directory.glob(f"{_OWED}*.json")):
            try:
                namespace = validate_namespace(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                _log.warning("%s: not a pending purge this version can read; left as it is", path)
                continue
            if path != self._owed_path(namespace) or not self.has_namespace(namespace):
                path.unlink(missing_ok=True)  # its namespace was deleted (and purged with it)
                continue
            _log.warning("namespace %r: finishing a purge that did not complete (the process was stopped)", namespace)
            self.purge(namespace)

    def _owed_path(self, namespace: str) -> Path:
        assert self._directory is not None
        return self._directory / f"{_OWED}{stable_hash(namespace, length=16)}.json"

    def _note_owed(self, namespace: str) -> None:
        _write_durably(self._owed_path(namespace), json.dumps(namespace))

    def _mark_purged(self, namespace: str, generation: int, *, complete: bool) -> None:
        """The ``purged`` record: readers older than ``generation`` read whole again; on a server it also says
        whether the purge completed."""
        metadata: dict[str, Any] = {"kind": "purged", "generation": generation}
        if self._directory is None:
            metadata["complete"] = complete
        self._collection(namespace, "meta").upsert(
            ids=[PURGED_ID], embeddings=[_PLACEHOLDER], documents=[""], metadatas=[metadata]
        )

    @store_call
    def drop_namespace(self, namespace: str) -> dict[str, Any]:
        """Delete ``namespace`` and everything it holds (never a namespace whose name only starts with it).

        The manifest goes first: from then on the namespace reads as empty, and a re-run finishes the rest."""
        namespace = validate_namespace(namespace)
        prefix = f"lm-{stable_hash(namespace, length=16)}-"
        with self.namespace_lock(namespace), self._server_commit_lock(namespace):
            names = [c if isinstance(c, str) else c.name for c in self.client.list_collections()]
            own = sorted((n for n in names if n.startswith(prefix)), key=lambda n: not n.endswith("-meta"))
            generation = self.manifest(namespace).generation if own else 0
            # On a server the commit lease held right now lives in meta: it is not memory the namespace holds.
            held = [n for n in own if not (self.settings.chroma_host and n.endswith("-meta"))]
            if generation == 0 and not any(self.client.get_collection(n).count() for n in held):
                for name in held:  # made empty by reads of a namespace that holds nothing
                    self._forget_collection(name)
                raise UnknownNamespaceError(namespace)
            self._drop_snapshot_file(namespace)
            for name in own:
                if not (self.settings.chroma_host and name.endswith("-meta")):
                    self._forget_collection(name)
            self._registry().delete(ids=[namespace])
            if self._pending_log is not None:  # its fast writes too, and no text of theirs left in the log's files
                self._pending_log.delete(namespace, through=2**62)
                self._pending_log.compact()
            if self._directory is not None:
                self._pending_path(namespace).unlink(missing_ok=True)
                self._owed_path(namespace).unlink(missing_ok=True)
            self._purged_through.pop(namespace, None)
            self._snapshots.pop(namespace, None)
            self._drop_kept(namespace)
            self._verified.pop(namespace, None)
            self._since_file.pop(namespace, None)
        if self.settings.chroma_host and prefix + "meta" in own:  # the lease lives in meta: deleted once let go
            self._forget_collection(prefix + "meta")
        self._count_commit(namespace)
        compacted = self._compact() if self._directory is not None else False
        return {"namespace": namespace, "generation": generation, "collections": len(own), "compacted": compacted}

    # -- the steps ------------------------------------------------------------------------------
    def _pending_path(self, namespace: str) -> Path:
        assert self._directory is not None
        return self._directory / f".purge-{stable_hash(namespace, length=16)}.json"

    def _pending_rebuilds(self, namespace: str) -> set[str]:
        """Collections a killed purge may have deleted rows of without rebuilding them yet (embedded)."""
        if self._directory is None:
            return set()
        try:
            return set(json.loads(self._pending_path(namespace).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return set()

    def _note_rebuild(self, namespace: str, kinds: set[str]) -> None:
        _write_durably(self._pending_path(namespace), json.dumps(sorted(kinds)))

    def _forget_collection(self, name: str) -> None:
        with self._guard:
            self._collections.pop(name, None)
        self.client.delete_collection(name)

    def _drop_snapshot_file(self, namespace: str) -> None:
        path = self._snapshot_file(namespace)
        if path is None:
            return
        path.unlink(missing_ok=True)
        if path.parent.exists() and path.parent.name == stable_hash(namespace, length=16):
            shutil.rmtree(path.parent, ignore_errors=True)

    def _delete_dead(self, namespace: str, kind: str, generation: int, void: set[int]) -> int:
        """Delete the versions retired at or before ``generation`` and those born in a void generation."""
        col = self._collection(namespace, kind)
        removed = 0
        conditions: list[dict[str, Any]] = [{"died": {"$lte": generation}}]
        if void:
            conditions.append({"born": {"$in": sorted(void)}})
        for where in conditions:
            while True:
                got = col.get(where=where, include=["metadatas"], limit=self._read_page)
                dead = [
                    i
                    for i, m in zip(got["ids"], got["metadatas"])
                    if where is not conditions[0] or m["died"] not in void
                ]
                if not dead:
                    break
                for chunk in self._batched(dead):
                    col.delete(ids=list(chunk))
                removed += len(dead)
        return removed

    def _has_copy(self, namespace: str, kind: str) -> bool:
        """A purge's copy of this collection left by a killed purge (its rebuild is finished again)."""
        name = self._collection_name(namespace, kind) + PURGE_SUFFIX
        return any((c if isinstance(c, str) else c.name) == name for c in self.client.list_collections())

    def _rebuild_collection(self, namespace: str, kind: str) -> None:
        """The collection's rows copied to a new collection that then takes its name: Chroma's log entries and
        HNSW files of the deleted rows go with the old collection."""
        name = self._collection_name(namespace, kind)
        col = self._collection(namespace, kind)
        copy_name = name + PURGE_SUFFIX
        try:
            self.client.delete_collection(copy_name)  # an unfinished copy of a killed purge (the original is whole)
        except Exception:  # there was none
            pass
        meta = dict(col.metadata or {"namespace": namespace, "kind": kind})
        copy = self.client.create_collection(
            copy_name,
            embedding_function=None,
            configuration={"hnsw": _HNSW},
            metadata={**meta, "purge_of": name, "complete": False},
        )
        offset = 0
        while True:
            got = col.get(include=["embeddings", "metadatas", "documents"], limit=self._read_page, offset=offset)
            if not got["ids"]:
                break
            docs = got.get("documents")
            for start in range(0, len(got["ids"]), self._max_batch):
                end = start + self._max_batch
                rows: dict[str, Any] = {
                    "ids": got["ids"][start:end],
                    "embeddings": got["embeddings"][start:end],
                    "metadatas": got["metadatas"][start:end],
                }
                if docs is not None and any(d is not None for d in docs[start:end]):
                    rows["documents"] = [d or "" for d in docs[start:end]]
                copy.add(**rows)
            if len(got["ids"]) < self._read_page:
                break
            offset += self._read_page
        copy.modify(metadata={**meta, "purge_of": name, "complete": True})
        with self._guard:
            self._collections.pop(name, None)
        self.client.delete_collection(name)
        self._adopt_copy(name)

    def _compact(self) -> bool:
        """``VACUUM`` the embedded SQLite file, so deleted rows leave no bytes in its free pages."""
        assert self._directory is not None
        path = self._directory / "chroma" / "chroma.sqlite3"
        if not path.exists():
            return False
        con = sqlite3.connect(str(path), timeout=30)
        try:
            con.execute("VACUUM")
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            segments = {str(row[0]) for row in con.execute("SELECT id FROM segments")}
        finally:
            con.close()
        # Chroma leaves the HNSW files of a deleted collection's segment behind: they still hold its vectors.
        for entry in path.parent.iterdir():
            if entry.is_dir() and _UUID.fullmatch(entry.name):
                if entry.name not in segments:
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    _scrub_segment(entry)
        return True


def _write_durably(path: Path, body: str) -> None:
    """``body`` to ``path`` through a synced temporary file: the file is whole or absent."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(body)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _scrub_segment(directory: Path) -> None:
    """Zero the unused slots of an HNSW segment's files.

    Chroma's embedded HNSW index writes its element tables whole, slots past its element count included, from
    memory it never initialized: those bytes are whatever the process's heap held before (texts and vectors of
    records a forget just removed, among others). The index reads only the slots below its count (``header.bin``
    says how many, and how long a row is), so zeroing the rest changes nothing it reads."""
    header = directory / "header.bin"
    try:
        head = header.read_bytes()
    except OSError:
        return
    # hnswlib's header as Chroma writes it: a u32 format version (1), then u64 level-0 offset, element capacity,
    # element count, row size.
    if len(head) < 36 or struct.unpack_from("<I", head, 0)[0] != 1:
        return
    max_elements, count, row = (struct.unpack_from("<Q", head, at)[0] for at in (12, 20, 28))
    for name, width in (("length.bin", 4), ("data_level0.bin", row)):
        target = directory / name
        if not target.exists() or width <= 0 or target.stat().st_size != max_elements * width:
            continue
        start, end = count * width, max_elements * width
        if start >= end:
            continue
        with open(target, "r+b") as handle:
            handle.seek(start)
            handle.write(bytes(end - start))
            handle.flush()
            os.fsync(handle.fileno())
