"""``LogicMapStore`` as a LangGraph API server's store: ``langgraph.json``'s ``"store"`` under ``langgraph dev``.

The server loads ``logicmap.studio.store.generate_store``. Its ``/store`` routes (the SDK's ``client.store``) put,
get, search, list and delete LogicMap memory; the memory-template's chatbot and memory graph
(``store_server_app.py``) run on it as in the template: a chat turn schedules the memory run on its thread
(``multitask_strategy="enqueue"``, ``after_seconds``), the memory run writes through ``get_store()``, and the next
turn's ``bot`` recalls what was written, for two users that never see each other's memories.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parent / "store_server_app.py"
STORE_PATH = "logicmap.studio.store.generate_store"


@pytest.fixture
def store_server(langgraph_dev: Any) -> Any:
    """The server with LogicMapStore as its store, running the memory-template's chatbot and memory graph."""
    return langgraph_dev(
        embedder="hashing",
        LOGICMAP_STORE_POLICY="heuristic",
        config={
            "store": {"path": STORE_PATH},
            "graphs": {"chatbot": f"{APP}:chatbot", "memory_graph": f"{APP}:memory_graph"},
        },
    )


async def _wait_for(call: Any, done: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await call()
        if done(got) or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.5)


def test_the_server_store_is_logicmap_memory_for_routes_and_the_memory_template(store_server: Any) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=store_server.url)

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        await client.store.put_item(["docs", "alice"], "pref", {"content": "Alice prefers window seats.", "n": 3})
        out["get"] = await client.store.get_item(["docs", "alice"], "pref")
        out["search"] = await client.store.search_items(["docs"], query="seat preference", filter={"n": {"$gte": 3}})
        out["namespaces"] = await client.store.list_namespaces(prefix=["docs"])
        await client.store.delete_item(["docs", "alice"], "pref")
        out["after_delete"] = await client.store.search_items(["docs"])
        replies: dict[str, list[str]] = {}
        for user, said in (
            ("alice", "Hi, I'm Alice from Lisbon and I'm allergic to peanuts."),
            ("bob", "Hey, Bob here, from Oslo; I run marathons every spring."),
        ):
            thread = await client.threads.create()
            config = {"configurable": {"user_id": user, "delay_seconds": 0}}
            await client.runs.wait(
                thread["thread_id"], "chatbot", config=config, input={"messages": [{"role": "user", "content": said}]}
            )
            await _wait_for(
                lambda u=user: client.store.search_items(["memories", u]), lambda got: len(got["items"]) >= 2
            )
            second = await client.runs.wait(
                thread["thread_id"],
                "chatbot",
                config=config,
                input={"messages": [{"role": "user", "content": "What do you know?"}]},
            )
            replies[user] = [str(m["content"]) for m in second["messages"] if m["type"] == "ai"]
        out["replies"] = replies
        out["alice_items"] = await client.store.search_items(["memories", "alice"], query="allergy")
        return out

    out = asyncio.run(scenario())
    assert out["get"]["value"] == {"content": "Alice prefers window seats.", "n": 3}
    assert [i["key"] for i in out["search"]["items"]] == ["pref"]
    assert out["namespaces"]["namespaces"] == [["docs", "alice"]]
    assert out["after_delete"]["items"] == []
    alice_recall, bob_recall = out["replies"]["alice"][-1], out["replies"]["bob"][-1]
    assert "allergic to peanuts" in alice_recall and "marathons" not in alice_recall
    assert "marathons" in bob_recall and "peanuts" not in bob_recall
    assert {tuple(i["namespace"]) for i in out["alice_items"]["items"]} == {
        ("memories", "alice", "User"),
        ("memories", "alice", "Note"),
    }
    assert "Using custom store" in store_server.log_path.read_text()
