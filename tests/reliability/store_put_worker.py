"""A fork server for the replacing-put crash test (``test_store_replace_safety.py``): imports LogicMap once, then
forks one child per command (``fork_server.serve``).

Commands (D a data directory, F the file the child writes its result to):
  {"op": "seed", "dir": D, "out": F}                           three items in ("memories", "alice"), "home" = OLD
  {"op": "replace", "dir": D, "out": F, "kill_after": S|null}  put "home" = NEW (a replacing put)
  {"op": "inspect", "dir": D, "out": F}                        what a reader sees: get, search, the records
"""

from __future__ import annotations

from pathlib import Path

import chromadb  # noqa: F401
import sklearn.cluster  # noqa: F401

import logicmap.graphs.surfaces.basestore  # noqa: F401
from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.store.live import live_snapshot
from logicmap.settings import LogicMapSettings
from tests.reliability.fork_server import serve

NS = ("memories", "alice")
OLD = {"content": "I keep a zebra called Quillon in the barn."}
NEW = {"content": "I moved to Porto with my walrus Brindlewick."}
OLD_WORD, NEW_WORD = "Quillon", "Brindlewick"


def _resources(directory: str) -> Resources:
    resources = Resources(settings=LogicMapSettings(data_dir=Path(directory), embedding_provider="hashing"))
    resources.llm_ = None
    return resources


def seen(store, res: Resources) -> dict:
    """What a reader sees: ``get``'s value, the keys and values ``search`` returns for each word, and whether any
    live record of any kind still holds each word."""
    item = store.get(NS, "home")
    found: dict = {"value": None if item is None else item.value}
    for word in (OLD_WORD, NEW_WORD):
        hits = store.search(NS, query=f"where is {word}", limit=10)
        found[f"search_{word}"] = [h.value for h in hits if h.key == "home"]
        snap = live_snapshot(res.store, "memories.alice")  # what readers see: committed, with pending writes
        found[f"records_{word}"] = sorted(
            kind.field
            for kind in RECORD_KINDS
            if any(word in r.model_dump_json() for r in getattr(snap, kind.field).values())
        )
    return found


def child(cmd: dict) -> dict:
    from logicmap.graphs.surfaces.basestore import LogicMapStore

    res = _resources(cmd["dir"])
    store = LogicMapStore(resources=res, policy="heuristic", consolidation="sync")
    op = cmd["op"]
    if op == "seed":
        store.put(NS, "job", {"content": "I work night shifts at the city hospital."})
        store.put(NS, "home", OLD)
        store.put(NS, "pet", {"content": "My cat sleeps on the piano."})
    elif op == "replace":
        store.put(NS, "home", NEW)
    return {"seen": seen(store, res), "generation": res.store.snapshot("memories.alice").generation}


if __name__ == "__main__":
    serve(lambda cmd: child)
