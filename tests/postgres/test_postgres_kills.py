"""Kill tests on PostgreSQL: a writer SIGKILLed at random points of its commits leaves nothing half-visible and
the re-run completes; a writer stalled inside its commit transaction holds the namespace's other writers only
until its session times out (``LOGICMAP_COMMIT_LEASE_S``), and leaves nothing; the database restarted under a
writer (every connection dropped mid-transaction) leaves nothing half-visible and the re-run completes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logicmap.memory.store import StoragePort, open_store
from logicmap.memory.store.generations import SENTINEL
from logicmap.settings import LogicMapSettings
from tests.postgres_support import EmbeddedPostgres, PostgresUnavailable
from tests.unit.test_storage_port import _session_change

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("pg_big_writer.py")
SESSIONS, TURNS, KILLS = 40, 300, 6


def _consistent(store: StoragePort, url: str, namespace: str) -> int:
    """Every committed session whole, generations consecutive, no version of an uncommitted generation."""
    import psycopg

    snap = store.snapshot(namespace)
    manifest = snap.manifest
    assert manifest.generation == len(manifest.sessions)
    assert sorted(s.generation for s in manifest.sessions.values()) == list(range(1, manifest.generation + 1))
    per_session: dict[str, int] = {}
    for turn in snap.turns.values():
        per_session[turn.session_id] = per_session.get(turn.session_id, 0) + 1
    assert per_session == dict.fromkeys(manifest.sessions, TURNS)
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM logicmap_records WHERE namespace = %s AND (born > %s OR (died <> %s AND died > %s))",
            (namespace, manifest.generation, SENTINEL, manifest.generation),
        ).fetchone()
    assert row is not None and row[0] == 0
    return manifest.generation


def test_a_writer_killed_mid_commit_leaves_nothing_half_visible_and_the_rerun_completes(postgres_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), *sys.path]))}
    argv = [sys.executable, str(WRITER), postgres_url, "killed", str(SESSIONS), str(TURNS)]
    store = open_store(LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    rng = random.Random(39)
    try:
        seen = []
        for _ in range(KILLS):
            writer = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert writer.stdout is not None
            writer.stdout.readline()  # it has committed a session: the next commits are under way
            time.sleep(rng.uniform(0.0, 0.5))
            writer.send_signal(signal.SIGKILL)
            writer.communicate(timeout=60)
            seen.append(_consistent(store, postgres_url, "killed"))
        rerun = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, timeout=600, check=False)
        assert rerun.returncode == 0, rerun.stderr.decode()[-2000:]
        assert _consistent(store, postgres_url, "killed") == SESSIONS
        assert seen == sorted(seen) and seen[-1] < SESSIONS  # the kills landed before the end
    finally:
        store.close()


def test_a_writer_stalled_inside_its_commit_holds_the_others_only_until_its_session_times_out(
    postgres_url: str,
) -> None:
    settings = LogicMapSettings(store_url=postgres_url, embedding_provider="hashing", commit_lease_s=1.0)
    stalled, other = open_store(settings), open_store(settings)
    try:
        stalled.commit(_session_change("stall", 0, "S1", ["first"]))
        with pytest.raises(Exception):  # noqa: B017 - the server ends the stalled session: any error of it
            with stalled._connection() as conn:  # a writer paused after its compare-and-swap
                conn.execute("BEGIN")
                conn.execute(
                    "UPDATE logicmap_namespaces SET generation = generation + 1 WHERE namespace = %s", ("stall",)
                )
                started = time.monotonic()
                other.commit(_session_change("stall", 1, "S2", ["second"]))  # waits for the row lock
                waited = time.monotonic() - started
                conn.execute("COMMIT")
        assert 0.5 < waited < 10
        assert other.manifest("stall").generation == 2
        assert sorted(t.text for t in other.snapshot("stall").turns.values()) == ["first", "second"]
        stalled.commit(_session_change("stall", 2, "S3", ["third"]))  # its pool replaced the ended session
        assert stalled.manifest("stall").generation == 3
    finally:
        stalled.close()
        other.close()


@pytest.fixture(scope="module")
def own_server() -> Iterator[EmbeddedPostgres]:
    """A server of this module's own, to restart."""
    try:
        server = EmbeddedPostgres()
        server.start()
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL for the postgres tests: {exc}")
    yield server
    server.remove()


def test_the_database_restarted_mid_ingest_leaves_nothing_half_visible_and_the_rerun_completes(
    own_server: EmbeddedPostgres,
) -> None:
    url = own_server.create_database()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), *sys.path]))}
    argv = [sys.executable, str(WRITER), url, "restarted", str(SESSIONS), str(TURNS)]
    writer = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert writer.stdout is not None
    writer.stdout.readline()
    time.sleep(random.Random(3).uniform(0.0, 0.5))
    own_server.restart()  # every connection of the writer dropped, its open transaction rolled back
    _out, err = writer.communicate(timeout=120)
    assert writer.returncode != 0 and b"StoreUnavailableError" in err  # one line naming the lost server
    store = open_store(LogicMapSettings(store_url=url, embedding_provider="hashing"))
    try:
        assert _consistent(store, url, "restarted") < SESSIONS
        rerun = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, timeout=600, check=False)
        assert rerun.returncode == 0, rerun.stderr.decode()[-2000:]
        assert _consistent(store, url, "restarted") == SESSIONS
    finally:
        store.close()
