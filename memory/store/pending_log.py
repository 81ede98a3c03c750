"""The pending log: fast writes kept durably until the consolidator builds them into the event graph.

A fast write (``LogicMapStore.put``, ``add_messages``, the ``remember`` tools) appends one ``PendingWrite`` (a
session's turns and their vectors) and returns: one small durable write instead of a whole ingest and commit. The
live view (``memory.store.live``) shows it to every reader at once; the consolidator (``graphs.writes.consolidate``) ingests
it and commits the result with ``ChangeSet.consumes_through`` = its sequence number, which moves the namespace's
``Manifest.consolidated_through`` in the same generation as the records it built. So a write is never lost (it is in
the log or in the records, or in both) and never consolidated twice (an entry at or below the mark is done, whether
or not it was deleted from the log yet).

| backend | log |
| --- | --- |
| Chroma embedded | ``SqlitePendingLog``: ``pending.sqlite3`` beside the Chroma files (WAL, one transaction per append) |
| in process | ``MemoryPendingLog``: shared by the stores of one ``memory://NAME`` |
| Chroma server, PostgreSQL | none yet (``fast_writes`` is false): a write is ingested and committed at once |

Deleted entries leave no text behind: the SQLite log runs with ``secure_delete`` (freed pages are zeroed) and
``compact()`` (called by a purge and by ``drop_namespace``) checkpoints and truncates its write-ahead log.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from logicmap.memory.records.records import validate_namespace
from logicmap.memory.store.errors import StoreError
from logicmap.memory.store.model import Manifest, PendingHead, PendingWrite, vector_matrix

__all__ = ["PENDING_FILE", "MemoryPendingLog", "PendingLog", "PendingWrites", "SqlitePendingLog"]

PENDING_FILE = "pending.sqlite3"


class PendingLog:
    """What a backend keeps its pending writes in (see the module docstring)."""

    def append(self, writes: Sequence[PendingWrite]) -> list[int]:
        """Record ``writes`` durably, in order, in one step (all or none); their sequence numbers."""
        raise NotImplementedError

    def entries(self, namespace: str, after: int = 0, seqs: Sequence[int] | None = None) -> list[PendingWrite]:
        """The entries of ``namespace`` with a sequence number above ``after`` (and in ``seqs``, when given), in
        order."""
        raise NotImplementedError

    def heads(self, namespace: str, after: int = 0) -> list[PendingHead]:
        """The heads (sequence number, session, turns) of the entries ``entries`` gives, without their bodies."""
        return [e.head for e in self.entries(namespace, after)]

    def delete(self, namespace: str, *, through: int | None = None, seqs: Sequence[int] = ()) -> int:
        """Delete the entries of ``namespace`` at or below ``through`` and those numbered ``seqs``; how many went."""
        raise NotImplementedError

    def namespaces(self) -> list[str]:
        """The namespaces that hold an entry."""
        raise NotImplementedError

    def compact(self) -> None:
        """Make deleted entries unrecoverable from the log's files (nothing to do in memory)."""

    def close(self) -> None:
        """Release the log's files."""


