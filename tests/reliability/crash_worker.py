"""A fork server for the crash-safety test: imports LogicMap once, then forks one child per ingest or read.

Each child is a real process that the server SIGKILLs on request, so trials pay no start-up cost.
Protocol: one JSON command per stdin line, one JSON reply per stdout line (``tests/reliability/test_crash_safety.py``).

Commands:
  {"op": "warm", "dir": D, "namespace": NS, "out": F}      ingest once in a child, then import what it imported lazily
  {"op": "ingest", "dir": D, "namespace": NS, "out": F, "kill_after": S | null, "fingerprints": bool}
  {"op": "inspect", "dir": D, "namespace": NS, "out": F}   a reader's view: fingerprint, manifest, leftover versions
  {"op": "quit"}
Children write their result as JSON to F; the reply says how the child ended (``killed`` or ``exited``).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_conversation.json"

# Everything an ingest needs, imported before any fork (the children then start instantly). No Chroma
# client, no thread pool and no OpenMP region is created in this process, so forking stays safe.
import chromadb  # noqa: E402,F401
import sklearn.cluster  # noqa: E402,F401

import logicmap.graphs.ingest.cues  # noqa: E402
import logicmap.graphs.ingest.facts  # noqa: E402
import logicmap.graphs.ingest.ingest  # noqa: E402
import logicmap.memory.indexes.graph  # noqa: E402,F401
from logicmap.graphs.runtime.resources import Resources  # noqa: E402
from logicmap.memory.files.loaders import load_conversations  # noqa: E402
from logicmap.settings import LogicMapSettings  # noqa: E402
from tests import chroma_internals as chroma  # noqa: E402
from tests.reliability import fork_server  # noqa: E402
from tests.reliability.fork_server import serve  # noqa: E402

CONVERSATION = load_conversations(SAMPLE)[0]


def _resources(directory: str) -> Resources:
    resources = Resources(settings=LogicMapSettings(data_dir=Path(directory), embedding_provider="hashing"))
    resources.llm_ = None
    return resources


def child_ingest(cmd: dict) -> dict:
    from logicmap.graphs.ingest.ingest import ingest_conversation

    resources = _resources(cmd["dir"])
    namespace = cmd["namespace"]
    prefixes: dict[int, dict] = {}
    commit_times: list[float] = []

    def after_commit(report) -> None:  # SessionReport
        if not report.skipped:
            commit_times.append(time.perf_counter() - fork_server.CHILD_STARTED)
        if cmd.get("fingerprints") and not report.skipped:
            snap = resources.store.snapshot(namespace)
            prefixes[snap.generation] = snap.fingerprint()

    before = set(sys.modules)
    started = time.perf_counter()
    report = ingest_conversation(
        CONVERSATION, namespace, resources=resources, policy="heuristic", progress=after_commit
    )
    elapsed = time.perf_counter() - started
    fingerprint = resources.store.snapshot(namespace).fingerprint()
    return {
        "elapsed": elapsed,
        "sessions": [(s.session_id, s.skipped, s.generation) for s in report.sessions],
        "fingerprint": fingerprint,
        "prefixes": prefixes,
        "commit_times": commit_times,
        "lazy_modules": sorted(set(sys.modules) - before),
    }


def child_inspect(cmd: dict) -> dict:
    resources = _resources(cmd["dir"])
    store = resources.store
    namespace = cmd["namespace"]
    snap = store.snapshot(namespace)
    generation = snap.generation
    leftovers = 0
    pending_retirements = 0
    if generation > 0 or store.namespaces():
        # Counting invisible versions on purpose (how Chroma holds them):
        kinds = ("turns", "events", "relations", "topics", "facts", "cues", "tags")
        leftovers = chroma.uncommitted_versions(store, namespace, kinds, generation)
        pending_retirements = chroma.pending_retirements(store, namespace, kinds, generation)
    return {
        "generation": generation,
        "fingerprint": snap.fingerprint(),
        "manifest_sessions": {sid: info.model_dump() for sid, info in snap.manifest.sessions.items()},
        "turn_sessions": {tid: t.session_id for tid, t in snap.turns.items()},
        "event_sessions": {eid: e.session_id for eid, e in snap.events.items()},
        "event_turns": {eid: e.turn_ids for eid, e in snap.events.items()},
        "namespaces": store.namespaces(),
        "leftover_versions": leftovers,
        "pending_retirements": pending_retirements,
    }


def _after(cmd: dict, status: int) -> None:
    if cmd["op"] == "warm" and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        # Import in the server what the first ingest imported lazily, so later children start warm.
        for name in json.loads(Path(cmd["out"]).read_text())["lazy_modules"]:
            try:
                importlib.import_module(name)
            except Exception:  # optional speed-up only
                pass


if __name__ == "__main__":
    serve(lambda cmd: child_inspect if cmd["op"] == "inspect" else child_ingest, after=_after)
