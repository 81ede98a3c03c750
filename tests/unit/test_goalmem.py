"""Goal-Mem: roles with scripted models, the breadth/depth loops of the graph, backbones, fallbacks."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever
from langgraph.runtime import Runtime
from langgraph.types import Send

from logicmap.agents.goalmem import (
    apply_unification,
    decompose_goal,
    parse_utterance,
    refine_subgoals,
    unify_subgoals,
)
from logicmap.agents.goalmem_heuristics import heuristic_decompositions, heuristic_goal, lexical_unification
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.runtime.result import EvidenceItem
from logicmap.graphs.strategies.goalmem import (
    FAILURE_ANSWER,
    GoalMemContext,
    Retrieval,
    answer,
    call_bound,
    decompose,
    fail,
    graph,
    refine,
    retrieve,
    route_after_decompose,
    route_after_refine,
    route_after_unify,
    unify,
)
from logicmap.graphs.strategies.goalmem import parse_goal as parse_goal_node
from logicmap.memory.records.nl_logic import Rule, Substitution, Term, parse_atom, parse_goal
from logicmap.memory.retrieval.backbones import BackboneRetriever, LangChainBackbone, make_backbone
from logicmap.memory.retrieval.retrieval import Hit
from logicmap.prompts import goalmem_decompose, goalmem_generate, goalmem_parse, goalmem_refine, goalmem_unify
from logicmap.prompts.goalmem_unify import Binding, SubgoalResult, Unification

QUESTION = "What drink did Maya have at the cafe she visited last week?"
GOAL = "find x: Maya had (x:drink) at the cafe she visited last week"
DRINK_AT_CAFE = "Maya had (x:drink) at (y:cafe)"
VISITED = "Maya visited (y:cafe) last week"
D2_2 = "Maya: Amazing progress! I visited a new cafe last week, the Blue Finch on Rua das Flores."
D2_4 = "Maya: At the Blue Finch I had an iced matcha latte with oat milk. It was the best drink I had all month."

MARKERS = {
    "parse": goalmem_parse.SYSTEM_MARKER,
    "decompose": goalmem_decompose.SYSTEM_MARKER,
    "unify": goalmem_unify.SYSTEM_MARKER,
    "refine": goalmem_refine.SYSTEM_MARKER,
    "generate": goalmem_generate.SYSTEM_MARKER,
}


class RoleScript:
    """A scripted model per role: a list of replies (popped) or a function of the messages."""

    def __init__(self, **scripts: list[Any] | Callable[[Sequence[BaseMessage]], Any]) -> None:
        self.scripts = scripts
        self.calls: dict[str, list[list[BaseMessage]]] = {role: [] for role in MARKERS}
        self.model = ScriptedChatModel(respond=self._respond, default="")

    def _respond(self, messages: Sequence[BaseMessage]) -> Any:
        system = str(messages[0].content)
        role = next(r for r, marker in MARKERS.items() if marker in system)
        self.calls[role].append(list(messages))
        script = self.scripts.get(role)
        if callable(script):
            return script(messages)
        if not script:
            raise AssertionError(f"unexpected {role} call")
        return script.pop(0)

    def count(self, role: str) -> int:
        return len(self.calls[role])


def with_model(base: Resources, model: Any) -> Resources:
    """The read-only ingested sample's store with a scripted chat model (the fixture stays untouched)."""
    res = Resources(settings=base.settings, store_=base.store, embeddings_=base.embeddings_)
    res.llm_ = model
    return res


def subgoals_in(messages: Sequence[BaseMessage]) -> dict[str, str]:
    return dict(re.findall(r"^(G\d+): (.+)$", str(messages[1].content), re.M))


def memories_in(messages: Sequence[BaseMessage]) -> set[str]:
    return set(re.findall(r"^(D\d+:\d+): ", str(messages[1].content), re.M))


def careful_unifier(messages: Sequence[BaseMessage]) -> dict:
    """Resolves the drink only when memories show BOTH which cafe Maya visited last week (D2:2) and what
    she had there (D2:4); otherwise says what is missing, as a careful model would."""
    subgoals, memories = subgoals_in(messages), memories_in(messages)
    results = []
    for sid, text in subgoals.items():
        if {"D2:2", "D2:4"} <= memories and "visited" in text:
            results.append(
                {
                    "subgoal": sid,
                    "resolved": True,
                    "facts": ["D2:2"],
                    "bindings": [{"variable": "y", "value": "Blue Finch", "type": "cafe"}],
                }
            )
        elif {"D2:2", "D2:4"} <= memories and "had" in text:
            results.append(
                {
                    "subgoal": sid,
                    "resolved": True,
                    "facts": ["D2:4", "D2:2"],
                    "bindings": [
                        {"variable": "x", "value": "iced matcha latte", "type": "drink"},
                        {"variable": "y", "value": "Blue Finch", "type": "cafe"},
                    ],
                }
            )
        else:
            results.append(
                {"subgoal": sid, "resolved": False, "reason": "nothing says which cafe she visited last week"}
            )
    return {"results": results}


