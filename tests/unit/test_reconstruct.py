"""MRAgent reconstruction: the agent loop with a scripted tool-calling model, budgets, forced answers, heuristic policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from logicmap.agents.answerers import answer_from_active_set
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.runtime.result import EvidenceItem
from logicmap.graphs.strategies.reconstruct import (
    ReconstructContext,
    ReconstructState,
    answer,
    build_reconstruct_graph,
)
from logicmap.memory.language.text import NO_ANSWER
from logicmap.prompts import query_cues

SNAPSHOTS = Path(__file__).parent / "snapshots"
NS = "sample"
NAVIGATOR = "reconstructing the memory"  # in the navigator's system prompt
FINAL = "from the memories below only"  # in the forced final answer's system prompt
QUERY_CUES = query_cues.SYSTEM_MARKER  # the query cue role (EXTRACTCUES)
PRUNER = "You prune the working memory"  # in the active-set pruner's system prompt
DOG = "What is the name of Maya's dog?"


def keep_everything(messages) -> dict[str, Any]:
    """A pruner that keeps the whole active set (these tests are about navigation, not pruning)."""
    import re

    return {"keep": re.findall(r"^(M\d+):", str(messages[-1].content), flags=re.MULTILINE), "answer_now": False}


def with_model(base: Resources, model: ScriptedChatModel) -> Resources:
    """The ingested sample's store and embedder with a scripted chat model."""
    return Resources(settings=base.settings, store_=base.store, embeddings_=base.embeddings, llm_=model)


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def event_of(resources: Resources, dia_id: str) -> str:
    return next(e.id for e in resources.store.snapshot(NS).events.values() if dia_id in e.turn_ids)


def tool_messages(messages: list) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def test_heuristic_policy_navigates_with_the_tools_and_answers_extractively(ingested_sample) -> None:
    result = answer("What race does Leo want to run next?", NS, resources=ingested_sample, policy="heuristic")
    assert "full marathon" in result.answer and result.details["cited_turn_ids"] == ["D4:8"]
    assert result.cost.llm_calls == 0 and result.details["mode"] == "heuristic"
    assert result.steps == 3 and result.details["tool_calls"] >= 3
    tools_used = [t["tool"] for t in result.details["tool_trace"]]
    assert tools_used[0] == "search_events" and "get_event" in tools_used
    assert result.evidence[0].kind == "turn" and result.evidence[0].id == "D4:8"  # cited turns lead the evidence
    assert "D4:8" in result.details["turn_texts"]

    when = answer("When did Leo finish the half marathon?", NS, resources=ingested_sample, policy="heuristic")
    assert "7 May 2023" in when.answer and "query_conversation_time" in [t["tool"] for t in when.details["tool_trace"]]


def test_no_chat_model_with_llm_policy_uses_the_deterministic_navigator(ingested_sample) -> None:
    result = answer(DOG, NS, resources=ingested_sample, policy="llm")
    assert "Biscuit" in result.answer and result.cost.llm_calls == 0
    assert [f.role for f in result.fallbacks] == ["navigator"]


def test_scripted_agent_navigates_recovers_from_a_bad_id_and_answers(ingested_sample) -> None:
    eid = event_of(ingested_sample, "D1:1")
    model = ScriptedChatModel(
        routes={
            QUERY_CUES: [{"keywords": ["dog"]}],
            NAVIGATOR: [
                AIMessage(
                    content="",
                    tool_calls=[
                        tool_call("query_tag_events", {"cue": "Biscuit"}, "c1"),
                        tool_call("get_event", {"event_id": "S9-E9"}, "c2"),
                    ],
                ),
                AIMessage(content="", tool_calls=[tool_call("get_event", {"event_id": eid}, "c3")]),
                AIMessage(
                    content="",
                    tool_calls=[
                        tool_call(
                            "submit_answer",
                            {
                                "answer": "Biscuit",
                                "cited_event_ids": [eid],
                                "cited_turn_ids": ["D1:1"],
                                "confidence": 0.9,
                            },
                            "c4",
                        )
                    ],
                ),
            ],
        },
        respond=keep_everything,
    )
    result = answer(DOG, NS, resources=with_model(ingested_sample, model), extra_tools=True)  # get_event: an extra
    assert result.answer == "Biscuit" and result.details["confidence"] == 0.9
    assert result.details["mode"] == "answered" and result.steps == 3
    # The query cue role, three navigator turns and a pruner call after each of the two tool rounds.
    assert result.cost.llm_calls == 6 and result.details["tool_calls"] == 3
    assert [p["by"] for p in result.details["prune_trace"]] == ["model", "model"] and not result.fallbacks
    assert [t["status"] for t in result.details["tool_trace"]] == ["success", "error", "success"]
    assert result.evidence[0].id == "D1:1" and result.evidence[1].id == eid
    # The question's cues seeded the first prompt; the bad id came back as a message the model saw.
    first = model.calls[1]
    assert "Cues found in the question: dog (entity)" in first[1].content and eid in first[1].content
    errors = [m.content for m in tool_messages(model.calls[3]) if m.status == "error"]
    assert len(errors) == 1 and "No event with id 'S9-E9'" in errors[0]


