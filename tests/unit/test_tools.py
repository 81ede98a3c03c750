"""Memory tools: every tool's happy path and its bad-argument message, schemas, async bodies, config errors."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from logicmap.memory.files.loaders import Session
from logicmap.memory.indexes.graph import EventGraph
from logicmap.tools import (
    EVENT_TOOLS,
    MRAGENT_TOOLS,
    MemoryToolConfigError,
    ToolNamespaceError,
    create_get_event_tool,
    create_memory_toolkit,
    create_remember_tool,
)

NS = "sample"


@pytest.fixture(scope="module")
def toolkit(ingested_sample):
    res = ingested_sample
    return {t.name: t for t in create_memory_toolkit(NS, store=res.store, embeddings=res.embeddings)}


@pytest.fixture(scope="module")
def snapshot(ingested_sample):
    return ingested_sample.store.snapshot(NS)


def call(tool, args: dict) -> ToolMessage:
    """Invoke a tool the way a ToolNode does: with a tool call, getting a ToolMessage back."""
    return tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": "call-1"})


def event_of(snapshot, dia_id: str) -> str:
    return next(e.id for e in snapshot.events.values() if dia_id in e.turn_ids)


def test_toolkit_has_every_tool_with_a_typed_schema_that_hides_injected_things(toolkit) -> None:
    assert set(toolkit) == set(EVENT_TOOLS) | set(MRAGENT_TOOLS)
    for tool in toolkit.values():
        assert tool.description and len(tool.description) > 40  # the docstring is the description
        assert tool.response_format == "content_and_artifact"
        props = tool.tool_call_schema.model_json_schema()["properties"]
        assert not {"store", "namespace", "embeddings", "snapshot"} & set(props)
    search = toolkit["search_events"].tool_call_schema.model_json_schema()["properties"]
    assert set(search) == {"query", "k", "diverse_topics"}
    assert search["k"]["anyOf"][0]["maximum"] == 20
    neighbors = toolkit["get_neighbors"].tool_call_schema.model_json_schema()["properties"]
    assert neighbors["direction"]["enum"] == ["out", "in", "both"]
    window = toolkit["query_event_context"].tool_call_schema.model_json_schema()["properties"]["window"]
    assert (window["minimum"], window["maximum"]) == (0, 10)


def test_unknown_namespace_is_a_configuration_error(ingested_sample) -> None:
    with pytest.raises(ToolNamespaceError) as info:
        create_get_event_tool("nobody-here", store=ingested_sample.store)
    assert isinstance(info.value, MemoryToolConfigError) and "unknown namespace 'nobody-here'" in str(info.value)
    assert "sample" not in str(info.value) and not hasattr(info.value, "known")  # no other tenant is named
    with pytest.raises(MemoryToolConfigError):
        create_memory_toolkit("bad namespace!", store=ingested_sample.store)
    with pytest.raises(MemoryToolConfigError, match="unknown memory tools"):
        create_memory_toolkit(NS, store=ingested_sample.store, include=["get_event", "read_mind"])


def test_search_events(toolkit, snapshot) -> None:
    msg = call(toolkit["search_events"], {"query": "half marathon finished medal", "k": 3})
    assert msg.status == "success" and len(msg.artifact) == 3
    assert msg.artifact[0]["id"] == event_of(snapshot, "D4:4") and msg.artifact[0]["kind"] == "event"
    assert msg.artifact[0]["id"] in msg.content and "D4:4" in msg.content
    diverse = call(toolkit["search_events"], {"query": "Maya", "k": 4, "diverse_topics": True}).artifact
    topics = [snapshot.topic_of(r["id"]) for r in diverse]
    assert len(set(topics)) == min(4, len(snapshot.topics))  # one event per topic first

    bad = call(toolkit["search_events"], {"query": "x", "k": 50})
    assert bad.status == "error" and bad.artifact is None
    assert (
        "k: Input should be less than or equal to 20 (got 50)" in bad.content
        and "call search_events again" in bad.content
    )
    assert "query" in call(toolkit["search_events"], {"k": 2}).content  # missing argument named


def test_get_event(toolkit, snapshot) -> None:
    eid = event_of(snapshot, "D1:1")
    msg = call(toolkit["get_event"], {"event_id": eid})
    assert msg.status == "success" and "[D1:1] Maya: Hi Leo!" in msg.content
    assert msg.artifact[0]["id"] == eid and {r["id"] for r in msg.artifact[1:]} == set(snapshot.events[eid].turn_ids)

    unknown = call(toolkit["get_event"], {"event_id": "S9-E9"})
    assert (
        unknown.status == "error"
        and "No event with id 'S9-E9'" in unknown.content
        and "search_events" in unknown.content
    )
    turn_id = call(toolkit["get_event"], {"event_id": "D4:4"})
    assert f"Call again with event_id='{event_of(snapshot, 'D4:4')}'" in turn_id.content
    wrong_name = call(toolkit["get_event"], {"id": eid})
    assert "event_id: Field required" in wrong_name.content and "Extra inputs are not permitted" in wrong_name.content
    wrong_type = call(toolkit["get_event"], {"event_id": ["S1-E1"]})
    assert wrong_type.status == "error" and "valid string" in wrong_type.content


def test_get_neighbors(toolkit, snapshot) -> None:
    eid = event_of(snapshot, "D3:5")
    msg = call(toolkit["get_neighbors"], {"event_id": eid})
    expected = {n.event_id for n in EventGraph.of(snapshot).neighbors(eid)}
    assert msg.status == "success" and {r["id"] for r in msg.artifact} == expected
    out = call(toolkit["get_neighbors"], {"event_id": eid, "relation_types": ["temporal_before"], "direction": "out"})
    assert all(r["relation"] == "temporal_before" and r["direction"] == "out" for r in out.artifact)

    bad = call(toolkit["get_neighbors"], {"event_id": eid, "relation_types": ["causal_magic"]})
    assert (
        bad.status == "error"
        and "No relation labelled causal_magic" in bad.content
        and "temporal_before" in bad.content
    )
    bad_direction = call(toolkit["get_neighbors"], {"event_id": eid, "direction": "sideways"})
    assert "direction: Input should be 'out', 'in' or 'both'" in bad_direction.content


def test_events_in_time_range(toolkit, snapshot) -> None:
    msg = call(toolkit["events_in_time_range"], {"start": "2023-05-01", "end": "2023-05-31"})
    assert msg.status == "success" and event_of(snapshot, "D4:4") in {r["id"] for r in msg.artifact}  # dated 2023-05-07
    month = call(toolkit["events_in_time_range"], {"start": "May 2023"})
    assert {r["id"] for r in month.artifact} == {r["id"] for r in msg.artifact}
    assert (
        "No events between 2019-01-01 and 2019-12-31"
        in call(toolkit["events_in_time_range"], {"start": "2019"}).content
    )

    bad = call(toolkit["events_in_time_range"], {"start": "next tuesday"})
    assert (
        bad.status == "error"
        and "Could not read 'next tuesday' as a date" in bad.content
        and "YYYY-MM-DD" in bad.content
    )
    backwards = call(toolkit["events_in_time_range"], {"start": "2023-06", "end": "2023-05"})
    assert "swap start and end" in backwards.content


def test_topic_events(toolkit, snapshot) -> None:
    topic = next(iter(snapshot.topics.values()))
    msg = call(toolkit["topic_events"], {"topic_id": topic.id})
    assert msg.status == "success" and {r["id"] for r in msg.artifact} == set(topic.members)
    bad = call(toolkit["topic_events"], {"topic_id": "T99"})
    assert bad.status == "error" and "No topic 'T99'" in bad.content and topic.id in bad.content


def test_query_tag_events(toolkit, snapshot) -> None:
    msg = call(toolkit["query_tag_events"], {"cue": "Biscuit"})
    ids = [r["id"] for r in msg.artifact]
    assert msg.status == "success" and event_of(snapshot, "D1:1") in ids and event_of(snapshot, "D4:5") in ids
    assert all(r["cue"] == "Biscuit" and r["tag"] for r in msg.artifact)
    # The lexical test embedder files "I adopted a dog ... His name is Biscuit." under no aspect (the taxonomy's
    # words are absent): the tag is the cue's kind.
    tagged = call(toolkit["query_tag_events"], {"cue": "biscuit", "tag": "entity"})
    assert tagged.artifact and all(r["tag"] == "entity" for r in tagged.artifact)

    unknown = call(toolkit["query_tag_events"], {"cue": "zebra crossing"})
    assert unknown.status == "error" and "No cue 'zebra crossing'" in unknown.content
    wrong_tag = call(toolkit["query_tag_events"], {"cue": "Biscuit", "tag": "astronomy"})
    assert wrong_tag.status == "error" and "its tags:" in wrong_tag.content and "entity" in wrong_tag.content


def test_query_event_keywords(toolkit, snapshot) -> None:
    msg = call(toolkit["query_event_keywords"], {"event_id": event_of(snapshot, "D4:4")})
    texts = {r["text"] for r in msg.artifact}
    assert msg.status == "success" and {"half marathon", "1 hour 52 minutes", "yesterday"} <= texts
    assert "1 hour 52 minutes (quantity)" in msg.content
    bad = call(toolkit["query_event_keywords"], {"event_id": "E1"})
    assert bad.status == "error" and "No event with id 'E1'" in bad.content


def test_query_conversation_time(toolkit, snapshot) -> None:
    eid = event_of(snapshot, "D4:4")
    msg = call(toolkit["query_conversation_time"], {"event_id": eid})
    assert msg.status == "success" and "happened: 2023-05-07 from the phrase 'yesterday'" in msg.content
    assert "session S4 at 2023-05-08T18:40" in msg.content and msg.artifact[0]["sessions"]
    assert call(toolkit["query_conversation_time"], {}).status == "error"


def test_query_event_context(toolkit, snapshot) -> None:
    eid = event_of(snapshot, "D4:4")
    msg = call(toolkit["query_event_context"], {"event_id": eid, "window": 1})
    turns = [r for r in msg.artifact if r["kind"] == "turn"]
    own = set(snapshot.events[eid].turn_ids)
    assert msg.status == "success" and {r["id"] for r in turns if r["in_event"]} == own
    assert len(turns) - len(own) <= 2 and " * [D4:4]" in msg.content
    bad = call(toolkit["query_event_context"], {"event_id": eid, "window": 99})
    assert bad.status == "error" and "window: Input should be less than or equal to 10 (got 99)" in bad.content


def test_query_personal_aspect(toolkit) -> None:
    msg = call(toolkit["query_personal_aspect"], {"person": "leo", "aspect": "favourite food"})
    assert msg.status == "success" and "Sushi is my favourite food" in msg.content
    assert msg.artifact[0]["turn_ids"] == ["D1:6"] and msg.artifact[0]["kind"] == "personal_fact"

    nobody = call(toolkit["query_personal_aspect"], {"person": "Bob", "aspect": "food"})
    assert nobody.status == "error" and "People known:" in nobody.content and "Maya" in nobody.content
    nothing = call(toolkit["query_personal_aspect"], {"person": "Leo", "aspect": "education"})
    assert nothing.status == "error" and "Aspects known for Leo" in nothing.content and "food" in nothing.content


def test_query_personal_information(toolkit) -> None:
    """The paper's phi_{c^s -> g^s}: a person's aspects (with how many facts each holds), not the facts."""
    msg = call(toolkit["query_personal_information"], {"person": "Maya"})
    assert msg.status == "success" and "- hobby (" in msg.content and "- work (" in msg.content
    assert {r["kind"] for r in msg.artifact} == {"aspect"} and all(r["facts"] >= 1 for r in msg.artifact)
    assert "nurse at Santo Antonio hospital" not in msg.content
    bad = call(toolkit["query_personal_information"], {"person": "Zed"})
    assert bad.status == "error" and "No facts about 'Zed'" in bad.content


def test_remember_ingests_through_the_injected_callable() -> None:
    stored: list[tuple[Session, str]] = []

    def ingest(session: Session, namespace: str) -> None:
        stored.append((session, namespace))

    tool = create_remember_tool("alice", ingest=ingest)
    msg = call(tool, {"text": "My sister is called Ines.", "speaker": "Alice", "when": "2024-02-03 10:15"})
    assert msg.status == "success"
    session, namespace = stored[0]
    assert namespace == "alice" and session.turns[0].text == "My sister is called Ines."
    assert session.turns[0].speaker == "Alice" and session.timestamp.isoformat() == "2024-02-03T10:15:00"
    assert session.turns[0].dia_id in msg.content and msg.artifact[0]["id"] == session.turns[0].dia_id
    # The same statement at the same time is the same session (storing it twice is a no-op for ingest).
    call(tool, {"text": "My sister is called Ines.", "speaker": "Alice", "when": "2024-02-03 10:15"})
    assert stored[1][0].session_id == session.session_id

    bad = call(tool, {"text": "hello", "when": "the day after never"})
    assert bad.status == "error" and "Could not read when='the day after never'" in bad.content and len(stored) == 2
    empty = call(tool, {"text": ""})
    assert empty.status == "error" and "text" in empty.content
    with pytest.raises(MemoryToolConfigError):
        create_remember_tool("alice", ingest=None)  # type: ignore[arg-type]  # a bad value on purpose


def test_remember_then_search_finds_it(resources) -> None:
    from logicmap.graphs.chat.chatbot import session_ingester

    remember = create_remember_tool("alice", ingest=session_ingester(resources, policy="heuristic"))
    assert (
        call(remember, {"text": "I keep bees on the roof of my house in Braga.", "speaker": "Alice"}).status
        == "success"
    )
    search = create_memory_toolkit(
        "alice", store=resources.store, embeddings=resources.embeddings, include=["search_events"]
    )[0]
    msg = call(search, {"query": "bees roof", "k": 1})
    assert "bees on the roof" in msg.content


def test_async_bodies_share_the_implementation(toolkit, snapshot) -> None:
    eid = event_of(snapshot, "D1:6")
    sync = call(toolkit["get_event"], {"event_id": eid})
    tool_call = {"type": "tool_call", "name": "get_event", "args": {"event_id": eid}, "id": "call-1"}
    async_ = asyncio.run(toolkit["get_event"].ainvoke(tool_call))
    assert async_.content == sync.content and async_.artifact == sync.artifact
    bad = asyncio.run(toolkit["get_event"].ainvoke({**tool_call, "args": {"event_id": "nope"}}))
    assert bad.status == "error" and "No event with id 'nope'" in bad.content


def _tool_graph(tools):
    """A ToolNode inside a graph, as an agent runs it."""
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "tools")
    return builder.compile()


def test_tool_node_returns_messages_for_bad_calls_and_raises_configuration_errors(toolkit) -> None:
    node = _tool_graph(list(toolkit.values()))
    ai = AIMessage(
        content="",
        tool_calls=[
            {"name": "get_event", "args": {"event_id": "S9-E9"}, "id": "a"},
            {"name": "search_events", "args": {"query": "sushi", "k": "many"}, "id": "b"},
            {"name": "read_mind", "args": {}, "id": "c"},
        ],
    )
    out = node.invoke({"messages": [ai]})["messages"][1:]
    assert [m.status for m in out] == ["error", "error", "error"]
    assert "No event with id" in out[0].content and "k: Input should be a valid integer" in out[1].content
    assert "read_mind is not a valid tool" in out[2].content

    def broken(session: Session, namespace: str) -> None:
        raise MemoryToolConfigError("ingestion is not configured for this deployment")

    node = _tool_graph([create_remember_tool("alice", ingest=broken)])
    with pytest.raises(MemoryToolConfigError, match="not configured"):
        node.invoke(
            {"messages": [AIMessage(content="", tool_calls=[{"name": "remember", "args": {"text": "x"}, "id": "r"}])]}
        )
