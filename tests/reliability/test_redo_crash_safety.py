"""``ingest --redo-fallbacks`` SIGKILLed at seeded points and run again ends with exactly the memory of an
uninterrupted redo pass, and a further run changes nothing.

The chat model is scripted (``redo_worker.BrokenSegmenter``): the first build falls back for a seeded set of
sessions, and the redo's model still fails for some of them, so the pass rebuilds sessions that go on recording
a fallback (the case that used to be rebuilt twice after a kill). Kills land either right after the K-th rebuilt
session committed (the child kills itself) or at a seeded time within the pass (the fork server kills it).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.support import ROOT, subprocess_env

TRIALS = 14
SEED = 20261125
SESSIONS = 6


class RedoServer:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("redo_worker.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=subprocess_env(workdir / "default-data", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        )
        self.count = 0

    def call(self, op: str, directory: Path, **extra: object) -> tuple[dict, dict]:
        self.count += 1
        out = self.workdir / f"{op}-{self.count}.json"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, "dir": str(directory), "out": str(out), **extra}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"redo server died: {self.proc.stderr.read() if self.proc.stderr else ''}")
        return json.loads(line), (json.loads(out.read_text()) if out.exists() else {})

    def done(self, op: str, directory: Path, **extra: object) -> dict:
        reply, result = self.call(op, directory, **extra)
        assert not reply["killed"] and reply["exit_code"] == 0 and result.get("ok"), result.get("error", reply)
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.flush()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> RedoServer:
    srv = RedoServer(tmp_path_factory.mktemp("redo-server"))
    yield srv
    srv.close()


def _plan(rng: random.Random) -> tuple[list[int], list[int]]:
    """Sessions that fall back at the first build, and those of them the redo's model still fails."""
    first = sorted(rng.sample(range(1, SESSIONS + 1), rng.randint(2, 4)))
    still = sorted(rng.sample(first, rng.randint(1, len(first) - 1)))
    return first, still


@pytest.mark.slow
def test_a_killed_redo_pass_run_again_reaches_the_uninterrupted_pass(server: RedoServer, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    tried = killed = 0
    plans: dict[tuple, tuple[Path, dict, float, int]] = {}
    for trial in range(TRIALS):
        first, still = _plan(rng)
        key = (tuple(first), tuple(still))
        if key not in plans:  # build once per plan, then redo uninterrupted on a copy: the reference
            built = tmp_path / f"built-{len(plans)}"
            server.done("ingest", built, broken=first)
            reference_dir = tmp_path / f"reference-{len(plans)}"
            shutil.copytree(built, reference_dir)
            reply, result = server.call("redo", reference_dir, broken=still)
            assert reply["exit_code"] == 0 and result.get("ok"), result.get("error")
            assert sorted(result["built"]) == [f"S{n}" for n in first]  # each fallen-back session rebuilt once
            reference = server.done("inspect", reference_dir)
            again = server.done("redo", reference_dir, broken=still)
            assert again["built"] == []  # a finished pass run again rebuilds nothing
            assert server.done("inspect", reference_dir) == reference
            plans[key] = (built, reference, reply["elapsed"], len(first))
        built, reference, elapsed, rebuilt = plans[key]
        trial_dir = tmp_path / f"trial-{trial}"
        shutil.copytree(built, trial_dir)
        if rng.random() < 0.5:
            kill = {"kill_at_report": rng.randint(1, rebuilt)}
        else:
            kill = {"kill_after": round(rng.uniform(0.05, 1.0) * elapsed, 3)}
        reply, _ = server.call("redo", trial_dir, broken=still, **kill)
        killed += bool(reply["killed"])
        server.done("redo", trial_dir, broken=still)  # the re-run
        view = server.done("inspect", trial_dir)
        assert view["fingerprint"] == reference["fingerprint"], f"trial {trial} ({kill}): memory differs"
        assert view["manifest"] == reference["manifest"] and view["topic_steps"] == reference["topic_steps"]
        assert server.done("redo", trial_dir, broken=still)["built"] == []
        tried += 1
    print(f"\nredo kill trials: {tried} tried, {killed} killed mid-pass, {tried} reached the uninterrupted memory")
    assert killed >= TRIALS // 2