def two_hop_script() -> RoleScript:
    return RoleScript(
        parse=[{"goal": GOAL}],
        decompose=[{"subgoals": [DRINK_AT_CAFE], "rationale": "the drink at the cafe"}],
        unify=careful_unifier,
        refine=[{"antecedents": [{"subgoal": "G1", "antecedent": VISITED}]}],
        generate=[{"answer": "An iced matcha latte with oat milk"}],
    )


# ------------------------------------------------------------------------------------------ roles


def test_parse_role_and_heuristic_fallback() -> None:
    script = RoleScript(parse=[{"goal": GOAL}])
    outcome = parse_utterance(script.model, QUESTION)
    assert outcome.output == parse_goal(GOAL) and outcome.fallback is None and outcome.cost.llm_calls == 1
    bad = RoleScript(parse=[{"goal": "Maya had a drink"}, "no json here"])
    outcome = parse_utterance(bad.model, QUESTION)
    assert outcome.fallback is not None and outcome.attempts == 2
    assert "answer variable" in str(bad.calls["parse"][1][-1].content)
    assert outcome.output.answer == ["x"] and outcome.output.answer_terms()[0].type == "drink"


def test_heuristic_goal_from_wh_word() -> None:
    assert heuristic_goal("What drink did Maya have at the cafe she visited?").render() == (
        "find x: Maya have (x:drink) at the cafe she visited"
    )
    assert heuristic_goal("Who helped Maya pack for the move?").render() == (
        "find x: (x:person) helped Maya pack for the move"
    )
    assert heuristic_goal("When did Maya move to Lisbon?").answer_terms()[0].type == "date"
    assert heuristic_goal("Did Maya move to Lisbon?").answer == []


def test_decompose_role_rejects_a_repeated_decomposition() -> None:
    goal = parse_goal(GOAL)
    first = Rule(body=[parse_atom(DRINK_AT_CAFE)], head=goal.atoms)
    script = RoleScript(
        decompose=[
            {"subgoals": [DRINK_AT_CAFE]},
            {"subgoals": [VISITED, DRINK_AT_CAFE]},
        ]
    )
    outcome = decompose_goal(script.model, QUESTION, goal, [(first, "which cafe is unknown")])
    assert [a.render() for a in outcome.output.body] == [VISITED, DRINK_AT_CAFE]
    assert outcome.attempts == 2 and outcome.fallback is None
    assert first.render() in str(script.calls["decompose"][0][1].content)
    assert "already failed" in str(script.calls["decompose"][1][-1].content)


def test_decompose_role_validates_types_and_answer_variables() -> None:
    goal = parse_goal(GOAL)
    script = RoleScript(decompose=[{"subgoals": ["Maya had (x:cafe)"]}, {"subgoals": ["Maya visited (y:cafe)"]}])
    outcome = decompose_goal(script.model, QUESTION, goal)
    errors = str(script.calls["decompose"][1][-1].content)
    assert "typed 'cafe'" in errors
    # Both replies were invalid: the fallback is the goal itself (first heuristic decomposition).
    assert outcome.fallback is not None and outcome.output.body == goal.atoms


def test_heuristic_decompositions_differ() -> None:
    goal = heuristic_goal("What drink did Maya have at the cafe she visited?")
    options = heuristic_decompositions(goal)
    keys = [frozenset(a.key() for a in option) for option in options]
    assert len(options) == 3 and len(set(keys)) == 3
    assert [a.render() for a in options[1]] == ["Maya have (x:drink)", "Maya at the cafe she visited"]


