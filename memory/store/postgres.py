"""``PostgresStore``: the storage port on PostgreSQL + pgvector (``LOGICMAP_STORE_URL=postgresql://...``).

The database is the authority: no leases, no fences. Every record kind (``memory.records.kinds.RECORD_KINDS``) is kept in
one table as versions with the generations they were born and retired at, as the in-process backend keeps them, its
vector in a pgvector column; the namespace is the first column of every primary key (so a table can later be
distributed by it, as Citus does).

A commit is one transaction: a compare-and-swap on the namespace's generation row
(``UPDATE ... SET generation = generation + 1 WHERE namespace = %s AND generation = %s``; no row updated: the
namespace moved, ``GenerationConflict``), the turn-id check, the retirements and the new versions. A generation is
never derived from a read of a maximum. Readers see committed generations only: a snapshot is read in one
``REPEATABLE READ`` transaction and cached in this process by (namespace, incarnation, generation), the generation
row checked on each ``snapshot()``, so a reader in another process sees a commit at its next read; a newer
generation is read as a delta on the cached snapshot (the versions born and retired since), whole after a purge.

``query`` is answered by the database: one statement ordering the namespace's live versions by pgvector's cosine
distance, through an HNSW index per vector width, with iterative scans so a namespace-filtered search returns the
full ``k`` (``nearest_rows``); the exact search in the database when it still comes back short.

Schema changes are the versioned ``MIGRATIONS``, run once by ``setup()`` (which opening a store calls) under an
advisory lock, their numbers kept in ``logicmap_migrations``. Connections come from a ``psycopg_pool`` pool and are
held only while statements run: records are encoded before a commit takes one and decoded after a read returns it.

``purge`` deletes the retired versions, then rewrites the records table (``VACUUM FULL``: the dead tuples' bytes
leave the table and index files) and asks for a ``CHECKPOINT`` after a WAL switch (see ``purge`` for what that does
and does not reach); ``drop_namespace`` deletes a namespace the same way.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from logicmap.memory.indexes.snapshot_file import VectorTable
from logicmap.memory.records.kinds import BY_FIELD, RECORD_KINDS
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.store.errors import (
    GenerationConflict,
    StoreError,
    StoreForkedError,
    StoreUnavailableError,
    TurnIdConflictError,
    UnknownNamespaceError,
)
from logicmap.memory.store.generations import SENTINEL
from logicmap.memory.store.model import ChangeSet, Manifest, NamespaceSnapshot, embedder_identity, ordered
from logicmap.memory.store.pending_log import PendingWrites
from logicmap.memory.store.port import check_commit, check_restore, committed_nearest, next_manifest
from logicmap.memory.store.purge import PurgeReport
from logicmap.memory.store.queries import check_queryable
from logicmap.settings import LogicMapSettings

__all__ = ["HNSW_MAX_WIDTH", "MIGRATIONS", "PostgresStore", "nearest_rows", "search_sql"]

POOL_MAX = 8
CONNECT_TIMEOUT_S = 10.0
_NAMESPACES = "logicmap_namespaces"
_RECORDS = "logicmap_records"
_INDEX_FN = "logicmap_vector_index"
_LOCK_KEY = 0x4C6F6769634D6170  # the advisory lock ``setup`` holds while it migrates ("LogicMap")
HNSW_MAX_WIDTH = 2000  # pgvector's limit for an HNSW index of ``vector``
EF_SEARCH = 40  # the HNSW candidate list of a search (pgvector's default), raised for a larger k

# Versioned schema changes, in order: ``setup`` runs those past the number ``logicmap_migrations`` holds. Never
# edit or reorder one that has shipped; append.
MIGRATIONS: tuple[str, ...] = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    f"""CREATE TABLE {_NAMESPACES} (
        namespace text PRIMARY KEY,
        incarnation uuid NOT NULL DEFAULT gen_random_uuid(),
        generation bigint NOT NULL,
        oldest bigint NOT NULL,
        manifest jsonb NOT NULL
    )""",
    f"""CREATE TABLE {_RECORDS} (
        namespace text NOT NULL,
        kind text NOT NULL,
        id text NOT NULL,
        born bigint NOT NULL,
        died bigint NOT NULL DEFAULT {SENTINEL},
        record jsonb NOT NULL,
        embedding vector,
        PRIMARY KEY (namespace, kind, id, born)
    )""",
    # One live version per record; a commit retires the live one before it writes the next.
    f"CREATE UNIQUE INDEX {_RECORDS}_live ON {_RECORDS} (namespace, kind, id) WHERE died = {SENTINEL}",
    # No planner statistics of record text or vectors: ANALYZE would copy values into pg_statistic, where a purge
    # of this table cannot reach them.
    f"ALTER TABLE {_RECORDS} ALTER COLUMN record SET STATISTICS 0, ALTER COLUMN embedding SET STATISTICS 0",
    # A delta read: the versions born, and those retired, since a cached generation.
    f"CREATE INDEX {_RECORDS}_born ON {_RECORDS} (namespace, born)",
    f"CREATE INDEX {_RECORDS}_died ON {_RECORDS} (namespace, died) WHERE died <> {SENTINEL}",
    # pgvector HNSW indexes for ``query``, one per vector width (an HNSW index needs one): a partial index of the
    # column cast to that width, built by this function (the one place its definition is kept; planner statistics
    # off, as for the column); up to HNSW_MAX_WIDTH dimensions, wider vectors are searched without an index.
    f"""CREATE FUNCTION {_INDEX_FN}(width integer) RETURNS void LANGUAGE plpgsql AS $$
    DECLARE name text := '{_RECORDS}_hnsw_' || width;
    BEGIN
        IF width BETWEEN 1 AND {HNSW_MAX_WIDTH} AND to_regclass(name) IS NULL THEN
            EXECUTE format('CREATE INDEX %I ON {_RECORDS} USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
                           'WHERE vector_dims(embedding) = %s', name, width, width);
            EXECUTE format('ALTER INDEX %I ALTER COLUMN 1 SET STATISTICS 0', name);
        END IF;
    END $$""",
    # ... for every width the table holds when this runs (a commit builds the index of a width it brings first).
    # (The widths are read whole first: an index cannot be built on a table a query of this session still reads.)
    f"""DO $$
    DECLARE width integer;
    BEGIN
        FOREACH width IN ARRAY (SELECT coalesce(array_agg(DISTINCT vector_dims(embedding)), '{{}}') FROM {_RECORDS}
                                WHERE embedding IS NOT NULL) LOOP
            PERFORM {_INDEX_FN}(width);
        END LOOP;
    END $$""",
)


@dataclass(frozen=True)
class _Row:
    """One version a commit writes, encoded before a connection is taken."""

    kind: str
    id: str
    record: str
    vector: str | None
    width: int  # the vector's dimensions (0: none)


class PostgresStore(PendingWrites):
    """The storage port on PostgreSQL + pgvector (see the module docstring)."""

    def __init__(self, settings: LogicMapSettings | None = None, *, url: str | None = None) -> None:
        self.settings = settings or LogicMapSettings()
        self.embedder = embedder_identity(self.settings)
        self.url = url or self.settings.store_url or ""
        self._where = _describe(self.url)
        self._pid = os.getpid()
        self._pool = _open_pool(self.url, self._where, stall_s=self.settings.commit_lease_s)
        self._cache: dict[str, tuple[tuple[str, int], NamespaceSnapshot]] = {}
        self._cache_lock = threading.Lock()
        self._indexed: set[int] = set()  # the vector widths whose HNSW index this store has seen built
        try:
            self.setup()
        except BaseException:
            self._pool.close()
            raise

    # -- connections and schema ------------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled connection (autocommit: transactions are explicit), a lost server as one line."""
        import psycopg
        import psycopg_pool

        if os.getpid() != self._pid:
            raise StoreForkedError(
                f"this memory store was opened by process {self._pid} and used in its forked child {os.getpid()}; "
                "its PostgreSQL connections belong to the parent: open a store in the child"
            )
        if self._pool.closed:  # psycopg_pool's PoolClosed says nothing of which store or what to do
            raise StoreError(f"the memory store at {self._where} is closed: open a new one to use it again")
        try:
            with self._pool.connection(timeout=CONNECT_TIMEOUT_S) as conn:
                yield conn
        except (
            psycopg.errors.TransactionRollback,
            psycopg.errors.SerializationFailure,
            psycopg.errors.DeadlockDetected,
        ) as exc:  # rolled back by the server: recompute and retry
            raise GenerationConflict(
                f"namespace commit rolled back by PostgreSQL ({type(exc).__name__}): "
                "recompute on the committed generation"
            ) from exc
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise StoreUnavailableError(f"PostgreSQL at {self._where} did not answer: {_first_line(exc)}") from exc

    def setup(self) -> int:
        """Run the migrations this database has not had yet (under an advisory lock: one process migrates, the
        others wait and find them done); the schema version it is at."""
        import psycopg

        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute("CREATE TABLE IF NOT EXISTS logicmap_migrations (v integer PRIMARY KEY)")
            row = conn.execute("SELECT max(v) FROM logicmap_migrations").fetchone()
            done = -1 if row is None or row[0] is None else int(row[0])
            for version in range(done + 1, len(MIGRATIONS)):
                try:
                    conn.execute(MIGRATIONS[version])
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise StoreError(
                        f"PostgreSQL at {self._where}: migration {version} needs a privilege this user lacks "
                        f"({_first_line(exc)}); an administrator can run "
                        "'CREATE EXTENSION vector' in this database"
                    ) from exc
                conn.execute("INSERT INTO logicmap_migrations (v) VALUES (%s)", (version,))
        return len(MIGRATIONS) - 1

    def _index_widths(self, widths: set[int]) -> None:
        """Build the HNSW index of each vector width not indexed yet (under ``setup``'s advisory lock; before the
        commit that brings the width, so a query after it finds the index)."""
        missing = widths - self._indexed
        if not missing:
            return
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            for width in sorted(missing):
                conn.execute(f"SELECT {_INDEX_FN}(%s)", (width,))
        self._indexed |= missing

    # -- reading ---------------------------------------------------------------------------------------------

    def _state(self, conn: Any, namespace: str) -> tuple[str, int, int, Manifest] | None:
        row = conn.execute(
            f"SELECT incarnation::text, generation, oldest, manifest::text FROM {_NAMESPACES} WHERE namespace = %s",
            (namespace,),
        ).fetchone()
        if row is None:
            return None
        return str(row[0]), int(row[1]), int(row[2]), Manifest.model_validate_json(row[3])

    def manifest(self, namespace: str) -> Manifest:
        namespace = validate_namespace(namespace)
        with self._connection() as conn:
            state = self._state(conn, namespace)
        return state[3] if state is not None else Manifest(namespace=namespace)

    def namespaces(self, under: str | None = None) -> list[str]:
        with self._connection() as conn:
            rows = conn.execute(f"SELECT namespace FROM {_NAMESPACES} WHERE generation > 0").fetchall()
        return sorted(ns for (ns,) in rows if under is None or ns == under or ns.startswith(under + "."))

    def has_namespace(self, namespace: str) -> bool:
        return self.manifest(namespace).generation > 0

    def require_namespace(self, namespace: str) -> Manifest:
        manifest = self.manifest(namespace)
        if manifest.generation == 0:
            raise UnknownNamespaceError(namespace)
        return manifest

    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        """The latest committed records: this process's cached snapshot when the namespace's row still names its
        generation (one small query); else, in one ``REPEATABLE READ`` transaction, the cached snapshot advanced by
        a delta (the versions born and retired since) when no purge since removed retirements the delta needs, or
        the namespace read whole."""
        namespace = validate_namespace(namespace)
        with self._cache_lock:
            cached = self._cache.get(namespace)
        if cached is not None:  # the common case: one round trip says the cached generation is still the latest
            with self._connection() as conn:
                row = conn.execute(
                    f"SELECT incarnation::text, generation FROM {_NAMESPACES} WHERE namespace = %s", (namespace,)
                ).fetchone()
            if row is not None and (str(row[0]), int(row[1])) == cached[0]:
                return cached[1]
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            state = self._state(conn, namespace)
            if state is None:
                return NamespaceSnapshot(namespace=namespace, manifest=Manifest(namespace=namespace))
            incarnation, generation, oldest, manifest = state
            base = None
            if cached is not None and cached[0][0] == incarnation:
                if cached[0][1] == generation:
                    return cached[1]
                if oldest <= cached[0][1] < generation:
                    base = cached[1]
            rows = self._versions(conn, namespace, generation, born_after=base.generation if base else None)
            retired = self._retired_between(conn, namespace, base.generation, generation) if base else []
        snap = self._build(manifest, rows) if base is None else self._advance(base, manifest, rows, retired)
        with self._cache_lock:
            self._cache[namespace] = ((incarnation, generation), snap)
        return snap

    def snapshot_at(self, namespace: str, generation: int) -> NamespaceSnapshot:
        namespace = validate_namespace(namespace)
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            state = self._state(conn, namespace)
            latest = state[1] if state is not None else 0
            if state is None or not state[2] <= generation <= latest:
                raise ValueError(
                    f"namespace {namespace!r} has no committed generation {generation} (it is at {latest})"
                )
            incarnation, _latest, _oldest, manifest = state
            with self._cache_lock:
                cached = self._cache.get(namespace)
            if cached is not None and cached[0] == (incarnation, generation):
                return cached[1]
            rows = self._versions(conn, namespace, generation)
        if generation == latest:  # read in this transaction: a commit landing meanwhile does not move it
            snap = self._build(manifest, rows)
            with self._cache_lock:
                self._cache[namespace] = ((incarnation, generation), snap)
            return snap
        snap = self._build(manifest.model_copy(deep=True, update={"generation": generation}), rows)
        held = {t.session_id for t in snap.turns.values()}
        snap.manifest.sessions = {k: v for k, v in snap.manifest.sessions.items() if k in held}
        return snap

    @staticmethod
    def _versions(
        conn: Any, namespace: str, generation: int, born_after: int | None = None
    ) -> list[tuple[str, str, str, bytes | None]]:
        """The versions seen at ``generation`` (only those born after ``born_after`` when given): kind, id, record
        JSON, vector (pgvector's binary form)."""
        since = "" if born_after is None else " AND born > %s"
        params = (namespace, generation, generation) + (() if born_after is None else (born_after,))
        with conn.cursor(binary=True) as cur:
            cur.execute(
                f"SELECT kind, id, record::text, embedding FROM {_RECORDS} "
                f"WHERE namespace = %s AND born <= %s AND died > %s{since}",
                params,
            )
            return list(cur.fetchall())

    @staticmethod
    def _retired_between(conn: Any, namespace: str, old: int, new: int) -> list[tuple[str, str]]:
        """(kind, id) of the versions seen at ``old`` that a generation up to ``new`` retired."""
        return list(
            conn.execute(
                f"SELECT kind, id FROM {_RECORDS} WHERE namespace = %s AND died > %s AND died <= %s AND born <= %s",
                (namespace, old, new, old),
            ).fetchall()
        )

    @classmethod
    def _advance(
        cls,
        base: NamespaceSnapshot,
        manifest: Manifest,
        rows: list[tuple[str, str, str, bytes | None]],
        retired: list[tuple[str, str]],
    ) -> NamespaceSnapshot:
        """``base`` moved to ``manifest``'s generation: what was retired since dropped, what was born since added
        (a new snapshot: ``base`` never changes under its readers)."""
        born = cls._build(manifest, rows)
        gone: dict[str, set[str]] = {kind.field: set() for kind in RECORD_KINDS}
        for kind_field, rid in retired:
            gone.setdefault(kind_field, set()).add(rid)
        snap = NamespaceSnapshot(namespace=base.namespace, manifest=manifest)
        for kind in RECORD_KINDS:
            records = {rid: r for rid, r in getattr(base, kind.field).items() if rid not in gone[kind.field]}
            records.update(getattr(born, kind.field))
            setattr(snap, kind.field, records)
            if kind.vector_field is not None:
                table = VectorTable.of(getattr(base, kind.vector_field))
                setattr(
                    snap,
                    kind.vector_field,
                    table.changed(gone[kind.field], VectorTable.of(getattr(born, kind.vector_field))),
                )
        ordered(snap)
        return snap

    @staticmethod
    def _build(manifest: Manifest, rows: list[tuple[str, str, str, bytes | None]]) -> NamespaceSnapshot:
        snap = NamespaceSnapshot(namespace=manifest.namespace, manifest=manifest)
        records: dict[str, dict[str, BaseModel]] = {kind.field: {} for kind in RECORD_KINDS}
        vectors: dict[str, dict[str, np.ndarray]] = {kind.field: {} for kind in RECORD_KINDS}
        for kind_field, rid, record, vector in rows:
            kind = BY_FIELD.get(kind_field)
            if kind is None:
                continue  # a kind a newer LogicMap wrote: not this version's to read
            records[kind_field][rid] = kind.model.model_validate_json(record)
            if kind.vector_field is not None and vector is not None:
                vectors[kind_field][rid] = _vector_from_binary(vector)
        for kind in RECORD_KINDS:
            setattr(snap, kind.field, records[kind.field])
            if kind.vector_field is not None:
                setattr(snap, kind.vector_field, VectorTable.of(vectors[kind.field]))
        ordered(snap)
        return snap

    def query(self, namespace: str, kind: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """The ``k`` live records of ``kind`` nearest to ``vector`` by cosine similarity, searched in the database
        (the committed, visible versions only), through the width's HNSW index when the planner takes it
        (``nearest_rows``); the exact search in the database when that comes back short. A zero query vector has no
        cosine: the exact search over the snapshot (``port.committed_nearest``) answers it, as every other
        backend's ``query`` does."""
        check_queryable(kind)
        namespace = validate_namespace(namespace)
        values = _vector_values(vector)
        if values is None or not np.any(values):
            return committed_nearest(self, namespace, kind, vector, k)
        if k <= 0:
            return []
        probe, width = _vector_text(values), len(values)
        with self._connection() as conn:
            hits = nearest_rows(conn, namespace, kind, probe, width, k)
            if len(hits) < k:  # fewer live rows, or the index scan gave up (hnsw.max_scan_tuples) short of k
                hits = nearest_rows(conn, namespace, kind, probe, width, k, exact=True)
            if not hits:  # none of this width: none at all, or a query of the wrong width
                row = conn.execute(
                    f"SELECT vector_dims(embedding) FROM {_RECORDS} WHERE namespace = %s "
                    "AND kind = %s AND died = %s AND embedding IS NOT NULL LIMIT 1",
                    (namespace, kind, SENTINEL),
                ).fetchone()
                if row is not None:
                    raise ValueError(f"a query vector of width {width} for {kind} vectors of width {row[0]}")
        return [(str(rid), 1.0 - float(distance)) for rid, distance in hits]

    # -- writing ---------------------------------------------------------------------------------------------

    def commit(self, change: ChangeSet) -> Manifest:
        return self._commit(change)

    def restore(self, change: ChangeSet, manifest: Manifest) -> Manifest:
        check_restore(change, manifest)
        return self._commit(change, restored=manifest)

    def _commit(self, change: ChangeSet, restored: Manifest | None = None) -> Manifest:
        """One transaction: the compare-and-swap on the generation row, the turn-id check, retirements, versions."""
        namespace = validate_namespace(change.namespace)
        embedder = change.embedder or self.embedder
        rows = _rows(change)
        self._index_widths({row.width for row in rows if row.width})
        with self._connection() as conn:
            state = self._state(conn, namespace)
        incarnation, current = (state[0], state[3]) if state is not None else (None, Manifest(namespace=namespace))
        generation = check_commit(change, current, embedder, restored=restored)
        if restored is None:
            new_manifest = next_manifest(current, change, generation, embedder)
        else:
            new_manifest = restored.model_copy(
                deep=True, update={"namespace": namespace, "generation": generation, "void": [], "embedder": embedder}
            )
        with self._connection() as conn, conn.transaction():
            if not self._swap(conn, namespace, incarnation, change.base_generation, generation, new_manifest):
                raise GenerationConflict(
                    f"namespace {namespace!r} moved from generation {change.base_generation} while this change "
                    "was computed"
                )
            self._check_turn_ids(conn, change)
            self._retire(conn, namespace, generation, change.retire)
            self._retire(conn, namespace, generation, _ids_by_kind(rows))
            self._write(conn, namespace, generation, rows)
        return new_manifest

    @staticmethod
    def _swap(
        conn: Any, namespace: str, incarnation: str | None, base: int, generation: int, manifest: Manifest
    ) -> bool:
        """The compare-and-swap: the namespace's row moves from ``base`` to ``generation`` only if it is still at
        ``base`` (a concurrent writer's row lock makes this wait, then find the row moved). A new namespace's row
        is inserted only if absent."""
        body = manifest.model_dump_json()
        if incarnation is None:
            row = conn.execute(
                f"INSERT INTO {_NAMESPACES} (namespace, generation, oldest, manifest) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (namespace) DO NOTHING RETURNING generation",
                (namespace, generation, generation, body),
            ).fetchone()
            return row is not None
        row = conn.execute(
            f"UPDATE {_NAMESPACES} SET generation = generation + 1, manifest = %s "
            "WHERE namespace = %s AND generation = %s AND incarnation = %s RETURNING generation",
            (body, namespace, base, incarnation),
        ).fetchone()
        return row is not None and int(row[0]) == generation

    @staticmethod
    def _check_turn_ids(conn: Any, change: ChangeSet) -> None:
        """Refuse a change that would replace a stored turn of another session (unless it retires it); run after
        the swap, so the live versions read are those of the base generation."""
        retired = set(change.retire.get("turns", ()))
        sessions = {t.dia_id: t.session_id for t in change.turns if t.dia_id not in retired}
        if not sessions:
            return
        stored = conn.execute(
            f"SELECT id, record->>'session_id' FROM {_RECORDS} "
            "WHERE namespace = %s AND kind = 'turns' AND id = ANY(%s) AND died = %s",
            (change.namespace, list(sessions), SENTINEL),
        ).fetchall()
        for rid, session in sorted(stored):
            if session != sessions[rid]:
                raise TurnIdConflictError(
                    f"namespace {change.namespace!r}: turn {rid!r} of session {sessions[rid]!r} would overwrite "
                    f"the stored turn {rid!r} of session {session!r}; nothing was written: give the turn another id"
                )

    @staticmethod
    def _retire(conn: Any, namespace: str, generation: int, ids: dict[str, list[str]]) -> None:
        for kind_field, rids in ids.items():
            if rids:
                conn.execute(
                    f"UPDATE {_RECORDS} SET died = %s WHERE namespace = %s AND kind = %s AND id = ANY(%s) "
                    "AND died = %s",
                    (generation, namespace, kind_field, list(rids), SENTINEL),
                )

    @staticmethod
    def _write(conn: Any, namespace: str, generation: int, rows: list[_Row]) -> None:
        if not rows:
            return
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY {_RECORDS} (namespace, kind, id, born, died, record, embedding) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row((namespace, row.kind, row.id, generation, SENTINEL, row.record, row.vector))

    # -- removing --------------------------------------------------------------------------------------------

    def purge(self, namespace: str) -> PurgeReport:
        """Remove every retired version of ``namespace``, then make their bytes go.

        1. One transaction (the namespace's row locked, so no commit interleaves) deletes the versions retired at
           or before the committed generation and moves the oldest generation a pinned run may read to it.
        2. ``VACUUM FULL`` of the records table: deleted tuples stay in the table and index files as dead tuples
           until a vacuum, and a plain vacuum frees their space without overwriting it, so the table and its
           indexes are rewritten with the live rows only and the old files unlinked. It holds an ACCESS EXCLUSIVE
           lock on the table, every namespace's, while it copies the whole table.
        3. ``pg_switch_wal()`` then ``CHECKPOINT``: the WAL segments that carried the purged rows' inserts end
           before the checkpoint's redo point, so the checkpoint removes them, or, with ``wal_recycle = on`` (the
           default), renames them for reuse, which keeps their bytes until they are overwritten. Both need a
           superuser (or ``pg_checkpoint`` and EXECUTE on ``pg_switch_wal``); without them ``limits`` says so.

        Outside any purge's reach: WAL archives, replicas and base backups keep the rows for their own retention.
        Repeating a purge completes one that was interrupted (step 2 and 3 run even when nothing is left to delete).
        """
        namespace = validate_namespace(namespace)
        with self._connection() as conn, conn.transaction():
            row = conn.execute(
                f"SELECT generation FROM {_NAMESPACES} WHERE namespace = %s FOR UPDATE", (namespace,)
            ).fetchone()
            if row is None:
                raise UnknownNamespaceError(namespace)
            generation = int(row[0])
            gone = conn.execute(
                f"DELETE FROM {_RECORDS} WHERE namespace = %s AND died <= %s RETURNING kind", (namespace, generation)
            ).fetchall()
            conn.execute(f"UPDATE {_NAMESPACES} SET oldest = generation WHERE namespace = %s", (namespace,))
        report = PurgeReport(namespace=namespace, generation=generation)
        for (kind_field,) in gone:
            report.versions_removed[kind_field] = report.versions_removed.get(kind_field, 0) + 1
        report.collections_rebuilt, report.compacted, report.limits = self._compact()
        return report

    def _compact(self) -> tuple[int, bool, str | None]:
        """``VACUUM FULL`` of the records table, then a WAL switch and a checkpoint (see ``purge``)."""
        import psycopg

        with self._connection() as conn:
            conn.execute(f"VACUUM FULL {_RECORDS}")
            missing = []
            for name, statement in (("pg_switch_wal()", "SELECT pg_switch_wal()"), ("CHECKPOINT", "CHECKPOINT")):
                try:
                    conn.execute(statement)
                except psycopg.errors.InsufficientPrivilege:
                    missing.append(name)
        limits = (
            "WAL archives, replicas and backups keep what they hold; WAL segments recycled by the server "
            "(wal_recycle = on) keep their bytes until overwritten"
        )
        if missing:
            limits = (
                f"this user may not run {' or '.join(missing)}: the purged rows stay in the WAL until the "
                f"server's next checkpoint; {limits}"
            )
        return 1, True, limits

    def drop_namespace(self, namespace: str) -> dict[str, Any]:
        """Delete ``namespace`` (its row and every version) in one transaction, then compact as ``purge`` does."""
        namespace = validate_namespace(namespace)
        with self._connection() as conn, conn.transaction():
            row = conn.execute(
                f"DELETE FROM {_NAMESPACES} WHERE namespace = %s RETURNING generation", (namespace,)
            ).fetchone()
            conn.execute(f"DELETE FROM {_RECORDS} WHERE namespace = %s", (namespace,))
        if row is None or int(row[0]) == 0:
            raise UnknownNamespaceError(namespace)
        with self._cache_lock:
            self._cache.pop(namespace, None)
        _rebuilt, compacted, _limits = self._compact()
        return {"namespace": namespace, "generation": int(row[0]), "collections": 0, "compacted": compacted}

    def close(self) -> None:
        """Close this store's connection pool (the memory stays in the database); in a forked child, nothing: the
        connections are the parent's."""
        if os.getpid() == self._pid:
            self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- encoding --------------------------------------------------------------------------------------------------


def _rows(change: ChangeSet) -> list[_Row]:
    """Every version ``change`` writes, encoded and checked (one vector per record) before anything is; a record
    listed twice is written once, as its last listing (the in-process backend's result)."""
    rows: dict[tuple[str, str], _Row] = {}
    for kind in RECORD_KINDS:
        records = list(getattr(change, kind.field))
        vectors = kind.stored_vectors(change)
        if vectors is not None and len(vectors) != len(records):
            raise ValueError(f"{kind.field}: {len(records)} records but {len(vectors)} vectors")
        for i, record in enumerate(records):
            rid = kind.record_id(record)
            values = _vector_values(vectors[i]) if vectors is not None else None
            rows.pop((kind.field, rid), None)
            rows[(kind.field, rid)] = _Row(
                kind.field,
                rid,
                record.model_dump_json(),
                None if values is None else _vector_text(values),
                0 if values is None else len(values),
            )
    return list(rows.values())


def _ids_by_kind(rows: list[_Row]) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    for row in rows:
        ids.setdefault(row.kind, []).append(row.id)
    return ids


def _vector_values(vector: Any) -> np.ndarray | None:
    """A vector as float32 values (None for an empty one: pgvector has no zero-width vector)."""
    values = np.asarray(vector, dtype=np.float32).reshape(-1)
    return values if len(values) else None


def _vector_text(values: np.ndarray) -> str:
    """pgvector's text form of float32 values."""
    return "[" + ",".join(repr(float(x)) for x in values.tolist()) + "]"


def _vector_from_binary(data: bytes) -> np.ndarray:
    """pgvector's binary form: dimension (int16), unused (int16), then the float32 values, big-endian."""
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


# -- searching -------------------------------------------------------------------------------------------------


def nearest_rows(
    conn: Any, namespace: str, kind: str, vector: str, width: int, k: int, exact: bool = False
) -> list[tuple[str, float]]:
    """``(id, cosine distance)`` of the ``k`` live records of ``kind`` nearest to ``vector``, nearest first (one
    statement: the versions its snapshot sees, committed ones only).

    The ``ORDER BY`` matches the width's HNSW index, which the planner takes when the namespace is not small. An
    HNSW scan finds the index's nearest candidates first and filters after, so with many namespaces it would
    return fewer than ``k`` rows of this one; ``hnsw.iterative_scan = relaxed_order`` (pgvector >= 0.8, set for
    every session of the store's pool: ``_open_pool``) makes it scan on until ``k`` rows pass the filter (or
    ``hnsw.max_scan_tuples`` were scanned), in an order that is nearly sorted, so the rows are sorted again. A ``k``
    above ``hnsw.ef_search`` (40) raises it for this statement (``SET LOCAL``). ``exact``: an ``ORDER BY`` no index
    matches (every live row of the kind compared)."""
    statement, params = search_sql(width, exact), (vector, namespace, kind, SENTINEL, vector, k)
    if exact or k <= EF_SEARCH:
        rows = conn.execute(statement, params).fetchall()
    else:
        with conn.transaction():
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(min(1000, k)),))
            rows = conn.execute(statement, params).fetchall()
    return [(str(rid), float(distance)) for rid, distance in rows]


