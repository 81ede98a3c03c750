"""Forget, list and delete on a real ``langgraph dev`` server: two users, one authority, nothing crosses.

Alice and bob use assistants of the lifecycle graphs whose namespace is ``{user_id}``. Bob tries to list, forget
and delete alice's memory every way a client can name a namespace (run context, run configurable, the input, her
turn ids under his own name): each is refused (403 from the tenant guard) or acts on bob's namespace only, and an
id of alice's reads like an unknown id. Alice forgets a turn with a purge; a third user deletes her namespace.
After the server stops, ``logicmap stats`` shows alice's audit record (surface ``server``, counts, no text).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import refused_run

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 300.0
SECRET = "quokka-9138"


def _sessions(speaker: str, prefix: str, texts: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "session_id": f"S{i}",
            "timestamp": f"2024-05-0{i}T10:00:00",
            "turns": [{"dia_id": f"{prefix}{i}:1", "speaker": speaker, "text": text}],
        }
        for i, text in enumerate(texts, start=1)
    ]


def _run_doc_snippets(url: str) -> str:
    """docs/server.md's ``python live-server`` snippets, run as written against this server; what they print."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
    blocks = re.findall(r"^```python live-server\n(.*?)^```", page, flags=re.DOTALL | re.MULTILINE)
    assert blocks and all("http://127.0.0.1:2024" in b for b in blocks)
    program = "\n".join(b.replace("http://127.0.0.1:2024", url) for b in blocks)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _ids(run: dict[str, Any]) -> list[str]:
    return [item["id"] for item in run["page"]["items"]]


def test_forget_list_and_delete_on_the_server_never_cross_tenants(langgraph_dev: Any) -> None:
    from langgraph_sdk import get_client

    server = langgraph_dev(embedder="hashing")
    client = get_client(url=server.url)
    alice, bob = {"configurable": {"user_id": "alice"}}, {"configurable": {"user_id": "bob"}}
    carol = {"configurable": {"user_id": "carol"}}

    async def scenario() -> dict[str, Any]:
        per_user = {"namespace": "{user_id}"}
        ingest = await client.assistants.create("ingest", context={**per_user, "policy": "heuristic"})
        lister = (await client.assistants.create("list_memories", context=per_user))["assistant_id"]
        forgetter = (await client.assistants.create("forget", context=per_user))["assistant_id"]
        deleter = (await client.assistants.create("delete_namespace", context=per_user))["assistant_id"]
        for config, sessions in (
            (alice, _sessions("Alice", "A", [f"My vault code is {SECRET}.", "I grow figs."])),
            (bob, _sessions("Bob", "B", ["I keep bees on my roof."])),
            (carol, _sessions("Carol", "C", ["I sail on Sundays."])),
        ):
            await client.runs.wait(None, ingest["assistant_id"], config=config, input={"sessions": sessions})
        out: dict[str, Any] = {"before": await client.runs.wait(None, lister, input={}, config=alice)}
        hostile = [
            {"config": {"configurable": {"user_id": "bob", "namespace": "alice"}}},
            {"context": {"user_id": "bob", "namespace": "alice"}},
        ]
        out["refused"] = []
        for attempt in hostile:
            out["refused"].append(await refused_run(client.runs.wait(None, lister, input={}, **attempt)))
            out["refused"].append(
                await refused_run(client.runs.wait(None, forgetter, input={"turn_ids": ["A1:1"]}, **attempt))
            )
            out["refused"].append(
                await refused_run(client.runs.wait(None, deleter, input={"confirm": True}, **attempt))
            )
        # The input's namespace is not the run's: bob lists his own memory, and alice's id is unknown in his.
        out["bob_list"] = await client.runs.wait(None, lister, input={"namespace": "alice"}, config=bob)
        out["bob_forget"] = await refused_run(
            client.runs.wait(None, forgetter, input={"turn_ids": ["A1:1"], "namespace": "alice"}, config=bob)
        )
        out["bob_unknown"] = await refused_run(
            client.runs.wait(None, forgetter, input={"turn_ids": ["Z9:9"]}, config=bob)
        )
        out["forgot"] = await client.runs.wait(
            None, forgetter, input={"turn_ids": ["A1:1"], "purge": True}, config=alice
        )
        out["after"] = await client.runs.wait(None, lister, input={}, config=alice)
        out["bob_after"] = await client.runs.wait(None, lister, input={}, config=bob)
        out["deleted"] = await client.runs.wait(None, deleter, input={"confirm": True}, config=carol)
        out["carol_after"] = await refused_run(client.runs.wait(None, lister, input={}, config=carol))
        return out

    try:
        out = asyncio.run(asyncio.wait_for(scenario(), RUN_TIMEOUT_S))
        printed = _run_doc_snippets(server.url)
    finally:
        server.stop()
    assert printed.startswith("A2:1 I grow figs.") and "'turns': 1" in printed, printed
    assert _ids(out["before"]) == ["A1:1", "A2:1"]
    assert len(out["refused"]) == 6
    for refusal in out["refused"]:
        assert refusal.startswith("403") and "may not name its own namespace" in refusal, refusal
    assert _ids(out["bob_list"]) == ["B1:1"] and SECRET not in json.dumps(out["bob_list"])
    # Alice's id in bob's namespace and a made-up id: the same error, naming only bob's namespace.
    for error in (out["bob_forget"], out["bob_unknown"]):
        assert "UnknownMemoryError" in error and "alice" not in error and SECRET not in error, error
    assert out["forgot"]["forgotten"]["removed"]["turns"] == 1 and out["forgot"]["forgotten"]["purge"]
    assert _ids(out["after"]) == ["A2:1"] and _ids(out["bob_after"]) == ["B1:1"]
    assert out["deleted"]["deleted"]["namespace"] == "carol"
    assert "UnknownNamespaceError" in out["carol_after"], out["carol_after"]
    # The audit record, read by the CLI once the server has let go of the store.
    stats = subprocess.run(
        [sys.executable, "-m", "logicmap", "stats", "-n", "alice"],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    audit = json.loads(stats.stdout)["forgets"]
    # The scenario's forget, then the docs' snippet's (alice's last turn).
    assert [(a["surface"], a["removed"]["turns"], a["purged"]) for a in audit] == [("server", 1, True)] * 2
    assert SECRET not in stats.stdout
    data_dir = Path(server.env["LOGICMAP_DATA_DIR"])
    assert not [p for p in data_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