def test_unify_batches_subgoals_in_one_call() -> None:
    script = RoleScript(unify=careful_unifier)
    subgoals = {"G1": parse_atom(DRINK_AT_CAFE), "G2": parse_atom(VISITED)}
    memories = [("D2:2", D2_2, "2023-03-20"), ("D2:4", D2_4, "2023-03-20")]
    step, outcome = unify_subgoals(script.model, QUESTION, subgoals, memories, Substitution())
    assert script.count("unify") == 1 and outcome.fallback is None
    assert step.substitution.as_dict() == {"x": "iced matcha latte", "y": "Blue Finch"}
    assert step.resolved == {"G1": ["D2:4", "D2:2"], "G2": ["D2:2"]} and not step.unresolved


def test_equality_is_the_llm_unifiers_judgment_and_lexical_conflicts_are_rejected() -> None:
    earlier = Substitution().bind(Term.var("y", "cafe"), Term.const("Blue Finch", "cafe"))
    reply = {
        "results": [
            {
                "subgoal": "G1",
                "resolved": True,
                "facts": ["D2:4"],
                "bindings": [
                    {"variable": "x", "value": "iced matcha latte", "type": "drink"},
                    {"variable": "y", "value": "Rua das Flores", "type": "cafe"},
                ],
            }
        ]
    }
    script = RoleScript(unify=[reply])
    step, outcome = unify_subgoals(
        script.model, QUESTION, {"G1": parse_atom(DRINK_AT_CAFE)}, [("D2:4", D2_4, None)], earlier
    )
    # The unifier saw G1 grounded with the Blue Finch and judged the restated value the same cafe: it stands,
    # the substitution keeps its first value, and the lexical objection is on record, not a rejection.
    assert outcome.fallback is None and step.resolved == {"G1": ["D2:4"]} and not step.rejected
    assert step.substitution.as_dict() == {"y": "Blue Finch", "x": "iced matcha latte"}
    assert "conflicting binding" in step.judged[0] and "Rua das Flores" in step.judged[0]
    # The same reply checked lexically (how the lexical fallback's output is checked) is refused.
    lexical = apply_unification(Unification.model_validate(reply), {"G1": parse_atom(DRINK_AT_CAFE)}, earlier)
    assert lexical.substitution == earlier and "G1" in lexical.unresolved and not lexical.resolved
    assert "conflicting binding" in lexical.rejected[0] and "Rua das Flores" in lexical.rejected[0]


def test_conflict_between_results_of_one_reply_rejects_the_later() -> None:
    reply = Unification(
        results=[
            SubgoalResult(
                subgoal="G1", resolved=True, facts=["D2:2"], bindings=[Binding(variable="y", value="Blue Finch")]
            ),
            SubgoalResult(
                subgoal="G2", resolved=True, facts=["D5:2"], bindings=[Binding(variable="y", value="Pasteis de Belem")]
            ),
        ]
    )
    step = apply_unification(
        reply, {"G1": parse_atom(VISITED), "G2": parse_atom("Maya ate at (y:cafe)")}, Substitution()
    )
    assert step.resolved == {"G1": ["D2:2"]} and step.substitution.value("y") == "Blue Finch"
    assert "G2" in step.unresolved and "conflicting" in step.rejected[0]


def test_type_fit_is_the_llm_unifiers_judgment_and_lexical_mismatches_are_rejected() -> None:
    reply = {
        "results": [
            {
                "subgoal": "G1",
                "resolved": True,
                "facts": ["D2:4"],
                "bindings": [
                    {"variable": "x", "value": "Blue Finch", "type": "cafe"},
                    {"variable": "y", "value": "Blue Finch", "type": "cafe"},
                ],
            }
        ]
    }
    script = RoleScript(unify=[reply])
    step, _ = unify_subgoals(
        script.model, QUESTION, {"G1": parse_atom(DRINK_AT_CAFE)}, [("D2:4", D2_4, None)], Substitution()
    )
    assert step.resolved == {"G1": ["D2:4"]} and step.substitution.value("x") == "Blue Finch"
    assert "type mismatch" in step.judged[0] and not step.rejected
    lexical = apply_unification(Unification.model_validate(reply), {"G1": parse_atom(DRINK_AT_CAFE)}, Substitution())
    assert not lexical.resolved and len(lexical.substitution) == 0 and "type mismatch" in lexical.rejected[0]


