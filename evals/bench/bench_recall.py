"""Evidence recall at 5, 10 and 20 turns: the graph strategies' no-LLM policies against plain dense and BM25 top-k.

One run, one memory per file (heuristic ingest, real MiniLM embedder by default), every strategy on every
question with gold evidence. Usage: ``python -m evals.bench.bench_recall [FILE ...]`` (default: every conversation in ``data/``).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Literal, cast

from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["ABLATION", "GRAPH_STRATEGIES", "TARGET_MARGIN", "ablation_tables", "main", "recall_table"]

DATASETS = sorted((Path(__file__).resolve().parents[2] / "data").glob("*.json"), key=lambda p: p.stat().st_size)
GRAPH_STRATEGIES = [
    "compass",
    "rerank",
    "compass:traversal",
    "compass:similarity",
    "goalmem:bm25",
    "goalmem:dense",
    "goalmem:events",
    "real",
    "reconstruct",
]
# Issue 9, point 5: at a 10-turn budget the graph must beat the better plain baseline by this much.
TARGET_MARGIN = 0.10
TARGET_BUDGET = 10
# Issue 21: what the graph traversal adds over the learned ranker alone, and the explorers' traversal without it.
ABLATION = {"ranker alone": "compass", "traversal alone": "compass:similarity", "both": "compass:traversal"}


def _category_order(label: str) -> tuple[int, str]:
    head = label.split(" ", 1)[0]
    return (int(head) if head.isdigit() else 100, label)


def _cited(
    label: str, fn: Any, question: str, namespace: str, resources: Any, k: int, options: dict[str, Any]
) -> list[str]:
    if label in ("dense", "bm25"):
        from logicmap.graphs.strategies.baselines import answer_top_k

        result = answer_top_k(
            question,
            namespace,
            method=cast(Literal["dense", "bm25"], label),
            resources=resources,
            policy="heuristic",
            k=k,
        )
    else:
        result = fn(question, namespace, resources=resources, policy="heuristic", **options)
    return result.cited_turns(k)


def recall_table(path: Path, resources: Any, strategies: list[str], budgets: list[int]) -> dict[str, Any]:
    """Recall per strategy (and per category at the target budget) for every question of ``path`` with gold evidence."""
    from logicmap.evals.metrics import category_label, evidence_recall, normalize_evidence_ids
    from logicmap.evals.runner import eval_namespace, select_questions
    from logicmap.evals.specs import resolve_strategies
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations

    conversations = load_conversations(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    available, unavailable = resolve_strategies(["dense", "bm25", *strategies])
    questions = [(c, qa) for c, qa in select_questions(conversations) if normalize_evidence_ids(qa.evidence)]
    namespaces: dict[str, str] = {}
    started = time.perf_counter()
    for conv_id in dict.fromkeys(c.conversation_id for c, _ in questions):
        ns = eval_namespace(digest, "heuristic", resources.settings.embedding_provider, conv_id)
        conversation = next(c for c in conversations if c.conversation_id == conv_id)
        ingest_conversation(conversation, ns, resources=resources, policy="heuristic")
        namespaces[conv_id] = ns
    ingest_s = time.perf_counter() - started
    k = max(budgets)
    rows: dict[str, dict[str, Any]] = {}
    for spec, fn in available:
        recalls: dict[int, list[float]] = {b: [] for b in budgets}
        per_category: dict[str, list[float]] = {}
        cited_counts, times, errors = [], [], 0
        for conv, qa in questions:
            gold = normalize_evidence_ids(qa.evidence)
            t0 = time.perf_counter()
            try:
                cited = _cited(
                    spec.label, fn, qa.question, namespaces[conv.conversation_id], resources, k, spec.options
                )
            except Exception:  # a failing question cites nothing; the count is printed
                cited, errors = [], errors + 1
            times.append(time.perf_counter() - t0)
            cited_counts.append(len(cited))
            for b in budgets:
                recalls[b].append(evidence_recall(cited, gold, b) or 0.0)
            per_category.setdefault(category_label(qa.category), []).append(
                evidence_recall(cited, gold, TARGET_BUDGET) or 0.0
            )
        rows[spec.label] = {
            "recall": {b: statistics.mean(v) for b, v in recalls.items()},
            "categories": {c: statistics.mean(v) for c, v in per_category.items()},
            "category_counts": {c: len(v) for c, v in per_category.items()},
            "cited": statistics.mean(cited_counts),
            "ms": 1000 * statistics.mean(times),
            "errors": errors,
        }
    return {"questions": len(questions), "rows": rows, "unavailable": unavailable, "ingest_s": ingest_s}


def _baseline(rows: dict[str, Any], category: str | None = None) -> float:
    """The better of dense and BM25 top-k at the target budget (overall or in one category)."""
    best: float
    if category is None:
        best = max(rows[b]["recall"][TARGET_BUDGET] for b in ("dense", "bm25"))
    else:
        best = max(rows[b]["categories"].get(category, 0.0) for b in ("dense", "bm25"))
    return best


def ablation_tables(tables: dict[str, dict[str, Any]]) -> None:
    """R@10 of the ranker alone, the traversal alone and both, with +/- over the better of dense and BM25:
    per conversation, then per category (questions of every file pooled)."""
    columns = {name: label for name, label in ABLATION.items() if all(label in t["rows"] for t in tables.values())}
    if not columns or not tables:
        return
    print(f"## Ablation: R@{TARGET_BUDGET}, +/- over the better of dense and BM25\n")
    lines: list[list[Any]] = []
    gains: dict[str, list[float]] = {name: [] for name in columns}
    for file, table in tables.items():
        rows, best = table["rows"], _baseline(table["rows"])
        cells = []
        for name, label in columns.items():
            value = rows[label]["recall"][TARGET_BUDGET]
            gains[name].append(value - best)
            cells.append(f"{value:.3f} ({value - best:+.3f})")
        lines.append([file, table["questions"], f"{best:.3f}", *cells])
    lines.append(["mean", "", "", *[f"({statistics.mean(g):+.3f})" for g in gains.values()]])
    print_table(["conversation", "questions", "better baseline", *columns], lines)
    categories = sorted({c for t in tables.values() for c in t["rows"]["dense"]["categories"]}, key=_category_order)
    print()
    lines = []
    for category in categories:
        pooled: dict[str, list[float]] = {name: [] for name in ["baseline", *columns]}
        weights = []
        for table in tables.values():
            rows = table["rows"]
            n = rows["dense"]["category_counts"].get(category, 0)
            if not n:
                continue
            weights.append(n)
            pooled["baseline"].append(_baseline(rows, category))
            for name, label in columns.items():
                pooled[name].append(rows[label]["categories"].get(category, 0.0))
        total = sum(weights)
        mean = {k: sum(v * w for v, w in zip(vals, weights)) / total for k, vals in pooled.items()}
        lines.append(
            [
                category,
                total,
                f"{mean['baseline']:.3f}",
                *[f"{mean[name]:.3f} ({mean[name] - mean['baseline']:+.3f})" for name in columns],
            ]
        )
    print_table(["category", "questions", "better baseline (per file)", *columns], lines)
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "files",
        nargs="*",
        default=[str(p) for p in DATASETS],
        help="LoCoMo / LongMemEval files (default: every conversation in data/, smallest first)",
    )
    parser.add_argument("--budgets", default="5,10,20")
    parser.add_argument("--embeddings", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--strategies", default=",".join(GRAPH_STRATEGIES), help="graph strategies to compare")
    parser.add_argument("--data-dir", help="memory directory to keep and reuse (default: temporary)")
    args = parser.parse_args(argv)
    budgets = sorted(int(b) for b in args.budgets.split(","))
    strategies = [s for s in args.strategies.split(",") if s]
    print(machine_line())
    print(
        f"embedder: {args.embeddings}; ingest and answering with the no-LLM (heuristic) policy; "
        f"baselines: top-k turns with k = the budget\n"
    )
    directory = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="logicmap-recall-"))
    resources = fresh_resources(directory, embeddings=args.embeddings)
    tables: dict[str, dict[str, Any]] = {}
    try:
        for file in args.files:
            path = Path(file)
            table = recall_table(path, resources, strategies, budgets)
            tables[path.name] = table
            rows = table["rows"]
            print(
                f"## {path.name}: {table['questions']} questions with gold evidence (ingest {table['ingest_s']:.1f}s)\n"
            )
            print_table(
                [
                    "strategy",
                    *[f"R@{b}" for b in budgets],
                    f"distinct turns cited (<= {max(budgets)})",
                    "ms/q",
                    "errors",
                ],
                [
                    [
                        f"`{label}`",
                        *[f"{r['recall'][b]:.3f}" for b in budgets],
                        f"{r['cited']:.1f}",
                        f"{r['ms']:.0f}",
                        r["errors"],
                    ]
                    for label, r in rows.items()
                ],
            )
            for label, reason in table["unavailable"].items():
                print(f"\n`{label}` unavailable: {reason}")
            categories = sorted({c for r in rows.values() for c in r["categories"]}, key=_category_order)
            print(f"\nR@{TARGET_BUDGET} per category:\n")
            print_table(
                ["strategy", *categories],
                [
                    [f"`{label}`", *[f"{r['categories'].get(c, 0.0):.3f}" for c in categories]]
                    for label, r in rows.items()
                ],
            )
            print(f"\nR@{TARGET_BUDGET} per category, +/- over the better of dense and BM25 in that category:\n")
            print_table(
                ["strategy", *categories],
                [
                    [f"`{label}`", *[f"{r['categories'].get(c, 0.0) - _baseline(rows, c):+.3f}" for c in categories]]
                    for label, r in rows.items()
                    if label not in ("dense", "bm25")
                ],
            )
            if TARGET_BUDGET in budgets:
                best = max(rows["dense"]["recall"][TARGET_BUDGET], rows["bm25"]["recall"][TARGET_BUDGET])
                print(
                    f"\ntarget: R@{TARGET_BUDGET} >= best baseline ({best:.3f}) + {TARGET_MARGIN:.2f} = {best + TARGET_MARGIN:.3f}"
                )
                for label, r in rows.items():
                    if label in ("dense", "bm25"):
                        continue
                    delta = r["recall"][TARGET_BUDGET] - best
                    met = delta >= TARGET_MARGIN - 1e-9
                    print(f"  {label}: {r['recall'][TARGET_BUDGET]:.3f} ({delta:+.3f}) {'MET' if met else 'NOT MET'}")
            print()
        ablation_tables(tables)
    finally:
        if resources.store_ is not None:
            resources.store_.close()
        if not args.data_dir:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
