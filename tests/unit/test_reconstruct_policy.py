"""MRAgent's policy objects (agents.reconstruct_policy): the factory's choice, the rule policy's decisions (the
no-LLM rules the graph used to branch into), the LLM policy asking a scripted model and recording its fallbacks."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from logicmap.agents.answerers import answer_from_active_set
from logicmap.agents.reconstruct_policy import (
    LLMReconstructPolicy,
    NavigatorTurn,
    RuleReconstructPolicy,
    rank_events,
    reconstruct_policy,
)
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.runtime.result import EvidenceItem
from logicmap.memory.indexes.cue_index import CueIndex
from logicmap.prompts import query_cues
from logicmap.prompts.reconstruct import ANSWER_TOOL, build_final_messages

NS = "sample"
DOG = "What is the name of Maya's dog?"


def turn_of(res: Any, number: int, **changes: Any) -> NavigatorTurn:
    values: dict[str, Any] = dict(
        question=DOG,
        turn=number,
        messages=[],
        active=[],
        seed_cues=["dog", "Maya"],
        snapshot=res.store.snapshot(NS),
        k=5,
        max_turns=8,
        max_tool_calls=10,
    )
    return NavigatorTurn(**{**values, **changes})


def event_item(res: Any, turn_id: str) -> EvidenceItem:
    event = next(e for e in res.store.snapshot(NS).events.values() if turn_id in e.turn_ids)
    return EvidenceItem(kind="event", id=event.id, text=event.render(), turn_ids=list(event.turn_ids))


def no_tools() -> list[Any]:
    raise AssertionError("the rule navigator builds no tools")


def test_the_factory_is_the_one_place_that_reads_the_policy_name() -> None:
    model = ScriptedChatModel()
    assert reconstruct_policy("heuristic", None) == RuleReconstructPolicy()
    assert reconstruct_policy("heuristic", model) == RuleReconstructPolicy()  # a model present is not used
    assert reconstruct_policy("llm", model) == LLMReconstructPolicy(model)
    missing = reconstruct_policy("llm", None)  # asked for the model, none configured: the rules, recorded once
    assert missing == RuleReconstructPolicy(missing=True)
    record = missing.missing_model()
    assert record is not None and "no chat model configured" in record.reason
    assert RuleReconstructPolicy().missing_model() is None and LLMReconstructPolicy(model).missing_model() is None


def test_the_rule_policy_decides_by_the_no_llm_rules(ingested_sample) -> None:
    policy = RuleReconstructPolicy()
    snapshot = ingested_sample.store.snapshot(NS)
    index = CueIndex.of(snapshot)
    cues = policy.query_cues(DOG, index, method="function_calling", tags=())
    assert [c.text for c in cues.cues] == [c.text for c in index.cues_of_text(DOG, limit=8)] and cues.fallback is None

    first = policy.navigate(turn_of(ingested_sample, 1), no_tools, {})
    assert first.cost is None and first.failure is None and first.reply is not None
    names = [c["name"] for c in first.reply.tool_calls]
    assert names[0] == "search_events" and first.reply.tool_calls[0]["args"] == {"query": DOG, "k": 5}
    assert "query_tag_events" in names and ANSWER_TOOL not in names

    active = [event_item(ingested_sample, "D1:1")]
    last = policy.navigate(turn_of(ingested_sample, 8, active=active), no_tools, {})  # the turns are spent: answer
    assert last.reply is not None
    answer = last.reply.tool_calls[0]
    expected = answer_from_active_set(
        DOG, active, snapshot, ranked_events=rank_events([], active), cues=["dog", "Maya"]
    )
    assert answer["name"] == ANSWER_TOOL and answer["args"] == expected.model_dump() and "Biscuit" in expected.answer

    assert policy.budget_note(3, 1, 10) == [] and policy.tool_extras(False) and policy.answered_mode() == "heuristic"
    final = policy.final_answer(
        build_final_messages(DOG, "(none)"),
        validate=lambda r: [],
        fallback=lambda: expected,
        method="function_calling",
        tags=(),
        metadata={},
    )
    assert final.output == expected and final.cost.llm_calls == 0
    assert policy.recorded(final.fallback) == []  # the rule is the policy, not a fallback


def test_the_rule_prune_keeps_what_the_rule_keeps(ingested_sample) -> None:
    policy = RuleReconstructPolicy()
    memories = [("M1", "Maya: My dog Biscuit loves the beach."), ("M2", "Leo: The weather in Porto was grey.")]
    outcome = policy.prune(
        DOG,
        memories,
        embeddings=ingested_sample.embeddings,
        floor=0.1,
        limit=1,
        question_date=None,
        method="function_calling",
        tags=(),
    )
    assert outcome.output.keep == ["M1"] and policy.pruned_by(outcome) == "rule"
    assert policy.recorded(outcome.fallback) == [] and outcome.cost.llm_calls == 0


def test_the_llm_policy_asks_the_model_and_records_its_fallbacks(ingested_sample) -> None:
    call = {"name": "get_event", "args": {"event_id": "S1-E1"}, "type": "tool_call"}
    model = ScriptedChatModel(
        routes={query_cues.SYSTEM_MARKER: ["not json", "still not json"]},
        replies=[AIMessage(content="", tool_calls=[{**call, "id": f"c{i}"} for i in range(3)]), "garbage", "garbage"],
    )
    policy = LLMReconstructPolicy(model)
    cues = policy.query_cues(DOG, CueIndex.of(ingested_sample.store.snapshot(NS)), method="function_calling", tags=())
    assert len(model.calls) == 2 and cues.fallback is not None  # asked, retried once, fell back to the matcher
    assert policy.recorded(cues.fallback) == [cues.fallback]

    built: list[bool] = []

    def tools() -> list[Any]:
        built.append(True)
        return []

    step = policy.navigate(turn_of(ingested_sample, 1, max_tool_calls=2), tools, {})
    assert built == [True] and step.cost is not None and step.cost.llm_calls == 1
    assert step.reply is not None and len(step.reply.tool_calls) == 2 and step.dropped == 1  # the per-turn budget

    final = policy.final_answer(
        build_final_messages(DOG, "(none)"),
        validate=lambda r: [],
        fallback=lambda: answer_from_active_set(DOG, [], ingested_sample.store.snapshot(NS)),
        method="function_calling",
        tags=(),
        metadata={},
    )
    assert final.fallback is not None and policy.recorded(final.fallback) == [final.fallback]
    assert len(model.calls) == 5 and policy.answered_mode() == "answered"
    assert policy.budget_note(3, 1, 10)[0].content and policy.tool_extras(False) is False


def test_a_failed_navigator_call_is_a_failure_step_not_an_exception(ingested_sample) -> None:
    def broken(messages: Any) -> Any:
        raise RuntimeError("connection reset")

    step = LLMReconstructPolicy(ScriptedChatModel(respond=broken)).navigate(turn_of(ingested_sample, 1), list, {})
    assert step.reply is None and step.failure is not None
    assert "RuntimeError: connection reset" in step.failure.errors[0]


def test_a_run_that_asks_for_the_model_without_one_runs_the_rules_and_says_so_once(ingested_sample) -> None:
    from logicmap.graphs.strategies.reconstruct import answer

    asked = answer(DOG, NS, resources=ingested_sample, policy="llm")
    rules = answer(DOG, NS, resources=ingested_sample, policy="heuristic")
    assert asked.answer == rules.answer and "Biscuit" in asked.answer and asked.cost.llm_calls == 0
    assert [(f.role, f.reason) for f in asked.fallbacks] == [
        ("navigator", "no chat model configured: deterministic navigation used")
    ]
    assert rules.fallbacks == [] and asked.details["mode"] == rules.details["mode"]