def test_tool_call_and_turn_budgets_then_a_forced_final_answer(ingested_sample) -> None:
    eid = event_of(ingested_sample, "D4:4")
    twelve = AIMessage(
        content="", tool_calls=[tool_call("query_event_keywords", {"event_id": eid}, f"k{i}") for i in range(12)]
    )
    final = {"answer": "1 hour 52 minutes", "cited_event_ids": [eid], "cited_turn_ids": ["D4:4"], "confidence": 0.7}
    model = ScriptedChatModel(
        routes={
            QUERY_CUES: [{"keywords": ["Leo", "half marathon"]}],
            NAVIGATOR: [twelve, twelve, twelve],
            FINAL: [final],
        },
        respond=keep_everything,
    )
    result = answer(
        "What was Leo's half marathon time?",
        NS,
        resources=with_model(ingested_sample, model),
        max_turns=3,
        max_tool_calls_per_turn=10,
    )
    assert result.steps == 3 and result.details["tool_calls"] == 30 and result.details["dropped_tool_calls"] == 6
    assert result.details["mode"] == "forced" and result.answer == "1 hour 52 minutes"
    assert result.cost.llm_calls == 8  # query cues, three navigator turns, a pruner per tool round, the forced answer
    navigator_calls = [c for c in model.calls if NAVIGATOR in str(c[0].content)]
    assert "2 tool call(s) were not run" in navigator_calls[1][-1].content
    assert "This is your last turn" in navigator_calls[2][-1].content
    final_prompt = model.calls[-1][1].content
    assert f"[event {eid}" in final_prompt and "[D4:4]" in final_prompt  # the active set, with turns verbatim


def test_invalid_answers_and_unparseable_arguments_are_told_or_forced(ingested_sample) -> None:
    eid = event_of(ingested_sample, "D1:1")
    model = ScriptedChatModel(
        routes={
            QUERY_CUES: [{"keywords": ["dog"]}],
            NAVIGATOR: [
                AIMessage(
                    content="",
                    invalid_tool_calls=[
                        {
                            "name": "get_event",
                            "args": "{event_id: S1",
                            "id": "bad1",
                            "error": "Expecting property name",
                            "type": "invalid_tool_call",
                        }
                    ],
                ),
                AIMessage(
                    content="",
                    tool_calls=[
                        tool_call(
                            "submit_answer",
                            {
                                "answer": "Biscuit",
                                "cited_event_ids": ["S42-E1"],
                                "cited_turn_ids": [],
                                "confidence": 0.8,
                            },
                            "c2",
                        )
                    ],
                ),
            ],
            FINAL: [{"answer": "Biscuit", "cited_event_ids": [eid], "cited_turn_ids": ["D1:1"], "confidence": 0.6}],
        },
        respond=keep_everything,
    )
    result = answer(DOG, NS, resources=with_model(ingested_sample, model))
    told = [m for m in tool_messages(model.calls[3]) if m.tool_call_id == "bad1"]
    assert told and told[0].status == "error" and "not valid JSON" in told[0].content
    assert result.details["mode"] == "forced" and result.details["cited_event_ids"] == [eid]
    assert any(f.role == "navigator" and "S42-E1" in " ".join(f.errors) for f in result.fallbacks)
    assert result.cost.llm_calls == 5  # query cues, two navigator turns, the pruner, the forced answer


