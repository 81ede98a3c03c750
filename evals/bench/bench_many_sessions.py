"""Ingest of a long conversation: the cost of each session as the memory grows, and the peak memory.

Synthetic sessions (no LLM: the heuristic policy; the hashing embedder), ingested by ``ingest_conversation``
into a fresh embedded store. Prints the wall time of sessions around a few positions (the mean of a window of
sessions), the total, and the process's peak RSS. Usage:
``python -m logicmap.evals.bench.bench_many_sessions [--sessions 1000] [--turns 50] [--at 100,700]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from logicmap.evals.common import fresh_resources, machine_line, peak_rss_mb, print_table, rss_mb

if TYPE_CHECKING:
    from logicmap.graphs.ingest.nodes import SessionReport
    from logicmap.memory.files.loaders import Conversation

__all__ = ["main", "synthetic_conversation"]

_WORDS = (
    "marathon pottery ramen museum bicycle bakery island violin garden puppy river market train concert "
    "recipe hiking camera novel painting beach festival coffee guitar soccer chess garden"
).split()
WINDOW = 10  # sessions averaged around each reported position


def synthetic_conversation(sessions: int, turns: int, seed: int = 7) -> Conversation:
    """``sessions`` sessions of ``turns`` turns of made-up small talk between two people, a week apart."""
    from logicmap.memory.files.loaders import Conversation, RawTurn, Session

    rng = random.Random(seed)
    start = datetime(2020, 1, 6, 10, 0)
    out = []
    for s in range(1, sessions + 1):
        stamp = start + timedelta(days=7 * (s - 1))
        raw = [
            RawTurn(
                dia_id=f"D{s}:{t}",
                speaker=("Maya", "Leo")[t % 2],
                text=" ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 20))) + ".",
            )
            for t in range(1, turns + 1)
        ]
        out.append(
            Session(
                session_id=f"S{s}", timestamp=stamp, timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"), turns=raw
            )
        )
    return Conversation(conversation_id="many", speakers=["Maya", "Leo"], sessions=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=50, help="turns per session")
    parser.add_argument("--at", default="100,700", help="session positions to report (comma-separated)")
    args = parser.parse_args(argv)
    from logicmap.graphs.ingest.ingest import ingest_conversation

    conversation = synthetic_conversation(args.sessions, args.turns)
    times: list[float] = []
    rss: list[float] = []
    last = [time.perf_counter()]

    def tick(report: SessionReport) -> None:
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now
        if len(times) % 100 == 0:
            rss.append(rss_mb())
            print(f"  {len(times)} sessions, {times[-1]:.3f} s/session, RSS {rss[-1]:.0f} MB", flush=True)

    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        res = fresh_resources(Path(tmp) / "memory")
        started = time.perf_counter()
        last[0] = started
        ingest_conversation(conversation, "bench.many", resources=res, policy="heuristic", progress=tick)
        total = time.perf_counter() - started
        res.store.close()
    rows = []
    for position in (int(p) for p in args.at.split(",")):
        window = times[max(0, position - WINDOW // 2) : position + WINDOW // 2]
        if window:
            rows.append([f"session {position}", f"{statistics.mean(window):.3f} s"])
    rows.append(["total", f"{total:.1f} s for {len(times)} sessions, {len(times) * args.turns} turns"])
    rows.append(["peak RSS", f"{peak_rss_mb():.0f} MB"])
    print_table(["what", "figure"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
