"""Benchmark: ``LogicMapStore.search`` p50 with one thread per core and with one thread, idle and under load, in one run.

The two settings are ``LOGICMAP_THREADS=<cores>`` (what the libraries choose by themselves: the old ``auto`` of the
embedded store) and ``LOGICMAP_THREADS=1`` (``auto`` now).

One namespace of ``--items`` one-turn items is built once (MiniLM vectors by default, as a default install has).
Then each (load, threads) pair is a fresh process that opens the store with ``LOGICMAP_THREADS`` set, searches once
to warm up, and times ``--queries`` searches with distinct queries (each embeds its query: MiniLM's matrix products
are where BLAS's thread pool runs). "under load" is ``--burners`` CPU-burning processes (``while True: pass``) this
script starts before and stops after those runs; "idle" is without them (other programs on the machine still run:
the load average is printed beside each row). The pairs run interleaved, ``--rounds`` times.

Usage: ``python -m logicmap.evals.bench.bench_threads [--items 1000] [--queries 40] [--rounds 2]``. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from logicmap.evals.bench.bench_store import NAMESPACE, _bulk_items, _text
from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["main"]

CORES = str(os.cpu_count() or 1)
SETTINGS = (CORES, "1")


def _worker(data_dir: Path, embeddings: str, queries: int) -> None:
    """In a fresh process: the store on ``data_dir``, one warm-up search, then the timed searches (JSON on stdout)."""
    from logicmap.graphs.surfaces.basestore import LogicMapStore

    res = fresh_resources(data_dir, embeddings=embeddings)
    store = LogicMapStore(resources=res, policy="heuristic")
    store.search(NAMESPACE, query="warm up", limit=10)
    times = []
    for i in range(queries):
        query = _text(np.random.default_rng(50_000 + i), i)
        started = time.perf_counter()
        store.search(NAMESPACE, query=query, limit=10)
        times.append(time.perf_counter() - started)
    print(json.dumps({"p50": statistics.median(times) * 1000, "threads": res.settings.thread_count()}))


def _build(data_dir: Path, embeddings: str, items: int) -> None:
    from logicmap.graphs.surfaces.basestore import LogicMapStore

    res = fresh_resources(data_dir, embeddings=embeddings)
    store = LogicMapStore(resources=res, policy="heuristic")
    store.put(NAMESPACE, "first", {"content": "The first note."})
    _bulk_items(res, 0, items, np.random.default_rng(items))
    store.put(NAMESPACE, "second", {"content": "A note after the bulk load (clusters every event)."})
    store.close()  # its consolidator stops before the memory store closes under it
    if res.store_ is not None:
        res.store_.close()


def _run(data_dir: Path, embeddings: str, queries: int, threads: str) -> dict[str, Any]:
    env = {**os.environ, "LOGICMAP_THREADS": threads, "HF_HUB_OFFLINE": "1"}
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
        env.pop(variable, None)  # the setting under test decides, not an inherited cap
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "logicmap.evals.bench.bench_threads",
            "--worker",
            str(data_dir),
            "--embeddings",
            embeddings,
            "--queries",
            str(queries),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"worker failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--embeddings", default="minilm", choices=["hashing", "minilm"])
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        _worker(args.worker, args.embeddings, args.queries)
        return
    print(machine_line())
    workdir = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    results: dict[tuple[str, str], list[float]] = {}
    loads: dict[str, list[float]] = {"idle": [], "under load": []}
    try:
        _build(workdir / "memory", args.embeddings, args.items)
        for _ in range(args.rounds):
            for load in ("idle", "under load"):
                burners = [
                    subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(args.burners if load == "under load" else 0)
                ]
                try:
                    time.sleep(1.0 if burners else 0.0)
                    for threads in SETTINGS:
                        p50 = _run(workdir / "memory", args.embeddings, args.queries, threads)["p50"]
                        results.setdefault((load, threads), []).append(p50)
                        loads[load].append(os.getloadavg()[0])
                finally:
                    for burner in burners:
                        burner.kill()
                        burner.wait()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rows = []
    for (load, threads), p50s in results.items():
        shown = f"{load} (+{args.burners} burners)" if load == "under load" else load
        setting = f"{threads} (one per core: the libraries' own pool)" if threads == CORES != "1" else threads
        rows.append([shown, setting, " / ".join(f"{p:.1f}" for p in p50s), f"{max(loads[load]):.1f}"])
    print(f"{args.items} items, {args.embeddings} embeddings, {args.queries} searches per process")
    print_table(["machine", "LOGICMAP_THREADS", "search p50 ms (each round)", "load average (max)"], rows)


if __name__ == "__main__":
    main()
