"""Would dense similarity pick the answering sentence? The no-LLM answer rule (``answer_slots.slot_scores``)
against the same rule plus ``weight`` times each sentence's cosine similarity to the question (the run's
embedder, MiniLM by default), on the evidence recorded by ``bench_answers --record`` (issue 41, item 4).

Only the sentences of the ``items`` best evidence items get the dense term (the rest keep the rule's score), and
only sentences the rule already scores above 0 (the rule's abstention stays); "when" questions keep the rule.
The rest of the answer (a "when" question's date, ``answer_clause``) is ``answerers.answer_from_evidence``'s.
Both rules see the same evidence, so only the sentence choice differs; "contains" and "ceiling" are
``bench_answers``'.

Usage (the recordings of ``bench_answers --record``; ``--grid`` prints the weights and item counts tried)::

    OMP_NUM_THREADS=1 LOGICMAP_THREADS=1 nice -n 10 python -m logicmap.evals.bench.bench_dense_answers \\
        answers-dev.jsonl --grid
    python -m logicmap.evals.bench.bench_dense_answers answers-holdout.jsonl --weight 2 --items 5
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, print_table
from logicmap.memory.indexes.embeddings import cosine_matrix

__all__ = ["Prepared", "choose", "main", "prepare"]

Prepared = tuple[dict[str, Any], list[Any], list[str], list[float], list[float], bool]
"""A record, its evidence sentences, the speaker prefixes, the rule's scores, the dense similarities, and
whether its cited turns contain the gold answer (the ceiling)."""


def prepare(records: Sequence[dict[str, Any]], embeddings: Any) -> list[Prepared]:
    """Each record's sentences, rule scores and dense similarities to its question (one batch per record)."""
    from logicmap.agents.answerers import evidence_sentences
    from logicmap.agents.responder import EvidenceText
    from logicmap.evals.bench.bench_answers import contains_answer, turn_answer_text
    from logicmap.memory.language.timeparse import parse_timestamp
    from logicmap.memory.retrieval.answer_slots import SlotCandidate, slot_scores

    prepared: list[Prepared] = []
    for r in records:
        evidence = [EvidenceText(e["id"], e["text"], e["time"]) for e in r["evidence"]]
        sentences, speakers = evidence_sentences(evidence)
        rule = slot_scores(
            r["question"], [SlotCandidate(s.text, s.rank, s.context) for s in sentences], ignore=speakers
        )
        vectors = embeddings.embed_documents([r["question"], *(s.text for s in sentences)])
        dense = cosine_matrix(vectors[:1], vectors[1:])[0].tolist() if sentences else []
        ceiling_text = "\n".join(turn_answer_text(t["text"], parse_timestamp(t["time"])) for t in r["cited"])
        prepared.append((r, sentences, speakers, rule, dense, contains_answer(ceiling_text, r["gold"])))
    return prepared


def choose(
    question: str, sentences: Sequence[Any], rule: Sequence[float], dense: Sequence[float], *, weight: float, items: int
) -> int | None:
    """The chosen sentence: the rule's score plus ``weight`` times the dense similarity for the sentences of
    the first ``items`` evidence items that the rule scores above 0 ("when" questions: the rule alone)."""
    from logicmap.memory.retrieval.answer_slots import question_focus

    if question_focus(question) == "time":
        weight = 0.0
    total = [
        score + (weight * sim if s.rank < items and score > 0 else 0.0)
        for s, score, sim in zip(sentences, rule, dense, strict=True)
    ]
    best = max(range(len(total)), key=lambda i: (total[i], -i), default=None)
    return best if best is not None and total[best] > 0 else None


def _answer(question: str, sentences: Sequence[Any], speakers: Sequence[str], best: int | None) -> str:
    """``answerers.answer_from_evidence``'s text for the chosen sentence."""
    from logicmap.agents.answerers import answer_with_sentence

    return answer_with_sentence(question, sentences[best] if best is not None else None, speakers).answer


def _rows(prepared: Sequence[Prepared], weight: float, items: int) -> list[list[Any]]:
    from logicmap.evals.bench.bench_answers import contains_answer
    from logicmap.evals.metrics import category_label, token_f1

    cells: dict[tuple[str, str], list[float]] = {}
    for r, sentences, speakers, rule, dense, ceiling in prepared:
        question, gold = r["question"], r["gold"]
        before = _answer(question, sentences, speakers, choose(question, sentences, rule, dense, weight=0.0, items=0))
        best = choose(question, sentences, rule, dense, weight=weight, items=items)
        after = _answer(question, sentences, speakers, best)
        values = [1.0, float(ceiling), float(contains_answer(before, gold)), float(contains_answer(after, gold))]
        values += [token_f1(before, gold, r["category"]), token_f1(after, gold, r["category"])]
        for file in (r["file"], "pooled"):
            cell = cells.setdefault((file, category_label(r["category"])), [0.0] * 6)
            for i, value in enumerate(values):
                cell[i] += value
    return [
        [file, label, int(c[0]), int(c[1]), int(c[2]), int(c[3]), f"{c[4] / c[0]:.3f}", f"{c[5] / c[0]:.3f}"]
        for (file, label), c in sorted(cells.items())
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="bench_answers --record files")
    parser.add_argument("--weight", type=float, default=2.0, help="the dense similarity's weight (default 2)")
    parser.add_argument("--items", type=int, default=5, help="evidence items whose sentences get it (default 5)")
    parser.add_argument("--grid", action="store_true", help="single-hop and temporal for every weight and items")
    parser.add_argument("--embeddings", default="minilm", choices=["minilm", "hashing"])
    args = parser.parse_args(argv)
    records: list[dict[str, Any]] = []
    for file in args.files:
        try:
            records += [json.loads(line) for line in Path(file).read_text().splitlines() if line.strip()]
        except (OSError, json.JSONDecodeError) as exc:
            print(f"error: {file} is not a bench_answers --record file: {exc}", file=sys.stderr)
            return 2
    started = time.perf_counter()
    resources = fresh_resources(Path(tempfile.mkdtemp(prefix="logicmap-dense-")), embeddings=args.embeddings)
    prepared = prepare([r for r in records if r["category"] in (1, 2, 3, 4)], resources.embeddings)
    header = [
        "file",
        "category",
        "questions",
        "ceiling",
        "contains, rule",
        "contains, rule + dense",
        "F1 rule",
        "F1 rule + dense",
    ]
    if args.grid:
        rows = []
        for items in (1, 2, 3, 5, 99):
            for weight in (0.5, 1.0, 2.0, 4.0, 8.0):
                pooled = [row for row in _rows(prepared, weight, items) if row[0] == "pooled"]
                rows += [[f"{weight} x dense, {items} items", *row[1:]] for row in pooled]
        print_table(header, rows)
    else:
        print_table(header, _rows(prepared, args.weight, args.items))
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
