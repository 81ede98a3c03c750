"""Answer token F1 of the strategies' no-LLM policies, per conversation file, with a line per answer.

One memory per file (heuristic ingest, the MiniLM embedder by default), every strategy on every question
(LoCoMo category 5 left out unless ``--categories`` names it). Usage:
``python -m logicmap.evals.bench.bench_nollm_answers FILE [FILE ...] [--strategies real,goalmem,reconstruct,compass]``.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["DEFAULT_STRATEGIES", "answer_f1_table", "main"]

DEFAULT_STRATEGIES = ["real", "goalmem", "reconstruct", "compass"]


def _category_order(label: str) -> tuple[int, str]:
    head = label.split(" ", 1)[0]
    return (int(head) if head.isdigit() else 100, label)


def answer_f1_table(
    path: Path,
    resources: Any,
    strategies: list[str],
    *,
    categories: list[str] | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Mean token F1 per strategy (overall and per category) on the questions of ``path``, no LLM anywhere."""
    from logicmap.evals.metrics import category_label, token_f1
    from logicmap.evals.runner import eval_namespace, select_questions
    from logicmap.evals.specs import resolve_strategies
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations

    conversations = load_conversations(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    available, unavailable = resolve_strategies(strategies)
    questions = select_questions(conversations, categories, limit)
    namespaces: dict[str, str] = {}
    started = time.perf_counter()
    for conv_id in dict.fromkeys(c.conversation_id for c, _ in questions):
        ns = eval_namespace(digest, "heuristic", resources.settings.embedding_provider, conv_id)
        conversation = next(c for c in conversations if c.conversation_id == conv_id)
        ingest_conversation(conversation, ns, resources=resources, policy="heuristic")
        namespaces[conv_id] = ns
    ingest_s = time.perf_counter() - started
    scores: dict[str, list[float]] = {spec.label: [] for spec, _ in available}
    per_category: dict[str, dict[str, list[float]]] = {spec.label: {} for spec, _ in available}
    errors = dict.fromkeys(scores, 0)
    times: dict[str, list[float]] = {label: [] for label in scores}
    total = len(questions) * len(available)
    done = 0
    for conv, qa in questions:
        for spec, fn in available:
            t0 = time.perf_counter()
            try:
                result = fn(
                    qa.question,
                    namespaces[conv.conversation_id],
                    resources=resources,
                    policy="heuristic",
                    **spec.options,
                )
                answer = result.answer
            except Exception as exc:  # a failing question scores 0; the count is printed
                answer, errors[spec.label] = f"<error {type(exc).__name__}>", errors[spec.label] + 1
            times[spec.label].append(time.perf_counter() - t0)
            f1 = token_f1(answer, qa.answer, qa.category)
            scores[spec.label].append(f1)
            per_category[spec.label].setdefault(category_label(qa.category), []).append(f1)
            done += 1
            if progress:
                shown = " ".join(answer.split())[:70]
                print(
                    f"[{done}/{total}] {path.name} {spec.label} cat {qa.category} F1 {f1:.2f} | "
                    f"{qa.question[:60]} -> {shown}",
                    file=sys.stderr,
                    flush=True,
                )
    rows = {
        label: {
            "f1": statistics.mean(v) if v else 0.0,
            "ms": 1000 * statistics.mean(times[label]) if times[label] else 0.0,
            "errors": errors[label],
            "categories": {c: statistics.mean(x) for c, x in per_category[label].items()},
        }
        for label, v in scores.items()
    }
    return {"questions": len(questions), "rows": rows, "unavailable": unavailable, "ingest_s": ingest_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+", help="LoCoMo / LongMemEval conversation files")
    parser.add_argument(
        "--strategies",
        default=",".join(DEFAULT_STRATEGIES),
        help="comma-separated strategies (as `logicmap eval` names them, e.g. goalmem:bm25)",
    )
    parser.add_argument("--embeddings", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--categories", help="comma-separated categories (default: all but LoCoMo 5)")
    parser.add_argument("--limit", type=int, help="at most N questions per file (in file order)")
    parser.add_argument("--data-dir", help="memory directory to keep and reuse (default: temporary)")
    parser.add_argument("--quiet", action="store_true", help="no line per answer")
    args = parser.parse_args(argv)
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        print(f"error: no such file: {missing[0]}", file=sys.stderr)
        return 2
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    categories = [c.strip() for c in (args.categories or "").split(",") if c.strip()] or None
    print(machine_line())
    print(
        f"embedder: {args.embeddings}; ingest and answers with the no-LLM (heuristic) policy; metric: LoCoMo token F1\n"
    )
    directory = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="logicmap-nollm-f1-"))
    resources = fresh_resources(directory, embeddings=args.embeddings)
    summary: dict[str, dict[str, float]] = {}
    try:
        for file in args.files:
            path = Path(file)
            table = answer_f1_table(
                path, resources, strategies, categories=categories, limit=args.limit, progress=not args.quiet
            )
            rows = table["rows"]
            summary[path.name] = {label: r["f1"] for label, r in rows.items()}
            cats = sorted({c for r in rows.values() for c in r["categories"]}, key=_category_order)
            print(f"## {path.name}: {table['questions']} questions (ingest {table['ingest_s']:.1f}s)\n")
            print_table(
                ["strategy", "F1", *cats, "ms/q", "errors"],
                [
                    [
                        f"`{label}`",
                        f"{r['f1']:.3f}",
                        *[f"{r['categories'].get(c, 0.0):.3f}" for c in cats],
                        f"{r['ms']:.0f}",
                        r["errors"],
                    ]
                    for label, r in rows.items()
                ],
            )
            for label, reason in table["unavailable"].items():
                print(f"\n`{label}` unavailable: {reason}")
            print()
        labels = list(dict.fromkeys(label for row in summary.values() for label in row))
        print("## token F1 per file\n")
        print_table(
            ["file", *labels],
            [[name, *[f"{row.get(label, 0.0):.3f}" for label in labels]] for name, row in summary.items()],
        )
    finally:
        if resources.store_ is not None:
            resources.store_.close()
        if not args.data_dir:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
