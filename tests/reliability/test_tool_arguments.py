"""Tool calls with malformed arguments: the model gets a readable error message back, never an exception.

Checked on every memory tool directly (``tool.invoke``), through a LangGraph ``ToolNode``, and through
the reconstruct graph's own ToolNode driven by a model that sends bad calls.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from pydantic import ValidationError

from tests.reliability.support import GarbageChatModel, ReplySpec, available_strategy, require_module

tools_pkg = require_module("tools")

RUNS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
_ids = itertools.count()

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.just(""),
    st.just("   "),
    st.just("S1-E1"),
    st.just("D1:1"),
    st.just("x" * 200),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def toolkit(resources) -> list[Any]:
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import Conversation

    def ingest(session, namespace):
        return ingest_conversation(
            Conversation(conversation_id="remember", sessions=[session]),
            namespace,
            resources=resources,
            policy="heuristic",
            source="api",
            append=True,
        )

    return tools_pkg.create_memory_toolkit(
        "sample", store=resources.store, embeddings=resources.embeddings, ingest=ingest
    )


class Toolbox(dict):
    """The tools by name (a short repr keeps hypothesis' failure reports readable)."""

    def __repr__(self) -> str:
        return f"Toolbox({sorted(self)})"


@pytest.fixture(scope="module")
def tools(sample_memory) -> Toolbox:
    return Toolbox({t.name: t for t in toolkit(sample_memory)})


def malformed_args(tool: Any) -> st.SearchStrategy[dict[str, Any]]:
    fields = list(tool.args_schema.model_fields)
    keys = st.sampled_from([*fields, "extra", "Query", "eventId", ""])
    return st.one_of(
        st.dictionaries(keys, VALUES, max_size=4),  # wrong types, unknown keys, missing required fields
        st.fixed_dictionaries({f: VALUES for f in fields}),  # every field present, values of any type
        st.just({}),
    )


MAX_MESSAGE = 2000  # an error the model reads back costs tokens: it must stay short whatever it was sent


def assert_readable_error(message: Any, tool_name: str) -> None:
    """A ToolMessage a model can act on: plain text, short, no traceback."""
    assert isinstance(message, ToolMessage), type(message)
    content = message.content if isinstance(message.content, str) else str(message.content)
    assert content.strip(), "empty error message"
    assert "Traceback" not in content, content[:500]
    if message.status == "error":
        assert len(content) <= MAX_MESSAGE, f"{tool_name}: {len(content)}-character error message: {content[:300]}..."


@pytest.mark.parametrize("name", [*tools_pkg.EVENT_TOOLS, *tools_pkg.MRAGENT_TOOLS, "remember"])
@RUNS
@given(data=st.data())
def test_malformed_arguments_come_back_as_a_readable_message(tools, name, data) -> None:
    tool = tools[name]
    args = data.draw(malformed_args(tool), label="args")
    call = {"name": name, "args": args, "id": f"call-{next(_ids)}", "type": "tool_call"}
    message = tool.invoke(call)  # must not raise
    assert_readable_error(message, name)
    try:
        tool.args_schema.model_validate(args)
        schema_ok = True
    except ValidationError as exc:
        schema_ok = False
        bad_fields = {str(e["loc"][0]) for e in exc.errors() if e.get("loc")}
    if not schema_ok:
        assert message.status == "error", f"{name} accepted invalid arguments {args!r}: {message.content[:300]}"
        assert f"Invalid arguments for {name}" in message.content and "Expected arguments" in message.content
        assert any(field in message.content for field in bad_fields), (bad_fields, message.content)
    plain = tool.invoke(args)  # the direct (non tool-call) form returns the same text, never raises
    assert isinstance(plain, str) and plain.strip()


def test_semantic_errors_tell_the_model_what_to_do(tools) -> None:
    def call(name: str, **args: Any) -> ToolMessage:
        return tools[name].invoke({"name": name, "args": args, "id": f"c-{next(_ids)}", "type": "tool_call"})

    cases = [
        (call("get_event", event_id="S9-E9"), "search_events"),
        (call("get_event", event_id="D1:1"), "event_id="),
        (call("events_in_time_range", start="next tuesday"), "YYYY-MM-DD"),
        (call("events_in_time_range", start="2023-06", end="2023-01"), "swap"),
        (call("topic_events", topic_id="T999"), "Topics in this memory"),
        (call("get_neighbors", event_id="S1-E1", relation_types=["no_such_label"]), "Labels in use"),
        (call("query_personal_information", person="Nobody"), "People known"),
        (call("remember", text="   "), "Nothing to remember"),
        (call("remember", text="hi", when="someday"), "YYYY-MM-DD"),
    ]
    for message, hint in cases:
        assert message.status == "error" and hint in message.content, message.content


def _bad_calls(names: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": "get_event", "args": {}, "id": "b1", "type": "tool_call"},
        {"name": "get_event", "args": {"event_id": 42, "extra": True}, "id": "b2", "type": "tool_call"},
        {"name": "search_events", "args": {"query": "", "k": -3}, "id": "b3", "type": "tool_call"},
        {"name": "events_in_time_range", "args": {"start": ["2023"]}, "id": "b4", "type": "tool_call"},
        {"name": "no_such_tool", "args": {"x": 1}, "id": "b5", "type": "tool_call"},
        {
            "name": "query_event_context",
            "args": {"event_id": "S1-E1", "window": 10**9},
            "id": "b6",
            "type": "tool_call",
        },
        {"name": names[0], "args": {"query": "x" * 501}, "id": "b7", "type": "tool_call"},
    ]


@pytest.mark.parametrize("name", ["search_events", "get_event", "query_tag_events", "remember"])
def test_a_huge_wrong_argument_is_not_echoed_back_in_full(tools, name) -> None:
    """A model that pastes a whole document into a short field must not get it all back (tokens, context)."""
    field = next(iter(tools[name].args_schema.model_fields))
    message = tools[name].invoke(
        {"name": name, "args": {field: "x" * 20_000, "bogus": ["y" * 20_000]}, "id": "huge", "type": "tool_call"}
    )
    assert message.status == "error" and f"Invalid arguments for {name}" in message.content
    assert len(message.content) <= MAX_MESSAGE, f"{len(message.content)}-character error message"


def test_a_tool_node_turns_every_bad_call_into_an_error_message(tools) -> None:
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([t for n, t in tools.items() if n != "remember"]))
    builder.add_edge(START, "tools")
    calls = _bad_calls(["search_events"])
    out = builder.compile().invoke({"messages": [AIMessage(content="", tool_calls=calls)]})
    messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in messages] == [c["id"] for c in calls]
    for message, call in zip(messages, calls):
        assert message.status == "error", (call, message.content)
        assert_readable_error(message, call["name"])


