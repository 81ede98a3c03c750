"""``evals.bench.bench_dense_answers``: the rule plus a dense term, measured on recorded evidence (issue 41, item 4,
tried and not adopted). Weight 0 is the answerer's own rule; "when" questions and sentences the rule scores 0 are
never moved by the dense term."""

from __future__ import annotations

from pathlib import Path

import pytest

from logicmap.agents.answerers import evidence_sentences
from logicmap.agents.responder import EvidenceText
from logicmap.evals.bench.bench_dense_answers import choose, main
from logicmap.memory.retrieval.answer_slots import SlotCandidate, choose_answer, slot_scores

EVIDENCE = [
    EvidenceText(
        "E1",
        "Maya: Guess what, I adopted a dog last month. (2023-05-08)\n"
        "Maya: His name is Biscuit. (2023-05-08)\n"
        "Leo: I ran a half marathon yesterday in Lisbon. (2023-05-08)",
        "2023-05-08",
    ),
]


def _scored(question: str) -> tuple[list[SlotCandidate], list[float], list[str]]:
    sentences, speakers = evidence_sentences(EVIDENCE)
    candidates = [SlotCandidate(s.text, s.rank, s.context) for s in sentences]
    return candidates, slot_scores(question, candidates, ignore=speakers), speakers


def test_weight_zero_is_the_answerers_rule() -> None:
    question = "What is the name of Maya's dog?"
    candidates, rule, speakers = _scored(question)
    dense = [0.9 if i == 0 else 0.0 for i in range(len(candidates))]
    assert choose(question, candidates, rule, dense, weight=0.0, items=5) == choose_answer(
        question, candidates, ignore=speakers
    )


def test_dense_moves_only_sentences_the_rule_scores() -> None:
    question = "What is the name of Maya's dog?"
    candidates, rule, _ = _scored(question)
    worst = min(range(len(rule)), key=lambda i: rule[i])
    assert rule[worst] > 0 and worst != choose_answer(question, candidates)
    dense = [1.0 if i == worst else 0.0 for i in range(len(candidates))]
    assert choose(question, candidates, rule, dense, weight=100.0, items=5) == worst
    assert choose(question, candidates, rule, dense, weight=100.0, items=0) == choose_answer(question, candidates)
    question = "Where did Leo run the half marathon?"  # only the last sentence shares its words
    candidates, rule, _ = _scored(question)
    assert rule[0] == 0
    dense = [1.0 if i == 0 else 0.0 for i in range(len(candidates))]
    assert choose(question, candidates, rule, dense, weight=100.0, items=5) == choose_answer(question, candidates)


def test_when_questions_keep_the_rule() -> None:
    question = "When did Leo run the half marathon?"
    candidates, rule, speakers = _scored(question)
    dense = [1.0 if i == 0 else 0.0 for i in range(len(candidates))]
    assert choose(question, candidates, rule, dense, weight=100.0, items=5) == choose_answer(
        question, candidates, ignore=speakers
    )


def test_a_file_that_is_not_a_recording_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
