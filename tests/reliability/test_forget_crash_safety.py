"""Crash safety of forget and purge: SIGKILLed at seeded points, the namespace reads as before the forget or as
after it, never half, and a re-run completes the removal (no file holds the canary afterwards)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.support import ROOT, subprocess_env

TRIALS = 20
SEED = 20261125


class Worker:
    def __init__(self, workdir: Path) -> None:
        self.workdir, self.count = workdir, 0
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("forget_worker.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=subprocess_env(workdir / "default", OPENBLAS_NUM_THREADS="1",
                                                        OMP_NUM_THREADS="1"), cwd=ROOT)

    def call(self, op: str, directory: Path, kill_after: float | None = None) -> tuple[dict, dict]:
        self.count += 1
        out = self.workdir / f"{op}-{self.count}.json"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, "dir": str(directory), "out": str(out),
                                          "kill_after": kill_after}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker died: {self.proc.stderr.read() if self.proc.stderr else ''}")
        return json.loads(line), (json.loads(out.read_text()) if out.exists() else {})

    def done(self, op: str, directory: Path) -> dict:
        reply, result = self.call(op, directory)
        assert reply["exit_code"] == 0 and result.get("ok"), result.get("error", reply)
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@pytest.mark.slow
def test_forget_and_purge_killed_anywhere_are_before_or_after_and_a_rerun_completes(tmp_path: Path) -> None:
    worker = Worker(tmp_path)
    try:
        base = tmp_path / "base"
        before = worker.done("ingest", base)["fingerprint"]
        reference = tmp_path / "reference"
        shutil.copytree(base, reference)
        reply, result = worker.call("forget", reference)
        assert result.get("ok"), result.get("error")
        after, duration = result["fingerprint"], reply["elapsed"]
        assert after != before and after["generation"] == before["generation"] + 1
        rng = random.Random(SEED)
        states = {"before": 0, "after": 0}
        for trial in range(TRIALS):
            directory = tmp_path / f"trial-{trial}"
            shutil.copytree(base, directory)
            reply, _ = worker.call("forget", directory, kill_after=rng.uniform(0.05, duration * 1.1))
            seen = worker.done("inspect", directory)["fingerprint"]
            assert seen in (before, after), f"trial {trial}: the namespace is half forgotten"
            states["before" if seen == before else "after"] += 1
            finished = worker.done("finish", directory)
            assert finished["fingerprint"] == after and finished["canary_files"] == [], f"trial {trial}"
            shutil.rmtree(directory)
        assert states["before"] and states["after"], states  # kills landed on both sides of the commit
    finally:
        worker.close()
