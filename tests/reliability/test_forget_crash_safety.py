"""Crash safety of forget and purge: SIGKILLed at seeded points, the namespace reads as before the forget or as
after it, never half, and a re-run completes the removal (no file holds the canary afterwards)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from tests.reliability.support import ForkWorker

TRIALS = 20
SEED = 20261125


@pytest.mark.slow
def test_forget_and_purge_killed_anywhere_are_before_or_after_and_a_rerun_completes(tmp_path: Path) -> None:
    worker = ForkWorker("forget_worker.py", tmp_path)
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


PURGE_TRIALS = 8
PURGE_SEED = 20261127


@pytest.mark.slow
def test_a_purge_killed_after_its_forget_committed_is_finished_by_the_next_open(tmp_path: Path) -> None:
    """SIGKILLed at seeded points of the purge (after the forget committed): opening the store again finishes the
    purge, so no file holds the canary, and the namespace reads as after the forget."""
    worker = ForkWorker("forget_worker.py", tmp_path)
    try:
        base = tmp_path / "base"
        worker.done("ingest", base)
        reference = tmp_path / "reference"
        shutil.copytree(base, reference)
        timing = worker.done("forget-in-purge", reference)
        after = worker.done("reopen", reference)["fingerprint"]
        assert timing["purge_started_s"] is not None
        purge_s = timing["ended_s"] - timing["purge_started_s"]
        rng = random.Random(PURGE_SEED)
        killed, left = 0, []
        for trial in range(PURGE_TRIALS):
            directory = tmp_path / f"purge-{trial}"
            shutil.copytree(base, directory)
            reply, _ = worker.call("forget-in-purge", directory, delay=rng.uniform(0.0, purge_s))
            killed += bool(reply["killed"])
            reopened = worker.done("reopen", directory)
            assert reopened["fingerprint"] == after, f"trial {trial}: not the state after the forget"
            if reopened["canary_files"]:
                left.append((trial, reopened["canary_files"]))
            shutil.rmtree(directory)
        print(f"purge kill trials: {killed} of {PURGE_TRIALS} killed inside the purge, {len(left)} left the canary")
        assert killed >= PURGE_TRIALS // 2, f"only {killed} of {PURGE_TRIALS} kills landed inside the purge"
        assert left == [], f"{len(left)} of {killed} killed purges left the canary on disk after a reopen: {left}"
    finally:
        worker.close()
