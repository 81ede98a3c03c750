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


def test_a_snapshot_advanced_by_deltas_equals_one_read_whole(postgres_url: str) -> None:
    """Random commits (new sessions, replaced turns, retirements, purges) by one store; after some, the other
    store's cached snapshot, advanced by a delta read (or read whole after a purge), equals a new store's whole
    read: records, order, vectors."""
    import random

    import numpy as np

    from logicmap.memory.store import ChangeSet
    from tests.unit.test_storage_port import _session_change

    settings = LogicMapSettings(store_url=postgres_url, embedding_provider="hashing")
    writer, reader = open_store(settings), open_store(settings)
    rng = random.Random(39)
    try:
        for step in range(60):
            base = writer.manifest("delta").generation
            live = sorted(writer.snapshot("delta").turns) if base else []
            roll = rng.random()
            if live and roll < 0.25:
                writer.commit(
                    ChangeSet(
                        namespace="delta",
                        base_generation=base,
                        embedder="hashing",
                        retire={"turns": rng.sample(live, min(2, len(live)))},
                    )
                )
            elif live and roll < 0.35:
                writer.purge("delta")
            else:
                session = f"S{rng.randrange(6)}"  # a session again: its turns replaced
                writer.commit(
                    _session_change(
                        "delta", base, session, [f"{session} step {step} turn {i}" for i in range(rng.randrange(1, 4))]
                    )
                )
            if rng.random() < 0.5:
                continue  # the reader skips generations: its next delta spans several (and a purge, at times)
            got = reader.snapshot("delta")
            whole = open_store(settings)
            try:
                want = whole.snapshot("delta")
            finally:
                whole.close()
            assert got.fingerprint() == want.fingerprint() and list(got.turns) == list(want.turns)
            assert got.turn_vectors.ids == want.turn_vectors.ids
            assert np.array_equal(got.turn_vectors.matrix, want.turn_vectors.matrix)
    finally:
        writer.close()
        reader.close()


def test_a_store_that_cannot_connect_is_one_line_at_once_without_the_password(postgres_server: object) -> None:
    import time

    from logicmap.memory.store import StoreUnavailableError
    from tests.postgres_support import free_port

    port = getattr(postgres_server, "port")  # noqa: B009 - the session's server
    for url, said in (
        (f"postgresql://ana:s3cret@127.0.0.1:{free_port()}/memory", "Connection refused"),
        (f"postgresql://postgres:s3cret@127.0.0.1:{port}/no_such_db", "no_such_db"),
    ):
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            open_store(LogicMapSettings(store_url=url, embedding_provider="hashing"))
        message = str(caught.value)
        assert said in message and "s3cret" not in message and "\n" not in message
        assert time.monotonic() - started < 5
    with pytest.raises((ValueError, StoreUnavailableError), match="invalid sslmode value"):
        open_store(LogicMapSettings(store_url="postgresql://127.0.0.1/x?sslmode=bogus", embedding_provider="hashing"))


def test_a_closed_store_refuses_every_later_call_in_one_line(postgres_url: str) -> None:
    """After ``close()`` the store's pool is gone: a later call says so in one line, naming the store without its
    password (was "PostgreSQL at HOST/DB did not answer: the pool ... is already closed", as if the server were down), as
    the Chroma backend does
    (``tests/unit/test_write_path.py``); the memory stays in the database for the next store."""
    from logicmap.memory.store import StoreError

    settings = LogicMapSettings(store_url=postgres_url, embedding_provider="hashing")
    store = open_store(settings)
    assert isinstance(store, PostgresStore)
    before = store.namespaces()
    store.close()
    for call in (store.namespaces, lambda: store.snapshot("memories.alice"), lambda: store.manifest("mem")):
        with pytest.raises(StoreError, match=r"^the memory store at .* is closed: open a new one") as caught:
            call()
        assert "\n" not in str(caught.value) and (settings.store_url or "") not in str(caught.value)
    store.close()  # twice: harmless
    again = open_store(settings)
    try:
        assert again.namespaces() == before
    finally:
        again.close()
