"""The chatbot on the LangGraph API server (``langgraph dev``): as a node of a local parent graph, and streamed.

(a) A parent ``MessagesState`` graph embeds the served chatbot through ``RemoteChatbot``; each user's turns land in
the tenant the parent's config names, and nowhere else (read back from the Chroma server the API server writes
to). A plain ``RemoteGraph`` node whose config names no tenant fails, and writes nothing anywhere.
(b) A chat reply streams through the server's ``messages-tuple`` mode as text chunks of the reply only: with the
local model (SmolLM2) token by token; without one, as the one extractive message.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.pregel.remote import RemoteException, RemoteGraph

from logicmap.graphs.chat.chatbot import RemoteChatbot
from logicmap.memory.store import MemoryStore
from logicmap.settings import LogicMapSettings
from tests.reliability.test_concurrency import chroma_server  # noqa: F401 - the fixture, reused

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 300.0


def _parent(node: Any) -> Any:
    parent = StateGraph(MessagesState)
    parent.add_node("memory_bot", node)
    parent.add_edge(START, "memory_bot")
    return parent.compile(checkpointer=InMemorySaver())


def _turn_texts(store: MemoryStore, namespace: str) -> list[str]:
    return sorted(t.text for t in store.snapshot(namespace).turns.values()) if store.has_namespace(namespace) else []


def _stored(store: MemoryStore, namespace: str, texts: list[str], timeout: float = 120.0) -> list[str]:
    """The namespace's turn texts once they are ``texts`` (the server stores a turn in a run it schedules after
    the reply, ``remember_mode="deferred"``), or what it holds at the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _turn_texts(store, namespace) != sorted(texts):
        time.sleep(0.5)
    return _turn_texts(store, namespace)


def test_a_parent_graph_embedding_the_remote_chatbot_writes_to_the_tenant_its_config_names(
    langgraph_dev: Any,
    chroma_server: int,  # noqa: F811
    tmp_path: Path,
) -> None:
    server = langgraph_dev(
        embedder="hashing", LOGICMAP_CHROMA_HOST="127.0.0.1", LOGICMAP_CHROMA_PORT=str(chroma_server)
    )
    reader = MemoryStore(
        LogicMapSettings(
            data_dir=tmp_path / "reader",
            embedding_provider="hashing",
            chroma_host="127.0.0.1",
            chroma_port=chroma_server,
        )
    )
    remote = RemoteChatbot(url=server.url, namespace="{user_id}", settings={"strategy": "dense", "policy": "heuristic"})
    app = _parent(remote)
    said = {"alice": "My cat is called Miso.", "bob": "I ride a green tandem bicycle."}
    threads = {}
    for user, text in said.items():
        threads[user] = {"configurable": {"thread_id": str(uuid.uuid4()), "user_id": user}}
        out = app.invoke({"messages": [("user", text)]}, threads[user])
        assert [m.type for m in out["messages"]] == ["human", "ai"]  # the parent's thread got the remote reply
    # Stored after the reply by the run each turn scheduled on its thread (the memory template's pattern).
    assert _stored(reader, "alice", [said["alice"]]) == [said["alice"]]
    assert _stored(reader, "bob", [said["bob"]]) == [said["bob"]]
    assert sorted(reader.namespaces()) == ["alice", "bob"]  # no "default", nothing else

    # The next turn on alice's parent thread recalls her memory, from her tenant only.
    out = app.invoke({"messages": [("user", "What is my cat called?")]}, threads["alice"])
    assert out["messages"][-1].content == "From memory: user: My cat is called Miso."  # the speaker is user_name
    assert [m.type for m in out["messages"]] == ["human", "ai", "human", "ai"]
    # The question is kept (as the context of its reply, never recalled as a fact); the extractive reply is not.
    want = sorted([said["alice"], "What is my cat called?"])
    assert _stored(reader, "alice", want) == want
    assert (
        not reader.snapshot("alice")
        .turns[next(t for t, v in reader.snapshot("alice").turns.items() if v.text == "What is my cat called?")]
        .evidence
    )
    assert _turn_texts(reader, "bob") == [said["bob"]]

    # A plain RemoteGraph forwards the parent's configurable: a config naming the tenant is enough ...
    plain = _parent(RemoteGraph("chatbot", url=server.url))
    carol = {"configurable": {"thread_id": str(uuid.uuid4()), "namespace": "carol", "policy": "heuristic"}}
    plain.invoke({"messages": [("user", "I grow chillies on my balcony.")]}, carol)
    assert _stored(reader, "carol", ["I grow chillies on my balcony."]) == ["I grow chillies on my balcony."]
    # ... and one naming none fails on the server: never a silent default.
    anonymous = {"configurable": {"thread_id": str(uuid.uuid4()), "user_id": "dave", "policy": "heuristic"}}
    with pytest.raises(RemoteException, match="NamespaceRequiredError"):
        plain.invoke({"messages": [("user", "My PIN is 9876.")]}, anonymous)
    assert sorted(reader.namespaces()) == ["alice", "bob", "carol"]

    # The turn was not stored by the reply's run: that run scheduled another on its thread, which stored it.
    erin = {"configurable": {"thread_id": str(uuid.uuid4()), "user_id": "erin"}}
    direct = remote.invoke({"messages": [("user", "I keep two goldfish.")]}, erin)
    assert direct["memory_write"]["status"] == "scheduled" and direct["memory_write"]["run_id"], direct["memory_write"]
    assert _stored(reader, "erin", ["I keep two goldfish."]) == ["I keep two goldfish."]
    reader.close()