def test_malformed_unification_output_falls_back_to_lexical_entailment() -> None:
    bound = Substitution().bind(Term.var("y", "cafe"), Term.const("Blue Finch", "cafe"))
    script = RoleScript(unify=["the drink was a latte I think", {"results": [{"subgoal": "G7", "resolved": True}]}])
    memories = [("D2:2", D2_2, "2023-03-20"), ("D2:4", D2_4, "2023-03-20")]
    step, outcome = unify_subgoals(script.model, QUESTION, {"G1": parse_atom(DRINK_AT_CAFE)}, memories, bound)
    assert outcome.attempts == 2 and outcome.fallback is not None
    assert outcome.fallback.role == "goalmem_unify" and "unknown subgoal id 'G7'" in outcome.fallback.errors[1]
    assert step.substitution.value("x") == "iced matcha latte" and step.resolved["G1"][0] == "D2:4"


def test_structural_problems_are_retried_with_the_error() -> None:
    bad = {
        "results": [
            {"subgoal": "G1", "resolved": True, "facts": ["D9:9"], "bindings": [{"variable": "x", "value": "latte"}]}
        ]
    }
    good = {
        "results": [
            {
                "subgoal": "G1",
                "resolved": True,
                "facts": ["D2:4"],
                "bindings": [{"variable": "x", "value": "iced matcha latte"}, {"variable": "y", "value": "Blue Finch"}],
            }
        ]
    }
    script = RoleScript(unify=[bad, good])
    step, outcome = unify_subgoals(
        script.model, QUESTION, {"G1": parse_atom(DRINK_AT_CAFE)}, [("D2:4", D2_4, None)], Substitution()
    )
    retry_text = str(script.calls["unify"][1][-1].content)
    assert "unknown memory ids ['D9:9']" in retry_text and "['y'] have no value" in retry_text
    assert outcome.attempts == 2 and outcome.fallback is None and step.substitution.value("x") == "iced matcha latte"


def test_lexical_unification_reads_values_next_to_the_relation() -> None:
    result = lexical_unification(
        [
            ("G1", parse_atom("Maya have (x:drink) at the cafe she visited")),
            ("G2", parse_atom("Maya visited (y:cafe) last week")),
        ],
        [("D2:2", D2_2, None), ("D2:4", D2_4, None)],
        Substitution(),
    )
    by_id = {r.subgoal: r for r in result.results}
    assert by_id["G1"].resolved and by_id["G1"].bindings[0].value == "iced matcha latte"
    assert by_id["G1"].facts == ["D2:4", "D2:2"]
    assert by_id["G2"].resolved and by_id["G2"].bindings[0].value == "Blue Finch"


def test_refine_role_validates_antecedents() -> None:
    goal = parse_goal(GOAL)
    g1 = parse_atom(DRINK_AT_CAFE)
    script = RoleScript(
        refine=[
            {
                "antecedents": [
                    {"subgoal": "G5", "antecedent": VISITED},
                    {"subgoal": "G1", "antecedent": "Maya (y:drink)"},
                ]
            },
            {"antecedents": [{"subgoal": "G1", "antecedent": VISITED}]},
        ]
    )
    types = {v.name: v for v in g1.variables()}
    picked, outcome = refine_subgoals(
        script.model, QUESTION, goal, Substitution(), {"G1": (g1, "which cafe")}, [], types, {g1.key()}
    )
    errors = str(script.calls["refine"][1][-1].content)
    assert "'G5' is not an unresolved subgoal" in errors and "typed 'drink'" in errors
    assert [(sid, a.render()) for sid, a in picked] == [("G1", VISITED)] and outcome.attempts == 2
    # Without a model the fallback is no refinement at all.
    picked, outcome = refine_subgoals(None, QUESTION, goal, Substitution(), {"G1": (g1, "")}, [], types, set())
    assert picked == [] and outcome.fallback is not None


# ------------------------------------------------------------------------------------------ the graph


def test_graph_topology() -> None:
    nodes = set(graph.get_graph().nodes)
    assert {"parse_goal", "decompose", "retrieve", "unify", "refine", "generate", "fail"} <= nodes
    mermaid = graph.get_graph().draw_mermaid()
    assert "retrieve --> unify" in mermaid.replace(";", "")
    assert call_bound(3, 5) == 37


