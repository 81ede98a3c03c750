"""The compact toolkit (``profile="compact"``): LangMem's two tools on LogicMap's retrieval and writes.

An agent (LangChain's ``create_agent``) driven by a scripted chat model creates, finds, updates and deletes a memory
through ``manage_memory`` and ``search_memory``, on the run's tenant only: a ``namespace`` argument is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.chat.ingestion import session_ingester
from logicmap.graphs.writes.forget import memory_editor
from logicmap.tools import COMPACT_TOOLS, MemoryToolConfigError, create_memory_toolkit

_ID = re.compile(r"\[([^\]]+)\]")


def _call(name: str, args: dict[str, Any], n: int) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call-{n}", "type": "tool_call"}


def _agent_turn(messages: Sequence[BaseMessage]) -> AIMessage:
    """The scripted model: each step reads the last tool results (ids come from search_memory's answer)."""
    step = sum(isinstance(m, AIMessage) for m in messages)
    last = str(messages[-1].content)
    found = _ID.findall(last)
    script = [
        lambda: [
            _call("manage_memory", {"content": "I keep bees on the roof of my house in Braga."}, 1),
            _call("manage_memory", {"content": "Bob's secret.", "namespace": "bob"}, 2),
        ],
        lambda: [_call("search_memory", {"query": "bees on the roof"}, 3)],
        lambda: [
            _call(
                "manage_memory",
                {"action": "update", "id": found[0], "content": "I keep bees on the roof of my flat in Porto."},
                4,
            )
        ],
        lambda: [_call("search_memory", {"query": "bees on the roof", "limit": 1}, 5)],
        lambda: [_call("manage_memory", {"action": "delete", "id": found[0]}, 6)],
        lambda: [_call("search_memory", {"query": "bees on the roof"}, 7)],
    ]
    if step < len(script):
        return AIMessage(content="", tool_calls=script[step]())
    return AIMessage(content="Done.")


def test_an_agent_creates_finds_updates_and_deletes_through_the_two_tools(resources: Any) -> None:
    tools = create_memory_toolkit(
        "{user_id}",
        store=resources.store,
        embeddings=resources.embeddings,
        ingest=session_ingester(resources, policy="heuristic"),
        editor=memory_editor(resources),
        profile="compact",
    )
    assert [t.name for t in tools] == ["search_memory", "manage_memory"] and set(COMPACT_TOOLS) == {
        t.name for t in tools
    }
    agent = create_agent(ScriptedChatModel(respond=_agent_turn), tools)
    out = agent.invoke(
        {"messages": [HumanMessage("Remember where I keep bees.")]}, config={"configurable": {"user_id": "alice"}}
    )
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    created, refused, found, updated, found_again, deleted, gone = results
    assert created.status == "success" and created.content.startswith("Remembered as turn ")
    assert refused.status == "error" and "namespace: Extra inputs are not permitted" in refused.content
    assert "Braga" in found.content and "[" + created.artifact[0]["id"] + "]" in found.content
    assert updated.status == "success" and updated.content == f"Updated memory {created.artifact[0]['id']}."
    assert "Porto" in found_again.content and "Braga" not in found_again.content
    assert deleted.status == "success" and deleted.content.startswith("Deleted memory ")
    assert gone.content == "No memories match 'bees on the roof'."
    assert resources.store.namespaces() == ["alice"]  # the refused call wrote nothing, anywhere
    assert out["messages"][-1].content == "Done."


def test_compact_schemas_are_two_and_hide_the_namespace(resources: Any) -> None:
    full = create_memory_toolkit(
        "alice",
        store=resources.store,
        ingest=session_ingester(resources, policy="heuristic"),
        editor=memory_editor(resources),
    )
    compact = create_memory_toolkit(
        "alice",
        store=resources.store,
        ingest=session_ingester(resources, policy="heuristic"),
        editor=memory_editor(resources),
        profile="compact",
    )
    assert len(full) == 15 and len(compact) == 2
    schemas = [convert_to_openai_tool(t)["function"] for t in compact]
    assert [sorted(s["parameters"]["properties"]) for s in schemas] == [["limit", "query"], ["action", "content", "id"]]
    size = sum(len(str(convert_to_openai_tool(t))) for t in compact)
    assert size * 4 < sum(len(str(convert_to_openai_tool(t))) for t in full)


def test_manage_memory_errors_the_model_can_act_on(resources: Any) -> None:
    ingest = session_ingester(resources, policy="heuristic")
    tools = {t.name: t for t in create_memory_toolkit("alice", store=resources.store, ingest=ingest, profile="compact")}

    def call(args: dict[str, Any]) -> ToolMessage:
        message = tools["manage_memory"].invoke({"type": "tool_call", "name": "manage_memory", "args": args, "id": "c"})
        assert isinstance(message, ToolMessage)
        return message

    assert call({"action": "delete", "id": "M1:1"}).content == (
        "This memory only accepts new memories: delete is not allowed here."
    )
    assert call({"content": ""}).content.startswith("Nothing to remember: text is empty.")
    assert "create takes no id" in call({"content": "x", "id": "M1:1"}).content
    editing = {
        t.name: t
        for t in create_memory_toolkit(
            "alice", store=resources.store, ingest=ingest, editor=memory_editor(resources), profile="compact"
        )
    }
    missing = editing["manage_memory"].invoke(
        {"type": "tool_call", "name": "manage_memory", "args": {"action": "update", "content": "y"}, "id": "c"}
    )
    assert missing.status == "error" and "update needs the memory's id" in missing.content
    with pytest.raises(MemoryToolConfigError, match="unknown toolkit profile 'tiny'"):
        create_memory_toolkit("alice", store=resources.store, ingest=ingest, profile="tiny")  # type: ignore[arg-type]  # a bad value on purpose


def test_the_mcp_server_offers_the_compact_profile_on_the_connection_tenant(resources: Any) -> None:
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client

    from logicmap.graphs.surfaces.mcp_server import build_mcp_server

    async def scenario() -> tuple[list[str], list[str], str]:
        async with Client(build_mcp_server(resources, namespace="alice", profile="compact")) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            await client.call_tool("manage_memory", {"content": "I sail on Sundays.", "namespace": "bob"})
            found = await client.call_tool("search_memory", {"query": "sail", "namespace": "bob"})
        async with Client(build_mcp_server(resources, namespace="alice", profile="compact", writes=False)) as client:
            read_only = sorted(t.name for t in (await client.list_tools()).tools)
        return names, read_only, "".join(c.text for c in found.content)

    names, read_only, found = asyncio.run(scenario())
    assert names == ["manage_memory", "search_memory"] and read_only == ["search_memory"]
    assert "I sail on Sundays." in found
    assert resources.store.namespaces() == ["alice"]  # the argument namespace was dropped: alice's, never bob's
    with pytest.raises(ValueError, match="unknown toolkit profile 'tiny'"):
        build_mcp_server(resources, namespace="alice", profile="tiny")  # type: ignore[arg-type]  # a bad value on purpose
