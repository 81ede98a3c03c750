"""Ingestion and query overhead with a scripted model that replies at once (or after a fixed latency).

With no model latency the wall time is LogicMap's own overhead (graph, store, embedder); with 0.2 s per
call it shows what parallel explorers save. Ingestion runs twice: combined extraction (the session analyst
segments and extracts facts and cues in one call, the default) and one call per role; the two must build the
same layers from the scripted model's answers. Usage: ``python -m evals.bench.bench_overhead [--delays 0,0.2]``.

Calls and tokens per question are what each strategy spends under one fixed scripted decision rule
(``evals.bench.scripted``), the same for every run, so a change in them is a change in the strategy's control flow:

- segmenter: one event per 4 turns; relations: each event ``temporal_before`` the next; coreference: never the
  same event, always an overlap (an edge);
- planner: two subgoals ("who is involved: Q", "what happened: Q"); start selection (its own call, or the
  planner's when it picks the starts too): the first 3 candidates;
- explorer (one event, or each event of a batch): EXPAND to its first 2 neighbours, satisfying no subgoal (so the
  compass search ends only on an empty queue or a spent step budget, and always wants a refinement);
- refiner: repeats the question; responder: "scripted answer", citing nothing; judge: CORRECT;
- any other role: the smallest object its schema accepts (Goal-Mem, REAL, the forward baselines, reconstruct).

Tokens are the scripted model's estimate (prompt and reply characters / 4), comparable across strategies and
runs, not a provider's count. The papers' own figures are printed beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from logicmap.evals.bench.scripted import make_scripted_model, role_of
from logicmap.evals.common import fresh_resources, machine_line, peak_rss_mb, print_table

__all__ = ["PAPER_FIGURES", "QUERY_STRATEGIES", "bench_ingest", "bench_queries", "main"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"

# (label, strategy name, options): compass runs both explorer modes to compare them.
QUERY_STRATEGIES: list[tuple[str, str, dict[str, Any]]] = [
    ("bm25", "bm25", {}),
    ("dense", "dense", {}),
    ("compass (parallel explorers)", "compass", {"explorer_mode": "parallel"}),
    ("compass (batched explorers)", "compass", {"explorer_mode": "batched"}),
    ("goalmem:bm25", "goalmem", {"backbone": "bm25"}),
    ("forward_reformulate:bm25", "forward_reformulate", {"backbone": "bm25"}),
    ("forward_reflect:bm25", "forward_reflect", {"backbone": "bm25"}),
    ("forward_react:bm25", "forward_react", {"backbone": "bm25"}),
    ("real", "real", {}),
    ("reconstruct", "reconstruct", {}),
]

# What the papers report per question (real models on LoCoMo), printed for reference only: the measured figures come
# from a scripted model with estimated tokens, so the two are not comparable.
PAPER_FIGURES: dict[str, str] = {
    "compass": "CompassMem: about 7.5 steps per question",
    "goalmem": "Goal-Mem: 16,977 tokens per question",
}


def bench_ingest(resources: Any, model: Any, namespace: str, *, combined: bool = True) -> dict[str, float]:
    """Ingest the sample conversation with the LLM policy against ``model``; wall, calls, tokens, model wait."""
    from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
    from logicmap.memory.files.loaders import load_conversations

    conversation = load_conversations(SAMPLE)[0]
    calls_before = len(model.calls)
    started = time.perf_counter()
    context = IngestContext(policy="llm", combined_extraction=combined)
    report = ingest_conversation(conversation, namespace, resources=resources, context=context)
    wall = time.perf_counter() - started
    calls = len(model.calls) - calls_before
    sessions = len([s for s in report.sessions if not s.skipped])
    turns = conversation.turn_count
    return {
        "sessions": sessions,
        "turns": turns,
        "wall": wall,
        "calls": calls,
        "prompt_tokens": report.cost.prompt_tokens,
        "completion_tokens": report.cost.completion_tokens,
        "fallbacks": len(report.fallbacks),
        "model_wait": calls * model.delay,
    }


def layer_counts(resources: Any, namespace: str) -> dict[str, int]:
    """How many records of each layer a namespace holds."""
    snapshot = resources.store.snapshot(namespace)
    return {kind: len(getattr(snapshot, kind)) for kind in ("events", "relations", "facts", "cues", "tags")}


def same_layers(resources: Any, first: str, second: str) -> bool:
    """Whether two namespaces hold the same events, relations, facts, cues and tags (creation times aside; a
    fact's id is derived from its namespace, so facts are compared by content)."""

    def records(namespace: str) -> dict[str, Any]:
        snapshot = resources.store.snapshot(namespace)
        out: dict[str, Any] = {
            kind: {k: v.model_dump(exclude={"created_at", "namespace"}) for k, v in getattr(snapshot, kind).items()}
            for kind in ("events", "relations", "cues", "tags")
        }
        facts = [f.model_dump(mode="json", exclude={"id", "created_at", "namespace"}) for f in snapshot.facts.values()]
        out["facts"] = sorted(facts, key=lambda f: json.dumps(f, sort_keys=True))
        return out

    return records(first) == records(second)


def bench_queries(resources: Any, model: Any, namespace: str, questions: list[str]) -> dict[str, dict[str, Any] | str]:
    """Every available strategy on every question with the LLM policy: mean wall, calls (with the calls per role),
    tokens and steps per question."""
    from logicmap.graphs.strategies.registry import strategy_function

    out: dict[str, dict[str, Any] | str] = {}
    for label, name, options in QUERY_STRATEGIES:
        try:
            fn = strategy_function(name)
        except (ImportError, AttributeError) as exc:
            out[label] = f"unavailable ({type(exc).__name__}: {exc})"
            continue
        walls, calls, tokens, steps, fallbacks, errors = [], [], [], [], 0, 0
        roles: Counter[str] = Counter()
        try:  # warm-up: the first call compiles the strategy's graph; that one-time cost is not overhead per question
            fn(questions[0], namespace, resources=resources, policy="llm", **options)
        except Exception:  # counted below when it fails again
            pass
        for question in questions:
            before = len(model.calls)
            started = time.perf_counter()
            try:
                result = fn(question, namespace, resources=resources, policy="llm", **options)
                fallbacks += len(result.fallbacks)
                tokens.append(result.cost.total_tokens)
                steps.append(result.steps)
            except Exception:  # a benchmark reports failures, it does not stop on them
                errors += 1
            walls.append(time.perf_counter() - started)
            calls.append(len(model.calls) - before)
            roles.update(role_of(messages) for messages in model.calls[before:])
        out[label] = {
            "wall": statistics.mean(walls),
            "wall_median": statistics.median(walls),
            "calls": statistics.mean(calls),
            "model_wait": statistics.mean(calls) * model.delay,
            "fallbacks": fallbacks,
            "errors": errors,
            "tokens": statistics.mean(tokens) if tokens else 0.0,
            "steps": statistics.mean(steps) if steps else 0.0,
            "roles": {role: n / len(questions) for role, n in roles.most_common()},
        }
    return out


def _print_per_question(queries: dict[str, dict[str, Any] | str], n_questions: int) -> None:
    """Calls (and where they go), tokens and steps per question for every LLM strategy, beside the papers'."""
    print(f"\n## Calls and tokens per question ({n_questions} questions, scripted decision rule; module docstring)\n")
    rows = []
    for label, stats in queries.items():
        if isinstance(stats, str) or label in ("bm25", "dense"):
            continue
        roles = ", ".join(f"{role} {n:.1f}" for role, n in stats["roles"].items())
        paper = PAPER_FIGURES.get(label.split(" ")[0].split(":")[0], "")
        rows.append([label, f"{stats['calls']:.1f}", roles, f"{stats['tokens']:.0f}", f"{stats['steps']:.1f}", paper])
    print_table(
        [
            "strategy",
            "LLM calls/q",
            "calls/q by reply type",
            "tokens/q (estimated)",
            "steps/q",
            "paper (real model; not comparable)",
        ],
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delays", default="0,0.2", help="model latencies in seconds, comma-separated")
    parser.add_argument(
        "--embeddings",
        default="hashing",
        choices=["hashing", "minilm"],
        help="embedder (hashing: LogicMap's overhead without the embedding model)",
    )
    parser.add_argument("--questions", type=int, default=15, help="sample questions per strategy")
    args = parser.parse_args(argv)
    from logicmap.memory.files.loaders import load_conversations

    print(machine_line())
    print(f"embedder: {args.embeddings}; scripted model replies with valid JSON for every known role\n")
    qa = [q for q in load_conversations(SAMPLE)[0].qa if str(q.category) != "5"][: args.questions]
    questions = [q.question for q in qa]
    delays = [float(d) for d in args.delays.split(",") if d.strip()]
    # Warm-up ingest: imports, Chroma start-up and graph compilation happen once per process, not per turn.
    with tempfile.TemporaryDirectory(prefix="logicmap-warmup-") as tmp:
        warm = fresh_resources(Path(tmp), embeddings=args.embeddings, llm=make_scripted_model(0.0))
        bench_ingest(warm, warm.llm_, "bench.warmup")
        warm.store.close()
    ingest_rows, query_rows, layer_rows = [], [], []
    by_delay: dict[float, dict[str, Any]] = {}
    for delay in delays:
        with tempfile.TemporaryDirectory(prefix="logicmap-overhead-") as tmp:
            model = make_scripted_model(delay)
            resources = fresh_resources(Path(tmp), embeddings=args.embeddings, llm=model)
            for mode, namespace in (("combined", "bench.overhead"), ("per role", "bench.separate")):
                ingest = bench_ingest(resources, model, namespace, combined=mode == "combined")
                overhead = ingest["wall"] - ingest["model_wait"]
                ingest_rows.append(
                    [
                        f"{delay:.1f}",
                        mode,
                        ingest["sessions"],
                        ingest["turns"],
                        ingest["calls"],
                        f"{ingest['calls'] / ingest['sessions']:.1f}",
                        f"{ingest['prompt_tokens'] / ingest['sessions']:.0f}",
                        f"{ingest['completion_tokens'] / ingest['sessions']:.0f}",
                        f"{ingest['wall']:.2f}",
                        f"{ingest['wall'] / ingest['sessions']:.3f}",
                        f"{1000 * overhead / ingest['turns']:.1f}",
                        ingest["fallbacks"],
                    ]
                )
            layer_rows.append(
                [
                    f"{delay:.1f}",
                    *layer_counts(resources, "bench.overhead").values(),
                    "yes" if same_layers(resources, "bench.overhead", "bench.separate") else "NO",
                ]
            )
            queries = bench_queries(resources, model, "bench.overhead", questions)
            by_delay[delay] = queries
            for label, stats in queries.items():
                if isinstance(stats, str):
                    query_rows.append([f"{delay:.1f}", label, stats, "", "", "", "", ""])
                    continue
                own = stats["wall"] - stats["model_wait"] if delay == 0 else None
                query_rows.append(
                    [
                        f"{delay:.1f}",
                        label,
                        f"{stats['calls']:.1f}",
                        f"{1000 * stats['wall']:.1f}",
                        f"{1000 * stats['wall_median']:.1f}",
                        f"{stats['model_wait']:.2f}",
                        f"{1000 * own:.1f}" if own is not None else "",
                        f"{stats['fallbacks']}/{stats['errors']}",
                    ]
                )
            if resources.store_ is not None:
                resources.store_.close()

    print(f"## Ingestion: sample conversation ({SAMPLE.name}), LLM policy, calls are sequential\n")
    print_table(
        [
            "delay s",
            "extraction",
            "sessions",
            "turns",
            "LLM calls",
            "calls/session",
            "prompt tok/session",
            "completion tok/session",
            "wall s",
            "wall s/session",
            "non-LLM overhead ms/turn",
            "fallbacks",
        ],
        ingest_rows,
    )
    print("\nLayers built (combined extraction), and whether one call per role built the very same records:\n")
    print_table(["delay s", "events", "relations", "facts", "cues", "tags", "same records per role"], layer_rows)
    print(f"\n## Queries: {len(questions)} sample questions, LLM policy\n")
    print_table(
        [
            "delay s",
            "strategy",
            "LLM calls/q",
            "wall ms/q (mean)",
            "wall ms/q (median)",
            "model time s/q if serial",
            "non-LLM overhead ms/q",
            "fallbacks/errors",
        ],
        query_rows,
    )
    _print_per_question(by_delay[delays[0]], len(questions))
    if 0.0 in by_delay and any(d > 0 for d in by_delay):
        delay = max(by_delay)
        print(
            f"\n## What concurrency saves at {delay:.1f} s per call "
            "(serial estimate = overhead at 0 s + calls x delay)\n"
        )
        rows = []
        for label, stats in by_delay[delay].items():
            base = by_delay[0.0].get(label)
            if isinstance(stats, str) or not isinstance(base, dict):
                continue
            serial = base["wall"] + stats["calls"] * delay
            rows.append(
                [
                    label,
                    f"{stats['calls']:.1f}",
                    f"{serial:.2f}",
                    f"{stats['wall']:.2f}",
                    f"{serial - stats['wall']:.2f}",
                    f"{serial / stats['wall']:.2f}x",
                ]
            )
        print_table(["strategy", "LLM calls/q", "serial estimate s/q", "measured s/q", "saved s/q", "speed-up"], rows)
    print(f"\npeak RSS {peak_rss_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