def test_two_hop_question_is_solved_only_at_depth_1(ingested_sample: Resources) -> None:
    script = two_hop_script()
    result = answer(QUESTION, "sample", resources=with_model(ingested_sample, script.model), k_per_subgoal=2)
    assert result.answer == "An iced matcha latte with oat milk"
    assert result.details["status"] == "answered"
    assert result.details["depth"] == 1 and result.details["solved_depth"] == 1 and result.details["breadth"] == 1
    assert result.details["substitution"] == {"x": "iced matcha latte", "y": "Blue Finch"}
    assert result.details["antecedent_of"] == {"G2": "G1"}
    assert result.details["grounded_goal"] == (
        'check: Maya had ("iced matcha latte":drink) at the cafe she visited last week'
    )
    assert {"D2:2", "D2:4"} <= set(result.cited_turns())
    assert [e.id for e in result.evidence] == ["D2:4", "D2:2"]
    # The first unification saw only the drink's memories and refused to guess the cafe.
    first, second = script.calls["unify"]
    assert "D2:4" in memories_in(first) and "D2:2" not in memories_in(first)
    assert subgoals_in(second) == {"G1": DRINK_AT_CAFE, "G2": VISITED} and "D2:2" in memories_in(second)
    # The generator sees the grounded goal and only the supporting memories.
    generate_prompt = str(script.calls["generate"][0][1].content)
    assert "iced matcha latte" in generate_prompt and set(re.findall(r"^(D\d+:\d+):", generate_prompt, re.M)) == {
        "D2:2",
        "D2:4",
    }
    assert result.cost.llm_calls == 6 and result.cost.total_tokens > 0 and not result.fallbacks
    assert result.cost.llm_calls <= call_bound(3, 5) + 1

    shallow = two_hop_script()
    result = answer(
        QUESTION,
        "sample",
        resources=with_model(ingested_sample, shallow.model),
        k_per_subgoal=2,
        max_depth=0,
        max_breadth=1,
    )
    assert result.answer == FAILURE_ANSWER and result.details["status"] == "failed"
    assert shallow.count("refine") == 0 and shallow.count("generate") == 0


def test_second_decomposition_avoids_the_first(ingested_sample: Resources) -> None:
    script = RoleScript(
        parse=[{"goal": GOAL}],
        decompose=[
            {"subgoals": [DRINK_AT_CAFE]},
            {"subgoals": [DRINK_AT_CAFE]},
            {"subgoals": ["Maya drank (x:drink)"]},
        ],
        unify=lambda m: {
            "results": [{"subgoal": s, "resolved": False, "reason": "not stated"} for s in subgoals_in(m)]
        },
        refine=lambda m: {"antecedents": []},
    )
    # Depth 1 (a refinement that finds nothing): at depth 0 the call budget 1 + 2(2 + 0) = 5 has no room for
    # the second decomposition's retry, and the budget is enforced.
    result = answer(QUESTION, "sample", resources=with_model(ingested_sample, script.model), max_breadth=2, max_depth=1)
    assert result.answer == FAILURE_ANSWER
    assert result.details["breadth"] == 2
    assert result.details["failed_decompositions"][0].startswith(DRINK_AT_CAFE + " =>")
    assert result.details["rule"].startswith("Maya drank (x:drink) =>")
    second_prompt = str(script.calls["decompose"][1][1].content)
    assert "tried and failed" in second_prompt and DRINK_AT_CAFE in second_prompt
    assert "already failed" in str(script.calls["decompose"][2][-1].content)
    assert script.count("unify") == 2 and script.count("refine") == 2 and script.count("generate") == 0
    assert (
        result.details["llm_requests"] == 8 <= call_bound(2, 1) and result.details["stop_reason"] == "breadth exhausted"
    )


def test_repeated_decomposition_after_retry_ends_the_breadth_loop(ingested_sample: Resources) -> None:
    script = RoleScript(
        parse=[{"goal": "find x: Maya had (x:drink)"}],
        decompose=[{"subgoals": ["Maya had (x:drink)"]}] * 5,
        unify=lambda m: {"results": [{"subgoal": "G1", "resolved": False}]},
        refine=lambda m: {"antecedents": []},
    )
    # Depth 1 so that the call budget (13) has room for the retries; at depth 0 (7) it stops the loop first.
    result = answer(QUESTION, "sample", resources=with_model(ingested_sample, script.model), max_depth=1)
    # Breadth 2: the model repeats itself twice, the heuristic fallback gives the keyword decomposition.
    # Breadth 3: nothing untried is left, so the loop stops instead of proving the same rule again.
    assert result.answer == FAILURE_ANSWER and result.details["stop_reason"] == "no new decomposition"
    assert result.details["breadth"] == 3 and len(result.details["failed_decompositions"]) == 2
    assert result.details["failed_decompositions"][1].startswith("(x:drink) is mentioned with Maya had")
    assert script.count("decompose") == 5 and script.count("unify") == 2 and result.details["llm_requests"] == 10