def test_plain_text_then_bad_final_output_falls_back_to_the_extractive_answer(ingested_sample) -> None:
    model = ScriptedChatModel(
        routes={
            QUERY_CUES: [{"keywords": ["dog"]}],
            NAVIGATOR: ["I think the dog is called Rex."],
            FINAL: ["no idea", "still no JSON"],
        }
    )
    result = answer(DOG, NS, resources=with_model(ingested_sample, model))
    assert result.cost.llm_calls == 4  # query cues, navigator, final answer, its one retry
    assert {f.role for f in result.fallbacks} == {"navigator", "reconstruct_answer"}
    assert "Biscuit" in result.answer and result.details["cited_turn_ids"]


def test_a_model_whose_call_raises_still_gets_an_answer(ingested_sample) -> None:
    def broken(messages):
        raise RuntimeError("the reply could not be read")

    result = answer(DOG, NS, resources=with_model(ingested_sample, ScriptedChatModel(respond=broken)))
    assert "Biscuit" in result.answer and result.cost.llm_calls == 0
    assert any("could not be read" in " ".join(f.errors) for f in result.fallbacks)


def test_an_unreachable_model_stops_the_question_instead_of_answering(ingested_sample) -> None:
    from logicmap.agents.provider import ProviderError, rate_gate

    calls = []

    def down(messages):
        calls.append(1)
        raise ConnectionError("model server unreachable")

    rate_gate.clear()
    with pytest.raises(ProviderError) as caught:
        answer(DOG, NS, resources=with_model(ingested_sample, ScriptedChatModel(respond=down)))
    assert caught.value.kind == "unreachable" and "unreachable" in str(caught.value) and len(calls) == 3


def test_extractive_answer_says_not_in_memory_without_matching_evidence(ingested_sample) -> None:
    snapshot = ingested_sample.store.snapshot(NS)
    assert answer_from_active_set("What is the capital of Peru?", [], snapshot).answer == NO_ANSWER
    item = EvidenceItem(kind="turn", id="D1:6", text="", turn_ids=["D1:6"])
    found = answer_from_active_set("Which food is Leo's favourite?", [item], snapshot)
    assert "Sushi" in found.answer and found.cited_turn_ids == ["D1:6"] and 0 < found.confidence < 1


def test_unknown_namespace_raises(ingested_sample) -> None:
    from logicmap.memory.store import UnknownNamespaceError

    with pytest.raises(UnknownNamespaceError):
        answer(DOG, "nobody", resources=ingested_sample, policy="heuristic")


def test_graph_runs_async_and_reports_its_budgets_in_the_context(ingested_sample) -> None:
    compiled = build_reconstruct_graph().compile()
    # The namespace from config['configurable'], as a deployment passes it; the whole state read back.
    final = asyncio.run(
        compiled.ainvoke(
            {"question": DOG},
            {"configurable": {"namespace": NS}},
            context=ReconstructContext(policy="heuristic", max_turns=2, resources=ingested_sample),
            output_keys=list(ReconstructState.__annotations__),
        )
    )
    assert final["turns"] == 2 and "Biscuit" in final["final"].answer and final["answer"] == final["final"].answer
    assert ReconstructContext().max_turns == 8 and ReconstructContext().max_tool_calls_per_turn == 10


def test_compiled_graph_diagram_matches_the_snapshot() -> None:
    diagram = build_reconstruct_graph().compile().get_graph().draw_mermaid()
    path = SNAPSHOTS / "reconstruct.mmd"
    assert diagram == path.read_text(encoding="utf-8"), (
        "the reconstruct topology changed: update the snapshot if intended"
    )


# -- single nodes, called alone ---------------------------------------------------------------------


def run_with(context: ReconstructContext):
    """A ``Runtime`` as LangGraph passes it to a node: the context carries the run's resources."""
    from langgraph.runtime import Runtime

    return Runtime(context=context, store=None, stream_writer=lambda _: None, previous=None)


def node_config(runtime) -> dict[str, Any]:
    """The config LangGraph gives a node: it carries the run's ``Runtime``, which the ``ToolNode`` inside
    ``run_tools`` reads (LangGraph keeps that key internal, so a test outside a graph run sets it itself)."""
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME

    return {"configurable": {CONFIG_KEY_RUNTIME: runtime}}


