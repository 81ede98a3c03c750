"""What one chatbot turn costs, per recall strategy: LLM calls, tokens and milliseconds on the reply path, with
and without a chat model, and the storing of the turn (reported apart: it runs after the reply).

A namespace of ``--turns-stored`` turns (default 1,000: sessions of 20 generated turns, ingested without a model)
is chatted with through the chatbot graph in one warm process: one warm-up turn, then ``--turns`` measured turns
per strategy, alternating statements and questions. Each turn is stored by the default in-process ingestion
queue; the queue is drained between turns (not timed in the turn) and its ingest cost is reported separately.
"With model" uses a scripted model that answers every role after a fixed per-call delay (``--delay``).

    nice -n 10 env PYTHONPATH=<parent of the package> python -m logicmap.evals.bench.bench_chat
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logicmap.evals.common import fresh_resources, machine_line, print_table

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

PLACES = ["Lisbon", "Porto", "Leiden", "Oslo", "Kyoto", "Quito", "Hanoi", "Dakar"]
THINGS = ["violin", "bicycle", "garden", "sourdough", "kayak", "telescope", "pottery", "marathon"]


def _conversation(turns: int) -> Any:
    from logicmap.memory.files.loaders import Conversation, RawTurn, Session

    sessions, start = [], datetime(2024, 1, 1, 9, 0)
    for s in range(max(1, turns // 20)):
        when = start + timedelta(days=3 * s)
        said = [
            RawTurn(
                dia_id=f"D{s + 1}:{t + 1}",
                speaker=("Maya", "Leo")[t % 2],
                text=f"In {PLACES[(s + t) % 8]} I spent the week on my {THINGS[(s * 3 + t) % 8]} "
                f"project, part {s * 20 + t}.",
            )
            for t in range(20)
        ]
        sessions.append(Session(session_id=f"S{s + 1}", timestamp=when, timestamp_text=when.isoformat(), turns=said))
    return Conversation(conversation_id="bench-chat", speakers=["Maya", "Leo"], sessions=sessions)


class _RecordingQueue:
    """The chatbot's ingestion queue, keeping each job's report (the storing cost, reported apart)."""

    def __init__(self) -> None:
        from logicmap.graphs.chat.ingestion import IngestionQueue

        self.queue = IngestionQueue()
        self.reports: list[Any] = []

    def submit(self, job: Any, label: str = "") -> None:
        self.queue.submit(lambda: self.reports.append(job()), label)

    def flush(self) -> float:
        started = time.perf_counter()
        self.queue.flush()
        return time.perf_counter() - started


def _message(i: int) -> str:
    if i % 2:
        return f"Where did I work on my {THINGS[i % 8]} project?"
    return f"I just took up {THINGS[i % 8]} lessons in {PLACES[i % 8]}."


def _run(res: Any, namespace: str, strategy: str, policy: str, turns: int) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from logicmap.graphs.chat.chatbot import ChatContext, build_chatbot_graph

    work = _RecordingQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = ChatContext(namespace=namespace, strategy=strategy, policy=policy, ingestion=work, resources=res)  # type: ignore[arg-type]  # names from argparse choices
    times, calls, tokens, ingest_s = [], [], [], []
    for i in range(turns + 1):  # turn 0 warms the strategy up
        config: RunnableConfig = {"configurable": {"thread_id": f"{strategy}-{policy}-{i // 4}"}}
        started = time.perf_counter()
        out = bot.invoke({"messages": [HumanMessage(_message(i))]}, config, context=ctx)
        elapsed = time.perf_counter() - started
        spent = work.flush()
        if i == 0:
            continue
        times.append(elapsed * 1000)
        calls.append(out["cost"]["llm_calls"])
        tokens.append(out["cost"]["prompt_tokens"] + out["cost"]["completion_tokens"])
        ingest_s.append(spent * 1000)
    stored = [r.ingest.cost.llm_calls for r in work.reports[1:] if getattr(r, "ingest", None) is not None]
    return {
        "p50": statistics.median(times),
        "p95": sorted(times)[min(len(times) - 1, math.ceil(len(times) * 0.95) - 1)],
        "calls": statistics.mean(calls),
        "tokens": statistics.mean(tokens),
        "ingest_ms": statistics.median(ingest_s),
        "ingest_calls": statistics.mean(stored) if stored else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns-stored", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=8, help="measured turns per strategy and policy")
    parser.add_argument("--delay", type=float, default=0.05, help="the scripted model's seconds per call")
    parser.add_argument("--embeddings", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--strategies", default="", help="comma-separated (default: every strategy)")
    args = parser.parse_args(argv)

    from logicmap.evals.bench.scripted import make_scripted_model
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.strategies.registry import STRATEGIES

    print(machine_line())
    data = Path(tempfile.mkdtemp(prefix="bench-chat-"))
    res = fresh_resources(data / "memory", embeddings=args.embeddings)
    started = time.perf_counter()
    ingest_conversation(
        _conversation(args.turns_stored), "bench", resources=res, policy="heuristic", memory_manager="r2"
    )
    print(
        f"namespace: {len(res.store.snapshot('bench').turns)} turns stored in {time.perf_counter() - started:.1f} s "
        f"(no LLM, {args.embeddings} embeddings); load average before the turns: {os.getloadavg()}"
    )
    names = [s for s in args.strategies.split(",") if s] or list(STRATEGIES)
    rows = []
    for model in (False, True):
        res.llm_ = make_scripted_model(delay=args.delay) if model else None
        for name in names:
            found = _run(res, "bench", name, "llm" if model else "heuristic", args.turns)
            rows.append(
                [
                    name,
                    f"scripted, {args.delay * 1000:.0f} ms/call" if model else "none",
                    f"{found['calls']:.1f}",
                    f"{found['tokens']:.0f}",
                    f"{found['p50']:.0f}",
                    f"{found['p95']:.0f}",
                    f"{found['ingest_calls']:.1f}",
                    f"{found['ingest_ms']:.0f}",
                ]
            )
            print(f"  {name} ({'model' if model else 'no model'}): p50 {found['p50']:.0f} ms", flush=True)
    print_table(
        [
            "strategy",
            "model",
            "LLM calls / turn (reply path)",
            "tokens / turn",
            "p50 ms",
            "p95 ms",
            "ingest LLM calls / turn (after the reply)",
            "ingest ms / turn (after the reply)",
        ],
        rows,
    )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
