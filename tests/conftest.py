"""Shared fixtures: isolated memory directories, the fast lexical embedder, the sample conversation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

from logicmap.graphs.resources import Resources  # noqa: E402
from logicmap.memory.config import LogicMapSettings  # noqa: E402
from logicmap.memory.loaders import Conversation, load_conversations  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample_conversation.json"


def make_resources(data_dir: Path, llm=None, provider: str = "hashing") -> Resources:  # noqa: ANN001
    """Resources on a private directory, with a given chat model (None: no LLM)."""
    resources = Resources(settings=LogicMapSettings(data_dir=data_dir, embedding_provider=provider))
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
