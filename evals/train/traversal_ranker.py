"""Fit the second hop's ranker (``memory.retrieval.traversal``) and report what the traversal adds over the ranker alone.

Usage: ``python -m evals.train.traversal_ranker [FILE ...] [--out memory/retrieval/traversal_weights.py]``
(default: the five development conversations the first-hop ranker was fitted on; never a reserved held-out
file, see ``data/README.md``). Each file is ingested with the no-LLM policy and the MiniLM embedder. Leave one
conversation out: the first-hop ranker and the second-hop ranker are both fitted on the other files (the
second hop starting from that first hop's seeds), and evidence recall at 10 turns of both is printed per file
and per category. Then the second hop is fitted on every file, starting from the shipped first-hop ranker,
and written.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from logicmap.evals.common import fresh_resources, machine_line, print_table
from logicmap.evals.train.turn_ranker import BUDGET

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

    from logicmap.graphs.runtime.resources import Resources
    from logicmap.memory.store import NamespaceSnapshot

__all__ = ["DEVELOPMENT_FILES", "main"]

DATA = Path(__file__).resolve().parents[2] / "data"
# The conversations the rankers may be fitted and chosen on (data/README.md: "how they were used").
DEVELOPMENT_FILES = [
    DATA / f"{name}_conversation.json" for name in ("sample", "long", "holdout", "holdout2", "holdout3")
]
WEIGHTS = Path(__file__).resolve().parents[2] / "memory" / "retrieval" / "traversal_weights.py"


class LabelledQuestion(TypedDict):
    """One question with gold evidence, as ``questions`` returns it."""

    snapshot: NamespaceSnapshot
    question: str
    ids: list[str]
    x: np.ndarray
    shipped: np.ndarray
    y: np.ndarray
    gold: list[str]
    category: int | str | None


def questions(path: Path, resources: Resources) -> list[LabelledQuestion]:
    """Per question with gold evidence: the snapshot, the question, first-hop features, labels, gold, category."""
    import hashlib

    from logicmap.evals.metrics import normalize_evidence_ids
    from logicmap.evals.runner import eval_namespace, select_questions
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations
    from logicmap.memory.indexes.embeddings import normalize
    from logicmap.memory.language.text import query_readings
    from logicmap.memory.retrieval.ranking import BASE_FEATURES, default_ranker, turn_features

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    out: list[LabelledQuestion] = []
    for conversation in load_conversations(path):
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
            features = turn_features(snapshot, qa.question, readings, BASE_FEATURES)
            shipped = default_ranker().scores(snapshot, qa.question, readings)
            labels = np.array([1 if t in gold else 0 for t in features.turn_ids])
            out.append(
                {
                    "snapshot": snapshot,
                    "question": qa.question,
                    "ids": features.turn_ids,
                    "x": features.matrix,
                    "shipped": np.array([shipped[t] for t in features.turn_ids]),
                    "y": labels,
                    "gold": gold,
                    "category": qa.category,
                }
            )
    return out


def _fit(x: np.ndarray, y: np.ndarray) -> LogisticRegression:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, max_iter=5000, class_weight="balanced").fit(x, y)


def _with_hops(rows: list[LabelledQuestion], coefficients: np.ndarray, intercept: float) -> list[np.ndarray]:
    """Each question's first-hop features next to its hop features, the seeds taken from the given first hop."""
    from logicmap.memory.retrieval.traversal import hop_features

    return [
        np.column_stack([r["x"], hop_features(r["snapshot"], r["question"], r["x"] @ coefficients + intercept)])
        for r in rows
    ]


def _recalls(rows: list[LabelledQuestion], scores: list[np.ndarray]) -> list[float]:
    from logicmap.evals.metrics import evidence_recall

    return [
        evidence_recall([r["ids"][i] for i in np.argsort(-s, kind="stable")], r["gold"], BUDGET) or 0.0
        for r, s in zip(rows, scores)
    ]


