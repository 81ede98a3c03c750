"""REAL's policy objects (issue 30 item 4): the factory picks the class from the pinned name, the rules decide as
the no-LLM search did (no request, no fallback recorded), the LLM policy asks the model (with the run's tags) and
falls back (recorded) on garbage; without a chat model it follows the rules and says so once, at the planner."""

from __future__ import annotations

from logicmap.agents.real import heuristic_answer, heuristic_roots, heuristic_scores
from logicmap.agents.real_policy import RULES, LLMRealPolicy, RuleRealPolicy, real_policy
from logicmap.agents.testing import ScriptedChatModel
from logicmap.memory.records.facts import apply_fact_updates, make_fact
from logicmap.memory.retrieval.fact_paths import FactIndex, FactPath

NS = "real-policy"
QUESTION = "Where does Maya live now?"


def _index() -> FactIndex:
    facts = [
        make_fact(
            NS, "Maya", "lives_in", "Lisbon", valid_from="2023-04-24", confidence=0.9, intent="FACT", turn_ids=["D4:1"]
        ),
        make_fact(
            NS, "Maya", "has_pet", "Biscuit", valid_from="2023-02-01", confidence=0.9, intent="FACT", turn_ids=["D1:1"]
        ),
    ]
    return FactIndex({f.id: f for f in apply_fact_updates({}, facts).facts})


def _paths(index: FactIndex) -> list[FactPath]:
    root = FactPath.start("Maya", "FACT")
    # The best path first (the answer is read off it): where Maya lives, then her pet.
    return [root.extend(f, "out", step=1) for f in sorted(index.facts.values(), key=lambda f: f.relation != "lives_in")]


def test_the_factory_returns_the_rules_for_heuristic_and_the_llm_roles_otherwise() -> None:
    model = ScriptedChatModel()
    assert real_policy("heuristic", model) is RULES and isinstance(RULES, RuleRealPolicy)
    chosen = real_policy("llm", model, method="json_mode", tags=["strategy:real"], metadata={"namespace": NS})
    assert isinstance(chosen, LLMRealPolicy) and chosen.llm is model and chosen.method == "json_mode"
    assert tuple(chosen.tags) == ("strategy:real",) and chosen.metadata == {"namespace": NS}


def test_the_rules_decide_as_the_no_llm_search() -> None:
    index, similar = _index(), list(_index().facts)
    paths = _paths(index)
    roots = RULES.roots(QUESTION, index, similar)
    assert roots.output == heuristic_roots(QUESTION, index, similar) and roots.output.roots[0].entity == "Maya"
    scored = RULES.evaluate(QUESTION, paths, index, similarities=[0.5, 0.1], window=None, reference_time=None)
    assert scored.output == heuristic_scores(QUESTION, paths, ["P1", "P2"], index, [0.5, 0.1], None)
    answered = RULES.answer(QUESTION, paths, index, reference_time=None, passing=True)
    assert answered.output == heuristic_answer(QUESTION, paths, index, passing=True)
    assert answered.output.answer == "Lisbon"
    for outcome in (roots, scored, answered):
        assert outcome.fallback is None and outcome.attempts == 0 and outcome.cost.llm_calls == 0


def test_the_llm_policy_without_a_model_follows_the_rules_and_records_it_once() -> None:
    index, paths = _index(), _paths(_index())
    policy = real_policy("llm", None)
    roots = policy.roots(QUESTION, index, list(index.facts))
    assert roots.output == RULES.roots(QUESTION, index, list(index.facts)).output
    assert roots.fallback is not None and roots.fallback.reason == "no chat model configured: heuristic policy used"
    scored = policy.evaluate(QUESTION, paths, index, similarities=[0.5, 0.1], window=None, reference_time=None)
    answered = policy.answer(QUESTION, paths, index, reference_time=None, passing=True)
    assert scored.fallback is None and answered.fallback is None and answered.output.answer == "Lisbon"


def test_the_llm_policy_asks_the_model_and_falls_back_on_garbage_recorded() -> None:
    index, paths = _index(), _paths(_index())
    model = ScriptedChatModel(
        replies=[{"roots": [{"entity": "maya", "intent": "FACT"}], "reference_time": "now", "include_uncertain": False}]
    )
    roots = real_policy("llm", model).roots(QUESTION, index, [])
    assert len(model.calls) == 1 and roots.fallback is None
    assert [r.entity for r in roots.output.roots] == ["Maya"] and roots.output.reference_time == "now"

    garbage = ScriptedChatModel(
        replies=["no scores", {"scores": [{"path_id": "P7", "relevance": 2, "coherence": 0, "sufficiency": 0}]}]
    )
    scored = real_policy("llm", garbage).evaluate(
        QUESTION, paths, index, similarities=[0.5, 0.1], window=None, reference_time=None
    )
    assert len(garbage.calls) == 2 and scored.attempts == 2
    assert scored.fallback is not None and scored.fallback.role == "real_evaluator"
    assert (
        scored.output
        == RULES.evaluate(QUESTION, paths, index, similarities=[0.5, 0.1], window=None, reference_time=None).output
    )
