"""A large ``add_messages`` call is stored in batches, each its own commit: a kill mid-call keeps every committed
batch and a re-run stores only the rest. A real process killed with SIGKILL, real Chroma, the hashing embedder.
(Its memory is measured by ``evals/bench/bench_add_messages.py``, figures in docs/chat.md.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from logicmap.evals.bench.bench_add_messages import messages
from logicmap.graphs.chat.messages import MESSAGE_BATCH, add_messages
from tests.conftest import make_resources
from tests.reliability.support import subprocess_env

pytestmark = pytest.mark.slow

_KILLED_AFTER_FIRST_COMMIT = """
import os, signal, sys, threading, time
from pathlib import Path
from logicmap.evals.bench.bench_add_messages import messages
from logicmap.evals.common import fresh_resources
from logicmap.graphs.chat.messages import add_messages
res = fresh_resources(Path(sys.argv[1]))
n = int(sys.argv[2])
threading.Thread(target=add_messages, args=("big", messages(n)), kwargs={"resources": res, "policy": "heuristic"},
                 daemon=True).start()
while not (res.store.has_namespace("big") and res.store.manifest("big").generation >= 1):
    time.sleep(0.02)
os.kill(os.getpid(), signal.SIGKILL)  # a crash in the middle of the call, right after its first commit
"""


def _run(script: str, data_dir: Path, n: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, str(data_dir), str(n)],
        capture_output=True,
        text=True,
        env=subprocess_env(data_dir),
        timeout=1800,
        check=False,
    )


def test_a_kill_mid_call_keeps_the_committed_batches_and_a_rerun_stores_the_rest(tmp_path: Path) -> None:
    n = 2 * MESSAGE_BATCH + 500
    done = _run(_KILLED_AFTER_FIRST_COMMIT, tmp_path / "memory", n)
    assert done.returncode == -9, done.stderr[-2000:]
    resources = make_resources(tmp_path / "memory")
    kept = len(resources.store.snapshot("big").turns)
    assert 0 < kept < n and kept % MESSAGE_BATCH == 0, kept  # whole batches, not the whole call, not nothing
    report = add_messages("big", messages(n), resources=resources, policy="heuristic")
    assert (report.added, report.already_stored) == (n - kept, kept)
    texts = [t.text for t in resources.store.snapshot("big").turns.values()]
    assert sorted(texts) == sorted(m["content"] for m in messages(n))  # each message once
    resources.store.close()