def search_sql(width: int, exact: bool = False) -> str:
    """``nearest_rows``'s statement (parameters: vector, namespace, kind, the live sentinel, vector, k)."""
    probe = f"embedding::vector({width}) <=> %s::vector({width})"
    return (
        f"WITH hits AS MATERIALIZED (SELECT id, {probe} AS distance FROM {_RECORDS} "
        f"WHERE namespace = %s AND kind = %s AND died = %s AND vector_dims(embedding) = {width} "
        f"ORDER BY {f'({probe}) + 0' if exact else probe} LIMIT %s) SELECT id, distance FROM hits ORDER BY distance, id"
    )


# -- connecting ------------------------------------------------------------------------------------------------


def _describe(url: str) -> str:
    """The server and database a URL names, without its password (for messages)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception as exc:  # any unparsable URL is one line
        raise ValueError(f"LOGICMAP_STORE_URL: not a PostgreSQL URL ({_first_line(exc)})") from exc
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_reachable(url: str, where: str) -> None:
    """One connection before the pool opens, so an unreachable server, a refused login or a missing database is
    one line at once (the pool would retry in the background until its timeout)."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT_S)).close()
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"PostgreSQL at {where}: {_first_line(exc)}") from exc
    except psycopg.ProgrammingError as exc:  # a connection parameter libpq does not take
        raise ValueError(f"LOGICMAP_STORE_URL: {_first_line(exc)}") from exc


