"""Forgetting on PostgreSQL, proved with a canary at the file level: after ``forget(..., purge=True)`` no file of
the database's data directory holds the canary's text or its embedding's bytes.

What ``PostgresStore.purge`` reaches, and so what is asserted: the table and index files always (the rewrite);
the WAL directory too when the server removes old WAL segments (``wal_recycle = off``). With the default
``wal_recycle = on`` a segment that carried the canary's insert is renamed for reuse and keeps its bytes until the
server writes over it: that server's test asserts the rest of the data directory only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.writes.forget import delete_namespace, forget
from logicmap.memory.files.loaders import load_conversations
from logicmap.settings import LogicMapSettings
from tests.postgres_support import EmbeddedPostgres, PostgresUnavailable
from tests.reliability.support import SAMPLE, memory_problems
from tests.reliability.test_forget_purge import CANARY, _answers, _files_holding, _with_canary

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def wal_removing_server() -> Iterator[EmbeddedPostgres]:
    """A server of its own whose checkpoints remove old WAL segments instead of recycling them."""
    try:
        server = EmbeddedPostgres(wal_recycle="off")
        server.start()
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL for the postgres tests: {exc}")
    yield server
    server.remove()


def _memory(url: str) -> Resources:
    res = Resources(settings=LogicMapSettings(store_url=url, embedding_provider="hashing"))
    sample = load_conversations(SAMPLE)[0]
    ingest_conversation(_with_canary(sample), "acme", resources=res, policy="heuristic", memory_manager="r2")
    ingest_conversation(sample, "acme.bob", resources=res, policy="heuristic", memory_manager="r2")
    return res


def _forget_the_canary(res: Resources, data: Path, *, skip: str | None = None) -> None:
    store = res.store
    vector = np.asarray(store.snapshot("acme").turn_vectors["D99:2"], dtype=np.float32).tobytes()
    with store._connection() as conn:  # the canary must be on disk before the purge
        conn.execute("ANALYZE")  # planner statistics too, which a purge of the tables would not reach
        conn.execute("CHECKPOINT")
    assert _files_holding(data, CANARY.encode(), vector), "the canary never reached the data files"
    bob_answers, bob_print = _answers(res, "acme.bob"), store.snapshot("acme.bob").fingerprint()

    report = forget("acme", turn_ids=["D99:2"], purge=True, resources=res)

    after = store.snapshot("acme")
    assert "D99:2" not in after.turns and not memory_problems(after)
    assert report.purge is not None and report.purge.compacted and report.purge.versions_removed["turns"] >= 1
    held = [f for f in _files_holding(data, CANARY.encode(), vector) if skip is None or f"/{skip}/" not in f]
    assert held == []
    assert all(CANARY not in a for a in _answers(res, "acme").values())
    assert _answers(res, "acme.bob") == bob_answers and store.snapshot("acme.bob").fingerprint() == bob_print


def test_purge_leaves_no_byte_of_the_canary_when_old_wal_is_removed(wal_removing_server: EmbeddedPostgres) -> None:
    url = wal_removing_server.create_database()
    res = _memory(url)
    try:
        _forget_the_canary(res, wal_removing_server.data)
        delete_namespace("acme.bob", resources=res)
        assert res.store.namespaces() == ["acme"]
    finally:
        res.store.close()
        wal_removing_server.drop_database(url)


def test_purge_on_a_default_server_leaves_the_canary_in_no_table_or_index_file(
    postgres_server: EmbeddedPostgres, postgres_url: str
) -> None:
    res = _memory(postgres_url)
    try:
        _forget_the_canary(res, postgres_server.data, skip="pg_wal")
    finally:
        res.store.close()


def test_planner_statistics_never_copy_record_text_or_vectors(postgres_url: str) -> None:
    """``ANALYZE`` keeps sampled values of a column in ``pg_statistic``, where no purge of the records table reaches
    them: the store's migrations turn statistics off for record text and vectors."""
    from logicmap.memory.store import open_store
    from tests.unit.test_storage_port import _session_change

    store = open_store(LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    try:
        store.commit(_session_change("stats", 0, "S1", [f"{CANARY} {i}" for i in range(20)]))
        with store._connection() as conn:  # the database's own catalog
            conn.execute("ANALYZE logicmap_records")
            kept = conn.execute(
                "SELECT attname FROM pg_stats WHERE tablename = 'logicmap_records' AND attname IN "
                "('record', 'embedding') AND (most_common_vals IS NOT NULL OR histogram_bounds IS NOT NULL)"
            ).fetchall()
            analyzed = conn.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'logicmap_records'").fetchone()
        assert kept == [] and analyzed is not None and analyzed[0] > 0
    finally:
        store.close()
