"""A writer process for the two-process test: commits ``count`` sessions to one namespace through its own
``PostgresStore``, recomputing on ``GenerationConflict`` as the ingest does; prints its retries as JSON."""

from __future__ import annotations

import json
import sys

from logicmap.memory.store import GenerationConflict, open_store
from logicmap.settings import LogicMapSettings
from tests.unit.test_storage_port import _session_change


def main(url: str, namespace: str, worker: str, count: int) -> None:
    store = open_store(LogicMapSettings(store_url=url, embedding_provider="hashing"))
    retries = 0
    try:
        for n in range(count):
            while True:
                base = store.manifest(namespace).generation
                try:
                    store.commit(_session_change(namespace, base, f"{worker}N{n}", [f"{worker} says {n}"]))
                    break
                except GenerationConflict:
                    retries += 1
    finally:
        store.close()
    print(json.dumps({"worker": worker, "retries": retries}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
