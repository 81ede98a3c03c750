"""evals/loco_learners.py: the other learners tried for the turn ranker, each scored leave-one-conversation-out."""

from __future__ import annotations

import dataclasses

import numpy as np

from logicmap.evals.loco import Question, feature_names, linear, loco
from logicmap.evals.loco_learners import LEARNERS, gathering_fit, learner_rows


def _question(conversation: str, gold_rows: list[int], signal: float, turns: int = 30) -> Question:
    """``turns`` turns; the gold turns' own similarity (the first feature) is ``signal``, the others' 0.5 plus a
    little seeded noise (the trees need more than one value to split on)."""
    rng = np.random.default_rng(len(conversation) * 31 + gold_rows[0])
    matrix = np.zeros((turns, len(feature_names())))
    matrix[:, 0] = 0.5 + rng.uniform(-0.05, 0.05, turns)
    matrix[gold_rows, 0] = signal
    ids = [f"D1:{i}" for i in range(turns)]
    labels = np.array([1 if i in gold_rows else 0 for i in range(turns)])
    gold = [ids[i] for i in gold_rows]
    return Question(conversation, 4, ids, matrix, labels, gold, np.arange(turns, dtype=np.int64) % 3)


def test_every_learner_ranks_the_gold_turns_first_when_the_similarity_tells_them() -> None:
    # In every conversation the gold turns are the most similar: each learner, fitted on the other conversations,
    # puts the held-out question's gold turns among its first ten (a learner that ignored the columns, inverted
    # them or scored the wrong question would not).
    questions = [_question(c, [2 + i, 11 + i], 0.9) for c in "abcd" for i in range(3)]
    rows = learner_rows(questions)
    assert [r[0] for r in rows] == [label for label, _ in LEARNERS]
    assert all(r[1] == "1.000" for r in rows), rows


def test_gathering_questions_get_a_fit_of_their_own() -> None:
    # The gathering questions' gold turns are the LEAST similar, the other questions' the most: the shared fit,
    # dominated by the many others, ranks the gathering golds last; a fit on the gathering questions alone ranks
    # them first, and leaves the other questions to the shared fit.
    plain = [_question(c, [4, 9], 0.9) for c in "abc" for _ in range(4)]
    gathering = [dataclasses.replace(_question(c, [5, 8], 0.1), category=1, gathering=True) for c in "abc"]
    shared = loco(plain + gathering, ["gather"], learner=linear)
    own = loco(plain + gathering, ["gather"], learner=gathering_fit(blend=False))
    assert shared[4] == own[4] == [1.0] * 12
    assert shared[1] == [0.0] * 3 and own[1] == [1.0] * 3
