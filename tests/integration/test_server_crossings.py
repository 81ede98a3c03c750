"""Issue 37's crossings on a real ``langgraph dev`` with LangGraph auth on and ``LogicMapStore`` as its store.

1. Query-parameter pollution: the guard reads a request once, strictly, and the server is handed what it read: a
   repeated ``namespace`` (plain, percent-encoded, in a JSON body) is refused (400) instead of reading as alice to the
   guard and as bob to the server.
2. An assistant fixed to another user's namespace: refused when created or updated (403), and a run that names one
   is refused before it starts; alice's item survives bob's ``forget`` with ``purge``.
3. Under ``LOGICMAP_SERVER_NAMESPACE`` a user's own store put works (204, then readable), another's is a 403 with
   one line, never a 500.
"""

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
ALICE, BOB = {"Authorization": "Bearer alice"}, {"Authorization": "Bearer bob"}
ALICE_TEXT = "Alice keeps her spare key under the blue flowerpot."
BOB_TEXT = "Bob keeps bees on his roof in Oslo."


def _server(langgraph_dev: Any, **env: str) -> Any:
    graphs = json.loads(STUDIO_CONFIG.read_text())["graphs"]
    return langgraph_dev(
        embedder="hashing",
        LOGICMAP_STORE_POLICY="heuristic",
        **env,
        config={
            "store": {"path": "logicmap.studio.store.generate_store"},
            "auth": {"path": f"{AUTH}:auth"},
            "graphs": {name: graphs[name] for name in ("rerank", "forget")},
        },
    )


def _put(http: httpx.Client, headers: dict[str, str], namespace: list[str], key: str, text: str) -> int:
    body = {"namespace": namespace, "key": key, "value": {"content": text}}
    return http.put("/store/items", json=body, headers=headers).status_code


def _get(http: httpx.Client, headers: dict[str, str], query: str) -> httpx.Response:
    return http.get(f"/store/items?{query}", headers=headers)


