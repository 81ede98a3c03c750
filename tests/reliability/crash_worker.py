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
import signal
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_conversation.json"

# Everything an ingest needs, imported before any fork (the children then start instantly). No Chroma
# client, no thread pool and no OpenMP region is created in this process, so forking stays safe.
import chromadb  # noqa: E402,F401
import sklearn.cluster  # noqa: E402,F401

import logicmap.graphs.ingest  # noqa: E402,F401
import logicmap.graphs.ingest_cues  # noqa: E402,F401
import logicmap.graphs.ingest_facts  # noqa: E402,F401
import logicmap.memory.graph  # noqa: E402,F401
from logicmap.graphs.resources import Resources  # noqa: E402
from logicmap.memory.config import LogicMapSettings  # noqa: E402
from logicmap.memory.loaders import load_conversations  # noqa: E402

CONVERSATION = load_conversations(SAMPLE)[0]


def _resources(directory: str) -> Resources:
    resources = Resources(settings=LogicMapSettings(data_dir=Path(directory), embedding_provider="hashing"))
    resources.llm_ = None
    return resources


def _write(path: str, payload: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, default=str)
    os.replace(tmp, path)


def child_ingest(cmd: dict) -> dict:
    from logicmap.graphs.ingest import ingest_conversation

    resources = _resources(cmd["dir"])
    namespace = cmd["namespace"]
    prefixes: dict[int, dict] = {}
    commit_times: list[float] = []

    def after_commit(report) -> None:  # noqa: ANN001 - SessionReport
        if not report.skipped:
            commit_times.append(time.perf_counter() - CHILD_STARTED)
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
    from logicmap.memory.store import SENTINEL

    resources = _resources(cmd["dir"])
    store = resources.store
    namespace = cmd["namespace"]
    snap = store.snapshot(namespace)
    generation = snap.generation
    leftovers = 0
    pending_retirements = 0
    if generation > 0 or store.namespaces():
        for kind in ("turns", "events", "relations", "topics", "facts", "cues", "tags"):
            col = store._collection(namespace, kind)  # noqa: SLF001 - counting invisible versions on purpose
            leftovers += len(col.get(where={"born": {"$gt": generation}}, include=[])["ids"])
            pending_retirements += len(
                col.get(where={"$and": [{"died": {"$gt": generation}}, {"died": {"$lt": SENTINEL}}]}, include=[])["ids"]
            )
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


CHILD_STARTED = 0.0


def run_child(cmd: dict) -> None:
    """Body of a forked child: never returns."""
    global CHILD_STARTED
    CHILD_STARTED = time.perf_counter()
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # stdout is the protocol pipe
        body = child_inspect if cmd["op"] == "inspect" else child_ingest
        _write(cmd["out"], {"ok": True, **body(cmd)})
    except BaseException:  # noqa: BLE001 - reported to the test, which fails on it
        code = 1
        try:
            _write(cmd["out"], {"ok": False, "error": traceback.format_exc()})
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def serve() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        sys.stdout.flush()
        sys.stderr.flush()
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            run_child(cmd)
        deadline = None if cmd.get("kill_after") is None else started + float(cmd["kill_after"])
        status = None
        killed = False
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = raw
                break
            if deadline is not None and time.perf_counter() >= deadline:
                os.kill(pid, signal.SIGKILL)
                killed = True
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        reply = {
            "op": cmd["op"],
            "elapsed": time.perf_counter() - started,
            "killed": killed and os.WIFSIGNALED(status),
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        }
        if cmd["op"] == "warm" and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            # Import in the server what the first ingest imported lazily, so later children start warm.
            for name in json.loads(Path(cmd["out"]).read_text())["lazy_modules"]:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - optional speed-up only
                    pass
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    serve()
