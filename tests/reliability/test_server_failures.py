"""A Chroma server killed under a running ``ingest``: one line naming the server, then a re-run that says why it
waits for a dead writer's lease and commits everything.

Real parts only: a ``chroma run`` server on a loopback port, the ``logicmap`` CLI in a subprocess, SIGKILL.
The kill moments are drawn from a seeded generator, so some land inside a commit (the writer's lease is left
behind on the server) and some between commits.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import chroma_internals as chroma
from tests.reliability.support import ROOT, ChromaServer, locomo_document, marked_conversation, subprocess_env

SEED = 329
TRIALS = int(os.environ.get("LOGICMAP_SERVER_KILL_TRIALS", "4"))
LEASE_S = 6.0


def _ingest(server: ChromaServer, tmp: Path, file: Path, namespace: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "logicmap", "ingest", str(file), "-n", namespace, "--policy", "heuristic", "--quiet"],
        cwd=ROOT.parent,
        env=server.env(tmp, LEASE_S),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _wait_for_a_commit(server: ChromaServer, namespace: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Until ``namespace`` has a committed session (or the ingest ended, or ``timeout_s``)."""
    store = server.store()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            if store.has_namespace(namespace) and store.manifest(namespace).sessions:
                return
            time.sleep(0.05)
    finally:
        store.close()


def _conversation_file(tmp: Path, marker: str) -> tuple[Path, int]:
    conversation = marked_conversation(marker, sessions=24, turns_per_session=6)
    file = tmp / f"{marker}.json"
    file.write_text(json.dumps(locomo_document(conversation)), encoding="utf-8")
    return file, len(conversation.sessions)


@pytest.mark.integration
@pytest.mark.slow
def test_a_server_killed_during_ingest_is_one_line_and_the_rerun_commits_everything(
    server: ChromaServer, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    failures, mid_ingest, lease_left, said_why = [], 0, 0, 0
    for trial in range(TRIALS):
        namespace = f"killed-{trial}"
        file, sessions = _conversation_file(tmp_path, f"zq{trial}x")
        proc = _ingest(server, tmp_path, file, namespace)
        _wait_for_a_commit(server, namespace, proc)  # the kill lands after the ingest's first commit, however
        time.sleep(rng.uniform(0.1, 0.8))  # fast the process starts (a fixed 2-6 s delay missed every ingest)
        server.kill()
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            server.start()
            continue  # it finished before the kill: nothing to judge
        mid_ingest += 1
        lines = _lines(err)
        if not (
            proc.returncode in (2, 3)
            and len(lines) == 1
            and lines[0].startswith("error: the Chroma server at ")
            and f"127.0.0.1:{server.port}" in lines[0]
        ):
            failures.append(f"trial {trial}: exit {proc.returncode}, stderr {err[-1500:]!r}")
        server.start()
        store = server.store()
        lease_left += chroma.lease_held(store, namespace)
        rerun = _ingest(server, tmp_path, file, namespace)
        out, err = rerun.communicate(timeout=300)
        said_why += any("waiting for its commit lease" in line for line in _lines(err))
        snap = store.snapshot(namespace)
        if rerun.returncode != 0 or len(snap.manifest.sessions) != sessions or len(snap.turns) != 6 * sessions:
            failures.append(
                f"trial {trial}: the re-run exited {rerun.returncode} with {len(snap.manifest.sessions)} "
                f"sessions, {len(snap.turns)} turns: {err[-1500:]!r}"
            )
    print(
        f"server killed during ingest: {TRIALS} kills, {mid_ingest} mid-ingest, {lease_left} left the writer's lease, "
        f"{said_why} re-runs said why they waited, {len(failures)} problems"
    )
    assert not failures, "\n".join(failures)
    assert mid_ingest >= TRIALS // 2, "the kills must land while ingest runs"


HOLD_LEASE = """
import sys, time
from logicmap.memory.store import MemoryStore
from tests import chroma_internals as chroma  # the test's environment puts the repository first on the path
store = MemoryStore()
lease = chroma.server_commit_lock(store, sys.argv[1])
lease.__enter__()
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.integration
@pytest.mark.slow
def test_a_rerun_waiting_for_a_dead_writers_lease_says_which_and_how_long(server: ChromaServer, tmp_path: Path) -> None:
    namespace = "dead-writer"
    # The dead writer's lease outlasts the re-run's start (reading the file, building the first session).
    env = {**server.env(tmp_path), "LOGICMAP_COMMIT_LEASE_S": "20"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LEASE, namespace],
        cwd=ROOT.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held", holder.stderr.read()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    file, sessions = _conversation_file(tmp_path, "zqdead")
    started = time.monotonic()
    proc = _ingest(server, tmp_path, file, namespace)
    out, err = proc.communicate(timeout=300)
    waited = time.monotonic() - started
    notes = [line for line in _lines(err) if "waiting for its commit lease" in line]
    assert proc.returncode == 0, err
    assert notes and f"namespace {namespace!r}" in notes[0] and "held by writer" in notes[0], err
    assert " s so far" in notes[0] and "expires in " in notes[0], notes
    assert waited >= 2.0  # it did wait for the lease, and said so
    snap = server.store().snapshot(namespace)
    assert len(snap.manifest.sessions) == sessions and len(snap.turns) == 6 * sessions


def test_a_server_that_is_not_running_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the socket is closed
    env = subprocess_env(tmp_path, LOGICMAP_CHROMA_HOST="127.0.0.1", LOGICMAP_CHROMA_PORT=str(port))
    for argv in (["namespaces"], ["stats", "-n", "someone"]):
        proc = subprocess.run(
            [sys.executable, "-m", "logicmap", *argv],
            cwd=ROOT.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = _lines(proc.stderr)
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"error: the Chroma server at 127.0.0.1:{port} does not answer"), lines