def test_seed_and_navigate_run_alone(ingested_sample) -> None:
    from logicmap.graphs.strategies.reconstruct import after_navigate, navigate, seed

    runtime = run_with(ReconstructContext(policy="heuristic", namespace=NS, resources=ingested_sample))
    state: dict[str, Any] = {"question": DOG}
    state |= seed(state, runtime)
    assert state["namespace"] == NS
    assert "dog" in state["seed_cues"] and state["active"] and all(i.kind == "event" for i in state["active"])
    assert state["turns"] == 0 and NAVIGATOR in state["messages"][0].content and "fallbacks" not in state

    update = navigate(state, runtime, {})
    calls = update["messages"][0].tool_calls
    assert update["turns"] == 1 and calls[0]["name"] == "search_events" and calls[0]["args"]["query"] == DOG
    assert after_navigate({**state, "messages": update["messages"]}) == "tools"


def test_run_tools_alone_answers_bad_calls_with_error_messages(ingested_sample) -> None:
    from logicmap.graphs.strategies.reconstruct import after_prune, memory_tools, run_tools

    assert "get_event" in {t.name for t in memory_tools(NS, ingested_sample)}
    eid = event_of(ingested_sample, "D1:1")
    runtime = run_with(ReconstructContext(policy="heuristic", max_turns=1, resources=ingested_sample))
    last = AIMessage(
        content="",
        tool_calls=[
            tool_call("get_event", {"event_id": eid}, "c1"),
            tool_call("get_event", {"event_id": "S9-E9"}, "c2"),
        ],
        invalid_tool_calls=[
            {
                "name": "get_event",
                "args": "{event_id: S1",
                "id": "bad1",
                "error": "Expecting property name",
                "type": "invalid_tool_call",
            }
        ],
    )
    state = {"namespace": NS, "question": DOG, "messages": [last], "turns": 1, "tool_calls": 0}
    update = run_tools(state, runtime, node_config(runtime))
    by_id = {m.tool_call_id: m for m in tool_messages(update["messages"])}
    assert [by_id[i].status for i in ("c1", "c2", "bad1")] == ["success", "error", "error"]
    assert "No event with id 'S9-E9'" in by_id["c2"].content and "not valid JSON" in by_id["bad1"].content
    assert update["tool_calls"] == 3 and [t["tool"] for t in update["trace"]] == ["get_event"] * 3
    assert update["active"][0].id == eid and {i.kind for i in update["active"][1:]} == {"turn"}  # the event, its turns
    assert after_prune(state, runtime) == "force_answer"  # the turn budget (1) is spent


def test_answer_nodes_run_alone(ingested_sample) -> None:
    from logicmap.graphs.strategies.reconstruct import after_answer, force_answer, take_answer

    runtime = run_with(ReconstructContext(policy="heuristic", resources=ingested_sample))
    eid = event_of(ingested_sample, "D1:1")
    good = AIMessage(
        content="",
        tool_calls=[
            tool_call(
                "submit_answer",
                {"answer": "Biscuit", "cited_event_ids": [eid], "cited_turn_ids": ["D1:1"], "confidence": 0.9},
                "a1",
            )
        ],
    )
    taken = take_answer({"namespace": NS, "question": DOG, "messages": [good]}, runtime)
    assert taken["final"].answer == "Biscuit" and taken["mode"] == "heuristic" and after_answer(taken) == "finish"
    bad = AIMessage(
        content="", tool_calls=[tool_call("submit_answer", {"answer": "Biscuit", "cited_event_ids": ["S42-E1"]}, "a2")]
    )
    refused = take_answer({"namespace": NS, "question": DOG, "messages": [bad]}, runtime)
    assert refused["final"] is None and after_answer(refused) == "force_answer"

    forced = force_answer({"namespace": NS, "question": DOG, "messages": [], "active": []}, runtime)
    assert "Biscuit" in forced["final"].answer and forced["mode"] == "forced" and forced["cost"].llm_calls == 0
    assert forced["active"] and all(i.kind == "event" for i in forced["active"])  # searched: nothing was reached
