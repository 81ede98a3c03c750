"""The run deadline on no-LLM work: per strategy, wall time of a question at the size limit
(``LOGICMAP_MAX_QUESTION_CHARS``) with ``LOGICMAP_RUN_DEADLINE_S`` = 5 s and with no deadline, on the sample
conversation (no LLM, hashing embedder). ``--long`` adds Goal-Mem on longer questions (limit raised) to show its
time now grows linearly with the question's length.

Usage: ``python -m logicmap.evals.bench.bench_deadline [--strategies compass,...] [--deadline 5] [--long 250000,1000000]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["main", "question_of"]

STRATEGIES = ("compass", "rerank", "goalmem", "real", "reconstruct", "r2", "dense", "bm25")
_WORDS = (
    "when did Caroline go to the support group and what did Melanie paint last summer near the lake "
    "Sweden adoption pottery camping 2023 May 7 friends kids?"
).split()


def question_of(length: int, seed: int = 0) -> str:
    """A question of exactly ``length`` characters made of words the sample conversation uses."""
    rng = random.Random(seed)
    words, size = [], 0
    while size <= length:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:length]


def _timed(strategy: str, question: str, res: Any) -> tuple[float, str]:
    from logicmap.graphs.strategies.registry import answer
    from logicmap.memory.runtime.deadline import RunDeadlineExceeded

    started = time.perf_counter()
    try:
        answer(strategy, question, "sample", resources=res, policy="heuristic")
        outcome = "answered"
    except RunDeadlineExceeded:
        outcome = "stopped by the deadline"
    return time.perf_counter() - started, outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--deadline", type=float, default=5.0)
    parser.add_argument(
        "--long", default="", help="extra Goal-Mem question lengths (limit raised), e.g. 250000,1000000"
    )
    args = parser.parse_args(argv)
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations

    sample = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"
    with tempfile.TemporaryDirectory(prefix="bench-deadline-") as tmp:
        res = fresh_resources(Path(tmp) / "memory")
        ingest_conversation(
            load_conversations(sample)[0], "sample", resources=res, policy="heuristic", memory_manager="r2"
        )
        limit = res.settings.max_question_chars
        question = question_of(limit)
        print(machine_line())
        print(f"question of {len(question):,} characters (the limit), sample conversation, no LLM, hashing embedder")
        rows = []
        for strategy in args.strategies.split(","):
            _timed(strategy, "what did Melanie paint?", res)  # warm: imports and caches out of the figures
            figures = []
            for deadline in (args.deadline, 0.0):
                res.settings.run_deadline_s = deadline
                figures.append(_timed(strategy, question, res))
            rows.append([strategy, f"{figures[0][0]:.3f} ({figures[0][1]})", f"{figures[1][0]:.3f} ({figures[1][1]})"])
            print(f"  {strategy}: {rows[-1][1:]}", flush=True)
        print_table(["strategy", f"wall s, deadline {args.deadline:g} s", "wall s, no deadline"], rows)
        if args.long:
            long_rows = []
            for length in (int(n) for n in args.long.split(",")):
                res.settings.max_question_chars = length
                figures = []
                for deadline in (args.deadline, 0.0):
                    res.settings.run_deadline_s = deadline
                    figures.append(_timed("goalmem", question_of(length), res))
                long_rows.append(
                    [f"{length:,}", f"{figures[0][0]:.2f} ({figures[0][1]})", f"{figures[1][0]:.2f} ({figures[1][1]})"]
                )
                print(f"  goalmem at {length:,}: {long_rows[-1][1:]}", flush=True)
            print_table(
                [
                    "goalmem question chars (limit raised)",
                    f"wall s, deadline {args.deadline:g} s",
                    "wall s, no deadline",
                ],
                long_rows,
            )
        res.store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
