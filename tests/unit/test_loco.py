"""evals/loco.py: leave-one-conversation-out recall of the reranker, its ablation table and the weights it writes."""

from __future__ import annotations

import json
import runpy

import numpy as np

from logicmap.evals.loco import Question, design, diversified, loco, main
from logicmap.memory.retrieval.ranking import FEATURES
from tests.store_seam import held_by_a_store


def _question(conversation: str, gold_row: int, signal: float, turns: int = 30) -> Question:
    """``turns`` turns; the gold turn's own similarity (the first feature) is ``signal``, the others' 0.5."""
    from logicmap.evals.loco import feature_names

    matrix = np.zeros((turns, len(feature_names())))
    matrix[:, 0] = 0.5
    matrix[gold_row, 0] = signal
    ids = [f"D1:{i}" for i in range(turns)]
    labels = np.array([1 if i == gold_row else 0 for i in range(turns)])
    return Question(conversation, 4, ids, matrix, labels, [ids[gold_row]], np.arange(turns, dtype=np.int64) % 3)


def test_each_conversation_is_scored_by_a_model_fitted_without_it() -> None:
    # In a and b the gold turn is the most similar one, in c the least: c is scored by a model fitted on a and b
    # only, which puts its gold turn last (recall at 10 of 30 turns: 0); a and b keep theirs on top.
    questions = [_question("a", 3, 0.9), _question("a", 4, 0.9), _question("b", 5, 0.9), _question("c", 7, 0.1)]
    results = loco(questions, [])
    assert results[4] == [1.0, 1.0, 1.0, 0.0]
    assert diversified(np.arange(6.0)[::-1], np.array([0, 0, 0, 1, 1, 2]), 0.0, 3) == [0, 1, 2]


def _listing(conversation: str, golds: int, level: float, turns: int = 30) -> Question:
    """A multi-hop-like question: its last ``golds`` turns are gold, 0.2 more similar (the first feature) than the
    others, whose similarity is ``level``."""
    from logicmap.evals.loco import feature_names

    matrix = np.zeros((turns, len(feature_names())))
    matrix[:, 0] = level
    matrix[turns - golds :, 0] = level + 0.2
    ids = [f"D1:{i}" for i in range(turns)]
    labels = np.array([1 if i >= turns - golds else 0 for i in range(turns)])
    return Question(conversation, 1, ids, matrix, labels, ids[turns - golds :], np.zeros(turns, dtype=np.int64))


def test_the_fit_sees_each_question_s_context() -> None:
    # Within every question the gold turns are the more similar ones, but across questions the ones whose turns
    # are all similar (level 1.0) have one gold turn in 30 and the others (level 0.0) ten: pooled turn by turn,
    # similarity predicts *fewer* gold turns and a fit on the turns alone ranks every gold turn last. With the
    # question's best similarity beside each turn (``design``), the fit ranks them first.
    questions = [_listing(c, 10, 0.0) for c in "abc"] + [_listing(c, 1, 1.0) for c in "abc"]
    assert loco(questions, [], context=False)[1] == [0.0] * 6
    assert loco(questions, [])[1] == [1.0] * 6
    matrix = questions[0].matrix
    assert design(matrix).shape == (30, 2 * matrix.shape[1]) and np.all(design(matrix)[:, matrix.shape[1]] == 0.2)


def test_the_command_prints_the_ablation_and_writes_weights(tmp_path, sample_path, capsys) -> None:
    samples = json.loads(sample_path.read_text())
    samples = samples if isinstance(samples, list) else [samples]
    both = []
    for suffix in ("x", "y"):
        for sample in samples:
            copy = dict(sample)
            copy["sample_id"] = f"{sample.get('sample_id', 'conv')}-{suffix}"
            both.append(copy)
    path = tmp_path / "two.json"
    path.write_text(json.dumps(both))
    out = tmp_path / "weights.py"
    assert (
        main([str(path), "--embeddings", "hashing", "--data-dir", str(tmp_path / "m"), "--write-weights", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "| refit on the base features |" in printed and "| chosen: " in printed and "without" in printed
    weights = runpy.run_path(str(out))
    assert set(weights["COEFFICIENTS"]) == set(FEATURES) and weights["SESSION_DIVERSITY"] == 0.0
    assert set(weights["CONTEXT"]) == set(FEATURES) and "| chosen, fitted without question context" in printed
    assert not held_by_a_store(tmp_path / "m")  # the command closed the store it opened


def _spread(conversation: str, gathering: bool, turns: int = 30) -> Question:
    """A gathering question's gold turns are its best turn (session 0) and a turn of session 1 that nine other
    turns of session 0 outscore (the first feature); a question that does not gather has its ten gold turns, the
    best ones, all in session 0, and ten turns of session 1 just below them."""
    from logicmap.evals.loco import feature_names

    matrix = np.zeros((turns, len(feature_names())))
    sessions = np.array([0] * 15 + [1] * 15, dtype=np.int64)
    if gathering:
        matrix[:10, 0], matrix[20, 0] = 0.8, 0.6
        matrix[0, 0] = 0.9
        gold_rows = [0, 20]
    else:
        matrix[:10, 0], matrix[15:25, 0] = 0.9, 0.85
        gold_rows = list(range(10))
    ids = [f"D1:{i}" for i in range(turns)]
    labels = np.array([1 if i in gold_rows else 0 for i in range(turns)])
    return Question(conversation, 1, ids, matrix, labels, [ids[i] for i in gold_rows], sessions, gathering)


def test_gathering_questions_get_their_own_diversity_weight_chosen_without_the_held_out_conversation() -> None:
    # Issue 41, item 3: by score alone a gathering question's top ten are session 0 and miss its session-1 gold
    # turn (recall 0.5). The ``gather`` component's weight, chosen on the training conversations' gathering
    # questions only, takes a turn of session 1 for them, and leaves the questions that do not gather, whose gold
    # turns all sit in one session, ranked by score (recall 1.0). Diversity for every question (``diverse``)
    # cannot serve both kinds.
    questions = [_spread(c, g) for c in "abc" for g in (True, False)]
    plain = loco(questions, [])[1]
    assert plain == [0.5, 1.0] * 3
    assert loco(questions, ["gather"])[1] == [1.0] * 6
    assert loco(questions, ["diverse"])[1] != [1.0] * 6
