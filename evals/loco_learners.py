"""Other learners for the no-LLM turn ranker, scored leave-one-conversation-out beside the shipped one.

Usage: ``python -m logicmap.evals.loco_learners FILE [--data-dir DIR]`` (FILE: LoCoMo-format conversations, e.g.
``../shared/data/locomo-dev5.json``; ``--data-dir`` shares ``evals.loco``'s ingest and feature cache).

Every row fits the shipped components (``evals.loco.CHOSEN``) on four conversations and scores the fifth, as
``evals.loco`` does; only the learner differs: the shipped logistic regression at other strengths, gradient-boosted
trees over the same columns, a fit of its own for the questions that gather their answer over the conversation
(``memory.retrieval.ranking_keys.gathers``), and a pairwise fit (gold minus non-gold turns of one question). Issue 41
(item 3) tried them to lift multi-hop recall; none was kept (docs/performance.md).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from logicmap.evals.common import machine_line, print_table
from logicmap.evals.loco import (
    CATEGORIES,
    CHOSEN,
    Learner,
    Question,
    Scorer,
    featurised,
    linear,
    loco,
    model_scorer,
    table_row,
    training_rows,
)

__all__ = ["LEARNERS", "gathering_fit", "learner_rows", "linear_at", "main", "pairwise", "trees"]


def linear_at(strength: float) -> Learner:
    """The shipped logistic regression (balanced classes, the question's context) at ``C = strength``."""
    return partial(linear, strength=strength)


def trees(rounds: int, rate: float, leaves: int) -> Learner:
    """Gradient-boosted trees (``HistGradientBoostingClassifier``, balanced classes, seeded) over the same
    columns: a ranker that can combine them non-linearly."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    def learn(questions: Sequence[Question], columns: list[int], context: bool = True) -> Scorer:
        model = HistGradientBoostingClassifier(
            max_iter=rounds, learning_rate=rate, max_leaf_nodes=leaves, class_weight="balanced", random_state=0
        ).fit(*training_rows(questions, columns, context))
        return model_scorer(model, columns, context)

    return learn


def gathering_fit(blend: bool) -> Learner:
    """The shipped fit for most questions; for a gathering question, a fit on the training gathering questions
    alone (``blend``: the sum of both fits' scores, each standardised over the question's turns; the shipped fit
    when the training questions hold none)."""

    def learn(questions: Sequence[Question], columns: list[int], context: bool = True) -> Scorer:
        shared = linear(questions, columns, context)
        gathering = [q for q in questions if q.gathering]
        own = linear(gathering, columns, context) if gathering else shared

        def score(q: Question) -> np.ndarray:
            if not q.gathering:
                return shared(q)
            return _standard(shared(q)) + _standard(own(q)) if blend else own(q)

        return score

    return learn


def _standard(scores: np.ndarray) -> np.ndarray:
    return np.asarray((scores - scores.mean()) / (scores.std() or 1.0))


def pairwise(negatives: int, hard: int, strength: float) -> Learner:
    """A pairwise logistic fit without intercept on the standardised columns: for each gold turn of a training
    question, its difference with ``negatives`` of the question's other turns (drawn at random from the ``hard``
    ones the shipped fit scores highest, or from all of them when ``hard`` is 0), each question weighing alike."""
    from sklearn.linear_model import LogisticRegression

    def learn(questions: Sequence[Question], columns: list[int], context: bool = True) -> Scorer:
        rng = np.random.default_rng(0)
        first = linear(questions, columns, context) if hard else None
        spread = np.vstack([q.matrix[:, columns] for q in questions]).std(axis=0) + 1e-9
        pairs, weights = [], []
        for q in questions:
            rows = q.matrix[:, columns] / spread
            golds, others = np.flatnonzero(q.labels == 1), np.flatnonzero(q.labels == 0)
            if not len(golds) or not len(others):
                continue
            if first is not None:
                others = others[np.argsort(-first(q)[others])][:hard]
            for gold in golds:
                drawn = others if len(others) <= negatives else rng.choice(others, negatives, replace=False)
                pairs.append(rows[gold] - rows[drawn])
                weights.append(np.full(len(drawn), 1.0 / (len(golds) * len(drawn))))
        x, w = np.vstack(pairs), np.concatenate(weights)
        model = LogisticRegression(C=strength, fit_intercept=False, max_iter=5000).fit(
            np.vstack([x, -x]), np.r_[np.ones(len(x)), np.zeros(len(x))], sample_weight=np.r_[w, w] / w.mean()
        )
        coefficients = model.coef_[0] / spread
        return lambda q: q.matrix[:, columns] @ coefficients

    return learn


#: The rows of the table: label, learner.
LEARNERS: tuple[tuple[str, Learner], ...] = (
    ("shipped: logistic regression, C 1", linear),
    *((f"logistic regression, C {c}", linear_at(c)) for c in (0.03, 0.1, 0.3, 3.0)),
    *(
        (f"gradient-boosted trees: {r} rounds, rate {a}, {n} leaves", trees(r, a, n))
        for r, a, n in ((100, 0.1, 15), (200, 0.05, 15), (300, 0.05, 31), (100, 0.1, 7))
    ),
    ("gathering questions: a fit of their own", gathering_fit(blend=False)),
    ("gathering questions: their fit's score added to the shared one", gathering_fit(blend=True)),
    *(
        (
            f"pairwise: {n} negatives per gold turn, {'the ' + str(h) + ' hardest' if h else 'any'}, C {c}",
            pairwise(n, h, c),
        )
        for n, h, c in ((50, 0, 1.0), (50, 200, 1.0), (30, 60, 1.0), (200, 0, 1.0), (50, 0, 0.1), (50, 200, 0.1))
    ),
)


def learner_rows(
    questions: Sequence[Question],
    learners: Sequence[tuple[str, Learner]] = LEARNERS,
    progress: Callable[[str], None] = lambda line: None,
) -> list[list[str]]:
    """One table row per learner: LOCO R@10 of the shipped components fitted with it, overall and per category."""
    rows = []
    for label, learner in learners:
        started = time.perf_counter()
        rows.append(table_row(label, loco(questions, list(CHOSEN), learner=learner), None))
        progress(f"  {label}: {rows[-1][1]} ({time.perf_counter() - started:.0f}s)")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="LoCoMo-format conversations (e.g. ../shared/data/locomo-dev5.json)")
    parser.add_argument("--data-dir", help="memory directory to keep and reuse, evals.loco's (default: temporary)")
    args = parser.parse_args(argv)
    path = Path(args.file)
    if not path.is_file():
        parser.error(f"no such file: {path}")
    print(machine_line())
    questions = featurised(path, args.data_dir)
    print(f"{len(questions)} questions with gold evidence (categories 1-4); components {', '.join(CHOSEN)}")
    counts = {c: sum(q.category == c for q in questions) for c in CATEGORIES}
    rows = learner_rows(questions, progress=lambda line: print(line, flush=True))
    print_table(
        [
            "learner (LOCO: fitted without the held-out conversation)",
            "R@10",
            *(f"{CATEGORIES[c]} ({counts[c]} q)" for c in CATEGORIES),
        ],
        [[r[0], r[1], *r[3:]] for r in rows],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
