"""Benchmark: how long the ``logicmap`` program takes to start, and what ``import logicmap`` loads.

Each figure is a fresh process (median of ``--repeat`` runs): ``logicmap --help``; ``logicmap ask`` on the sample
conversation (ingested once beforehand into a private data directory, no LLM), per MiniLM runtime, with its peak
resident memory; and the heavy modules a bare ``import logicmap`` pulls in.

Usage: ``python -m logicmap.evals.bench.bench_startup [--repeat 3]``. Prints numbers; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"
HEAVY = ("torch", "chromadb", "sklearn", "scipy", "pandas", "nltk", "transformers", "sentence_transformers",
         "langchain_openai", "matplotlib", "networkx")


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS in MB of one run of ``command`` (its own rusage, from ``wait4``)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    err = child.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed ({child.returncode}): {err.strip()[-400:]}")
    return elapsed, usage.ru_maxrss / 1024


def _median(command: list[str], env: dict[str, str], repeat: int) -> tuple[float, float]:
    runs = [_run(command, env) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    program = [sys.executable, "-m", "logicmap"]
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "LOGICMAP_DATA_DIR": str(Path(tmp) / "memory")}
        env.pop("LOGICMAP_CHAT_MODEL", None)
        imported = subprocess.run(
            [sys.executable, "-c", "import json, sys, logicmap; print(json.dumps(sorted({m.split('.')[0] for m in "
             "sys.modules})))"], env=env, capture_output=True, text=True, check=True)
        heavy = sorted(set(json.loads(imported.stdout)) & set(HEAVY))
        print(f"import logicmap loads heavy modules: {heavy or 'none'}")
        help_s, help_mb = _median([*program, "--help"], env, args.repeat)
        print(f"logicmap --help: {help_s:.2f} s (median of {args.repeat}), peak {help_mb:.0f} MB")
        _run([*program, "ingest", str(SAMPLE), "-n", "sample", "--policy", "heuristic"], env)
        for runtime in ("numpy", "torch"):
            ask_env = {**env, "LOGICMAP_EMBEDDING_RUNTIME": runtime}
            ask_s, ask_mb = _median([*program, "ask", "Where does Maya live now?", "-n", "sample"], ask_env,
                                    args.repeat)
            print(f"logicmap ask (cold, runtime {runtime}): {ask_s:.2f} s (median of {args.repeat}), "
                  f"peak {ask_mb:.0f} MB")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