def test_repeated_parameters_and_foreign_assistants_are_refused(langgraph_dev: Any) -> None:
    server = _server(langgraph_dev)
    with httpx.Client(base_url=server.url, timeout=120) as http:
        assert _put(http, BOB, ["memories", "bob"], "home", BOB_TEXT) == 204
        assert _put(http, ALICE, ["memories", "alice"], "home", ALICE_TEXT) == 204

        # 1. Every spelling of a second namespace: refused, or read the one way the server reads it.
        polluted = {
            "repeated": "namespace=memories.alice&namespace=memories.bob&key=home",
            "repeated_reversed": "namespace=memories.bob&namespace=memories.alice&key=home",
            "encoded_name": "namespace=memories.alice&%6eamespace=memories.bob&key=home",
            "encoded_dot": "namespace=memories%2Ebob&key=home",
            "mixed_case": "Namespace=memories.bob&namespace=memories.alice&key=home",
            "repeated_key": "namespace=memories.alice&key=home&key=other",
            "semicolon": "namespace=memories.alice;namespace=memories.bob&key=home",
        }
        statuses = {name: _get(http, ALICE, query).status_code for name, query in polluted.items()}
        assert statuses == {
            "repeated": 400,
            "repeated_reversed": 400,
            "encoded_name": 400,
            "encoded_dot": 403,
            "mixed_case": 400,
            "repeated_key": 400,
            "semicolon": 403,
        }, statuses
        head = http.head("/store/items?namespace=memories.bob&key=home", headers=ALICE)
        assert head.status_code == 403
        raw = (
            b'{"namespace": ["memories", "alice"], "key": "home", "value": {"content": "x"},'
            b' "namespace": ["memories", "bob"]}'
        )
        put = http.put("/store/items", content=raw, headers={**ALICE, "content-type": "application/json"})
        assert put.status_code == 400 and "repeats the key 'namespace'" in put.json()["detail"]
        search = http.post(
            "/store/items/search",
            headers={**ALICE, "content-type": "application/json"},
            content=b'{"namespace_prefix": ["memories", "alice"], "namespace_prefix": ["memories"]}',
        )
        assert search.status_code == 400
        nested = (
            b'{"namespace": ["memories", "alice"], "key": "deep", "value": {"v": ' + b"[" * 3000 + b"]" * 3000 + b"}}"
        )
        deep = http.put("/store/items", content=nested, headers={**ALICE, "content-type": "application/json"})
        assert deep.status_code == 400 and "nested deeper" in deep.json()["detail"]
        own = _get(http, ALICE, "namespace=memories.alice&key=home")
        assert own.status_code == 200 and own.json()["value"] == {"content": ALICE_TEXT}

        # 2. Assistants fixed to another user's namespace, and runs naming one.
        def create(headers: dict[str, str], graph: str, **fields: Any) -> httpx.Response:
            return http.post("/assistants", headers=headers, json={"graph_id": graph, **fields})

        foreign = {
            "rerank_context": create(BOB, "rerank", context={"namespace": "memories.alice"}),
            "forget_configurable": create(BOB, "forget", config={"configurable": {"namespace": "memories.alice"}}),
            "template_elsewhere": create(BOB, "rerank", context={"namespace": "memories.{who}"}),
            "user_at_other_label": create(BOB, "rerank", context={"namespace": "{user_id}.alice"}),
        }
        assert {k: r.status_code for k, r in foreign.items()} == {k: 403 for k in foreign}, {
            k: r.text for k, r in foreign.items()
        }
        mine = create(BOB, "rerank", context={"namespace": "memories.{user_id}"})
        assert mine.status_code == 200, mine.text
        patched = http.patch(
            f"/assistants/{mine.json()['assistant_id']}", headers=BOB, json={"context": {"namespace": "memories.alice"}}
        )
        assert patched.status_code == 403
        run = http.post(
            "/runs/wait",
            headers=BOB,
            json={
                "assistant_id": "forget",
                "input": {"keys": ["home"], "purge": True},
                "context": {"namespace": "memories.alice"},
            },
        )
        assert run.status_code == 403 and "not the authenticated user's" in run.json()["detail"]
        answered = http.post(
            "/runs/wait",
            headers=BOB,
            json={"assistant_id": mine.json()["assistant_id"], "input": {"question": "Where is the spare key?"}},
        )
        assert answered.status_code == 200 and "flowerpot" not in answered.text

        after = _get(http, ALICE, "namespace=memories.alice&key=home")
        assert after.json()["value"] == {"content": ALICE_TEXT}  # nothing bob tried reached alice's memory
        assert _get(http, BOB, "namespace=memories.bob&key=home").json()["value"] == {"content": BOB_TEXT}


def test_store_writes_under_a_deployment_template_work_for_their_own_tenant(langgraph_dev: Any) -> None:
    server = _server(langgraph_dev, LOGICMAP_SERVER_NAMESPACE="{user_id}")
    from langgraph_sdk import get_client

    alice = get_client(url=server.url, headers=ALICE)

    async def scenario() -> dict[str, Any]:
        await alice.store.put_item(["alice", "notes"], "home", {"content": ALICE_TEXT})
        return {
            "get": await alice.store.get_item(["alice", "notes"], "home"),
            "search": await alice.store.search_items(["alice"], query="spare key"),
        }

    out = asyncio.run(scenario())
    assert out["get"]["value"] == {"content": ALICE_TEXT}
    assert [item["key"] for item in out["search"]["items"]] == ["home"]
    with httpx.Client(base_url=server.url, timeout=120) as http:
        refused = http.put(
            "/store/items",
            headers=BOB,
            json={"namespace": ["alice", "notes"], "key": "home", "value": {"content": "overwritten by bob"}},
        )
        assert refused.status_code == 403 and "\n" not in refused.json()["detail"]
        polluted = _get(http, ALICE, "namespace=alice.notes&namespace=bob&key=home")
        assert polluted.status_code == 400
    log = server.log_tail(400)
    assert "Traceback" not in log and "TenantOverrideError" not in log, log[-3000:]
