"""No-LLM ingest of a session holding one huge turn: wall time per ingest stage, then one question per strategy.

The session has a few ordinary turns, one turn of about ``--mb`` megabytes of mixed conversational text
(names, places, time phrases, numbers, punctuation) and one turn that is a run of ``--run-words``
capitalised words, the shape that made the fact patterns superlinear. Hashing embedder, heuristic policy.
Usage: ``python -m logicmap.evals.bench.bench_big_turn [--mb 1 --run-words 8000 --strategies compass,dense,bm25]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, machine_line, peak_rss_mb, print_table

__all__ = ["big_turn_session", "main", "timed_ingest"]

_SENTENCES = (
    "I live in {Place} now and I moved to {Place} {when}.",
    "My sister {Name} helped me paint the kitchen {when}",
    "{Name} had a long shift at {Place} General, so I cooked dinner.",
    "I love hiking near {Place} with {Name} and {Name}!",
    "How is life in {Place}? I visited {Place} {when}, the {Name} Museum was closed.",
    "I adopted a puppy {when}. His name is {Name}.",
    "Maybe I will start a pottery class because {Name} said it helps",
    "Order #{digits} arrived on 8 May, 2023 -- {punct} ok {spaces} fine",
    "{Name} {Name} {Name} {Name} {Name} is my favourite band",
    "in {digits} days or {digits} months ago; who knows",
)
_NAMES = ("Maya", "Leo", "Ana", "Rui", "Biscuit", "Porto", "Lisbon", "Oak", "Ridge", "Santos", "Silva", "Nora")
_WHEN = ("yesterday", "last week", "two months ago", "in 3 days", "this summer", "last Monday", "tomorrow")


def big_text(size: int, seed: int = 0) -> str:
    """About ``size`` characters of mixed conversational text with the shapes the patterns look for."""
    rng = random.Random(seed)
    parts, total = [], 0
    while total < size:
        template = rng.choice(_SENTENCES)
        text = template
        for key, pick in (("{Place}", _NAMES), ("{Name}", _NAMES), ("{when}", _WHEN)):
            while key in text:
                text = text.replace(key, rng.choice(pick), 1)
        text = text.replace("{digits}", "9" * rng.randint(1, 40)).replace("{punct}", "!?" * rng.randint(1, 30))
        text = text.replace("{spaces}", " " * rng.randint(1, 60))
        parts.append(text)
        total += len(text) + 1
    return " ".join(parts)[:size]


def capitalised_run(words: int, seed: int = 1) -> str:
    """``words`` capitalised words in one run, ending without the words a pattern waits for."""
    rng = random.Random(seed)
    return "I live in " + " ".join(rng.choice(_NAMES) for _ in range(words)) + " and so on"


def big_turn_session(mb: float, run_words: int) -> Any:
    """One conversation, one session: ordinary turns around the huge turn and the capitalised run."""
    from logicmap.memory.files.loaders import Conversation, RawTurn, Session

    texts = [
        ("Maya", "I moved to Lisbon last month and I love it."),
        ("Leo", "How is life in Lisbon? I visited Porto yesterday."),
        ("Maya", big_text(int(mb * 1_000_000))),
        ("Leo", capitalised_run(run_words)),
        ("Maya", "My sister Ana helped me move. I adopted a puppy last week."),
        ("Leo", "Nice! What is the puppy called?"),
    ]
    turns = [RawTurn(dia_id=f"D1:{i + 1}", speaker=s, text=t) for i, (s, t) in enumerate(texts)]
    stamp = datetime(2023, 5, 8, 13, 56)
    session = Session(session_id="S1", timestamp=stamp, timestamp_text="1:56 pm on 8 May, 2023", turns=turns)
    return Conversation(conversation_id="big-turn", speakers=["Maya", "Leo"], sessions=[session])


def timed_ingest(conversation: Any, namespace: str, resources: Any) -> list[tuple[str, float]]:
    """Stream the ingest graph (heuristic policy) and time each node: the seconds between its updates."""
    from logicmap.graphs.ingest.ingest import IngestContext, graph
    from logicmap.graphs.runtime.resources import with_resources
    from logicmap.graphs.runtime.tracing import run_config

    ctx, resources = with_resources(IngestContext(policy="heuristic", namespace=namespace), resources)
    config = run_config("ingest", namespace=namespace, policy="heuristic", budgets=ctx, recursion_limit=40)
    stages: list[tuple[str, float]] = []
    last = time.perf_counter()
    for update in graph.stream({"sessions": conversation.sessions}, config=config, context=ctx, stream_mode="updates"):
        now = time.perf_counter()
        for node, delta in update.items():
            stages.append((node, now - last))
            print(f"  {node}: {now - last:.2f} s", flush=True)
            for report in (delta or {}).get("reports", []) or []:
                for note in report.fallbacks:
                    print(f"    note: {note[:140]}")
        last = now
    return stages


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0, help="size of the huge turn in MB (default 1)")
    parser.add_argument("--run-words", type=int, default=8000, help="capitalised words in one run (default 8000)")
    parser.add_argument(
        "--strategies",
        default="compass,dense,bm25,real",
        help="strategies asked one question after the ingest (comma-separated; empty: none)",
    )
    args = parser.parse_args(argv)
    print(machine_line())
    conversation = big_turn_session(args.mb, args.run_words)
    chars = sum(len(t.text) for t in conversation.sessions[0].turns)
    print(
        f"session: {len(conversation.sessions[0].turns)} turns, {chars:,} characters; "
        f"capitalised run of {args.run_words:,} words; heuristic policy, hashing embedder"
    )
    root = Path(tempfile.mkdtemp(prefix="bench-big-turn-"))
    try:
        resources = fresh_resources(root / "memory")
        started = time.perf_counter()
        stages = timed_ingest(conversation, "big", resources)
        total = time.perf_counter() - started
        snapshot = resources.store.snapshot("big")
        print(
            "records: "
            + ", ".join(
                f"{len(getattr(snapshot, kind))} {kind}" for kind in ("turns", "events", "facts", "cues", "tags")
            )
        )
        rows = [(name, f"{seconds:.2f}") for name, seconds in stages]
        rows.append(("ingest total", f"{total:.2f}"))
        from logicmap.graphs.strategies.registry import answer

        for name in filter(None, args.strategies.split(",")):
            began = time.perf_counter()
            answer(name, "Where does Maya live?", "big", resources=resources, policy="heuristic")
            rows.append((f"ask ({name})", f"{time.perf_counter() - began:.2f}"))
            print(f"  ask {name}: {rows[-1][1]} s", flush=True)
        print_table(["stage", "wall s"], rows)
        print(f"peak RSS: {peak_rss_mb():.0f} MB")
        if resources.store_ is not None:
            resources.store_.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
