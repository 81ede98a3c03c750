"""Fit the graph-feature reranker (``memory.retrieval.ranking``) on LoCoMo-format conversations and report how it carries over.

Usage: ``python -m logicmap.evals.train.turn_ranker [FILE ...] [--out memory/retrieval/turn_ranker_weights.py]``
(default: every conversation in ``data/`` except the ones reserved for
measurement, ``RESERVED``). Each file is ingested with the no-LLM policy and the MiniLM
embedder; every turn of a question with gold evidence is one example (gold turn or not). The script prints,
for each file, evidence recall at 10 turns of plain dense retrieval, of the same model fitted without the graph
features (``memory.retrieval.ranking.GRAPH_FEATURES``) and of the reranker, both fitted on the *other* files
(leave-one-conversation-out), their means, then fits on all files and writes the weights module.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from logicmap.evals.common import machine_line, open_resources, print_table

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

    from logicmap.graphs.runtime.resources import Resources

#: One question: turn ids, features, labels, gold ids, and dense similarities.
Example = tuple[list[str], np.ndarray, np.ndarray, list[str], np.ndarray]

__all__ = ["main"]

#: Conversations reserved for measurement only (data/README.md): never a default for fitting.
RESERVED = frozenset({"holdout4_conversation.json", "holdout5_conversation.json", "holdout6_conversation.json"})
DATASETS = sorted(
    (p for p in (Path(__file__).resolve().parents[2] / "data").glob("*.json") if p.name not in RESERVED),
    key=lambda p: p.stat().st_size,
)
WEIGHTS = Path(__file__).resolve().parents[2] / "memory" / "retrieval" / "turn_ranker_weights.py"
BUDGET = 10


def examples(path: Path, resources: Resources) -> list[Example]:
    """Per question with gold evidence: turn ids, features, labels, gold ids, and dense similarities."""
    from logicmap.evals.metrics import normalize_evidence_ids
    from logicmap.evals.runner import eval_namespace, select_questions
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations
    from logicmap.memory.indexes.embeddings import normalize
    from logicmap.memory.language.text import query_readings
    from logicmap.memory.retrieval.ranking import turn_features

    conversations = load_conversations(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    out: list[Example] = []
    for conversation in conversations:
        namespace = eval_namespace(
            digest, "heuristic", resources.settings.embedding_provider, conversation.conversation_id
        )
        ingest_conversation(conversation, namespace, resources=resources, policy="heuristic")
        snapshot = resources.store.snapshot(namespace)
        for _, qa in select_questions([conversation]):
            gold = normalize_evidence_ids(qa.evidence)
            if not gold:
                continue
            readings = normalize(
                np.asarray(resources.embeddings.embed_documents(query_readings(qa.question)), dtype=np.float32)
            )
            features = turn_features(snapshot, qa.question, readings)
            labels = np.array([1 if t in gold else 0 for t in features.turn_ids])
            out.append((features.turn_ids, features.matrix, labels, gold, features.matrix[:, 2]))
    return out


def recall_at(rows: list[Example], score: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
    from logicmap.evals.metrics import evidence_recall

    values = []
    for ids, matrix, _, gold, dense in rows:
        s = score(matrix, dense)
        ranked = [ids[i] for i in np.argsort(-s, kind="stable")]
        values.append(evidence_recall(ranked, gold, BUDGET) or 0.0)
    return float(np.mean(values)) if values else float("nan")


def fit(rows: list[Example], columns: list[int] | None = None) -> LogisticRegression:
    """A logistic regression on ``rows``' features (only ``columns`` of them, when given)."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([m for _, m, _, _, _ in rows])
    y = np.concatenate([labels for _, _, labels, _, _ in rows])
    return LogisticRegression(C=1.0, max_iter=5000, class_weight="balanced").fit(
        x if columns is None else x[:, columns], y
    )


def plain_columns() -> list[int]:
    """The feature columns a plain turn index has too: every feature but ``GRAPH_FEATURES``."""
    from logicmap.memory.retrieval.ranking import FEATURES, GRAPH_FEATURES

    return [i for i, name in enumerate(FEATURES) if name not in GRAPH_FEATURES]


