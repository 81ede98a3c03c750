"""Metrics: LoCoMo token F1 normalization and per-category rules, BLEU-1, evidence recall, the LLM judge."""

from __future__ import annotations

import math

import pytest

from logicmap.agents.testing import ScriptedChatModel
from logicmap.evals.metrics import (
    bleu1,
    category_label,
    evidence_recall,
    f1_score,
    llm_judge,
    normalize_answer,
    normalize_evidence_ids,
    stem_tokens,
    token_f1,
)


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("ties", "tie"),
        ("running", "run"),
        ("hopping", "hop"),
        ("filing", "file"),
        ("agreed", "agre"),
        ("dying", "die"),
        ("happiness", "happi"),
        ("relational", "relat"),
        ("conditional", "condit"),
        ("generalization", "gener"),
        ("meetings", "meet"),
        ("pottery", "potteri"),
        ("activities", "activ"),
        ("replacement", "replac"),
        ("cement", "cement"),
        ("geology", "geolog"),
        ("was", "wa"),
        ("is", "is"),
        ("falling", "fall"),
        ("fizzed", "fizz"),
        ("controlling", "control"),
        ("electrical", "electr"),
        ("adoption", "adopt"),
        ("cried", "cri"),
        ("lied", "lie"),
        ("skies", "sky"),
    ],
)
def test_porter_stem_matches_nltk_default_mode(word: str, stem: str) -> None:
    assert stem_tokens(word) == [stem]


def test_normalization_drops_case_punctuation_articles_and_commas() -> None:
    assert normalize_answer("The Cat, and a DOG!  an apple.") == "cat dog apple"
    # Articles only as whole words: "theory" and "android" keep their letters.
    assert normalize_answer("Theory of android") == "theory of android"
    assert stem_tokens("The hospitals") == ["hospit"]


def test_token_f1_stems_and_counts_multisets() -> None:
    assert token_f1("running", "runs") == 1.0
    assert token_f1("Biscuit", "biscuit.") == 1.0
    assert token_f1("nothing shared", "Biscuit") == 0.0
    # 1 of 3 predicted tokens overlaps 1 of 1 gold token: P=1/3, R=1.
    assert token_f1("my dog Biscuit", "Biscuit") == pytest.approx(0.5)
    # Repeated tokens count once per occurrence (multiset overlap).
    assert f1_score("paris paris", "paris") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert token_f1("", "Biscuit") == 0.0


def test_category_1_splits_on_commas_and_averages_best_parts() -> None:
    gold = "Sushi, pasteis de nata"
    # Gold parts: "sushi" (best part F1 1.0) and "pasteis de nata" (1.0).
    assert token_f1("pasteis de nata, sushi", gold, category=1) == pytest.approx(1.0)
    # Without the split, the same answer would be one bag of tokens (and commas are dropped anyway).
    assert token_f1("pasteis de nata, sushi", gold, category=4) == pytest.approx(1.0)
    # One part found: sushi -> 1.0, "pasteis de nata" -> 0.0.
    assert token_f1("sushi", gold, category=1) == pytest.approx(0.5)
    # A single prediction with both parts scores each gold part against the whole prediction.
    p = token_f1("sushi and pasteis de nata", gold, category=1)
    assert p == pytest.approx((2 * 0.25 / 1.25 + 2 * 0.75 / 1.75) / 2)
    assert token_f1("sushi", gold, category="1") == pytest.approx(0.5)


def test_category_3_cuts_gold_at_semicolon() -> None:
    gold = "A full marathon; probably in Porto"
    assert token_f1("full marathon", gold, category=3) == 1.0
    assert token_f1("full marathon", gold, category=4) < 1.0


def test_category_5_rewards_abstaining_only() -> None:
    assert token_f1("Not mentioned in the conversation", "anything", category=5) == 1.0
    assert token_f1("No information available.", "anything", category=5) == 1.0
    assert token_f1("Ramen with egg", "Ramen with egg", category=5) == 0.0