class MemoryPendingLog(PendingLog):
    """The log in this process's memory (``InProcessStore``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._rows: dict[str, dict[int, PendingWrite]] = {}

    def append(self, writes: Sequence[PendingWrite]) -> list[int]:
        with self._lock:
            seqs = []
            for write in writes:
                self._seq += 1
                self._rows.setdefault(write.namespace, {})[self._seq] = write.model_copy(update={"seq": self._seq})
                seqs.append(self._seq)
            return seqs

    def entries(self, namespace: str, after: int = 0, seqs: Sequence[int] | None = None) -> list[PendingWrite]:
        with self._lock:
            rows = self._rows.get(namespace, {})
            wanted = set(seqs) if seqs is not None else None
            return [rows[s] for s in sorted(rows) if s > after and (wanted is None or s in wanted)]

    def delete(self, namespace: str, *, through: int | None = None, seqs: Sequence[int] = ()) -> int:
        with self._lock:
            rows = self._rows.get(namespace, {})
            gone = [s for s in rows if (through is not None and s <= through) or s in set(seqs)]
            for s in gone:
                del rows[s]
            if not rows:
                self._rows.pop(namespace, None)
            return len(gone)

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(ns for ns, rows in self._rows.items() if rows)


class SqlitePendingLog(PendingLog):
    """The log in ``pending.sqlite3`` of an embedded store's data directory (the process that holds the directory's
    lock is its only writer). An append is one transaction; ``synchronous=FULL``: a write acknowledged survives a
    killed process and a power cut."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / PENDING_FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "secure_delete=ON"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "namespace TEXT NOT NULL, body TEXT NOT NULL, vectors BLOB NOT NULL, session_id TEXT, "
            "turns INTEGER)"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS pending_namespace ON pending (namespace, seq)")
        self._heads_columns()
        # The entries of each namespace read so far, kept in step with every append and delete (the process that
        # holds the directory is the log's only writer): a reader after each write parses nothing again.
        self._mirror: dict[str, dict[int, PendingWrite]] = {}

    def _heads_columns(self) -> None:
        """A log written before the heads had their columns gets them (filled from the bodies, once)."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(pending)")}
        if {"session_id", "turns"} <= columns:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for column, kind in (("session_id", "TEXT"), ("turns", "INTEGER")):
                    if column not in columns:
                        self._db.execute(f"ALTER TABLE pending ADD COLUMN {column} {kind}")
                self._db.execute(
                    "UPDATE pending SET session_id = json_extract(body, '$.session.session_id'), "
                    "turns = json_array_length(body, '$.session.turns')"
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def append(self, writes: Sequence[PendingWrite]) -> list[int]:
        rows = []
        for write in writes:
            body = write.model_dump_json(exclude={"vectors", "seq"})
            vectors = vector_matrix(write.vectors)
            head = write.head
            rows.append(
                (
                    write.namespace,
                    body,
                    json.dumps(list(vectors.shape)).encode() + b"\n" + vectors.tobytes(),
                    head.session_id,
                    head.turns,
                )
            )
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                seqs = [
                    int(
                        self._db.execute(
                            "INSERT INTO pending (namespace, body, vectors, session_id, turns) VALUES (?, ?, ?, ?, ?)",
                            row,
                        ).lastrowid
                        or 0
                    )
                    for row in rows
                ]
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            for write, seq in zip(writes, seqs):
                if write.namespace in self._mirror:
                    self._mirror[write.namespace][seq] = write.model_copy(update={"seq": seq})
        return seqs

    def entries(self, namespace: str, after: int = 0, seqs: Sequence[int] | None = None) -> list[PendingWrite]:
        with self._lock:
            mirror = self._mirror.get(namespace)
            if mirror is None and seqs is not None:  # a few entries (a consolidation batch): read, not mirrored
                return [w for w in self._read(namespace, seqs) if w.seq > after]
            if mirror is None:
                mirror = self._mirror[namespace] = {w.seq: w for w in self._read(namespace)}
            wanted = set(seqs) if seqs is not None else None
            return [mirror[s] for s in sorted(mirror) if s > after and (wanted is None or s in wanted)]

    def heads(self, namespace: str, after: int = 0) -> list[PendingHead]:
        with self._lock:
            mirror = self._mirror.get(namespace)
            if mirror is not None:
                return [mirror[s].head for s in sorted(mirror) if s > after]
            rows = self._db.execute(
                "SELECT seq, session_id, turns FROM pending WHERE namespace = ? AND seq > ? ORDER BY seq",
                (namespace, after),
            ).fetchall()
            return [PendingHead(int(seq), str(session), int(turns or 0)) for seq, session, turns in rows]

    def _read(self, namespace: str, seqs: Sequence[int] | None = None) -> list[PendingWrite]:
        """Every entry of ``namespace`` in the file, or those numbered ``seqs`` (under the lock)."""
        query = "SELECT seq, body, vectors FROM pending WHERE namespace = ?"
        if seqs is None:
            rows = self._db.execute(query + " ORDER BY seq", (namespace,)).fetchall()
        else:
            rows = []
            wanted = sorted({int(s) for s in seqs})
            for start in range(0, len(wanted), 500):  # within SQLite's bound on parameters
                chunk = wanted[start : start + 500]
                rows += self._db.execute(
                    query + f" AND seq IN ({', '.join('?' * len(chunk))}) ORDER BY seq", (namespace, *chunk)
                ).fetchall()
        out = []
        for seq, body, blob in rows:
            shape_line, _, raw = bytes(blob).partition(b"\n")
            shape = json.loads(shape_line)
            vectors = vector_matrix(np.frombuffer(raw, dtype=np.float32).reshape(shape) if shape[0] else [])
            write = PendingWrite.model_validate_json(body)
            out.append(write.model_copy(update={"seq": int(seq), "vectors": vectors}))
        return out

    def delete(self, namespace: str, *, through: int | None = None, seqs: Sequence[int] = ()) -> int:
        with self._lock:
            gone = 0
            if through is not None:
                gone += self._db.execute(
                    "DELETE FROM pending WHERE namespace = ? AND seq <= ?", (namespace, through)
                ).rowcount
            for seq in seqs:
                gone += self._db.execute(
                    "DELETE FROM pending WHERE namespace = ? AND seq = ?", (namespace, int(seq))
                ).rowcount
            mirror = self._mirror.get(namespace)
            if mirror is not None:
                for seq in [s for s in mirror if (through is not None and s <= through) or s in set(seqs)]:
                    del mirror[seq]
            return gone

    def namespaces(self) -> list[str]:
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT DISTINCT namespace FROM pending ORDER BY namespace")]

    def compact(self) -> None:
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PendingWrites:
    """The port's pending-log operations for a backend that sets ``_pending_log`` (``None``: it keeps no log, and
    ``fast_writes`` is false)."""

    _pending_log: PendingLog | None = None

    def manifest(self, namespace: str) -> Manifest:
        raise NotImplementedError

    def _log(self) -> PendingLog | None:
        """The log, after the backend's own checks (a Chroma store refuses a forked child: its SQLite connection
        belongs to the parent)."""
        check = getattr(self, "_check_process", None)
        if callable(check):
            check()
        return self._pending_log

    @property
    def fast_writes(self) -> bool:
        """Whether a write can be a pending write here (else it is ingested and committed at once)."""
        return self._pending_log is not None

    def append_pending(self, writes: Sequence[PendingWrite]) -> list[int]:
        """Record fast writes durably, in order, all or none; their sequence numbers."""
        log = self._log()
        if log is None:
            raise StoreError(f"{type(self).__name__} keeps no pending log: write through an ingest instead")
        for write in writes:
            validate_namespace(write.namespace)
        return log.append(writes)

    def pending_writes(
        self, namespace: str, after: int | None = None, seqs: Sequence[int] | None = None
    ) -> list[PendingWrite]:
        """The pending writes of ``namespace`` not consolidated yet (above the committed ``consolidated_through``,
        or above ``after``; only those numbered ``seqs``, when given), in order."""
        validate_namespace(namespace)
        log = self._log()
        if log is None:
            return []
        mark = self.manifest(namespace).consolidated_through if after is None else after
        return log.entries(namespace, mark, seqs)

    def pending_heads(self, namespace: str, after: int | None = None) -> list[PendingHead]:
        """The heads of ``pending_writes`` (sequence number, session, turns): what a consolidator chooses its batch
        from without reading every pending write's turns and vectors."""
        validate_namespace(namespace)
        log = self._log()
        if log is None:
            return []
        mark = self.manifest(namespace).consolidated_through if after is None else after
        return log.heads(namespace, mark)

    def drop_pending(self, namespace: str, *, through: int | None = None, seqs: Sequence[int] = ()) -> int:
        """Delete pending writes of ``namespace`` (consolidated ones, ``through``; or those ``seqs``: a deleted key's);
        the log is compacted after, so their text is in none of its files."""
        log = self._log()
        if log is None:
            return 0
        gone = log.delete(validate_namespace(namespace), through=through, seqs=seqs)
        if gone:  # no text of a deleted write left in the log's files (``compact``)
            log.compact()
        return gone

    def pending_namespaces(self) -> list[str]:
        """The namespaces with a pending write (consolidated or not yet deleted)."""
        log = self._log()
        return [] if log is None else log.namespaces()
