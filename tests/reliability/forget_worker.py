"""A fork server for the forget crash test: imports LogicMap once, then forks one child per command.

Protocol: one JSON command per stdin line, one JSON reply per stdout line (``test_forget_crash_safety.py``).

Commands (D a data directory, F the file the child writes its result to):
  {"op": "ingest", "dir": D, "out": F}                 the sample with the canary session, into namespace "acme"
  {"op": "forget", "dir": D, "out": F, "kill_after": S | null}   forget the canary turn, then purge
  {"op": "inspect", "dir": D, "out": F}                a reader's fingerprint of "acme"
  {"op": "finish", "dir": D, "out": F}                 the re-run: forget and purge if the forget is not
                                                       committed, else purge again; then the fingerprint and
                                                       the files that still hold the canary
"""

from __future__ import annotations

from pathlib import Path

import chromadb  # noqa: F401
import sklearn.cluster  # noqa: F401

import logicmap.graphs.forget  # noqa: F401
import logicmap.graphs.ingest  # noqa: F401
from logicmap.graphs.resources import Resources
from logicmap.memory.loaders import load_conversations
from logicmap.settings import LogicMapSettings
from tests.reliability.fork_server import serve
from tests.reliability.support import SAMPLE
from tests.reliability.test_forget_purge import CANARY, _files_holding, _with_canary

NAMESPACE, VICTIM = "acme", "D99:2"


def _resources(directory: str) -> Resources:
    resources = Resources(settings=LogicMapSettings(data_dir=Path(directory), embedding_provider="hashing"))
    resources.llm_ = None
    return resources


def child(cmd: dict) -> dict:
    from logicmap.graphs.forget import forget
    from logicmap.graphs.ingest import ingest_conversation

    res = _resources(cmd["dir"])
    op = cmd["op"]
    if op == "ingest":
        ingest_conversation(_with_canary(load_conversations(SAMPLE)[0]), NAMESPACE, resources=res,
                            policy="heuristic", memory_manager="r2")
    elif op == "forget":
        forget(NAMESPACE, turn_ids=[VICTIM], purge=True, resources=res)
    elif op == "finish":
        if VICTIM in res.store.snapshot(NAMESPACE).turns:
            forget(NAMESPACE, turn_ids=[VICTIM], purge=True, resources=res)
        else:
            res.store.purge(NAMESPACE)
    snap = res.store.snapshot(NAMESPACE)
    found = {"fingerprint": snap.fingerprint()}
    if op == "finish":
        res.store.close()
        found["canary_files"] = _files_holding(Path(cmd["dir"]), CANARY.encode())
    return found


if __name__ == "__main__":
    serve(lambda cmd: child)
