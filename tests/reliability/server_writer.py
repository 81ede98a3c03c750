"""A writer process for the concurrency tests: import, say ready, wait for the start signal, ingest, report.

Usage: python server_writer.py FILE NAMESPACE READY_FILE GO_FILE OUT_FILE
Memory settings come from LOGICMAP_* variables (LOGICMAP_CHROMA_HOST/PORT for a Chroma server).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    file, namespace, ready, go, out = argv
    result: dict = {"namespace": namespace}
    try:
        from logicmap.graphs.ingest.ingest import ingest_conversation
        from logicmap.graphs.runtime.resources import Resources
        from logicmap.memory.files.loaders import load_conversations

        resources = Resources()
        resources.llm_ = None
        conversation = load_conversations(file)[0]
        resources.store.manifest(namespace)  # connect before the start signal
        Path(ready).touch()
        deadline = time.monotonic() + 120
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise TimeoutError("no start signal")
            time.sleep(0.005)
        started = time.perf_counter()
        # Writers of one namespace send halves of one conversation: each vouches for its new sessions.
        report = ingest_conversation(conversation, namespace, resources=resources, policy="heuristic", append=True)
        result.update(
            ok=True,
            elapsed=time.perf_counter() - started,
            sessions=[[s.session_id, s.skipped, s.generation] for s in report.sessions],
        )
    except BaseException:  # the test reads and reports it
        result.update(ok=False, error=traceback.format_exc())
    Path(out).write_text(json.dumps(result), encoding="utf-8")
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
