"""A fork server for the forget crash test: imports LogicMap once, then forks one child per command.

Protocol: one JSON command per stdin line, one JSON reply per stdout line (``test_forget_crash_safety.py``).

Commands (D a data directory, F the file the child writes its result to):
  {"op": "ingest", "dir": D, "out": F}                 the sample with the canary session, into namespace "acme"
  {"op": "forget", "dir": D, "out": F, "kill_after": S | null}   forget the canary turn, then purge
  {"op": "inspect", "dir": D, "out": F}                a reader's fingerprint of "acme"
  {"op": "finish", "dir": D, "out": F}                 the re-run: forget and purge if the forget is not
                                                       committed, else purge again; then the fingerprint and
                                                       the files that still hold the canary
  {"op": "forget-in-purge", "dir": D, "out": F, "delay": S | null}
                                                       forget and purge the canary turn; with a delay, the child
                                                       SIGKILLs itself S seconds after the purge started (its
                                                       first rebuild note appeared); the seconds from the start
                                                       to the purge and to the end
  {"op": "reopen", "dir": D, "out": F}                 open the store (nothing else), then the fingerprint and
                                                       the files that still hold the canary
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import chromadb  # noqa: F401
import sklearn.cluster  # noqa: F401

import logicmap.graphs.ingest.ingest
import logicmap.graphs.writes.forget  # noqa: F401
from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.files.loaders import load_conversations
from logicmap.memory.records.records import stable_hash
from logicmap.settings import LogicMapSettings
from tests.reliability import fork_server
from tests.reliability.fork_server import serve
from tests.reliability.support import SAMPLE
from tests.reliability.test_forget_purge import CANARY, _files_holding, _with_canary

NAMESPACE, VICTIM = "acme", "D99:2"


def _resources(directory: str) -> Resources:
    resources = Resources(settings=LogicMapSettings(data_dir=Path(directory), embedding_provider="hashing"))
    resources.llm_ = None
    return resources


def _watch_purge(directory: str, delay: float | None, seen: list[float]) -> None:
    """Wait for the purge's first rebuild note, note when it appeared, and SIGKILL this process ``delay`` later."""
    note = Path(directory) / f".purge-{stable_hash(NAMESPACE, length=16)}.json"
    while not note.exists():
        time.sleep(0.0005)
    seen.append(time.perf_counter() - fork_server.CHILD_STARTED)
    if delay is not None:
        time.sleep(delay)
        os.kill(os.getpid(), signal.SIGKILL)


def child(cmd: dict) -> dict:
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.writes.forget import forget

    res = _resources(cmd["dir"])
    op = cmd["op"]
    if op == "ingest":
        ingest_conversation(
            _with_canary(load_conversations(SAMPLE)[0]),
            NAMESPACE,
            resources=res,
            policy="heuristic",
            memory_manager="r2",
        )
    elif op == "forget":
        forget(NAMESPACE, turn_ids=[VICTIM], purge=True, resources=res)
    elif op == "forget-in-purge":
        seen: list[float] = []
        threading.Thread(target=_watch_purge, args=(cmd["dir"], cmd.get("delay"), seen), daemon=True).start()
        forget(NAMESPACE, turn_ids=[VICTIM], purge=True, resources=res)
        ended = time.perf_counter() - fork_server.CHILD_STARTED
        res.store.close()
        return {"purge_started_s": seen[0] if seen else None, "ended_s": ended}
    elif op == "finish":
        if VICTIM in res.store.snapshot(NAMESPACE).turns:
            forget(NAMESPACE, turn_ids=[VICTIM], purge=True, resources=res)
        else:
            res.store.purge(NAMESPACE)
    snap = res.store.snapshot(NAMESPACE)
    found = {"fingerprint": snap.fingerprint()}
    if op in ("finish", "reopen"):
        res.store.close()
        found["canary_files"] = _files_holding(Path(cmd["dir"]), CANARY.encode())
    return found


if __name__ == "__main__":
    serve(lambda cmd: child)
