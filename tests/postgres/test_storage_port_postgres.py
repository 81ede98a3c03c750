"""The storage port's conformance suite (``tests/unit/test_storage_port.py``) on PostgreSQL + pgvector: the same
functions, each test on a fresh database of the session's embedded server (``postgres_url``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logicmap.memory.store import StoragePort, open_store
from logicmap.memory.store.postgres import MIGRATIONS, PostgresStore
from logicmap.settings import LogicMapSettings
from tests.unit.test_storage_port import SUITE, check_every_kind_round_trips

pytestmark = pytest.mark.postgres
Opener = Callable[[], StoragePort]


@pytest.fixture
def opener(postgres_url: str) -> Iterator[Opener]:
    settings = LogicMapSettings(store_url=postgres_url, embedding_provider="hashing")
    opened: list[StoragePort] = []

    def open_one() -> StoragePort:  # each a store of its own, with its own connection pool
        opened.append(open_store(settings))
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()


@pytest.mark.parametrize("check", SUITE, ids=lambda c: c.__name__)
def test_the_port_on_postgres(opener: Opener, check: Callable[[Opener], None]) -> None:
    check(opener)


def test_every_kind_round_trips_on_postgres(opener: Opener, tmp_path: Path) -> None:
    check_every_kind_round_trips(opener, tmp_path)


def test_the_url_picks_postgres_and_setup_runs_each_migration_once(postgres_url: str) -> None:
    store = open_store(LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    try:
        assert isinstance(store, PostgresStore) and isinstance(store, StoragePort)
        assert store.setup() == len(MIGRATIONS) - 1  # again: nothing left to run
        with store._connection() as conn:
            done = [v for (v,) in conn.execute("SELECT v FROM logicmap_migrations ORDER BY v").fetchall()]
        assert done == list(range(len(MIGRATIONS)))
    finally:
        store.close()
