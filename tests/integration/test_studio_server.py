"""The LangGraph API server (``langgraph dev``) serving studio/langgraph.json: graphs run through langgraph-sdk.

The chatbot is also driven as a ``RemoteGraph``. Servers bind 127.0.0.1 on a free port and are stopped by pid.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STUDIO_CONFIG = PROJECT_ROOT / "studio" / "langgraph.json"
SAMPLE = PROJECT_ROOT / "data" / "sample_conversation.json"
GRAPH_MODULES = ("ingest", "compass", "rerank", "goalmem", "real", "reconstruct", "r2", "chatbot")
# The memory lifecycle's graphs share one module (graphs.lifecycle): graph id -> its variable there.
LIFECYCLE_GRAPHS = {"forget": "forget_graph", "list_memories": "list_graph", "delete_namespace": "delete_graph"}

RUN_TIMEOUT_S = 240.0
EVENT_ID = re.compile(r"^S\d+-E\d+$")


def test_studio_config_exposes_every_graph_module() -> None:
    import importlib

    config = json.loads(STUDIO_CONFIG.read_text())
    assert config["$schema"] == "https://langgra.ph/schema.json"
    assert config["dependencies"] == [".."] and config["env"] == "./studio/.env"
    existing = [name for name in GRAPH_MODULES if _graph_file(name).exists()]
    assert sorted(config["graphs"]) == sorted([*existing, *LIFECYCLE_GRAPHS]), (
        "studio/langgraph.json must list every graphs/<name>.py and the lifecycle graphs"
    )
    for name, entry in config["graphs"].items():
        module, variable = ("lifecycle", LIFECYCLE_GRAPHS[name]) if name in LIFECYCLE_GRAPHS else (name, "graph")
        assert entry["path"] == _module_path(module, variable) and entry["description"]
        graph = getattr(importlib.import_module(_module_path(module, variable).split(":")[0]), variable)
        assert graph.checkpointer is None, f"{name}: Studio graphs get persistence from the server"
        assert graph.builder.context_schema is not None, f"{name}: per-run settings belong in a context schema"


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, RUN_TIMEOUT_S))


def test_studio_server_runs_ingest_compass_and_the_remote_chatbot(langgraph_dev: Any) -> None:
    from langgraph_sdk import get_client

    server = langgraph_dev(embedder="minilm")
    client = get_client(url=server.url)

    async def scenario() -> dict[str, Any]:
        assistants = await client.assistants.search(limit=50)
        by_graph = {a["graph_id"]: a["assistant_id"] for a in assistants}
        assert set(by_graph) == set(server.graph_ids)
        forms, inputs = {}, {}
        for graph_id, assistant_id in by_graph.items():
            schemas = await client.assistants.get_schemas(assistant_id)
            forms[graph_id] = sorted((schemas.get("context_schema") or {}).get("properties", {}))
            inputs[graph_id] = sorted((schemas.get("input_schema") or {}).get("properties", {}))
        ingested = await client.runs.wait(
            None, "ingest", input={"path": str(SAMPLE)}, context={"namespace": "sample", "policy": "heuristic"}
        )
        compass = None
        if "compass" in by_graph:
            # The server takes a run's context or its configurable, not both: the template sits on an
            # assistant, each run names its user in configurable (as LangMem's tools are deployed).
            per_user = await client.assistants.create("compass", context={"namespace": "{user_id}"})
            thread = await client.threads.create()
            compass = await client.runs.wait(
                thread["thread_id"],
                per_user["assistant_id"],
                input={"question": "What is the name of Maya's dog?"},
                config={"configurable": {"user_id": "sample"}},
            )
        return {"forms": forms, "inputs": inputs, "ingested": ingested, "compass": compass}

    outcome = _run(scenario())
    assert all(outcome["forms"][g] for g in server.graph_ids), outcome["forms"]  # a settings form per graph
    assert "policy" in outcome["forms"]["ingest"] and "namespace" in outcome["forms"]["ingest"]
    # The input is what a user supplies; the tenant is the run's (context or config), never an input field.
    assert outcome["inputs"]["ingest"] == ["path", "sessions"] and outcome["inputs"]["compass"] == [
        "question",
        "question_date",
    ]

    ingested = outcome["ingested"]
    assert [r["session_id"] for r in ingested["reports"]] == ["S1", "S2", "S3", "S4", "S5"]
    assert sum(r["events"] for r in ingested["reports"]) >= 5 and ingested["cost"]["llm_calls"] == 0

    if outcome["compass"] is None:
        pytest.skip("graphs/strategies/compass.py does not exist yet")
    compass = outcome["compass"]
    assert isinstance(compass["answer"], str) and compass["answer"].strip()
    assert compass["kept"] and all(EVENT_ID.match(e) for e in compass["kept"])
    assert any(e.startswith("S1-") for e in compass["kept"]), compass["kept"]  # the dog is in session 1
    assert compass["cost"]["llm_calls"] == 0

    if "chatbot" not in server.graph_ids:
        pytest.skip("graphs/chat/chatbot.py does not exist yet")
    from langgraph.pregel.remote import RemoteGraph

    remote = RemoteGraph("chatbot", url=server.url)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    context = {"namespace": "sample", "strategy": "compass", "policy": "heuristic", "ingest": False}
    first = remote.invoke(
        {"messages": [{"role": "user", "content": "What is the name of Maya's dog?"}]}, config=config, context=context
    )
    reply = first["messages"][-1]
    assert reply["type"] == "ai" and reply["content"].strip()
    cited = {t for item in first["evidence"] for t in item["turn_ids"]}
    assert "D1:1" in cited, first["evidence"]
    # The server keeps the thread: a second turn sees the first one.
    second = remote.invoke(
        {"messages": [{"role": "user", "content": "Where does Maya live now?"}]}, config=config, context=context
    )
    assert [m["type"] for m in second["messages"]] == ["human", "ai", "human", "ai"]


def _module_path(module: str, variable: str) -> str:
    """Where ``studio/langgraph.json`` points a graph: its module in a room of ``graphs`` (``module:variable``)."""
    rooms = {"ingest": "ingest.ingest", "chatbot": "chat.chatbot", "lifecycle": "surfaces.lifecycle"}
    return f"logicmap.graphs.{rooms.get(module, 'strategies.' + module)}:{variable}"


def _graph_file(module: str) -> Path:
    return PROJECT_ROOT.joinpath(*_module_path(module, "graph").split(":")[0].split(".")[1:]).with_suffix(".py")
