"""A fork server for the redo crash test: imports LogicMap once, then forks one child per ingest, redo or read.

Protocol as ``crash_worker.py``: one JSON command per stdin line, one JSON reply per stdout line; a child writes
its result as JSON to ``out``. The chat model is scripted (``tests/unit/session_models.SessionModel``): its
segmenter replies junk for the sessions named in ``broken``, so those sessions fall back.

Commands:
  {"op": "ingest", "dir": D, "out": F, "broken": [session numbers]}      the first build, with fallbacks
  {"op": "redo", "dir": D, "out": F, "broken": [...], "kill_after": S | null, "kill_at_report": K | null}
        ``--redo-fallbacks`` with a model that still fails for ``broken``; the server SIGKILLs the child after
        S seconds, or the child SIGKILLs itself right after its K-th rebuilt session committed
  {"op": "inspect", "dir": D, "out": F}                                   fingerprint and manifest
  {"op": "quit"}
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import chromadb  # noqa: F401
import sklearn.cluster  # noqa: F401

import logicmap.graphs.ingest.cues
import logicmap.graphs.ingest.facts
import logicmap.graphs.ingest.ingest
import logicmap.graphs.ingest.redo  # noqa: F401
from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.settings import LogicMapSettings
from tests.reliability.fork_server import serve
from tests.unit.session_models import SEGMENT, SessionModel, long_conversation

NAMESPACE = "redo"
SESSIONS = 6
CONVERSATION = long_conversation(6, sessions=SESSIONS, chars=120)
CONTEXT = IngestContext(policy="llm", combined_extraction=False)


class BrokenSegmenter(SessionModel):
    """The segmenter replies junk for prompts that show a turn of a broken session (that session falls back)."""

    markers: list[str] = []

    def _next(self, messages: Any) -> Any:
        shown = str(messages[1].content) if len(messages) > 1 else ""
        if SEGMENT in str(messages[0].content) and any(m in shown for m in self.markers):
            return "this is not JSON at all"
        return super()._next(messages)


def _resources(directory: str, broken: list[int]) -> Resources:
    resources = Resources(settings=LogicMapSettings(data_dir=Path(directory), embedding_provider="hashing"))
    resources.llm_ = BrokenSegmenter(markers=[f"[D{n}:1]" for n in broken])
    return resources


def child_build(cmd: dict) -> dict:
    resources = _resources(cmd["dir"], cmd["broken"])
    redo = cmd["op"] == "redo"
    rebuilt: list[str] = []

    def after_commit(report: Any) -> None:
        if not report.skipped:
            rebuilt.append(report.session_id)
            if redo and cmd.get("kill_at_report") == len(rebuilt):
                os.kill(os.getpid(), signal.SIGKILL)

    report = ingest_conversation(
        CONVERSATION, NAMESPACE, resources=resources, context=CONTEXT, redo_fallbacks=redo, progress=after_commit
    )
    return {"built": [s.session_id for s in report.sessions if not s.skipped]}


def child_inspect(cmd: dict) -> dict:
    store = _resources(cmd["dir"], []).store
    snap = store.snapshot(NAMESPACE)
    sessions = {sid: info.model_dump(mode="json") for sid, info in snap.manifest.sessions.items()}
    return {"fingerprint": snap.fingerprint(), "manifest": sessions, "topic_steps": snap.manifest.topic_steps}


if __name__ == "__main__":
    serve(lambda cmd: child_inspect if cmd["op"] == "inspect" else child_build)