def test_category_labels() -> None:
    assert category_label(1) == "1 multi-hop"
    assert category_label("2") == "2 temporal"
    assert category_label("temporal-reasoning") == "temporal-reasoning"
    assert category_label(None) == "uncategorized"


def test_bleu1_clips_counts_and_penalizes_brevity() -> None:
    assert bleu1("the cat sat", "the cat sat") == 1.0
    assert bleu1("dog", "the cat sat") == 0.0
    # Clipped: "the" counts once in the reference.
    assert bleu1("the the the the", "the cat") == pytest.approx(0.25)
    # Shorter than the reference: precision 1 times exp(1 - 3/2).
    assert bleu1("the cat", "the cat sat") == pytest.approx(math.exp(1 - 1.5))
    assert bleu1("", "x") == 0.0


def test_evidence_recall_at_budget() -> None:
    cited = ["D1:1", "D1:2", "D1:1", "D2:4", "D3:1"]
    gold = ["D1:2", "D3:1"]
    assert evidence_recall(cited, gold) == 1.0
    assert evidence_recall(cited, gold, budget=2) == 0.5  # D1:1, D1:2
    # Repeats do not spend the budget: the third distinct turn is D2:4.
    assert evidence_recall(cited, gold, budget=3) == 0.5
    assert evidence_recall(cited, gold, budget=4) == 1.0
    assert evidence_recall([], gold, budget=10) == 0.0
    assert evidence_recall(cited, [], budget=10) is None
    assert normalize_evidence_ids(["D8:6; D9:17", "D1:1", "D1:1"]) == ["D8:6", "D9:17", "D1:1"]
    assert evidence_recall(["D9:17"], ["D8:6; D9:17"], budget=5) == 0.5


def test_llm_judge_not_run_without_model() -> None:
    score = llm_judge(None, "q", "gold", "pred")
    assert not score.ran and score.score is None
    assert "no judge model" in (score.reason_not_run or "")


def test_llm_judge_reads_verdict_and_never_fakes_a_failed_one() -> None:
    llm = ScriptedChatModel(replies=[{"reasoning": "Same dog.", "label": "CORRECT"}])
    score = llm_judge(llm, "Dog's name?", "Biscuit", "It is Biscuit")
    assert score.ran and score.correct is True and score.score == 1.0
    assert score.llm_calls == 1 and score.prompt_tokens > 0
    assert "Gold answer: Biscuit" in str(llm.calls[0][-1].content)

    wrong = llm_judge(ScriptedChatModel(replies=[{"reasoning": "Different.", "label": "WRONG"}]), "q", "a", "b")
    assert wrong.ran and wrong.score == 0.0

    broken = llm_judge(ScriptedChatModel(replies=["not json", {"label": "MAYBE"}]), "q", "a", "b")
    assert not broken.ran and broken.score is None and broken.llm_calls == 2
    assert "no valid verdict" in (broken.reason_not_run or "")


def test_any_gold_session_recall_counts_a_question_once_any_gold_session_is_cited() -> None:
    """Issue 41: the peer metric, beside evidence recall: 1 when any gold turn's session is among the sessions of the
    first N distinct cited turns (a turn of session D3 covers every gold turn of D3), else 0; None without gold."""
    from logicmap.evals.metrics import evidence_recall, session_recall

    cited = ["D1:4", "D3:9", "D1:4", "D7:2"]
    assert session_recall(cited, ["D3:12", "D5:1"], 2) == 1.0  # D3 cited (another turn of it)
    assert evidence_recall(cited, ["D3:12", "D5:1"], 2) == 0.0  # neither gold turn itself
    assert session_recall(cited, ["D7:2"], 2) == 0.0  # D7 is cited third: beyond the budget of 2 distinct turns
    assert session_recall(cited, ["D7:2"], 3) == 1.0
    assert session_recall(cited, []) is None
