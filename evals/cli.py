"""The eval commands of the ``logicmap`` program: ``demo`` (the main job), ``eval``, ``train-data`` and ``train-r2``.

They sit with evals because they score answers (evals.metrics, evals.runner); ``main`` (the whole program, run by
``logicmap.__main__`` and the ``logicmap`` script) adds them to the core parser of ``graphs.surfaces.cli``, which itself
imports nothing from evals.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logicmap.data import sample_path
from logicmap.evals.train.logo_cli import register_train_r2
from logicmap.evals.train.smoke import register_train_data
from logicmap.graphs.surfaces.cli import (
    PolicyName,
    build_parser,
    output_path,
    policy_from_args,
    resources_from_args,
    run,
)
from logicmap.memory.language.text import printable

if TYPE_CHECKING:
    from logicmap.graphs.runtime.resources import Resources
# Scoring, the memory and the graphs are imported by the commands that use them: `logicmap --help` stays fast.

__all__ = ["add_eval_commands", "cmd_demo", "cmd_eval", "main", "recall_budgets"]

SAMPLE = sample_path()  # shipped in the package: the demo runs from an installed wheel, in any directory


def _demo_pass(
    resources: Resources,
    conversation: Any,
    namespace: str,
    policy: PolicyName,
    questions: list[Any],
    strategy: str,
    out_dir: Path,
) -> None:
    """Ingest, show the memory, draw it, answer the questions and score them against the gold answers."""
    from logicmap.evals.metrics import evidence_recall, token_f1
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.strategies.registry import answer
    from logicmap.graphs.surfaces.visualize import write_event_graph_html
    from logicmap.memory.indexes.graph import EventGraph

    print(f"== ingesting {len(conversation.sessions)} sessions into namespace {namespace!r} (policy {policy})")
    report = ingest_conversation(
        conversation,
        namespace,
        resources=resources,
        policy=policy,
        progress=True,
        memory_manager="r2" if strategy == "r2" else None,
    )
    fresh = [s for s in report.sessions if not s.skipped]
    print(
        f"   {len(fresh)} sessions ingested now, {len(report.sessions) - len(fresh)} already in memory; "
        f"LLM calls {report.cost.llm_calls}, tokens {report.cost.prompt_tokens}+{report.cost.completion_tokens}, "
        f"wall {report.wall_time_s:.1f}s"
    )
    for fb in report.fallbacks:
        print(printable(f"   fallback recorded: {fb.role}: {fb.reason}", one_line=True))
    graph = EventGraph.of(resources.store.snapshot(namespace))
    print("== memory statistics")
    print(json.dumps(graph.stats(), indent=2))
    out = write_event_graph_html(graph, out_dir / f"{namespace}-graph.html")
    print(f"== event graph drawn to {out}")
    print(f"== {len(questions)} questions with strategy {strategy!r}")
    started = time.perf_counter()
    calls = tokens = 0
    f1s, recalls = [], []
    for qa in questions:
        result = answer(strategy, qa.question, namespace, resources=resources, policy=policy)
        calls += result.cost.llm_calls
        tokens += result.cost.total_tokens
        f1 = token_f1(result.answer, qa.answer, qa.category) if qa.category != 5 else None
        recall = evidence_recall(result.cited_turns(10), qa.evidence, 10) if qa.evidence else None
        f1s += [f1] if f1 is not None else []
        recalls += [recall] if recall is not None else []
        fallbacks = f" | fallbacks: {', '.join(f.role for f in result.fallbacks)}" if result.fallbacks else ""
        print(printable(f"Q: {qa.question}", one_line=True))
        print(printable(f"   A: {result.answer[:160]}", one_line=True))
        print(
            printable(
                f"   gold: {qa.answer} | cited: {', '.join(result.cited_turns(6))} | {result.cost.llm_calls} calls"
                f"{fallbacks}",
                one_line=True,
            )
        )
    elapsed = time.perf_counter() - started
    mean: Callable[[list[float]], float] = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    print(
        f"== {len(questions)} questions: token F1 {mean(f1s):.3f}, evidence recall@10 {mean(recalls):.3f}; "
        f"{calls} LLM calls, {tokens} tokens, {elapsed:.1f}s ({elapsed / max(len(questions), 1):.2f}s per question)"
    )


def _cmd_train_r2(args: argparse.Namespace) -> int:
    from logicmap.evals.train.logo_train import cmd_train_r2

    return cmd_train_r2(args)


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: the sample conversation through the no-LLM policies, then through the chat model if any."""
    from logicmap.memory.files.loaders import load_conversations

    resources = resources_from_args(args)
    conversation = load_conversations(SAMPLE)[0]
    out_dir = output_path(args.out_dir, "demo --out-dir")  # made here, in a directory that exists
    out_dir.mkdir(exist_ok=True)
    print("#### Part 1: the deterministic no-LLM policies on the whole sample conversation")
    _demo_pass(
        resources, conversation, args.namespace, "heuristic", conversation.qa[: args.limit], args.strategy, out_dir
    )
    settings = resources.settings
    if args.no_llm:
        print("\n#### Part 2 skipped: --no-llm")
        return 0
    if not settings.chat_model:
        print(
            "\n#### Part 2 skipped: no chat model configured. Point LogicMap at a real model to run the LLM roles:\n"
            "   export LOGICMAP_CHAT_MODEL=gpt-4o-mini LOGICMAP_OPENAI_API_KEY=sk-... LOGICMAP_STRUCTURED_OUTPUT=json_schema\n"
            "   or an OpenAI-compatible server (vLLM, Ollama, llama.cpp): LOGICMAP_CHAT_MODEL=<model> "
            "LOGICMAP_OPENAI_BASE_URL=http://127.0.0.1:8000/v1"
        )
        return 0
    small = conversation.model_copy(deep=True)
    small.sessions = small.sessions[: args.llm_sessions]
    present = {t.dia_id for s in small.sessions for t in s.turns}
    questions = [q for q in conversation.qa if q.evidence and set(q.evidence) <= present][: args.llm_questions]
    print(
        f"\n#### Part 2: the LLM policies with {settings.chat_model} at {settings.openai_base_url or 'OpenAI'} "
        f"({len(small.sessions)} sessions, {len(questions)} questions)"
    )
    if "smol" in settings.chat_model.lower():
        print("   note: SmolLM2-135M is a smoke test of the real HTTP path, not a source of good answers.")
    _demo_pass(resources, small, f"{args.namespace}-llm", "llm", questions, args.strategy, out_dir)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate strategies on a LoCoMo / LongMemEval file and write the report (evals.runner)."""
    from logicmap.evals.judge import make_judge_model
    from logicmap.evals.runner import run_eval

    resources = resources_from_args(args)
    policy = policy_from_args(args, resources)
    judge, judge_method = make_judge_model(resources, args.judge_model)
    # --out's directory must exist; the default reports/ directory is the program's own and is created.
    out = (
        str(output_path(args.out, "eval --out"))
        if args.out
        else (f"reports/eval-{Path(args.file).stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    categories = [c for c in (args.categories or "").split(",") if c.strip()] or None
    run = run_eval(
        args.file,
        args.strategy,
        limit=args.limit,
        categories=categories,
        policy=policy,
        out_dir=out,
        resources=resources,
        budgets=args.budgets,
        judge=judge,
        judge_method=judge_method,
        progress=not args.quiet,
        langsmith=False if args.no_langsmith else None,
    )
    for label, reason in run.unavailable.items():
        print(printable(f"unavailable: {label}: {reason}", one_line=True))
    for strategy, stats in run.aggregates.items():
        s = stats["overall"]
        recall = " ".join(f"R@{b}={v:.3f}" if v is not None else f"R@{b}=n/a" for b, v in s.recall.items())
        recall += (
            " (any gold session: "
            + " ".join(f"S@{b}={v:.3f}" if v is not None else f"S@{b}=n/a" for b, v in s.session_recall.items())
            + ")"
        )
        judged = "judge not run" if s.judge_accuracy is None else f"judge={s.judge_accuracy:.3f}"
        print(
            f"{strategy}: {s.questions} q, F1={s.f1:.3f} BLEU-1={s.bleu1:.3f} {judged} {recall}; "
            f"{s.llm_calls:.1f} LLM calls/q, {s.wall_time_s:.2f}s/q, errors {s.errors}"
        )
    print(f"wrote {run.files.get('report')} ({len(run.results)} answers)")
    return 0


def recall_budgets(text: str) -> list[int]:
    """``--budgets``: comma-separated positive whole numbers of turns ("5,10,20"), in order, without repeats."""
    parts = [p.strip() for p in text.split(",")]
    bad = [p for p in parts if not re.fullmatch(r"[0-9]+", p) or int(p) == 0]
    if bad:
        shown = ", ".join(repr(printable(p, one_line=True)[:20]) for p in bad[:3])
        raise argparse.ArgumentTypeError(
            f"recall budgets are positive whole numbers of turns (like 5,10,20), not {shown}"
        )
    return sorted({int(p) for p in parts})


def add_eval_commands(sub: Any) -> None:
    """Add ``demo``, ``train-data`` (Memory-R2, evals.train.smoke), ``train-r2`` (evals.train.logo_train) and ``eval`` to the ``logicmap`` subparsers."""
    p = sub.add_parser("demo", help="the main job: ingest the sample conversation and answer its questions")
    p.add_argument("--namespace", "-n", default="sample")
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--strategy", "-s", default="compass")
    p.add_argument("--limit", type=int, default=20, help="questions in part 1")
    p.add_argument("--llm-sessions", type=int, default=2, help="sessions ingested with the chat model in part 2")
    p.add_argument("--llm-questions", type=int, default=2, help="questions answered with the chat model in part 2")
    p.add_argument("--out-dir", default="reports")
    p.add_argument("--no-llm", action="store_true", help="part 1 only, even when a chat model is configured")
    p.set_defaults(func=cmd_demo)

    register_train_data(sub)
    register_train_r2(sub, _cmd_train_r2)

    p = sub.add_parser("eval", help="evaluate strategies on a LoCoMo / LongMemEval file: F1, BLEU-1, recall, cost")
    p.add_argument("file")
    p.add_argument(
        "--strategy",
        "-s",
        action="append",
        required=True,
        help="strategy to run (repeatable): compass, compass:similarity, rerank, goalmem:bm25|dense|events, real, "
        "reconstruct, dense, bm25, r2 (its conversations are ingested with the Memory-R2 manager); "
        "NAME:faithful is a method's paper configuration",
    )
    p.add_argument("--limit", type=int, help="at most N questions (in file order)")
    p.add_argument(
        "--categories",
        help="comma-separated categories (LoCoMo numbers, LongMemEval question types); "
        "default: all but LoCoMo 5 (adversarial)",
    )
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--out", "-o", help="output directory (default reports/eval-FILE-TIME)")
    p.add_argument(
        "--budgets",
        type=recall_budgets,
        default="5,10,20",
        help="evidence recall budgets in turns: comma-separated positive integers",
    )
    p.add_argument("--judge-model", help="LLM judge model (default LOGICMAP_JUDGE_MODEL; none: judge not run)")
    p.add_argument("--no-langsmith", action="store_true", help="do not push to LangSmith even when configured")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_eval)


def main(argv: list[str] | None = None) -> int:
    """Run one ``logicmap`` command: ingest, ask, graph, stats, namespaces, local-llm, chat, facts, demo, train-data, eval."""
    return run(build_parser(add_eval_commands), argv)