def _open_pool(url: str, where: str, *, stall_s: float) -> Any:
    """The store's pool. Each connection's session ends if it sits ``stall_s`` seconds inside a transaction (a
    writer paused or hung mid-commit), so its row lock holds the namespace's other writers at most that long,
    as a Chroma server's commit lease does (``LOGICMAP_COMMIT_LEASE_S``); its HNSW searches scan iteratively
    (``nearest_rows``)."""
    try:
        import psycopg_pool
    except ImportError as exc:
        raise StoreError(
            "LOGICMAP_STORE_URL names PostgreSQL but psycopg is not installed: pip install 'logicmap[postgres]'"
        ) from exc

    _check_reachable(url, where)

    def configure(conn: Any) -> None:
        conn.execute(f"SET idle_in_transaction_session_timeout = {max(1, int(stall_s * 1000))}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")  # a filtered HNSW search returns k rows
        conn.execute(f"SET hnsw.ef_search = {EF_SEARCH}")

    pool = psycopg_pool.ConnectionPool(
        url,
        min_size=1,
        max_size=POOL_MAX,
        kwargs={"autocommit": True},
        configure=configure,
        open=False,
        name=f"logicmap {where}",
    )
    pool.open(wait=False)
    try:
        pool.wait(timeout=CONNECT_TIMEOUT_S)
    except psycopg_pool.PoolTimeout as exc:
        pool.close()
        raise StoreUnavailableError(
            f"PostgreSQL at {where} did not answer within {CONNECT_TIMEOUT_S:.0f} s "
            "(is the server running, and the URL's user, password and database right?)"
        ) from exc
    return pool
