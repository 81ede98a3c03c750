"""One large ``add_messages`` call: wall time and peak resident memory for ``--n`` short messages.

Each run is its own subprocess (a fresh interpreter, so its peak RSS, ``resource.getrusage(RUSAGE_SELF)`` read
after the call, is the call's alone) on a fresh temporary memory directory: the hashing embedder,
the heuristic (no-LLM) policy, alternating user and assistant messages of a few words, each with an id, all one
chat session. ``--resend`` then sends the same messages again in the same process (a no-op: every one is stored).
Then another fresh subprocess opens the namespace the run wrote and reports what reading its snapshot added to its
RSS (what any process that reads or writes that namespace holds).

    nice -n 10 env PYTHONPATH=<parent of the package> python -m logicmap.evals.bench.bench_add_messages --n 100000 \\
        --consolidation manual background
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, machine_line, peak_rss_mb, print_table, rss_mb

__all__ = ["main", "messages", "run_once"]

PLACES = ["Lisbon", "Porto", "Leiden", "Oslo", "Kyoto", "Quito", "Hanoi", "Dakar"]
THINGS = ["violin", "bicycle", "garden", "sourdough", "kayak", "telescope", "pottery", "marathon"]


def messages(n: int) -> list[dict[str, Any]]:
    """``n`` short messages, user and assistant in turn, each with its own id."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"m{i}",
            "content": f"In {PLACES[i % 8]} I worked on my {THINGS[(i // 8) % 8]} project, note {i}.",
        }
        for i in range(n)
    ]


def run_once(n: int, data_dir: Path, resend: bool = False) -> dict[str, Any]:
    """Store ``n`` messages into a fresh namespace in this process: seconds, messages added, peak RSS (MB)."""
    from logicmap.graphs.chat.messages import add_messages

    res = fresh_resources(data_dir)
    batch = messages(n)
    started = time.perf_counter()
    report = add_messages("bench", batch, resources=res, policy="heuristic")
    out: dict[str, Any] = {"n": n, "added": report.added, "wall_s": round(time.perf_counter() - started, 1)}
    if resend:
        started = time.perf_counter()
        again = add_messages("bench", batch, resources=res, policy="heuristic")
        out.update(resend_s=round(time.perf_counter() - started, 1), resend_stored=again.already_stored)
    out["turns"] = len(res.store.snapshot("bench").turns)
    used = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = round(used.ru_utime + used.ru_stime, 1)
    out["peak_rss_mb"] = round(peak_rss_mb())
    res.store.close()
    return out


def open_once(data_dir: Path) -> dict[str, Any]:
    """What opening the namespace a run wrote takes in a process: RSS before and after reading its snapshot."""
    res = fresh_resources(data_dir)
    if not res.store.has_namespace("bench"):  # the store (its Chroma client) opens here, before the measure
        raise SystemExit("no namespace 'bench' in this directory")
    before = rss_mb()
    turns = len(res.store.snapshot("bench").turns)
    return {"turns": turns, "snapshot_mb": round(rss_mb() - before)}


def _child(*args: str, consolidation: str | None = None) -> dict[str, Any]:
    env = dict(os.environ, **({"LOGICMAP_CONSOLIDATION": consolidation} if consolidation else {}))
    done = subprocess.run(
        [sys.executable, "-m", "logicmap.evals.bench.bench_add_messages", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"the run {args} failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(n: int, resend: bool = False, consolidation: str | None = None) -> dict[str, Any]:
    """``run_once`` in a fresh interpreter (its peak RSS is the call's own, with what the background consolidator
    built meanwhile), then ``open_once`` in another."""
    with tempfile.TemporaryDirectory(prefix="bench-add-messages-") as tmp:
        result = _child("--child", str(n), tmp, *(["--resend"] if resend else []), consolidation=consolidation)
        result["open_snapshot_mb"] = _child("--open", tmp)["snapshot_mb"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000], help="message counts, one run each")
    parser.add_argument("--resend", action="store_true", help="then send the same messages again (a no-op)")
    parser.add_argument(
        "--consolidation",
        nargs="+",
        choices=["background", "manual", "sync"],
        default=[None],
        help="LOGICMAP_CONSOLIDATION for the runs (default: as set), one run per mode and count",
    )
    parser.add_argument("--child", nargs=2, metavar=("N", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--open", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.open:
        print(json.dumps(open_once(Path(args.open))))
        return 0
    if args.child:
        print(json.dumps(run_once(int(args.child[0]), Path(args.child[1]), resend=args.resend)))
        return 0
    print(machine_line())
    print(
        "add_messages, hashing embedder, heuristic policy, one call per run (each run its own subprocess); "
        "committed turns: what the consolidator built during the call"
    )
    rows = []
    for mode in args.consolidation:
        for n in args.n:
            r = measure(n, resend=args.resend, consolidation=mode)
            rows.append(
                [
                    mode or os.environ.get("LOGICMAP_CONSOLIDATION", "background"),
                    f"{n:,}",
                    f"{r['added']:,}",
                    r["wall_s"],
                    r["cpu_s"],
                    r["peak_rss_mb"],
                    f"{r['turns']:,}",
                    r["open_snapshot_mb"],
                    *([r["resend_s"], f"{r['resend_stored']:,}"] if args.resend else []),
                ]
            )
    print_table(
        [
            "consolidation",
            "messages",
            "added",
            "wall s",
            "process CPU s",
            "peak RSS MB",
            "committed turns",
            "snapshot in a fresh process MB",
            *(["re-send s", "re-send already stored"] if args.resend else []),
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