def leave_one_out(data: dict[Path, list[Example]], path: Path) -> tuple[float, float, float]:
    """R@10 on ``path`` of dense retrieval, of the ranker without graph features and of the reranker, both
    fitted on the other files (nan without other files)."""
    others = [r for p, rows in data.items() if p != path for r in rows]
    dense = recall_at(data[path], lambda m, d: d)
    if not others:
        return dense, float("nan"), float("nan")
    plain, model = plain_columns(), fit(others)
    without = fit(others, plain)
    learned = recall_at(data[path], lambda m, d: model.decision_function(m))
    flat = recall_at(data[path], lambda m, d: without.decision_function(m[:, plain]))
    return dense, flat, learned


def mean_rows(results: dict[Path, tuple[float, float, float]]) -> list[list[object]]:
    """Mean rows: over every file, and over the files dense retrieval leaves room on (R@10 < 1)."""
    rows: list[list[object]] = []
    groups = [
        ("mean, every file", list(results)),
        ("mean, files where dense R@10 < 1", [p for p, r in results.items() if r[0] < 1.0 - 1e-9]),
    ]
    for label, paths in groups:
        if not paths:
            continue
        dense, flat, learned = (float(np.mean([results[p][i] for p in paths])) for i in range(3))
        rows.append(
            [f"{label} ({len(paths)})", "", f"{dense:.3f}", f"{flat:.3f}", f"{learned:.3f}", f"{learned - dense:+.3f}"]
        )
    return rows


def write_weights(model: LogisticRegression, files: list[Path], out: Path, report: list[str]) -> None:
    from logicmap.memory.retrieval.ranking import FEATURES

    lines = [
        '"""Weights of the graph-feature reranker (``memory.retrieval.ranking``), written by ``python -m evals.train.turn_ranker``.',
        "",
        f"Fitted on {date.today().isoformat()} (logistic regression, balanced classes, C=1) on: "
        + ", ".join(p.name for p in files)
        + ".",
        "Leave-one-conversation-out evidence recall at 10 turns when they were written:",
        *[f"    {line}" for line in report],
        '"""',
        "",
        "COEFFICIENTS = {",
        *[f"    {name!r}: {float(c):.6f}," for name, c in zip(FEATURES, model.coef_[0])],
        "}",
        f"INTERCEPT = {float(model.intercept_[0]):.6f}",
        "",
    ]
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "files",
        nargs="*",
        default=[str(p) for p in DATASETS],
        help="LoCoMo / LongMemEval files (default: data/ without the reserved held-out files)",
    )
    parser.add_argument(
        "--out",
        default="-",
        help="weights module to write (default '-': nothing; the shipped "
        f"weights, {WEIGHTS.name}, are fitted on public conversations by evals/loco.py)",
    )
    parser.add_argument(
        "--embeddings",
        default="minilm",
        choices=["minilm", "openai", "hashing"],
        help="the embedder the ranker will run with (its model and endpoint from the LOGICMAP_* settings)",
    )
    parser.add_argument("--data-dir", help="memory directory to keep and reuse (default: temporary)")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.files]
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="logicmap-ranker-") as tmp:
        data = {}
        with open_resources(Path(args.data_dir or tmp), embeddings=args.embeddings) as resources:
            for i, path in enumerate(files, 1):
                started = time.perf_counter()
                data[path] = examples(path, resources)
                print(
                    f"[{i}/{len(files)}] {path.name}: {len(data[path])} questions, "
                    f"{time.perf_counter() - started:.1f}s",
                    flush=True,
                )
        rows, report, results = [], [], {}
        for path in files:
            dense, flat, learned = results[path] = leave_one_out(data, path)
            rows.append(
                [path.name, len(data[path]), f"{dense:.3f}", f"{flat:.3f}", f"{learned:.3f}", f"{learned - dense:+.3f}"]
            )
            report.append(f"{path.name}: dense {dense:.3f}, ranker {learned:.3f} ({learned - dense:+.3f})")
        print_table(
            [
                "file",
                "questions",
                "dense R@10",
                "ranker without graph features R@10",
                "graph-feature reranker R@10 (both fitted on the other files)",
                "reranker gain",
            ],
            rows + mean_rows(results),
        )
        if args.out != "-":
            model = fit([r for p in files for r in data[p]])
            write_weights(model, files, Path(args.out), report)
            print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