class FixedBackbone:
    """A backbone that returns the same two memories for any query."""

    name = "fixed"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Hit]:
        self.queries.append(query)
        hits = [
            Hit("turn", "D2:4", "[D2:4] " + D2_4, ["D2:4"], 2.0),
            Hit("turn", "D4:5", "[D4:5] Maya: Sorry", ["D4:5"], 1.0),
        ]
        return hits[:k]


def test_early_stop_when_a_depth_step_retrieves_nothing_new(ingested_sample: Resources) -> None:
    antecedents = [
        {"antecedents": [{"subgoal": "G1", "antecedent": f"Maya went to (y:cafe) step {i}"}]} for i in range(5)
    ]
    script = RoleScript(
        parse=[{"goal": GOAL}],
        decompose=[{"subgoals": [DRINK_AT_CAFE]}],
        unify=careful_unifier,
        refine=antecedents,
    )
    backbone = FixedBackbone()
    result = answer(
        QUESTION,
        "sample",
        resources=with_model(ingested_sample, script.model),
        backbone=backbone,
        max_breadth=1,
        max_depth=5,
    )
    assert result.answer == FAILURE_ANSWER
    assert script.count("refine") == 1 and script.count("unify") == 2
    unify_steps = [t for t in result.details["trace"] if t["node"] == "unify"]
    assert [t["new_memories"] for t in unify_steps] == [2, 0]
    assert result.details["depth"] == 1 and backbone.queries == ["Maya had drink at cafe", "Maya went to cafe step 0"]


def test_memory_budget_caps_retrieval(ingested_sample: Resources) -> None:
    result = answer(
        "What drink did Maya have at the cafe she visited?",
        "sample",
        resources=ingested_sample,
        policy="heuristic",
        max_memories=3,
        k_per_subgoal=5,
    )
    assert 0 < result.details["memories_retrieved"] <= 3


@pytest.mark.parametrize("backbone", ["bm25", "events"])
def test_heuristic_policy_answers_the_running_example(ingested_sample: Resources, backbone: str) -> None:
    result = answer(
        "What drink did Maya have at the cafe she visited?",
        "sample",
        resources=ingested_sample,
        policy="heuristic",
        backbone=backbone,
    )
    assert "matcha" in result.answer
    assert result.cost.llm_calls == 0 and not result.fallbacks
    assert "D2:4" in result.cited_turns() and result.details["backbone"] == backbone
    if backbone == "events":
        assert all(e.kind == "event" for e in result.evidence) and result.details["turn_texts"]


def test_dense_backbone_and_llm_policy_without_a_model(ingested_sample: Resources) -> None:
    result = answer(
        "Who helped Maya pack for the move?",
        "sample",
        resources=with_model(ingested_sample, None),
        backbone="dense",
        policy="llm",
    )
    assert result.answer and result.details["backbone"] == "dense"
    assert result.fallbacks and all(f.reason == "no chat model configured" for f in result.fallbacks)
    assert {f.role for f in result.fallbacks} >= {"goalmem_parse", "goalmem_decompose", "goalmem_unify"}


def test_malformed_unification_in_a_run_does_not_crash(ingested_sample: Resources) -> None:
    script = RoleScript(
        parse=[{"goal": "find x: Maya have (x:drink) at the cafe she visited"}],
        decompose=[{"subgoals": ["Maya have (x:drink) at the cafe she visited"]}],
        unify=lambda m: "{not json",
        refine=lambda m: {"antecedents": []},
        generate=lambda m: {"answer": "iced matcha latte"},
    )
    result = answer(QUESTION, "sample", resources=with_model(ingested_sample, script.model), max_breadth=1)
    assert any(f.role == "goalmem_unify" and f.reason.startswith("invalid") for f in result.fallbacks)
    assert result.answer in ("iced matcha latte", FAILURE_ANSWER)
    assert result.cost.llm_calls <= 2 * call_bound(1, 5) + 1


