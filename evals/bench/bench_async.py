"""The async API under concurrency: how often the event loop ticks, how many threads run, how long N calls take.

The sample conversation is ingested once (no LLM, hashing embedder by default); then, for each concurrency N, N
``aanswer`` calls (a strategy, default ``rerank``) run at once with ``asyncio.gather`` while a ticker counts 5 ms
loop ticks and samples the live threads (all, and the shared executor's). A free loop would tick about wall/5 ms times; the executor's bound
(``LOGICMAP_ASYNC_WORKERS``) caps the extra threads whatever N is. Usage:
``python -m logicmap.evals.bench.bench_async [--strategy rerank] [--calls 1 4 16 64] [--embeddings hashing]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["main", "measure"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"
QUESTION = "What is the name of Maya's dog?"
TICK_S = 0.005


async def measure(res: Any, strategy: str, calls: int) -> dict[str, Any]:
    """``calls`` concurrent ``aanswer`` calls: wall time, loop ticks against a free loop's, peak extra threads."""
    from logicmap.graphs.strategies.registry import aanswer
    from logicmap.memory.runtime.blocking import THREAD_PREFIX

    baseline = threading.active_count()
    ticks, peak, workers, stop = 0, baseline, 0, asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks, peak, workers
        while not stop.is_set():
            await asyncio.sleep(TICK_S)
            ticks += 1
            peak = max(peak, threading.active_count())
            workers = max(workers, sum(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate()))

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    await asyncio.gather(
        *(aanswer(strategy, QUESTION, "sample", resources=res, policy="heuristic") for _ in range(calls))
    )
    wall = time.perf_counter() - started
    stop.set()
    await task
    return {
        "calls": calls,
        "wall_s": f"{wall:.2f}",
        "per_call_ms": f"{1000 * wall / calls:.0f}",
        "loop_ticks": ticks,
        "free_loop_ticks": int(wall / TICK_S),
        "threads_added": peak - baseline,
        "executor_threads": workers,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", default="rerank")
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--embeddings", default="hashing")
    args = parser.parse_args(argv)
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.strategies.registry import aanswer
    from logicmap.memory.runtime.blocking import blocking_executor

    print(machine_line())
    print(f"shared executor: {blocking_executor()._max_workers} workers (LOGICMAP_ASYNC_WORKERS)")
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh_resources(Path(tmp), embeddings=args.embeddings)
        ingest_conversation(str(SAMPLE), "sample", resources=res, policy="heuristic")
        asyncio.run(aanswer(args.strategy, QUESTION, "sample", resources=res, policy="heuristic"))  # warm
        rows = [list(asyncio.run(measure(res, args.strategy, n)).values()) for n in args.calls]
        res.store.close()
    print_table(
        ["calls", "wall_s", "per_call_ms", "loop_ticks", "free_loop_ticks", "threads_added", "executor_threads"], rows
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
