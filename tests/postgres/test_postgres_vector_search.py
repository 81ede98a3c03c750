"""``PostgresStore.query`` searched in the database through pgvector's HNSW indexes: with many namespaces in one
table, after ``ANALYZE``, a namespace-filtered search returns the full ``k`` (``hnsw.iterative_scan``), the ids the
exact search over the snapshot gives (recall), and equals the exact answer where no index is used."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from logicmap.memory.records.records import SessionInfo
from logicmap.memory.store import ChangeSet, open_store
from logicmap.memory.store.generations import SENTINEL
from logicmap.memory.store.port import committed_nearest
from logicmap.memory.store.postgres import PostgresStore, nearest_rows, search_sql
from logicmap.settings import LogicMapSettings
from tests.unit.test_storage_port import _turn

pytestmark = pytest.mark.postgres

NAMESPACES, ROWS, WIDTH, K, SEARCHES = 30, 200, 64, 10, 50


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = open_store(LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    assert isinstance(opened, PostgresStore)
    yield opened
    opened.close()


def _fill(store: PostgresStore, namespace: str, vectors: np.ndarray) -> None:
    turns = [_turn(namespace, "S1", i + 1, f"{namespace} turn {i}") for i in range(len(vectors))]
    info = SessionInfo(session_id="S1", content_hash=f"h-{namespace}", generation=0, policy="heuristic")
    store.commit(
        ChangeSet(
            namespace=namespace,
            base_generation=0,
            session=info,
            turns=turns,
            turn_vectors=[list(map(float, v)) for v in vectors],
            embedder="hashing",
        )
    )


def test_namespace_filtered_searches_return_the_full_k_through_the_hnsw_index(store: PostgresStore) -> None:
    rng = np.random.default_rng(39)
    for n in range(NAMESPACES):
        _fill(store, f"vs.t{n:02d}", rng.normal(size=(ROWS, WIDTH)))
    with store._connection() as conn:
        conn.execute("ANALYZE logicmap_records")
        assert conn.execute("SELECT to_regclass('logicmap_records_hnsw_64')").fetchone()[0] is not None
    overlaps, short = [], []
    for i in range(SEARCHES):
        namespace, query = f"vs.t{i % NAMESPACES:02d}", rng.normal(size=WIDTH)
        got = store.query(namespace, "turns", list(query), K)
        exact = committed_nearest(store, namespace, "turns", list(query), K)
        assert len(got) == K and all(rid.startswith("S1:") for rid, _ in got)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        overlaps.append(len({rid for rid, _ in got} & {rid for rid, _ in exact}) / K)
        text = "[" + ",".join(repr(float(x)) for x in query) + "]"
        with store._connection() as conn, conn.transaction():  # the index path alone, as ``query`` runs it first
            if len(nearest_rows(conn, namespace, "turns", text, WIDTH, K)) < K:
                short.append(namespace)
            plan = conn.execute("EXPLAIN " + search_sql(WIDTH), (text, namespace, "turns", SENTINEL, text, K))
            assert "logicmap_records_hnsw_64" in str(plan.fetchall())
    assert short == [], f"{len(short)} of {SEARCHES} index searches returned fewer than {K} rows"
    recall = sum(overlaps) / len(overlaps)
    print(f"recall@{K} of {SEARCHES} namespace-filtered HNSW searches: {recall:.3f}")
    assert recall >= 0.9


def test_a_small_namespace_gets_the_exact_answer_and_bad_queries_are_one_line(store: PostgresStore) -> None:
    rng = np.random.default_rng(7)
    _fill(store, "vs.small", rng.normal(size=(5, 8)))
    query = list(rng.normal(size=8))
    got, exact = store.query("vs.small", "turns", query, 10), committed_nearest(store, "vs.small", "turns", query, 10)
    assert [rid for rid, _ in got] == [rid for rid, _ in exact]
    assert np.allclose([s for _, s in got], [s for _, s in exact], atol=1e-5)
    assert store.query("vs.none", "turns", query, 3) == [] and store.query("vs.small", "turns", query, 0) == []
    assert store.query("vs.small", "turns", [0.0] * 8, 2) == [("S1:1", 0.0), ("S1:2", 0.0)]  # no cosine: exact
    with pytest.raises(ValueError, match="width 3 for turns vectors of width 8"):
        store.query("vs.small", "turns", [1.0, 2.0, 3.0], 2)
    with pytest.raises(ValueError, match="have no vectors"):
        store.query("vs.small", "tags", query, 2)


def test_the_migration_indexes_the_widths_a_database_held_before_it(store: PostgresStore, postgres_url: str) -> None:
    _fill(store, "vs.old", np.random.default_rng(3).normal(size=(4, 12)))
    with store._connection() as conn:  # back to the schema before the HNSW migrations, its vectors kept
        conn.execute("DROP INDEX logicmap_records_hnsw_12")
        conn.execute("DROP FUNCTION logicmap_vector_index")
        conn.execute("DELETE FROM logicmap_migrations WHERE v >= 7")
    again = open_store(LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    try:
        with store._connection() as conn:
            assert conn.execute("SELECT to_regclass('logicmap_records_hnsw_12')").fetchone()[0] is not None
    finally:
        again.close()
