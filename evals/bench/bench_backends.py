"""The storage backends side by side on one conversation (the bundled sample, or ``--file`` and ``--conversation``):
no-LLM ingest (hashing embedder), a ``rerank`` answer to each of its first ``--questions`` questions, and a new
store's first snapshot against a cached one, on embedded Chroma, the in-process store and, with
``--postgres-url``, PostgreSQL (a new namespace there: nothing is touched).

The first part of issue 39's ``bench_backends`` (store put/search at scale, many-event queries and concurrent
writers are not in it yet; ``bench_writers --modes server,postgres`` races writers). Usage:
``python -m logicmap.evals.bench.bench_backends [--postgres-url postgresql://...] [--repeat 2] [--file F
--conversation conv-26] [--questions 20]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from logicmap.evals.common import machine_line, print_table

__all__ = ["main", "measure"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"


def measure(settings: Any, sample: Any, questions: int) -> list[str]:
    """Ingest seconds, ms per ``rerank`` answer, a new store's first snapshot ms, a cached snapshot ms."""
    from logicmap.graphs.ingest import ingest_conversation
    from logicmap.graphs.resources import Resources
    from logicmap.graphs.strategies import answer

    namespace = f"bench-{random.randrange(16**8):08x}"
    res = Resources(settings=settings)
    res.llm_ = None
    try:
        started = time.perf_counter()
        ingest_conversation(sample, namespace, resources=res, policy="heuristic")
        ingest = time.perf_counter() - started
        started = time.perf_counter()
        asked = sample.qa[:questions]
        for qa in asked:
            answer("rerank", qa.question, namespace, resources=res, policy="heuristic")
        per_answer = (time.perf_counter() - started) / max(1, len(asked))
    finally:
        res.store.close()
    fresh = Resources(settings=settings)
    try:
        started = time.perf_counter()
        fresh.store.snapshot(namespace)
        first = time.perf_counter() - started
        started = time.perf_counter()
        fresh.store.snapshot(namespace)
        cached = time.perf_counter() - started
    finally:
        fresh.store.close()
    return [f"{ingest:.2f}", f"{per_answer * 1000:.1f}", f"{first * 1000:.1f}", f"{cached * 1000:.2f}"]


def main(argv: list[str] | None = None) -> int:
    from logicmap.settings import LogicMapSettings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--postgres-url", help="also measure PostgreSQL, in this database")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--file", type=Path, default=SAMPLE, help="a conversation file (default: the sample)")
    parser.add_argument("--conversation", help="the conversation's id in the file (default: its first)")
    parser.add_argument("--questions", type=int, default=20, help="questions answered (its first N)")
    args = parser.parse_args(argv)
    from logicmap.memory.loaders import load_conversations

    conversations = load_conversations(args.file)
    chosen = [c for c in conversations if args.conversation in (None, c.conversation_id)]
    if not chosen:
        parser.error(f"no conversation {args.conversation!r} in {args.file}")
    sample = chosen[0]
    print(machine_line())
    turns = sum(len(s.turns) for s in sample.sessions)
    print(f"{sample.conversation_id}: {len(sample.sessions)} sessions, {turns} turns; no LLM, hashing embedder")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        for run in range(args.repeat):
            backends: list[tuple[str, Any]] = [
                ("chroma (embedded)", LogicMapSettings(data_dir=Path(tmp) / f"chroma-{run}", store_url=None,
                                                       embedding_provider="hashing")),
                ("in process", LogicMapSettings(store_url=f"memory://bench-{run}", embedding_provider="hashing")),
            ]
            if args.postgres_url:
                backends.append(("postgresql", LogicMapSettings(store_url=args.postgres_url,
                                                                embedding_provider="hashing")))
            for name, settings in backends:
                rows.append([name, run + 1, *measure(settings, sample, args.questions)])
                print(f"  {rows[-1]}", flush=True)
    print_table(["backend", "run", "ingest s", "rerank ms / question", "first snapshot ms", "cached snapshot ms"],
                rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
