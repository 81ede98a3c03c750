"""Garbage model output: every LLM role gets random replies; no exception escapes, fallbacks are recorded,
memory stays consistent.

Replies are drawn by hypothesis (invalid JSON, wrong types, unknown ids, empty and ~100 kB strings, valid
JSON of the wrong schema, tool calls with bad arguments, failing calls) and built per call for the schema
the role bound (tests/reliability/support.py ``GarbageChatModel``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.result import AnswerResult
from logicmap.memory.files.loaders import load_conversations
from tests.reliability.support import (
    GUARANTEED_INVALID_KINDS,
    REPLY_KINDS,
    SAMPLE,
    GarbageChatModel,
    ReplySpec,
    available_strategy,
    memory_problems,
    require_module,
    strategy_names,
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**18) | st.floats(allow_nan=False) | st.text(max_size=24),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)


def reply_specs(kinds: tuple[str, ...]) -> st.SearchStrategy[list[ReplySpec]]:
    spec = st.builds(
        ReplySpec,
        kind=st.sampled_from(kinds),
        text=st.text(max_size=60),
        payload=JSON_VALUES,
        seed=st.integers(0, 2**32 - 1),
    )
    return st.lists(spec, min_size=1, max_size=8)


ANY_REPLIES = reply_specs(REPLY_KINDS)
INVALID_REPLIES = reply_specs(GUARANTEED_INVALID_KINDS)
# CI runs a fixed, derandomized sample; LOGICMAP_FUZZ_EXAMPLES=N explores N random examples per test instead.
_DEEP = int(os.environ.get("LOGICMAP_FUZZ_EXAMPLES", "0"))
INGEST_RUNS = settings(
    max_examples=_DEEP or 10,
    deadline=None,
    derandomize=not _DEEP,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ANSWER_RUNS = settings(INGEST_RUNS, max_examples=_DEEP or 16)
_names = itertools.count()

CONVERSATION = load_conversations(SAMPLE)[0]
TWO_SESSIONS = CONVERSATION.model_copy(update={"sessions": CONVERSATION.sessions[:2]})
SESSION_TURNS = {s.session_id: [t.dia_id for t in s.turns] for s in CONVERSATION.sessions}


def _ingest_with(module_resources, specs):
    model = GarbageChatModel(specs=specs)
    module_resources.llm_ = model
    namespace = f"garbage-{next(_names)}"
    try:
        report = ingest_conversation(TWO_SESSIONS, namespace, resources=module_resources, policy="llm")
    finally:
        module_resources.llm_ = None
    return model, namespace, report


def _check_memory(module_resources, namespace: str) -> None:
    snap = module_resources.store.snapshot(namespace)
    assert sorted(snap.manifest.sessions) == ["S1", "S2"], "a session was lost to bad model output"
    problems = memory_problems(snap, SESSION_TURNS)
    assert not problems, "\n".join(problems)


@INGEST_RUNS
@given(specs=ANY_REPLIES)
def test_ingest_survives_any_reply_and_keeps_memory_consistent(module_resources, specs) -> None:
    model, namespace, report = _ingest_with(module_resources, specs)
    _check_memory(module_resources, namespace)
    called = set(model.roles_called)
    assert {"segmenter", "relation_extractor", "topic_abstractor"} <= called  # MRAgent's Eq. 18 role included
    for topic in module_resources.store.snapshot(namespace).topics.values():  # a label is whole or absent
        assert (topic.label is None) == (topic.label_source is None) == (topic.description is None), topic.id
        assert topic.label is None or (topic.label.strip() and len(topic.label) <= 60)
    assert {f.role for f in report.fallbacks} <= called | {"ingest"}
    for session in report.sessions:  # what fell back is also recorded per session and in the manifest
        info = module_resources.store.snapshot(namespace).manifest.sessions[session.session_id]
        assert {f.role for f in info.fallbacks} == {line.split(": ")[0] for line in session.fallbacks}
        assert sum(f.calls for f in info.fallbacks) == len(session.fallbacks)


@INGEST_RUNS
@given(specs=INVALID_REPLIES)
def test_ingest_records_a_fallback_for_every_role_that_got_only_garbage(module_resources, specs) -> None:
    model, namespace, report = _ingest_with(module_resources, specs)
    _check_memory(module_resources, namespace)
    called = set(model.roles_called)
    assert called, "the llm policy called no role"
    assert called <= {f.role for f in report.fallbacks}, f"roles without a recorded fallback: {called}"
    snap = module_resources.store.snapshot(namespace)
    assert all(info.fallbacks for info in snap.manifest.sessions.values())
    assert all(e.source == "fallback" for e in snap.events.values())
    assert all(t.label_source in (None, "fallback") for t in snap.topics.values())  # no garbage stored as llm


def _check_answer(result: AnswerResult, resources, namespace: str, before: dict) -> None:
    assert isinstance(result, AnswerResult) and isinstance(result.answer, str)
    snap = resources.store.snapshot(namespace)
    known = {**snap.events, **snap.turns, **snap.facts}
    for item in result.evidence:
        if item.kind in ("event", "turn"):
            assert item.id in known, f"evidence {item.kind} {item.id!r} does not exist in memory"
        missing = [t for t in item.turn_ids if t not in snap.turns]
        assert not missing, f"evidence {item.id!r} cites turns {missing} that do not exist"
    assert _digest(snap.fingerprint()) == before, "answering a question changed memory"


def _digest(fingerprint: dict) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def sample_before(sample_memory) -> str:
    return _digest(sample_memory.store.snapshot("sample").fingerprint())


QUESTIONS = st.sampled_from(
    [
        "What is the name of Maya's dog?",
        "When did Leo run the Lisbon half marathon and why did he start training?",
        'E1 S1-E1 D1:1 {"json": true} ' + "very long question " * 200,
    ]
)


@pytest.mark.parametrize("strategy", strategy_names())
@ANSWER_RUNS
@given(specs=ANY_REPLIES, question=QUESTIONS, batched=st.booleans())
def test_every_strategy_survives_any_reply(sample_memory, sample_before, strategy, specs, question, batched) -> None:
    answer = available_strategy(strategy)
    model = GarbageChatModel(specs=specs)
    sample_memory.llm_ = model
    try:
        options = {"explorer_mode": "batched" if batched else "parallel"} if strategy == "compass" else {}
        result = answer(question, "sample", resources=sample_memory, policy="llm", **options)
    finally:
        sample_memory.llm_ = None
    _check_answer(result, sample_memory, "sample", sample_before)
    assert {f.role for f in result.fallbacks} <= set(model.roles_called) | {strategy, "responder", "navigator", "real"}


@pytest.mark.parametrize("strategy", strategy_names())
@ANSWER_RUNS
@given(specs=INVALID_REPLIES)
def test_every_strategy_records_a_fallback_for_every_role_that_got_only_garbage(
    sample_memory, sample_before, strategy, specs
) -> None:
    answer = available_strategy(strategy)
    model = GarbageChatModel(specs=specs)
    sample_memory.llm_ = model
    try:
        result = answer("What is the name of Maya's dog?", "sample", resources=sample_memory, policy="llm")
    finally:
        sample_memory.llm_ = None
    _check_answer(result, sample_memory, "sample", sample_before)
    recorded = {f.role for f in result.fallbacks}
    # A tool-calling agent answered with error ToolMessages may simply run out of turns: that is recorded as
    # a forced final answer rather than as a fallback of the agent role itself.
    agent_roles = {"agent", "navigator"} if result.details.get("mode") == "forced" else {"agent"}
    called = set(model.roles_called) - agent_roles
    assert called <= recorded, (
        f"{strategy}: roles that got only garbage but recorded no fallback: {sorted(called - recorded)}"
    )


@pytest.mark.parametrize("strategy", strategy_names())
@pytest.mark.parametrize("question", ["", "   ", "?", "\x00\ud7ff\n\t"])
@pytest.mark.parametrize("policy", ["llm", "heuristic"])
def test_degenerate_questions_get_an_answer_not_an_exception(
    sample_memory, sample_before, strategy, question, policy
) -> None:
    """An empty or content-free question (with no model configured, so every role falls back)."""
    answer = available_strategy(strategy)
    result = answer(question, "sample", resources=sample_memory, policy=policy)
    _check_answer(result, sample_memory, "sample", sample_before)


@settings(ANSWER_RUNS, max_examples=_DEEP or 6)
@given(specs=ANY_REPLIES, strategy=st.sampled_from(["compass", "dense", "reconstruct", "goalmem", "real"]))
def test_the_chatbot_survives_any_reply_and_stores_consistent_turns(module_resources, specs, strategy) -> None:
    """The chatbot graph end to end: recall with a strategy, reply, queue the turn; garbage in every role."""
    chatbot = require_module("logicmap.graphs.chat.chatbot")
    available_strategy(strategy)
    from langgraph.checkpoint.memory import InMemorySaver

    work = chatbot.IngestionQueue()
    bot = chatbot.build_chatbot_graph().compile(checkpointer=InMemorySaver())
    namespace = f"chat-{next(_names)}"
    context = chatbot.ChatContext(
        namespace=namespace, strategy=strategy, policy="llm", ingestion=work, resources=module_resources
    )
    module_resources.llm_ = GarbageChatModel(specs=specs)
    try:
        for text in ("I adopted a puppy called Biscuit last week.", "What is my puppy called?"):
            out = bot.invoke(
                {"messages": [("user", text)]}, {"configurable": {"thread_id": namespace}}, context=context
            )
            assert isinstance(out["messages"][-1].content, str)
            assert work.flush(timeout=120), "ingestion did not finish"
    finally:
        module_resources.llm_ = None
    assert not work.errors, work.errors
    snap = module_resources.store.snapshot(namespace)
    assert len(snap.manifest.sessions) == 2, "a chat turn was not stored"
    problems = memory_problems(snap)
    assert not problems, "\n".join(problems)
