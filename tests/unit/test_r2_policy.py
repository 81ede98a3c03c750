"""Memory-R2's answer-agent policy (agents.r2_policy) and the responder policy of rerank, dense and bm25
(agents.responder_policy): the factory's choice, the rule decisions, the LLM policy's recorded fallbacks."""

from __future__ import annotations

import pytest

from logicmap.agents.answerers import answer_from_evidence
from logicmap.agents.r2_policy import LLMR2Policy, RuleR2Policy, r2_policy
from logicmap.agents.responder import EvidenceText
from logicmap.agents.responder_policy import LLMResponderPolicy, RuleResponderPolicy, responder_policy
from logicmap.agents.testing import ScriptedChatModel
from logicmap.memory.records.r2 import FactRecord
from logicmap.prompts import r2_distill

QUESTION = "What is the name of Maya's dog?"
FACTS = [
    FactRecord(id="F1", text="Maya has a dog named Biscuit.", turn_ids=("D1:3",)),
    FactRecord(id="F2", text="Leo ran a half marathon in Porto.", turn_ids=("D2:1",)),
    FactRecord(id="F3", text="Maya walks Biscuit on the beach.", turn_ids=("D3:2",)),
]
EVIDENCE = [EvidenceText("F1", "Maya has a dog named Biscuit."), EvidenceText("F2", "Leo ran a half marathon.")]
KW = {"method": "function_calling", "tags": ["strategy:r2"], "metadata": {"namespace": "ns"}}


def test_the_factories_choose_by_the_policy_name() -> None:
    model = ScriptedChatModel()
    assert r2_policy("heuristic", model) == RuleR2Policy() and r2_policy("llm", model) == LLMR2Policy(model)
    assert r2_policy("llm", None) == LLMR2Policy(None)  # asked for the model, none configured: fallbacks recorded
    assert responder_policy("heuristic", model) == RuleResponderPolicy()
    assert responder_policy("llm", model) == LLMResponderPolicy(model)


@pytest.mark.parametrize("policy", [RuleR2Policy(), RuleResponderPolicy()])
def test_the_rule_policy_answers_extractively_and_records_nothing(policy) -> None:
    outcome = policy.respond(QUESTION, EVIDENCE, **KW)
    assert outcome.output == answer_from_evidence(QUESTION, EVIDENCE) and outcome.cost.llm_calls == 0
    assert "Biscuit" in outcome.output.answer and policy.recorded(outcome.fallback) == []


def test_the_rule_distillation_keeps_the_most_similar() -> None:
    outcome = RuleR2Policy().distill(QUESTION, FACTS, keep=2, **KW)
    assert outcome.output.selected == ["F1", "F2"] and RuleR2Policy().recorded(outcome.fallback) == []


def test_the_llm_policy_asks_the_model_and_records_its_fallbacks() -> None:
    model = ScriptedChatModel(
        routes={r2_distill.ROLE_MARKER: [{"selected": ["F3", "F9"]}, {"selected": ["F3"]}]},
        replies=["garbage", "garbage"],
    )
    policy = LLMR2Policy(model)
    distilled = policy.distill(QUESTION, FACTS, keep=2, **KW)
    # F9 was never shown: the model is told and asked once more; its corrected choice stands, nothing is recorded
    assert distilled.output.selected == ["F3"] and len(model.calls) == 2 and policy.recorded(distilled.fallback) == []
    answered = policy.respond(QUESTION, EVIDENCE, **KW)
    assert answered.fallback is not None and policy.recorded(answered.fallback) == [answered.fallback]
    assert answered.output == answer_from_evidence(QUESTION, EVIDENCE) and len(model.calls) == 4


def test_the_llm_policy_without_a_model_records_every_fallback() -> None:
    policy = LLMResponderPolicy(None)
    outcome = policy.respond(QUESTION, EVIDENCE, **KW)
    assert outcome.fallback is not None and policy.recorded(outcome.fallback) == [outcome.fallback]
    assert RuleResponderPolicy().recorded(outcome.fallback) == []