def _write(model: LogisticRegression, files: list[Path], out: Path, report: list[str]) -> None:
    from logicmap.memory.retrieval.ranking import BASE_FEATURES
    from logicmap.memory.retrieval.traversal import HOP_FEATURES

    lines = [
        '"""Weights of the second hop of the no-LLM search (``memory.retrieval.traversal``), written by',
        "``python -m logicmap.evals.train.traversal_ranker``.",
        "",
        f"Fitted on {date.today().isoformat()} (logistic regression, balanced classes, C=1) on: "
        + ", ".join(p.name for p in files)
        + ", the seeds taken from the shipped first-hop ranker.",
        "Leave-one-conversation-out evidence recall at 10 turns (ranker alone -> ranker + traversal) when they were written:",
        *[f"    {line}" for line in report],
        '"""',
        "",
        "COEFFICIENTS = {",
        *[f"    {name!r}: {float(c):.6f}," for name, c in zip((*BASE_FEATURES, *HOP_FEATURES), model.coef_[0])],
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
        default=[str(p) for p in DEVELOPMENT_FILES],
        help="LoCoMo files (default: the five development conversations)",
    )
    parser.add_argument("--out", default=str(WEIGHTS), help="weights module to write ('-' to write nothing)")
    parser.add_argument("--embeddings", default="minilm", choices=["minilm", "openai", "hashing"])
    parser.add_argument("--data-dir", help="memory directory to keep and reuse (default: temporary)")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.files]
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="logicmap-traversal-") as tmp:
        resources = fresh_resources(Path(args.data_dir or tmp), embeddings=args.embeddings)
        data: dict[Path, list[LabelledQuestion]] = {}
        for i, path in enumerate(files, 1):
            started = time.perf_counter()
            data[path] = questions(path, resources)
            print(
                f"[{i}/{len(files)}] {path.name}: {len(data[path])} questions, {time.perf_counter() - started:.1f}s",
                flush=True,
            )
        table, report = [], []
        by_category: dict[int | str | None, list[tuple[float, float]]] = {}
        for path in files:
            others = [r for p in files if p != path for r in data[p]]
            if not others:
                continue
            first = _fit(np.vstack([r["x"] for r in others]), np.concatenate([r["y"] for r in others]))
            coef, icpt = first.coef_[0], float(first.intercept_[0])
            second = _fit(np.vstack(_with_hops(others, coef, icpt)), np.concatenate([r["y"] for r in others]))
            held = data[path]
            alone = _recalls(held, [r["x"] @ coef + icpt for r in held])
            both = _recalls(held, [second.decision_function(m) for m in _with_hops(held, coef, icpt)])
            for r, a, b in zip(held, alone, both):
                by_category.setdefault(r["category"], []).append((a, b))
            a, b = float(np.mean(alone)), float(np.mean(both))
            table.append([path.name, len(held), f"{a:.3f}", f"{b:.3f}", f"{b - a:+.3f}"])
            report.append(f"{path.name}: {a:.3f} -> {b:.3f} ({b - a:+.3f})")
        print_table(["file", "questions", "ranker alone R@10", "ranker + traversal R@10", "gain"], table)
        print()
        print_table(
            ["category", "questions", "ranker alone", "ranker + traversal"],
            [
                [c, len(v), f"{np.mean([a for a, _ in v]):.3f}", f"{np.mean([b for _, b in v]):.3f}"]
                for c, v in sorted(by_category.items())
            ],
        )
        if args.out != "-":
            from logicmap.memory.retrieval.traversal import hop_features

            rows = [r for p in files for r in data[p]]
            model = _fit(
                np.vstack(
                    [np.column_stack([r["x"], hop_features(r["snapshot"], r["question"], r["shipped"])]) for r in rows]
                ),
                np.concatenate([r["y"] for r in rows]),
            )
            _write(model, files, Path(args.out), report)
            print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
