"""A child started through ``agents.local_llm.spawn_tied_to_parent`` (how ``LocalLLMServer`` starts the model
server) dies when its parent is SIGKILLed.

Generated cases (seeded): a parent process spawns a stand-in server (a Python process that sleeps, ignores
SIGTERM and SIGINT, in its own session like the real server or not), then is SIGKILLed at a seeded delay; the
child must be gone within a few seconds. A control case spawns the same stand-in with plain ``Popen`` and shows
that it would have outlived its parent. With ``.venv-llm`` present, one case does it with the real server.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.support import ROOT, subprocess_env

CASES = 10
GONE_WITHIN_S = 5.0

STAND_IN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"

PARENT = """
import subprocess, sys, time
from logicmap.agents.local_llm import spawn_tied_to_parent
tied, session = sys.argv[1] == "tied", sys.argv[2] == "session"
command = [sys.executable, "-c", sys.argv[3]]
spawn = spawn_tied_to_parent if tied else subprocess.Popen
child = spawn(command, start_new_session=session, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
time.sleep(600)
"""

REAL_PARENT = """
import time
from logicmap.agents.local_llm import LocalLLMServer
server = LocalLLMServer().start(timeout=300)
print(server.process.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _llm_venv() -> dict[str, str]:
    venv = os.environ.get("LOGICMAP_LLM_VENV")
    return {"LOGICMAP_LLM_VENV": venv} if venv else {}


def _parent(script: str, *args: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=subprocess_env(ROOT / ".unused-data", **_llm_venv()),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), f"the parent did not start its child: {line!r}"
    return proc, int(line)


def _kill_parent_and_wait(proc: subprocess.Popen[str], child: int) -> float | None:
    """SIGKILL the parent; seconds until the child is gone, or None if it outlives ``GONE_WITHIN_S``."""
    assert _alive(child)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    started = time.monotonic()
    while time.monotonic() - started < GONE_WITHIN_S:
        if not _alive(child):
            return time.monotonic() - started
        time.sleep(0.05)
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_tied_child_dies_with_its_sigkilled_parent() -> None:
    rng = random.Random(3221)
    gone = 0
    for case in range(CASES):
        session = rng.choice(["session", "same"])
        proc, child = _parent(PARENT, "tied", session, STAND_IN)
        time.sleep(rng.uniform(0.0, 0.5))
        try:
            waited = _kill_parent_and_wait(proc, child)
            assert waited is not None, f"case {case} ({session}): child {child} outlived its parent"
            gone += 1
        finally:
            if _alive(child):
                os.kill(child, signal.SIGKILL)
    print(f"\ntied children gone after their parent's SIGKILL: {gone} of {CASES}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_without_the_tie_the_same_child_outlives_its_parent() -> None:
    """The control: the stand-in really would survive (so the test above measures the tie, not the stand-in)."""
    proc, child = _parent(PARENT, "plain", "session", STAND_IN)
    try:
        assert _kill_parent_and_wait(proc, child) is None
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.integration
def test_the_real_model_server_dies_with_its_sigkilled_parent() -> None:
    from logicmap.agents.local_llm import LocalLLMUnavailable, find_llm_python

    try:
        find_llm_python(None)
    except LocalLLMUnavailable as exc:
        pytest.skip(f"no local model venv: {exc}")
    proc, child = _parent(REAL_PARENT)
    try:
        assert _kill_parent_and_wait(proc, child) is not None, "the model server outlived its parent"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
