"""The chatbot and the MCP server on PostgreSQL (``LOGICMAP_STORE_URL=postgresql://...``): what they store lands in the
database and is recalled from it, as on the embedded store (``tests/unit/test_chatbot.py``,
``tests/integration/test_mcp_server.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from logicmap.graphs.chat.chatbot import ChatContext, build_chatbot_graph
from logicmap.graphs.runtime.resources import Resources
from logicmap.settings import LogicMapSettings

pytestmark = pytest.mark.postgres


@pytest.fixture
def resources(postgres_url: str) -> Iterator[Resources]:
    res = Resources(settings=LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    res.llm_ = None
    yield res
    res.store.close()


def test_the_chatbot_remembers_and_recalls_through_postgres(resources: Resources) -> None:
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = ChatContext(
        namespace="alice",
        strategy="reconstruct",
        policy="heuristic",
        user_name="Alice",
        remember_mode="sync",
        resources=resources,
    )

    def say(text: str, thread: str) -> dict:
        return bot.invoke(
            {"messages": [HumanMessage(content=text)]}, {"configurable": {"thread_id": thread}}, context=ctx
        )

    assert say("My dog's name is Pixel and she is a beagle.", "t1")["memory_write"]["status"] == "stored"
    second = say("What is my dog's name?", "t2")  # a fresh thread: only the memory in Postgres knows it
    assert "Pixel" in second["messages"][-1].content
    assert type(resources.store).__name__ == "PostgresStore"
    turns = {t.text: t for t in resources.store.snapshot("alice").turns.values()}  # both turns, in the database
    assert set(turns) == {"My dog's name is Pixel and she is a beagle.", "What is my dog's name?"}
    assert (
        turns["My dog's name is Pixel and she is a beagle."].evidence and not turns["What is my dog's name?"].evidence
    )


def test_the_mcp_server_remembers_and_searches_through_postgres(resources: Resources) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from logicmap.graphs.surfaces.mcp_server import build_mcp_server

    async def scenario() -> str:
        async with Client(build_mcp_server(resources, namespace="bob")) as client:
            await client.call_tool("remember", {"text": "I sail to Berlenga on Sundays."})
            found = await client.call_tool("search_events", {"query": "sail Sundays"})
        return "".join(getattr(c, "text", "") for c in found.content)

    assert "Berlenga" in asyncio.run(scenario())
    assert any("Berlenga" in t.text for t in resources.store.snapshot("bob").turns.values())
