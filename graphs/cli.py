"""The ``logicmap`` command line: ingest, ask, graph, stats, demo (and more as strategies land).

Errors the user can fix (bad files, unknown namespaces, a locked store) print one clear line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from logicmap.graphs.resources import Resources
from logicmap.memory.config import LogicMapSettings
from logicmap.memory.graph import EventGraph
from logicmap.memory.loaders import DataFormatError, load_conversations
from logicmap.memory.store import StoreError, UnknownNamespaceError

__all__ = ["main"]

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample_conversation.json"


def _resources(args: argparse.Namespace) -> Resources:
    overrides: dict[str, Any] = {}
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = Path(args.data_dir)
    if getattr(args, "embeddings", None):
        overrides["embedding_provider"] = args.embeddings
    return Resources(settings=LogicMapSettings(**overrides))


def _policy(args: argparse.Namespace, resources: Resources) -> str:
    policy = getattr(args, "policy", "auto") or "auto"
    if policy == "auto":
        policy = "llm" if resources.settings.chat_model else "heuristic"
        if policy == "heuristic":
            print("note: no chat model configured (LOGICMAP_CHAT_MODEL); using the no-LLM policy", file=sys.stderr)
    return policy


def _namespace_for(base: str, conversation_id: str, many: bool) -> str:
    if not many:
        return base
    return f"{base}.{re.sub(r'[^A-Za-z0-9_.:@-]+', '-', conversation_id).strip('-') or 'conv'}"


def cmd_ingest(args: argparse.Namespace) -> int:
    from logicmap.graphs.ingest import ingest_conversation

    resources = _resources(args)
    conversations = load_conversations(args.file)
    policy = _policy(args, resources)
    many = len(conversations) > 1
    for conv in conversations:
        for repair in conv.repairs:
            print(f"repaired {conv.conversation_id}: {repair}", file=sys.stderr)
        namespace = _namespace_for(args.namespace, conv.conversation_id, many)
        report = ingest_conversation(conv, namespace, resources=resources, policy=policy, progress=not args.quiet)
        done = [s for s in report.sessions if not s.skipped]
        skipped = len(report.sessions) - len(done)
        turns = sum(s.turns for s in done)
        print(
            f"{namespace}: {len(done)} sessions ingested, {skipped} already committed; "
            f"{sum(s.events for s in done)} events, {turns} turns; policy {policy}; "
            f"LLM calls {report.cost.llm_calls} ({report.llm_calls_per_session:.1f}/session), "
            f"tokens {report.cost.prompt_tokens}+{report.cost.completion_tokens}, wall {report.wall_time_s:.2f}s"
        )
        for fb in report.fallbacks:
            print(f"  fallback: {fb.role}: {fb.reason}", file=sys.stderr)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    resources = _resources(args)
    resources.store.require_namespace(args.namespace)
    stats = EventGraph.of(resources.store.snapshot(args.namespace)).stats()
    print(json.dumps(stats, indent=2))
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    from logicmap.graphs.visualize import write_event_graph

    resources = _resources(args)
    resources.store.require_namespace(args.namespace)
    out = Path(args.out or f"{args.namespace}-graph.html")
    write_event_graph(EventGraph.of(resources.store.snapshot(args.namespace)), out)
    print(f"wrote {out}")
    return 0


def _print_result(result: Any, as_json: bool) -> None:
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    print(f"Q: {result.question}")
    print(f"A: {result.answer}")
    snapshot_turns = result.details.get("turn_texts", {})
    print(f"evidence ({len(result.evidence)}):")
    for item in result.evidence[:8]:
        print(f"  - [{item.kind} {item.id}] {item.text[:160]}")
        for tid in item.turn_ids[:4]:
            if tid in snapshot_turns:
                print(f"      {snapshot_turns[tid][:160]}")
    c = result.cost
    print(
        f"cost: {c.llm_calls} LLM calls, {c.prompt_tokens}+{c.completion_tokens} tokens"
        f"{' (estimated)' if c.tokens_estimated else ''}, {result.steps} steps, {c.wall_time_s:.2f}s"
    )
    for fb in result.fallbacks:
        print(f"  fallback: {fb.role}: {fb.reason}")


def cmd_ask(args: argparse.Namespace) -> int:
    from logicmap.graphs.strategies import answer

    resources = _resources(args)
    resources.store.require_namespace(args.namespace)
    policy = _policy(args, resources)
    options: dict[str, Any] = {"policy": policy}
    if args.backbone:
        options["backbone"] = args.backbone
    result = answer(args.strategy, args.question, args.namespace, resources=resources, **options)
    _print_result(result, args.json)
    return 0


def cmd_namespaces(args: argparse.Namespace) -> int:
    for ns in _resources(args).store.namespaces():
        print(ns)
    return 0


def _demo_pass(resources: Resources, conversation: Any, namespace: str, policy: str, questions: list[Any],
               strategy: str, out_dir: Path) -> None:
    """Ingest, show the memory, draw it, answer the questions and score them against the gold answers."""
    from logicmap.evals.metrics import evidence_recall, token_f1
    from logicmap.graphs.ingest import ingest_conversation
    from logicmap.graphs.strategies import answer
    from logicmap.graphs.visualize import write_event_graph_html

    print(f"== ingesting {len(conversation.sessions)} sessions into namespace {namespace!r} (policy {policy})")
    report = ingest_conversation(conversation, namespace, resources=resources, policy=policy, progress=True)
    fresh = [s for s in report.sessions if not s.skipped]
    print(
        f"   {len(fresh)} sessions ingested now, {len(report.sessions) - len(fresh)} already in memory; "
        f"LLM calls {report.cost.llm_calls}, tokens {report.cost.prompt_tokens}+{report.cost.completion_tokens}, "
        f"wall {report.wall_time_s:.1f}s"
    )
    for fb in report.fallbacks:
        print(f"   fallback recorded: {fb.role}: {fb.reason}")
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
        print(f"Q: {qa.question}\n   A: {result.answer[:160]}\n   gold: {qa.answer} | cited: {', '.join(result.cited_turns(6))}"
              f" | {result.cost.llm_calls} calls{' | fallbacks: ' + ', '.join(f.role for f in result.fallbacks) if result.fallbacks else ''}")
    elapsed = time.perf_counter() - started
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    print(
        f"== {len(questions)} questions: token F1 {mean(f1s):.3f}, evidence recall@10 {mean(recalls):.3f}; "
        f"{calls} LLM calls, {tokens} tokens, {elapsed:.1f}s ({elapsed / max(len(questions), 1):.2f}s per question)"
    )


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: the sample conversation through the no-LLM policies, then through the chat model if any."""
    resources = _resources(args)
    conversation = load_conversations(SAMPLE)[0]
    out_dir = Path(args.out_dir)
    print("#### Part 1: the deterministic no-LLM policies on the whole sample conversation")
    _demo_pass(resources, conversation, args.namespace, "heuristic", conversation.qa[: args.limit], args.strategy, out_dir)
    settings = resources.settings
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
    print(f"\n#### Part 2: the LLM policies with {settings.chat_model} at {settings.openai_base_url or 'OpenAI'} "
          f"({len(small.sessions)} sessions, {len(questions)} questions)")
    if "smol" in settings.chat_model.lower():
        print("   note: SmolLM2-135M is a smoke test of the real HTTP path, not a source of good answers.")
    _demo_pass(resources, small, f"{args.namespace}-llm", "llm", questions, args.strategy, out_dir)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="logicmap", description="Long-term memory for conversational agents.")
    parser.add_argument("--data-dir", help="memory directory (default: LOGICMAP_DATA_DIR or .logicmap)")
    parser.add_argument("--embeddings", choices=["minilm", "openai", "hashing"], help="embedding provider override")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="ingest a LoCoMo / LongMemEval / JSONL conversation file")
    p.add_argument("file")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("ask", help="answer a question from a namespace's memory")
    p.add_argument("question")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--strategy", "-s", default="compass")
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--backbone", help="retrieval backbone (goalmem): bm25, dense, events")
    p.add_argument("--json", action="store_true", help="print the typed result as JSON")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("graph", help="draw a namespace's event graph to a self-contained HTML file (or PNG: --out x.png)")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--out", "-o")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("stats", help="memory statistics of a namespace")
    p.add_argument("--namespace", "-n", required=True)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("namespaces", help="list namespaces with committed memory")
    p.set_defaults(func=cmd_namespaces)

    p = sub.add_parser("demo", help="the main job: ingest the sample conversation and answer its questions")
    p.add_argument("--namespace", "-n", default="sample")
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--strategy", "-s", default="compass")
    p.add_argument("--limit", type=int, default=20, help="questions in part 1")
    p.add_argument("--llm-sessions", type=int, default=2, help="sessions ingested with the chat model in part 2")
    p.add_argument("--llm-questions", type=int, default=2, help="questions answered with the chat model in part 2")
    p.add_argument("--out-dir", default="reports")
    p.set_defaults(func=cmd_demo)

    # -- more subcommands are registered below (one block per feature) --

    # Offline model: `logicmap local-llm [--port P] [--benchmark] [-- CMD ...]` (agents.local_llm)
    def cmd_local_llm(args: argparse.Namespace) -> int:
        from logicmap.agents.local_llm import run_local_llm_command

        command = [c for c in args.run if c != "--"]
        return run_local_llm_command(port=args.port, benchmark=args.benchmark, command=command, venv=args.venv,
                                     n_threads=args.threads)  # fmt: skip

    p = sub.add_parser("local-llm", help="serve SmolLM2-135M (llama.cpp, OpenAI-compatible) on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--threads", type=int, help="generation threads (default: half the cores)")
    p.add_argument("--venv", help="the llama-cpp-python venv (default: LOGICMAP_LLM_VENV or .venv-llm)")
    p.add_argument("--benchmark", action="store_true", help="print start time and tokens/s, then stop")
    p.add_argument("run", nargs=argparse.REMAINDER, help="-- CMD ...: run CMD against the server with LOGICMAP_* set")
    p.set_defaults(func=cmd_local_llm)

    # MRAgent chatbot: `logicmap chat -n NS [--strategy S]` (graphs.chatbot); /evidence, /quit
    def cmd_chat(args: argparse.Namespace) -> int:
        from logicmap.graphs.chatbot import run_chat

        resources = _resources(args)
        return run_chat(resources, args.namespace, strategy=args.strategy, policy=_policy(args, resources), user_name=args.user)

    p = sub.add_parser("chat", help="chat with long-term memory (/evidence shows what was recalled, /quit ends)")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--strategy", "-s", default="reconstruct", help="recall strategy: reconstruct, compass, goalmem, dense...")
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--user", default="user", help="the speaker name your turns are stored under")
    p.set_defaults(func=cmd_chat)

    # REAL: `logicmap facts -n NS [--as-of DATE] [--history HEAD RELATION]` (memory.facts)
    def cmd_facts(args: argparse.Namespace) -> int:
        from logicmap.memory.facts import describe_facts, parse_when

        resources = _resources(args)
        resources.store.require_namespace(args.namespace)
        if args.as_of and parse_when(args.as_of) is None:
            raise ValueError(f"--as-of {args.as_of!r} is not a date (YYYY-MM-DD, YYYY-MM or YYYY)")
        snapshot = resources.store.snapshot(args.namespace)
        lines = describe_facts(snapshot, as_of=args.as_of, history=tuple(args.history) if args.history else None)
        print("\n".join(lines) if lines else "no facts")
        return 0

    p = sub.add_parser("facts", help="REAL's temporal facts of a namespace: all, as of a date, or one attribute's history")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--as-of", help="only facts valid at this date (YYYY-MM-DD, YYYY-MM or YYYY)")
    p.add_argument("--history", nargs=2, metavar=("HEAD", "RELATION"), help="every version of one attribute")
    p.set_defaults(func=cmd_facts)

    # Memory-R2: `logicmap train-data FILE --out PATH [--group-size G] [--curriculum]` (evals.train.smoke)
    from logicmap.evals.train.smoke import register_train_data

    register_train_data(sub)

    def cmd_eval(args: argparse.Namespace) -> int:
        """Evaluate strategies on a LoCoMo / LongMemEval file and write the report (evals.runner)."""
        from logicmap.evals.runner import make_judge_model, run_eval

        resources = _resources(args)
        policy = _policy(args, resources)
        judge, judge_method = make_judge_model(resources, args.judge_model)
        out = args.out or f"reports/eval-{Path(args.file).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        categories = [c for c in (args.categories or "").split(",") if c.strip()] or None
        run = run_eval(
            args.file, args.strategy, limit=args.limit, categories=categories, policy=policy, out_dir=out,
            resources=resources, budgets=[int(b) for b in args.budgets.split(",")], judge=judge,
            judge_method=judge_method, progress=not args.quiet, langsmith=False if args.no_langsmith else None,
        )
        for label, reason in run.unavailable.items():
            print(f"unavailable: {label}: {reason}")
        for strategy, stats in run.aggregates.items():
            s = stats["overall"]
            recall = " ".join(f"R@{b}={v:.3f}" if v is not None else f"R@{b}=n/a" for b, v in s.recall.items())
            judged = "judge not run" if s.judge_accuracy is None else f"judge={s.judge_accuracy:.3f}"
            print(f"{strategy}: {s.questions} q, F1={s.f1:.3f} BLEU-1={s.bleu1:.3f} {judged} {recall}; "
                  f"{s.llm_calls:.1f} LLM calls/q, {s.wall_time_s:.2f}s/q, errors {s.errors}")
        print(f"wrote {run.files.get('report')} ({len(run.results)} answers)")
        return 0

    p = sub.add_parser("eval", help="evaluate strategies on a LoCoMo / LongMemEval file: F1, BLEU-1, recall, cost")
    p.add_argument("file")
    p.add_argument("--strategy", "-s", action="append", required=True,
                   help="strategy to run (repeatable): compass, compass:similarity, goalmem:bm25|dense|events, real, reconstruct, dense, bm25")
    p.add_argument("--limit", type=int, help="at most N questions (in file order)")
    p.add_argument("--categories", help="comma-separated categories (LoCoMo numbers, LongMemEval question types); "
                   "default: all but LoCoMo 5 (adversarial)")
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--out", "-o", help="output directory (default reports/eval-FILE-TIME)")
    p.add_argument("--budgets", default="5,10,20", help="evidence recall budgets in turns")
    p.add_argument("--judge-model", help="LLM judge model (default LOGICMAP_JUDGE_MODEL; none: judge not run)")
    p.add_argument("--no-langsmith", action="store_true", help="do not push to LangSmith even when configured")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (DataFormatError, UnknownNamespaceError, StoreError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; committed sessions are kept, re-run to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