def _stream_reply(url: str, namespace: str, text: str, context: dict[str, Any]) -> list[tuple[dict, dict]]:
    from langgraph_sdk import get_client

    async def scenario() -> list[tuple[dict, dict]]:
        client = get_client(url=url)
        thread = await client.threads.create()
        events = []
        async for part in client.runs.stream(
            thread["thread_id"],
            "chatbot",
            input={"messages": [{"role": "user", "content": text}]},
            context={"namespace": namespace, **context},
            stream_mode="messages-tuple",
        ):
            if part.event == "messages":
                events.append((part.data[0], part.data[1]))
            assert part.event != "error", part.data
        return events

    return asyncio.run(asyncio.wait_for(scenario(), RUN_TIMEOUT_S))


def _remember(url: str, namespace: str, text: str) -> None:
    events = _stream_reply(url, namespace, text, {"policy": "heuristic", "strategy": "dense"})
    assert [m["content"] for m, _ in events] == ["Noted, I'll remember that."]


def test_without_a_model_the_reply_arrives_on_the_servers_messages_stream(langgraph_dev: Any) -> None:
    server = langgraph_dev(embedder="hashing")
    _remember(server.url, "erin", "My favourite colour is teal.")
    events = _stream_reply(
        server.url,
        "erin",
        "What is my favourite colour?",
        {"policy": "heuristic", "strategy": "dense", "ingest": False},
    )
    assert [(m["type"], m["content"]) for m, _ in events] == [("ai", "From memory: user: My favourite colour is teal.")]
    assert {meta["langgraph_node"] for _, meta in events} == {"respond"}


def test_a_model_reply_streams_token_by_token_through_the_server(langgraph_dev: Any, local_llm: Any) -> None:
    server = langgraph_dev(embedder="hashing", **local_llm.env())
    _remember(server.url, "erin", "My favourite colour is teal.")
    # Recall through the dense strategy asks the model too (a JSON tool call): none of it may reach the stream.
    events = _stream_reply(
        server.url, "erin", "What is my favourite colour?", {"policy": "llm", "strategy": "dense", "ingest": False}
    )
    assert len(events) > 1, events  # chunks, not one message at the end
    assert all(m["type"] == "AIMessageChunk" and not m.get("tool_call_chunks") for m, _ in events), events[:3]
    assert {meta["langgraph_node"] for _, meta in events} == {"respond"}
    assert len({m["id"] for m, _ in events}) == 1  # one message: the reply
    streamed = "".join(m["content"] for m, _ in events)
    assert streamed.strip() and not streamed.lstrip().startswith("{")