def test_the_reconstruct_graph_answers_bad_tool_calls_with_error_messages(sample_memory) -> None:
    reconstruct = require_module("logicmap.graphs.strategies.reconstruct")
    available_strategy("reconstruct")
    calls = _bad_calls(["search_events"])
    replies = [
        AIMessage(content="", tool_calls=calls),
        AIMessage(
            content="",
            invalid_tool_calls=[
                {
                    "name": "get_event",
                    "args": '{"event_id": ',
                    "id": "i1",
                    "error": "bad JSON",
                    "type": "invalid_tool_call",
                }
            ],
        ),
        {"answer": "Biscuit", "cited_event_ids": ["S1-E1"], "cited_turn_ids": ["D1:1"], "confidence": 0.5},
    ]
    from logicmap.agents.testing import ScriptedChatModel

    # The navigator's replies by its prompt (the pruner between tool rounds gets "" and uses its rule).
    sample_memory.llm_ = ScriptedChatModel(routes={"reconstructing the memory": list(replies)}, default="")
    try:
        graph = reconstruct.build_reconstruct_graph().compile()
        final = graph.invoke(
            {"question": "What is the name of Maya's dog?"},
            output_keys=["messages"],
            context=reconstruct.ReconstructContext(policy="llm", namespace="sample", resources=sample_memory),
        )
    finally:
        sample_memory.llm_ = None
    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    by_id = {m.tool_call_id: m for m in tool_messages}
    for call in calls:
        assert call["id"] in by_id, f"no reply to tool call {call['id']}"
        assert by_id[call["id"]].status == "error"
        assert_readable_error(by_id[call["id"]], call["name"])
    assert by_id["i1"].status == "error" and "not valid JSON" in by_id["i1"].content


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    specs=st.lists(
        st.builds(
            ReplySpec,
            kind=st.sampled_from(["tool_call", "invalid_tool_call", "plausible", "mutant"]),
            payload=st.dictionaries(
                st.sampled_from(["event_id", "query", "cue", "person", "k", "x"]), VALUES, max_size=3
            ),
            seed=st.integers(0, 10**6),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_the_reconstruct_strategy_never_raises_on_random_tool_calls(sample_memory, specs) -> None:
    answer = available_strategy("reconstruct")
    model = GarbageChatModel(specs=specs)
    sample_memory.llm_ = model
    try:
        result = answer("Where did Maya move?", "sample", resources=sample_memory, policy="llm")
    finally:
        sample_memory.llm_ = None
    assert isinstance(result.answer, str)
    for step in result.details.get("tool_trace", []):
        assert step["status"] in ("success", "error")
