"""Runs through the LangGraph API server carry the same root run as CLI runs: name, ``strategy:``/``policy:`` tags,
namespace and budgets metadata, cost; caught by a LangSmith stand-in on 127.0.0.1.

``langgraph dev`` runs with ``LANGSMITH_TRACING=true``, ``LANGSMITH_ENDPOINT`` at the capture server and a fake key.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SAMPLE = PROJECT_ROOT / "data" / "sample_conversation.json"
RUN_TIMEOUT_S = 240.0
FLUSH_DEADLINE_S = 60.0


def _metadata(run: dict[str, Any]) -> dict[str, Any]:
    return (run.get("extra") or {}).get("metadata") or {}


def _ended_root(capture: Any, name: str) -> dict[str, Any]:
    """The one root run named ``name``, once its end (with the cost figures) has arrived."""
    deadline = time.monotonic() + FLUSH_DEADLINE_S
    while True:
        roots = [r for r in capture.runs().values() if not r.get("parent_run_id") and r.get("name") == name]
        if len(roots) == 1 and roots[0].get("end_time") and "llm_calls" in _metadata(roots[0]):
            return roots[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no ended root run {name!r}: {[(r.get('name'), r.get('end_time')) for r in roots]}")
        time.sleep(0.5)


def test_a_server_run_carries_tags_namespace_budgets_and_cost(langgraph_dev: Any, capture_server: Any) -> None:
    from langgraph_sdk import get_client

    server = langgraph_dev(
        embedder="hashing",
        LANGSMITH_TRACING="true",
        LANGSMITH_ENDPOINT=capture_server.url,
        LANGSMITH_API_KEY="lsv2_pt_fake_key_for_tests",
        LANGSMITH_PROJECT="logicmap-server",
    )
    client = get_client(url=server.url)

    async def scenario() -> dict[str, Any]:
        ingested = await client.runs.wait(
            None, "ingest", input={"path": str(SAMPLE)}, context={"policy": "heuristic", "namespace": "served"}
        )
        thread = await client.threads.create()
        # "llm" asked for, but the server has no chat model configured: the run can only use the heuristic one.
        answered = await client.runs.wait(
            thread["thread_id"],
            "compass",
            context={"policy": "llm", "max_steps": 4, "namespace": "served"},
            input={"question": "What is the name of Maya's dog?"},
        )
        return {"ingested": ingested, "compass": answered}

    outcome = asyncio.run(asyncio.wait_for(scenario(), RUN_TIMEOUT_S))
    assert outcome["ingested"]["reports"] and outcome["compass"]["answer"]

    ingest = _ended_root(capture_server, "ingest")
    assert {"strategy:ingest", "policy:heuristic"} <= set(ingest["tags"])
    meta = _metadata(ingest)
    assert meta["namespace"] == "served" and meta["merge_threshold"] == 0.9 and "resources" not in meta
    assert meta["llm_calls"] == outcome["ingested"]["cost"]["llm_calls"] == 0 and meta["wall_time_s"] > 0

    compass = _ended_root(capture_server, "compass")
    assert {"strategy:compass", "policy:heuristic"} <= set(compass["tags"])
    assert "policy:llm" not in compass["tags"]
    meta = _metadata(compass)
    assert meta["namespace"] == "served" and meta["policy"] == "heuristic" and meta["max_steps"] == 4
    assert meta["llm_calls"] == 0 and meta["total_tokens"] == 0 and meta["wall_time_s"] > 0
    assert outcome["compass"]["cost"]["wall_time_s"] > 0  # the state the server returns carries the wall time
    # Routers leave no runs in the trace.
    names = {r.get("name") for r in capture_server.runs().values()}
    assert {"planner", "localize", "respond"} <= names and "route_search" not in names


def test_a_served_chat_turn_carries_the_resolved_tenant_tags_and_cost(langgraph_dev: Any, capture_server: Any) -> None:
    """The chatbot on the server, its tenant a template of the assistant's context ('{user_id}') filled from the
    run's config: one root run named chatbot, tagged, with the tenant's name (never the template) and the cost;
    the after_recall router leaves no run."""
    from langgraph_sdk import get_client

    server = langgraph_dev(
        embedder="hashing",
        LANGSMITH_TRACING="true",
        LANGSMITH_ENDPOINT=capture_server.url,
        LANGSMITH_API_KEY="lsv2_pt_fake_key_for_tests",
        LANGSMITH_PROJECT="logicmap-server",
    )
    client = get_client(url=server.url)

    async def scenario() -> dict[str, Any]:
        assistant = await client.assistants.create(
            "chatbot", context={"namespace": "{user_id}", "strategy": "dense", "policy": "heuristic"}
        )
        thread = await client.threads.create()
        return await client.runs.wait(
            thread["thread_id"],
            assistant["assistant_id"],
            input={"messages": [{"role": "user", "content": "My dog is called Biscuit."}]},
            config={"configurable": {"user_id": "alice"}},
        )

    out = asyncio.run(asyncio.wait_for(scenario(), RUN_TIMEOUT_S))
    assert out["memory_write"]["status"] == "stored" and out["memory_write"]["namespace"] == "alice"
    chat = _ended_root(capture_server, "chatbot")
    assert {"strategy:chatbot", "policy:heuristic"} <= set(chat["tags"])
    meta = _metadata(chat)
    assert meta["namespace"] == "alice" and meta["llm_calls"] == 0 and meta["wall_time_s"] > 0
    assert "after_recall" not in {r.get("name") for r in capture_server.runs().values()}
