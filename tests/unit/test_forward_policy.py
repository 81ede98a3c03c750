"""The forward baselines' policy objects (issue 30 item 4): the factory picks the class from the resolved name, the
rules decide as the no-LLM baselines did (no request, no fallback recorded), the LLM policy asks the model and falls
back (recorded) on garbage."""

from __future__ import annotations

from logicmap.agents.answerers import answer_from_memory_lines
from logicmap.agents.forward_policy import LLMForwardPolicy, RuleForwardPolicy, forward_policy
from logicmap.agents.testing import ScriptedChatModel

QUESTION = "What drink did Maya have at the Blue Finch?"
MEMORIES = [
    ("D2:2", "Maya: I visited a new cafe last week, the Blue Finch on Rua das Flores.", "2024-05-07"),
    ("D2:4", "Maya: At the Blue Finch I had an iced matcha latte with oat milk.", "2024-05-07"),
]


def test_the_factory_returns_the_rules_for_heuristic_and_the_llm_roles_otherwise() -> None:
    model = ScriptedChatModel()
    assert isinstance(forward_policy("heuristic", model), RuleForwardPolicy)
    chosen = forward_policy("llm", model, method="json_mode")
    assert isinstance(chosen, LLMForwardPolicy) and chosen.llm is model and chosen.method == "json_mode"


def test_the_rules_decide_as_the_no_llm_baselines() -> None:
    rules = forward_policy("heuristic", None)
    queries = rules.reformulate(QUESTION, max_queries=3).output.queries
    assert queries == [QUESTION, "drink Maya have Blue Finch"]  # the question and its content words
    assert rules.reformulate(QUESTION, max_queries=1).output.queries == [QUESTION]
    answered = rules.answer(QUESTION, MEMORIES)
    assert answered.output == answer_from_memory_lines(QUESTION, MEMORIES) and answered.output.cited == ["D2:4"]
    assert rules.reflect(QUESTION, answered.output.answer, MEMORIES).output.sufficient is True
    first = rules.react(QUESTION, [], [], 3, searched=False).output
    assert (first.action, first.query) == ("search", QUESTION)
    then = rules.react(QUESTION, ["Thought: ..."], MEMORIES, 2, searched=True).output
    assert then.action == "answer" and then.answer == answered.output.answer and then.cited == ["D2:4"]
    last = rules.react(QUESTION, [], MEMORIES, 0, searched=False).output  # no search left: answer now
    assert last.action == "answer"
    for outcome in (rules.reformulate(QUESTION), answered, rules.react(QUESTION, [], [], 3, searched=False)):
        assert outcome.fallback is None and outcome.attempts == 0 and outcome.cost.llm_calls == 0


def test_the_llm_policy_asks_the_model_and_falls_back_on_garbage_recorded() -> None:
    model = ScriptedChatModel(replies=[{"queries": ["Maya drink Blue Finch", "Blue Finch order"]}])
    reformulated = forward_policy("llm", model).reformulate(QUESTION)
    assert len(model.calls) == 1 and reformulated.fallback is None
    assert reformulated.output.queries == ["Maya drink Blue Finch", "Blue Finch order"]

    garbage = ScriptedChatModel(replies=["not json", {"answer": "", "cited": ["D9:9"]}])
    answered = forward_policy("llm", garbage).answer(QUESTION, MEMORIES)
    assert len(garbage.calls) == 2 and answered.attempts == 2
    assert answered.fallback is not None and answered.fallback.role == "forward_answer"
    assert answered.output == RuleForwardPolicy().answer(QUESTION, MEMORIES).output
