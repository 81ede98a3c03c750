"""Forgetting: the time to forget one turn (one commit) and to purge it from disk, on the sample conversation and
on a synthetic 10,000-turn namespace.

No LLM (heuristic policy); the sample with the embedder asked for (default: hashing), the big namespace with the
hashing embedder. Each namespace is ingested into a fresh embedded store, then one turn from its middle is
forgotten and purged (``logicmap.forget(..., purge=False)`` then ``MemoryStore.purge``), timed separately; the
namespace's snapshot is read before, so the forget's time is that of a warm process. Usage:
``python -m logicmap.evals.bench.bench_forget [--sessions 200] [--turns 50] [--embeddings hashing]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from logicmap.evals.bench.bench_many_sessions import synthetic_conversation
from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["main", "time_forget"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"


def _disk_mb(directory: Path) -> float:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 2**20


def time_forget(conversation: Any, data_dir: Path, embeddings: str) -> dict[str, Any]:
    """Ingest ``conversation``, then forget one turn and purge it: the times and sizes, as a row."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.writes.forget import forget

    res = fresh_resources(data_dir, embeddings=embeddings)
    started = time.perf_counter()
    ingest_conversation(conversation, "bench", resources=res, policy="heuristic", progress=False)
    ingest_s = time.perf_counter() - started
    snap = res.store.snapshot("bench")
    turns = list(snap.turns)
    victim = turns[len(turns) // 2]
    before_mb = _disk_mb(data_dir)
    started = time.perf_counter()
    report = forget("bench", turn_ids=[victim], resources=res)
    forget_s = time.perf_counter() - started
    started = time.perf_counter()
    purge = res.store.purge("bench")
    purge_s = time.perf_counter() - started
    res.store.close()
    return {
        "turns": len(turns),
        "events": len(snap.events),
        "ingest_s": f"{ingest_s:.1f}",
        "forget_s": f"{forget_s:.2f}",
        "purge_s": f"{purge_s:.2f}",
        "retired": sum(report.removed.values()),
        "versions_purged": sum(purge.versions_removed.values()),
        "collections_rebuilt": purge.collections_rebuilt,
        "disk_mb": f"{before_mb:.1f} -> {_disk_mb(data_dir):.1f}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200, help="sessions of the big namespace")
    parser.add_argument("--turns", type=int, default=50, help="turns per session of the big namespace")
    parser.add_argument("--embeddings", default="hashing", help="the sample's embedder (the big one uses hashing)")
    args = parser.parse_args(argv)
    from logicmap.memory.files.loaders import load_conversations

    print(machine_line())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sample = time_forget(load_conversations(SAMPLE)[0], Path(tmp) / "sample", args.embeddings)
        rows.append(["sample", *sample.values()])
        big = time_forget(synthetic_conversation(args.sessions, args.turns), Path(tmp) / "big", "hashing")
        rows.append([f"synthetic {args.sessions}x{args.turns}", *big.values()])
    print_table(["namespace", *sample.keys()], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
