"""How tests open stores, so that the stores a test opened under its ``tmp_path`` are closed when it ends.

An embedded Chroma client keeps its SQLite connections, files and HNSW indexes open until it is closed (Chroma's
shared system outlives the store object), and a suite of a few thousand tests that never closes them runs out of
file descriptors and memory. Tests make their resources with ``make_resources`` or ``resources_for``, which remember
them until the test ends; ``tests/conftest.py``'s autouse fixture then closes, with ``close_stores_under``, the stores
they opened under the test's ``tmp_path`` (a resources' store opens lazily: its ``store_`` is looked at then).
One module, imported by one name: ``tests/conftest.py`` is loaded twice (by pytest as ``conftest``, by the tests as
``tests.conftest``), so state kept there would be two lists.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.store import StoragePort
from logicmap.settings import LogicMapSettings

__all__ = ["close_stores_under", "held_by_a_store", "make_resources", "resources_for"]

_MADE: list[Resources] = []  # since the last test ended (a Resources is a dataclass, so unhashable: a list)


def resources_for(settings: LogicMapSettings, **fields: Any) -> Resources:
    """``Resources(settings=settings, **fields)`` whose store, once opened, is closed after the test when it lives
    under the test's ``tmp_path``."""
    resources = Resources(settings=settings, **fields)
    _MADE.append(resources)
    return resources


def make_resources(data_dir: Path, llm: Any = None, provider: str = "hashing") -> Resources:
    """Resources on a private directory, with a given chat model (None: no LLM)."""
    resources = resources_for(LogicMapSettings(data_dir=data_dir, embedding_provider=provider))
    resources.llm_ = llm
    return resources


def close_stores_under(root: Path | None) -> list[StoragePort]:
    """Close the stores opened by the resources made since the last call whose data directory is under ``root``
    (none when ``root`` is None), forget those resources, and return the stores closed."""
    stores = [res.store_ for res in _MADE if res.store_ is not None]
    _MADE.clear()
    closed = [s for s in stores if root is not None and Path(s.settings.data_dir).resolve().is_relative_to(root)]
    for store in closed:
        store.close()
    return closed


def held_by_a_store(directory: Path) -> bool:
    """Whether an open store holds ``directory``'s process lock (an OS lock on the directory, as another opener
    meets it): a store left open keeps it until it is closed."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
