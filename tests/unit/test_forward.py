"""Forward-reasoning baselines: query reformulation, self-reflection and ReAct over the same backbones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from logicmap.agents.answerers import answer_from_memory_lines
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.forward import FORWARD_STRATEGIES, answer_react, answer_reflect, answer_reformulate
from logicmap.memory.language.text import NO_ANSWER
from logicmap.prompts import forward_answer, forward_react, forward_reflect, forward_reformulate

QUESTION = "What drink did Maya have at the cafe she visited?"


def with_model(base: Resources, model: Any) -> Resources:
    res = Resources(settings=base.settings, store_=base.store, embeddings_=base.embeddings_)
    res.llm_ = model
    return res


def human(messages: Sequence[BaseMessage]) -> str:
    return str(messages[1].content)


@pytest.mark.parametrize("strategy", [answer_reformulate, answer_reflect, answer_react])
@pytest.mark.parametrize("backbone", ["bm25", "dense", "events"])
def test_baselines_run_without_a_model(ingested_sample: Resources, strategy: Any, backbone: str) -> None:
    result = strategy(QUESTION, "sample", resources=ingested_sample, policy="heuristic", backbone=backbone)
    assert result.answer and result.evidence and result.cited_turns()
    assert result.cost.llm_calls == 0 and not result.fallbacks
    assert result.details["backbone"] == backbone and result.details["memories_retrieved"] <= 60


def test_reformulation_searches_each_query_and_answers_once(ingested_sample: Resources) -> None:
    model = ScriptedChatModel(
        routes={
            forward_reformulate.SYSTEM_MARKER: [{"queries": ["Maya visited a new cafe", "drink at the Blue Finch"]}],
            forward_answer.SYSTEM_MARKER: [{"answer": "An iced matcha latte", "cited": ["D2:4", "D2:2"]}],
        }
    )
    result = answer_reformulate(QUESTION, "sample", resources=with_model(ingested_sample, model), k=3)
    assert result.answer == "An iced matcha latte" and result.details["queries"] == [
        "Maya visited a new cafe",
        "drink at the Blue Finch",
    ]
    assert [e.id for e in result.evidence] == ["D2:4", "D2:2"]
    assert result.cost.llm_calls == 2 and len(model.calls) == 2
    shown = human(model.calls[1])
    assert "D2:2" in shown and "D2:4" in shown


def test_self_reflection_follows_up_on_a_gap(ingested_sample: Resources) -> None:
    model = ScriptedChatModel(
        routes={
            forward_answer.SYSTEM_MARKER: [
                {"answer": "Something at a cafe", "cited": []},
                {"answer": "An iced matcha latte", "cited": ["D2:4"]},
            ],
            forward_reflect.SYSTEM_MARKER: [
                {"sufficient": False, "missing": "the drink", "query": "Blue Finch iced matcha latte"},
                {"sufficient": True},
            ],
        }
    )
    result = answer_reflect(QUESTION, "sample", resources=with_model(ingested_sample, model), k=3, max_rounds=2)
    assert result.answer == "An iced matcha latte" and result.cited_turns() == ["D2:4"]
    assert [r["sufficient"] for r in result.details["rounds"]] == [False, True]
    assert result.cost.llm_calls == 4


def test_reflection_without_a_query_is_retried_then_stops(ingested_sample: Resources) -> None:
    model = ScriptedChatModel(
        routes={
            forward_answer.SYSTEM_MARKER: [{"answer": "a latte", "cited": []}],
            forward_reflect.SYSTEM_MARKER: [{"sufficient": False}, {"sufficient": False}],
        }
    )
    result = answer_reflect(QUESTION, "sample", resources=with_model(ingested_sample, model))
    assert result.answer == "a latte" and result.fallbacks[0].role == "forward_reflect"
    assert "follow-up query" in result.fallbacks[0].errors[0]


def test_react_agent_searches_then_answers(ingested_sample: Resources) -> None:
    model = ScriptedChatModel(
        routes={
            forward_react.SYSTEM_MARKER: [
                {"thought": "find the cafe", "action": "search", "query": "Maya visited a new cafe last week"},
                {"thought": "now the drink there", "action": "search", "query": "drink at the Blue Finch"},
                {"thought": "done", "action": "answer", "answer": "An iced matcha latte", "cited": ["D2:4", "D2:2"]},
            ]
        }
    )
    result = answer_react(QUESTION, "sample", resources=with_model(ingested_sample, model), k=3)
    assert result.answer == "An iced matcha latte" and result.cited_turns() == ["D2:4", "D2:2"]
    assert (
        len(result.details["transcript"]) == 4 and "search[drink at the Blue Finch]" in result.details["transcript"][2]
    )
    assert "Observation" in human(model.calls[2]) and "D2:2" in human(model.calls[2])
    assert result.cost.llm_calls == 3


def test_react_malformed_steps_fall_back_and_the_last_step_must_answer(ingested_sample: Resources) -> None:
    model = ScriptedChatModel(
        routes={
            forward_react.SYSTEM_MARKER: [
                "I will search",
                {"action": "search"},  # step 1: both invalid -> fallback searches the question
                {"action": "search", "query": "cafe"},  # step 2
                {"action": "search", "query": "more"},
                {"action": "search", "query": "again"},  # step 3: no searches left
            ]
        }
    )
    result = answer_react(QUESTION, "sample", resources=with_model(ingested_sample, model), max_steps=3)
    roles = [f.role for f in result.fallbacks]
    assert roles == ["forward_react", "forward_react"]
    assert "no searches left" in result.fallbacks[1].errors[0]
    assert result.answer and len(result.details["transcript"]) == 4


def test_memory_budget_is_shared_by_all_searches(ingested_sample: Resources) -> None:
    model = ScriptedChatModel(
        routes={
            forward_reformulate.SYSTEM_MARKER: [{"queries": ["cafe", "drink", "Lisbon"]}],
            forward_answer.SYSTEM_MARKER: [{"answer": "latte", "cited": []}],
        }
    )
    result = answer_reformulate(QUESTION, "sample", resources=with_model(ingested_sample, model), k=5, max_memories=7)
    assert result.details["memories_retrieved"] <= 7


def test_extractive_answer_and_strategy_names() -> None:
    memories = [
        ("D1:1", "Maya: I adopted a dog. His name is Biscuit.", None),
        ("D2:4", "Maya: At the Blue Finch I had an iced matcha latte. It was the best drink.", None),
    ]
    extracted = answer_from_memory_lines("What drink did Maya have?", memories)
    assert extracted.cited == ["D2:4"] and "matcha" in extracted.answer
    assert answer_from_memory_lines("Quantum chromodynamics?", memories).answer == NO_ANSWER
    assert set(FORWARD_STRATEGIES) == {"forward_reformulate", "forward_reflect", "forward_react"}
