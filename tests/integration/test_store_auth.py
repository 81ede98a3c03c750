"""The tenant authority on the server's ``/store`` routes (``studio/store_guard.py``) under a real ``langgraph dev``
with ``LogicMapStore`` as its store and LangGraph auth on: alice cannot put, get, search, list or delete bob's
items (403, revealing nothing), and uses her own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import STUDIO_CONFIG

pytestmark = pytest.mark.integration

AUTH = Path(__file__).resolve().parent / "store_auth.py"


@pytest.fixture
def auth_store_server(langgraph_dev: Any) -> Any:
    """The server with LogicMapStore as its store, LangGraph auth on (``store_auth.py``), and one graph."""
    rerank = json.loads(STUDIO_CONFIG.read_text())["graphs"]["rerank"]
    return langgraph_dev(
        embedder="hashing",
        LOGICMAP_STORE_POLICY="heuristic",
        config={
            "store": {"path": "logicmap.studio.store.generate_store"},
            "auth": {"path": f"{AUTH}:auth"},
            "graphs": {"rerank": rerank},
        },
    )


async def _status(call: Any) -> int:
    try:
        await call
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return 200


def test_alice_cannot_touch_bobs_store_items_and_uses_her_own(auth_store_server: Any) -> None:
    from langgraph_sdk import get_client

    alice = get_client(url=auth_store_server.url, headers={"Authorization": "Bearer alice"})
    bob = get_client(url=auth_store_server.url, headers={"Authorization": "Bearer bob"})
    mine, his = ["memories", "alice"], ["memories", "bob"]

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        await bob.store.put_item(his, "home", {"content": "Bob keeps bees on his roof in Oslo."})
        await alice.store.put_item(mine, "home", {"content": "Alice moved to Lisbon with her dog."})
        out["refused"] = {
            "put": await _status(alice.store.put_item(his, "home", {"content": "overwritten by alice"})),
            "put_nested": await _status(alice.store.put_item([*his, "notes"], "x", {"content": "x"})),
            "get": await _status(alice.store.get_item(his, "home")),
            "get_missing": await _status(alice.store.get_item(his, "no-such-key")),
            "search": await _status(alice.store.search_items(his, query="bees")),
            "search_all": await _status(alice.store.search_items(["memories"], query="bees")),
            "search_root": await _status(alice.store.search_items([], query="bees")),
            "list": await _status(alice.store.list_namespaces(prefix=["memories"])),
            "list_all": await _status(alice.store.list_namespaces()),
            "list_wildcard": await _status(alice.store.list_namespaces(prefix=["memories", "*"])),
            "delete": await _status(alice.store.delete_item(his, "home")),
        }
        out["alice_get"] = await alice.store.get_item(mine, "home")
        out["alice_search"] = await alice.store.search_items(mine, query="dog")
        out["alice_list"] = await alice.store.list_namespaces(prefix=mine)
        await alice.store.put_item(mine, "home", {"content": "Alice moved to Porto."})
        out["alice_replaced"] = await alice.store.get_item(mine, "home")
        await alice.store.delete_item(mine, "home")
        out["alice_after_delete"] = await alice.store.search_items(mine)
        out["bob_get"] = await bob.store.get_item(his, "home")
        out["bob_search"] = await bob.store.search_items(his, query="overwritten by alice")
        return out

    out = asyncio.run(scenario())
    assert out["refused"] == {name: 403 for name in out["refused"]}, out["refused"]
    assert out["alice_get"]["value"] == {"content": "Alice moved to Lisbon with her dog."}
    assert [i["key"] for i in out["alice_search"]["items"]] == ["home"]
    assert out["alice_list"]["namespaces"] == [mine]
    assert out["alice_replaced"]["value"] == {"content": "Alice moved to Porto."}
    assert out["alice_after_delete"]["items"] == []
    assert out["bob_get"]["value"] == {"content": "Bob keeps bees on his roof in Oslo."}  # nothing alice did landed
    assert [i["value"] for i in out["bob_search"]["items"]] == [{"content": "Bob keeps bees on his roof in Oslo."}]
