"""Goal-Mem's policy objects (issue 30 item 4): the factory picks the class from the pinned name, the rules decide
as the no-LLM heuristics do (no request, no fallback recorded), the LLM policy asks the model and falls back
(recorded) on garbage; and the graphs that used to branch on the policy name no longer do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from logicmap.agents.goalmem_heuristics import (
    heuristic_answer,
    heuristic_decompositions,
    heuristic_goal,
    lexical_unification,
)
from logicmap.agents.goalmem_policy import RULES, LLMGoalMemPolicy, RuleGoalMemPolicy, goalmem_policy
from logicmap.agents.testing import ScriptedChatModel
from logicmap.memory.records.nl_logic import Substitution, Term, parse_atom, parse_goal

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What drink did Maya have at the cafe she visited last week?"
MEMORIES = [
    ("D2:2", "Maya: I visited a new cafe last week, the Blue Finch on Rua das Flores.", "2024-05-07"),
    ("D2:4", "Maya: At the Blue Finch I had an iced matcha latte with oat milk.", "2024-05-07"),
]


def test_the_factory_returns_the_rules_for_heuristic_and_the_llm_roles_otherwise() -> None:
    model = ScriptedChatModel()
    assert goalmem_policy("heuristic", model) is RULES and isinstance(RULES, RuleGoalMemPolicy)
    chosen = goalmem_policy("llm", model, method="json_mode")
    assert isinstance(chosen, LLMGoalMemPolicy) and chosen.llm is model and chosen.method == "json_mode"
    assert isinstance(goalmem_policy("llm", None), LLMGoalMemPolicy)


def test_the_rules_decide_as_the_no_llm_heuristics_without_a_request() -> None:
    parsed = RULES.parse(QUESTION)
    assert parsed.output.render() == parse_goal(heuristic_goal(QUESTION).render()).render()
    goal = parsed.output
    first = RULES.decompose(QUESTION, goal, [])
    assert [a.render() for a in first.output.body] == [a.render() for a in heuristic_decompositions(goal)[0]]
    # The next breadth step skips the failed decomposition.
    second = RULES.decompose(QUESTION, goal, [(first.output, "not proved")])
    candidates = heuristic_decompositions(goal)
    expected = candidates[1] if len(candidates) > 1 else goal.atoms
    assert [a.render() for a in second.output.body] == [a.render() for a in expected]

    subgoals = {"G1": parse_atom("Maya had (x:drink) at (y:cafe)")}
    step, unified = RULES.unify(QUESTION, subgoals, MEMORIES, Substitution())
    lexical = lexical_unification([("G1", subgoals["G1"])], MEMORIES, Substitution())
    assert unified.output == lexical and set(step.resolved) | set(step.unresolved) == {"G1"}
    assert not step.judged  # the lexical checks apply to the rules' own output

    picked, refined = RULES.refine(
        QUESTION, goal, Substitution(), {"G1": (subgoals["G1"], "no cafe")}, MEMORIES, {}, set()
    )
    assert picked == [] and refined.output.antecedents == []  # no refinement: the depth loop ends

    bound = Substitution().bind(Term.var("x", "drink"), Term.const("iced matcha latte", "drink"))
    answered = RULES.generate(QUESTION, goal, bound, MEMORIES)
    assert answered.output.answer == heuristic_answer(goal, bound)
    for outcome in (parsed, first, second, unified, refined, answered):
        assert outcome.fallback is None and outcome.attempts == 0 and outcome.cost.llm_calls == 0


def test_the_llm_policy_asks_the_model_and_falls_back_on_garbage_recorded() -> None:
    good = ScriptedChatModel(replies=[{"goal": "find x: Maya had (x:drink) at the cafe she visited last week"}])
    parsed = goalmem_policy("llm", good).parse(QUESTION)
    assert len(good.calls) == 1 and parsed.fallback is None and parsed.output.answer == ["x"]

    garbage = ScriptedChatModel(replies=["no json here", "still none"])
    policy = goalmem_policy("llm", garbage)
    parsed = policy.parse(QUESTION)
    assert len(garbage.calls) == 2 and parsed.attempts == 2  # the reply and its one retry
    assert parsed.fallback is not None and parsed.fallback.role == "goalmem_parse"
    assert parsed.output.render() == RULES.parse(QUESTION).output.render()

    garbage = ScriptedChatModel(replies=["{}", "{}"])
    subgoals = {"G1": parse_atom("Maya had (x:drink) at (y:cafe)")}
    step, unified = goalmem_policy("llm", garbage).unify(QUESTION, subgoals, MEMORIES, Substitution(), max_attempts=1)
    assert len(garbage.calls) == 1 and unified.fallback is not None and unified.fallback.role == "goalmem_unify"
    assert unified.output == RULES.unify(QUESTION, subgoals, MEMORIES, Substitution())[1].output


@pytest.mark.parametrize(
    "module",
    [
        "graphs/strategies/goalmem.py",
        "graphs/strategies/real.py",
        "graphs/strategies/forward.py",
        "agents/goalmem.py",
        "agents/goalmem_forward.py",
    ],
)
def test_no_node_or_role_compares_the_policy_name(module: str) -> None:
    source = (ROOT / module).read_text(encoding="utf-8")
    assert not re.search(r"""(==|!=)\s*["'](heuristic|llm)["']|["'](heuristic|llm)["']\s*(==|!=)""", source)
    assert not re.search(r"^\s*(if|elif)\b.*\bheuristic\b", source, re.M)