class ListRetriever(BaseRetriever):
    """A LangChain retriever over a fixed list of documents (word overlap ranking)."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        words = set(query.lower().split())
        return sorted(self.documents, key=lambda d: -len(words & set(d.page_content.lower().split())))


def test_any_langchain_retriever_is_a_backbone(ingested_sample: Resources) -> None:
    retriever = ListRetriever(
        documents=[
            Document(page_content=D2_2, metadata={"dia_id": "D2:2"}),
            Document(page_content=D2_4, metadata={"dia_id": "D2:4"}),
            Document(
                page_content="Leo: I usually drink black coffee.", metadata={"id": "note-1", "turn_ids": ["D2:5"]}
            ),
        ]
    )
    result = answer(
        "What drink did Maya have at the cafe she visited?",
        "sample",
        resources=ingested_sample,
        policy="heuristic",
        backbone=retriever,
    )
    assert "matcha" in result.answer and "D2:4" in result.cited_turns()
    assert result.details["backbone"] == "ListRetriever"
    hits = LangChainBackbone(retriever).search("black coffee", 3)
    assert hits[0].id == "note-1" and hits[0].turn_ids == ["D2:5"] and hits[0].kind == "fact"


def test_backbone_names_and_reverse_adapter(ingested_sample: Resources) -> None:
    store = ingested_sample.store
    events = make_backbone("events", store, "sample", ingested_sample.embeddings).search("Blue Finch matcha latte", 4)
    assert events and all(h.kind == "event" and h.turn_ids for h in events) and len(events) <= 4
    docs = BackboneRetriever(backbone=make_backbone("bm25", store, "sample"), k=2).invoke("iced matcha latte")
    assert len(docs) == 2 and docs[0].metadata["turn_ids"] and docs[0].id == docs[0].metadata["id"]
    with pytest.raises(ValueError, match="unknown backbone"):
        make_backbone("nope", store, "sample")


# ------------------------------------------------------------------------------------------ nodes alone


def runtime_for(resources: Resources, **settings: Any) -> Runtime[GoalMemContext]:
    return Runtime(
        context=GoalMemContext(**settings, resources=resources), store=None, stream_writer=lambda _: None, previous=None
    )


def evidence(mid: str, text: str) -> EvidenceItem:
    return EvidenceItem(kind="turn", id=mid, text=f"[{mid}] {text}", turn_ids=[mid], time="2023-05-08")


def test_context_hides_resources_and_retriever_from_the_schema() -> None:
    schema = graph.get_context_jsonschema()
    assert "resources" not in schema["properties"] and "retriever" not in schema["properties"]
    assert {"max_breadth", "max_depth", "backbone", "policy"} <= set(schema["properties"])
    # Nor do a run's resources reach its trace metadata, where the budgets are.
    from logicmap.graphs.runtime.tracing import run_metadata

    metadata = run_metadata("goalmem", namespace="n", policy="llm", budgets=GoalMemContext(resources=Resources()))
    assert "resources" not in metadata and metadata["max_depth"] == 5


def test_parse_and_decompose_nodes_alone(ingested_sample: Resources) -> None:
    runtime = runtime_for(ingested_sample, policy="heuristic", namespace="sample")
    parsed = parse_goal_node({"question": QUESTION}, runtime)
    assert (
        parsed["namespace"] == "sample"
        and parsed["breadth"] == 0
        and parsed["goal"].answer
        and parsed["cost"].llm_calls == 0
    )
    update = decompose({"question": QUESTION, "goal": parse_goal(GOAL), "breadth": 0, "step": 0}, runtime)
    assert update["breadth"] == 1 and update["step"] == 1 and update["depth"] == 0 and not update["exhausted"]
    assert list(update["subgoals"]) == update["originals"] == [f"G{i + 1}" for i in range(len(update["rule"].body))]
    assert set(update["unresolved"].values()) == {"not tried"} and update["failed"] == []
    # A second call records the first rule as failed, with what it left unproved, and tries another.
    again = decompose({**update, "question": QUESTION, "goal": parse_goal(GOAL)}, runtime)
    assert again["failed"][0] == (
        update["rule"],
        "; ".join(f"{atom.render()}: not tried" for atom in update["subgoals"].values()),
    )
    assert again["breadth"] == 2 and (again.get("exhausted") or again["rule"].body_key() != update["rule"].body_key())


def test_unify_node_alone_resolves_with_both_memories(resources: Resources) -> None:
    script = RoleScript(unify=careful_unifier)
    state = {
        "question": QUESTION,
        "goal": parse_goal(GOAL),
        "step": 2,
        "depth": 1,
        "breadth": 1,
        "subgoals": {"G1": parse_atom(DRINK_AT_CAFE), "G2": parse_atom(VISITED)},
        "originals": ["G1"],
        "retrieved": [
            Retrieval(step=1, subgoal="G1", query="q1", hits=[evidence("D2:4", D2_4)]),
            Retrieval(step=2, subgoal="G2", query="q2", hits=[evidence("D2:2", D2_2)]),
        ],
    }
    update = unify(state, runtime_for(with_model(resources, script.model)))
    assert script.count("unify") == 1 and update["new_in_step"] == 1 and update["solved_depth"] == 1
    assert update["resolved"] == {"G1": ["D2:4", "D2:2"], "G2": ["D2:2"]} and update["unresolved"] == {}
    assert update["substitution"].as_dict() == {"x": "iced matcha latte", "y": "Blue Finch"}
    assert route_after_unify({**state, **update}, runtime_for(resources)) == "generate"


def test_refine_node_alone_adds_an_antecedent(resources: Resources) -> None:
    script = RoleScript(refine=[{"antecedents": [{"subgoal": "G1", "antecedent": VISITED}]}])
    state = {
        "question": QUESTION,
        "goal": parse_goal(GOAL),
        "step": 1,
        "depth": 0,
        "subgoals": {"G1": parse_atom(DRINK_AT_CAFE)},
        "unresolved": {"G1": "which cafe?"},
        "retrieved": [Retrieval(step=1, subgoal="G1", query="q1", hits=[evidence("D2:4", D2_4)])],
    }
    update = refine(state, runtime_for(with_model(resources, script.model)))
    assert update["subgoals"]["G2"].render() == VISITED and update["antecedent_of"] == {"G2": "G1"}
    assert update["unresolved"] == {"G1": "which cafe?", "G2": "not tried"}
    assert update["depth"] == 1 and update["step"] == 2 and update["cost"].llm_calls == 1


def test_retrieve_node_and_routers_alone(resources: Resources) -> None:
    backbone = FixedBackbone()
    runtime = runtime_for(resources, retriever=backbone, max_memories=3, k_per_subgoal=2)
    update = retrieve({"namespace": "sample", "subgoal": "G1", "query": "matcha", "k": 1, "step": 1}, runtime)
    assert [h.id for h in update["retrieved"][0].hits] == ["D2:4"] and update["queried"] == {"G1": "matcha"}
    assert backbone.queries == ["matcha"]
    state = {
        "namespace": "sample",
        "step": 1,
        "subgoals": {"G1": parse_atom(DRINK_AT_CAFE), "G2": parse_atom(VISITED)},
        **update,
    }
    sends = route_after_decompose(state, runtime)
    # G1's query is new (it was "matcha"), and the two branches share the 2 memories left of the budget.
    assert all(isinstance(s, Send) and s.node == "retrieve" for s in sends)
    assert [(s.arg["subgoal"], s.arg["k"]) for s in sends] == [("G1", 1), ("G2", 1)]
    assert route_after_decompose({**state, "exhausted": True}, runtime) == "fail"
    queried = {sid: atom.text() for sid, atom in state["subgoals"].items()}
    done = {**state, "queried": queried, "resolved": {}, "last_unified": {}, "breadth": 3}
    assert route_after_refine(done, runtime) == "unify"
    rendered = {sid: atom.render() for sid, atom in state["subgoals"].items()}
    assert route_after_refine({**done, "last_unified": rendered}, runtime) == "fail"
    assert route_after_refine({**done, "last_unified": rendered, "breadth": 1}, runtime) == "decompose"
    assert route_after_unify({**done, "depth": 0, "unresolved": {"G1": "no"}}, runtime) == "refine"
    assert route_after_unify({**done, "depth": 1, "new_in_step": 0, "unresolved": {"G1": "no"}}, runtime) == "fail"
    assert fail({})["answer"] == FAILURE_ANSWER


def test_strategy_registry_and_context_options(ingested_sample: Resources) -> None:
    from logicmap.graphs.strategies.registry import answer as strategy_answer

    result = strategy_answer(
        "goalmem",
        "What drink did Maya have at the cafe she visited?",
        "sample",
        resources=ingested_sample,
        policy="heuristic",
        backbone="bm25",
    )
    assert (
        result.strategy == "goalmem" and json.loads(result.model_dump_json())["details"]["limits"]["max_breadth"] == 3
    )
    context = GoalMemContext(max_breadth=1, max_depth=1, backbone="events")
    result = answer(QUESTION, "sample", resources=ingested_sample, policy="heuristic", context=context)
    assert result.details["backbone"] == "events" and result.details["limits"]["max_depth"] == 1
    # The caller's context is left as it was (no resources, policy or namespace filled in).
    assert context.resources is None and context.policy == "auto" and context.namespace is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'beam' for strategy 'goalmem'"):
        answer(QUESTION, "sample", resources=ingested_sample, policy="heuristic", beam=3)
