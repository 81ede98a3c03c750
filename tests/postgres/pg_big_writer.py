"""A writer process for the kill test: commits sessions ``K0``..``K{count-1}`` of ``turns`` turns each (wide
vectors, so a commit takes a while) to one namespace, skipping those already committed, recomputing on conflict."""

from __future__ import annotations

import sys

import numpy as np

from logicmap.memory.store import GenerationConflict, open_store
from logicmap.settings import LogicMapSettings
from tests.unit.test_storage_port import _session_change

WIDTH = 384


def main(url: str, namespace: str, count: int, turns: int) -> None:
    store = open_store(LogicMapSettings(store_url=url, embedding_provider="hashing"))
    rng = np.random.default_rng(0)
    for n in range(count):
        session = f"K{n}"
        while session not in store.manifest(namespace).sessions:
            change = _session_change(
                namespace, store.manifest(namespace).generation, session, [f"{session} turn {i}" for i in range(turns)]
            )
            change.turn_vectors = rng.normal(size=(turns, WIDTH)).tolist()
            try:
                store.commit(change)
            except GenerationConflict:
                continue
        print(session, flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
