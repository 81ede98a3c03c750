"""The write path beside LangGraph's ``InMemoryStore``: put p50/p95, a 200-put ``batch``, get and search, RSS and disk,
and the consolidation that follows, at several namespace sizes, in one process with one embedder for both stores.

For each size N: LogicMap's namespace is filled with N committed items (the records a heuristic put of a one-turn
value makes, bulk-committed as ``bench_store`` does: N ingest runs would take hours) and ``InMemoryStore`` (with
``index={"embed": the same embedder}``) with the same N values through its own ``batch``. Then, on both: ``--puts``
single puts of new keys (LogicMap's: fast writes to the pending log, ``consolidation="manual"`` so the figure is the
write alone), one ``batch`` of 200 puts, gets and searches. Last, LogicMap's ``flush()`` consolidates what the puts
left pending: its wall time and sessions per second are the consolidation lag a background consolidator works off.

Usage: ``python -m logicmap.evals.bench.bench_writes [--sizes 100,1000,10000] [--puts 40] [--embeddings minilm]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from logicmap.evals.bench.bench_store import NAMESPACE, _bulk_items, _text
from logicmap.evals.common import fresh_resources, machine_line, print_table, rss_mb

__all__ = ["main"]


def _ms(times: list[float]) -> tuple[str, str]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"{statistics.median(ordered) * 1000:.1f}", f"{p95 * 1000:.1f}"


def _disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _timed(call: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - started)
    return out


def measure(size: int, *, puts: int, embeddings: str, workdir: Path) -> list[list[Any]]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    from logicmap.graphs.surfaces.basestore import LogicMapStore

    res = fresh_resources(workdir / f"n{size}", embeddings=embeddings)
    ours = LogicMapStore(resources=res, policy="heuristic", consolidation="manual", max_pending=10 * (puts + 200))
    rng = np.random.default_rng(size)
    started = time.perf_counter()
    _bulk_items(res, 0, size, rng)
    ours.put(NAMESPACE, "warm", {"content": "A first note."})
    ours.flush()  # topics for the bulk-loaded events, once: the steady state a live namespace is in
    build = time.perf_counter() - started
    emb = res.embeddings
    reference = InMemoryStore(index={"dims": len(emb.embed_query("x")), "embed": emb})
    rng = np.random.default_rng(size)
    reference.batch([PutOp(NAMESPACE, f"item-{i}", {"content": _text(rng, i), "n": i}) for i in range(size)])
    rows: list[list[Any]] = []

    def row(what: str, mine: list[float], theirs: list[float]) -> None:
        m50, m95 = _ms(mine)
        t50, t95 = _ms(theirs)
        ratio = statistics.median(mine) / max(statistics.median(theirs), 1e-9)
        rows.append([size, what, len(mine), m50, m95, t50, t95, f"{ratio:.1f}x"])

    texts = [
        f"A new note {i} about {' '.join(np.random.default_rng(i).choice(['tea', 'dogs', 'Lisbon', 'tennis'], 3))}"
        for i in range(puts)
    ]
    # Alternating pairs, so neither store always runs second on a warmer machine.
    mine: list[float] = []
    theirs: list[float] = []
    for i in range(puts):
        for store, out in ((ours, mine), (reference, theirs)) if i % 2 == 0 else ((reference, theirs), (ours, mine)):
            started = time.perf_counter()
            store.put(NAMESPACE, f"new-{i}", {"content": texts[i]})
            out.append(time.perf_counter() - started)
    row("put (new key)", mine, theirs)
    batch = [PutOp(NAMESPACE, f"bulk-{i}", {"content": f"Bulk note {i}: {_text(rng, i)}"}) for i in range(200)]
    row("batch of 200 puts", _timed(lambda _: ours.batch(batch), 1), _timed(lambda _: reference.batch(batch), 1))
    keys = [f"item-{(i * 7919) % size}" for i in range(puts)]
    row(
        "get",
        _timed(lambda i: ours.get(NAMESPACE, keys[i]), puts),
        _timed(lambda i: reference.get(NAMESPACE, keys[i]), puts),
    )
    row(
        "search(query)",
        _timed(lambda i: ours.search(NAMESPACE, query=texts[i], limit=10), puts),
        _timed(lambda i: reference.search(NAMESPACE, query=texts[i], limit=10), puts),
    )
    waiting = ours.pending(NAMESPACE).writes
    started = time.perf_counter()
    ours.flush()
    lag = time.perf_counter() - started
    disk = _disk_mb(workdir / f"n{size}")
    print(
        f"n={size}: built in {build:.1f}s; {waiting} pending writes consolidated in {lag:.1f}s "
        f"({waiting / max(lag, 1e-9):.1f} sessions/s); rss {rss_mb():.0f} MB (both stores); disk {disk:.1f} MB",
        flush=True,
    )
    rows.append(
        [
            size,
            f"flush() of {waiting} pending writes (consolidation)",
            1,
            f"{lag * 1000:.0f}",
            "",
            "",
            "",
            f"{waiting / max(lag, 1e-9):.1f} sessions/s",
        ]
    )
    if res.store_ is not None:
        res.store_.close()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--puts", type=int, default=40)
    parser.add_argument("--embeddings", default="minilm", choices=["hashing", "minilm"])
    args = parser.parse_args(argv)
    print(machine_line())
    workdir = Path(tempfile.mkdtemp(prefix="bench-writes-"))
    rows: list[list[Any]] = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            rows += measure(size, puts=args.puts, embeddings=args.embeddings, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(
        ["items", "operation", "calls", "LogicMap p50 ms", "p95 ms", "InMemoryStore p50 ms", "p95 ms", "ratio (p50)"],
        rows,
    )


if __name__ == "__main__":
    main()
