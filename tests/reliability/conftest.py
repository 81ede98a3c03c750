"""Fixtures of the reliability suite: isolated stores, the sample conversation ingested once per module, a Chroma server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from logicmap.graphs.runtime.resources import Resources
from tests.conftest import make_resources
from tests.reliability.support import ChromaServer


@pytest.fixture(scope="module")
def module_resources(tmp_path_factory: pytest.TempPathFactory) -> Resources:
    """One store for a module's examples (each example uses its own namespace)."""
    res = make_resources(tmp_path_factory.mktemp("reliability") / "memory")
    yield res
    if res.store_ is not None:
        res.store_.close()


@pytest.fixture(scope="module")
def sample_memory(module_resources: Resources) -> Resources:
    """The sample conversation ingested by the heuristic policy into namespace "sample" (read-only), with the
    Memory-R2 manager too, so every strategy (``r2`` included) has its memory."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations
    from tests.reliability.support import SAMPLE

    ingest_conversation(
        load_conversations(SAMPLE)[0], "sample", resources=module_resources, policy="heuristic", memory_manager="r2"
    )
    return module_resources


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ChromaServer]:
    """A ``chroma run`` on a loopback port for one test, SIGKILLed after it."""
    chroma = ChromaServer(tmp_path / "chroma-server", tmp_path / "chroma.log")
    chroma.start()
    yield chroma
    chroma.kill()
