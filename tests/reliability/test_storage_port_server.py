"""The storage port's conformance suite (``tests/unit/test_storage_port.py``) against a Chroma server: the same
functions, on a ``chroma run`` started on 127.0.0.1 for the module (the embedded and in-process backends run them
in the unit suite)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logicmap.memory.store import MemoryStore, StoragePort
from logicmap.settings import LogicMapSettings
from tests.reliability.support import ChromaServer
from tests.unit.test_storage_port import SUITE, check_every_kind_round_trips

Opener = Callable[[], StoragePort]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    root = tmp_path_factory.mktemp("port-server")
    chroma = ChromaServer(root / "chroma-server", root / "chroma.log")
    chroma.start()
    yield chroma
    chroma.kill()


@pytest.fixture
def opener(chroma_server: ChromaServer, tmp_path: Path) -> Iterator[Opener]:
    settings = LogicMapSettings(chroma_host="127.0.0.1", chroma_port=chroma_server.port, embedding_provider="hashing")
    opened: list[StoragePort] = []

    def open_one() -> StoragePort:
        opened.append(MemoryStore(settings))
        return opened[-1]

    yield open_one
    if opened:
        for name in opened[0].namespaces():  # the server outlives the test: leave it empty for the next
            opened[0].drop_namespace(name)
    for store in opened:
        store.close()


@pytest.mark.parametrize("check", SUITE, ids=lambda c: c.__name__)
def test_the_port_on_a_chroma_server(opener: Opener, check: Callable[[Opener], None]) -> None:
    check(opener)


def test_every_kind_round_trips_on_a_chroma_server(opener: Opener, tmp_path: Path) -> None:
    check_every_kind_round_trips(opener, tmp_path)
