"""LangSmith tracing against a capture server on 127.0.0.1: run names, tags, metadata and cost arrive; off sends nothing.

The graphs run in a child process with ``LANGSMITH_ENDPOINT`` pointed at the capture server and a fake key.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 300
STRATEGY_GRAPHS = ("compass", "goalmem", "real", "reconstruct")

# The child: ingest two sessions with a scripted model that never returns valid JSON (every LLM role runs and
# falls back), ask each strategy one question, and run the ingest graph inside graphs.tracing.traced_run.
CHILD = r"""
import dataclasses, json, sys
from pathlib import Path
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.ingest import IngestContext, build_ingest_graph, ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.runtime.tracing import traced_run
from logicmap.settings import LogicMapSettings
from logicmap.memory.files.loaders import load_conversations

data_dir = Path(sys.argv[1])
conversation = load_conversations(Path("data/sample_conversation.json"))[0]
sessions = conversation.sessions[:2]
resources = Resources(settings=LogicMapSettings(data_dir=data_dir, embedding_provider="hashing"))
resources.llm_ = ScriptedChatModel(default="no JSON here")
out = {}
report = ingest_conversation(conversation.model_copy(update={"sessions": sessions}), "traced", resources=resources,
                             policy="llm")
out["ingest_llm_calls"] = report.cost.llm_calls

import importlib.util
from logicmap.graphs.strategies.registry import answer
for strategy in ("compass", "goalmem", "real", "reconstruct"):
    if importlib.util.find_spec(f"logicmap.graphs.strategies.{strategy}") is not None:
        result = answer(strategy, "What is the name of Maya's dog?", "traced", resources=resources, policy="llm")
        out[f"{strategy}_llm_calls"] = result.cost.llm_calls

context = IngestContext(policy="heuristic")
with traced_run("ingest", namespace="traced-root", policy="heuristic", inputs={"sessions": 1}, budgets=context) as run:
    final = build_ingest_graph().compile().invoke(
        {"sessions": sessions[:1]}, config=run.config,
        context=dataclasses.replace(context, namespace="traced-root", resources=resources))
    run.finish({"sessions": len(final["reports"])}, cost=final["cost"])
out["traced_run_id"] = run.run_id

from logicmap.graphs.runtime.tracing import tracing_enabled
if tracing_enabled():  # flush what is queued; with tracing off there is no client to flush
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langsmith.run_trees import get_cached_client
    wait_for_all_tracers()
    get_cached_client().flush()
print("RESULT " + json.dumps(out))
"""


def _run_child(tmp_path: Path, child_env: Any, capture_url: str, *, tracing: bool) -> dict[str, Any]:
    langsmith = {
        "LANGSMITH_ENDPOINT": capture_url,
        "LANGSMITH_API_KEY": "lsv2_pt_fake_key_for_tests",
        "LANGSMITH_PROJECT": "logicmap-capture",
    }
    if tracing:
        langsmith["LANGSMITH_TRACING"] = "true"
    env = child_env(tmp_path / "memory", embedder="hashing", **langsmith)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "memory")],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def _metadata(run: dict[str, Any]) -> dict[str, Any]:
    return (run.get("extra") or {}).get("metadata") or {}


def _trace(runs: dict[str, dict[str, Any]], root_id: str) -> list[dict[str, Any]]:
    return [r for r in runs.values() if str(r.get("trace_id")) == root_id]


def _root(runs: dict[str, dict[str, Any]], name: str, namespace: str) -> tuple[str, dict[str, Any]]:
    found = [
        (rid, r)
        for rid, r in runs.items()
        if not r.get("parent_run_id") and r.get("name") == name and _metadata(r).get("namespace") == namespace
    ]
    assert len(found) == 1, sorted(
        {(r.get("name"), _metadata(r).get("namespace")) for r in runs.values() if not r.get("parent_run_id")}
    )
    return found[0]


def _check_ingest(runs: dict[str, dict[str, Any]], reported: dict[str, Any]) -> None:
    root_id, root = _root(runs, "ingest", "traced")
    assert {"strategy:ingest", "policy:llm"} <= set(root["tags"])
    meta = _metadata(root)
    assert meta["strategy"] == "ingest" and meta["policy"] == "llm" and meta["sessions"] == 2
    assert meta["merge_threshold"] == 0.9 and meta["recluster_every"] == 4  # budgets
    assert root["outputs"]["cost"]["llm_calls"] == reported["ingest_llm_calls"] > 0  # cost on the root run
    trace = _trace(runs, root_id)
    nodes = {r["name"] for r in trace if r.get("run_type") == "chain"}
    assert {"prepare", "segment", "relate", "fuse", "topics", "commit"} <= nodes
    roles = [r for r in trace if r.get("run_type") == "llm"]
    assert {"session_analyst", "relation_extractor"} <= {r["name"] for r in roles}  # combined extraction (default)
    analyst = next(r for r in roles if r["name"] == "session_analyst")
    assert {"part:segmenter", "part:fact_extractor", "part:cue_extractor"} <= set(analyst["tags"])
    for role in roles:
        assert f"role:{role['name']}" in role["tags"] and "strategy:ingest" in role["tags"]
        assert _metadata(role)["namespace"] == "traced"


NODES = {"compass": {"planner", "localize", "respond"}, "goalmem": {"decompose", "retrieve", "unify"}}


def _check_strategy(runs: dict[str, dict[str, Any]], reported: dict[str, Any], strategy: str) -> None:
    root_id, root = _root(runs, strategy, "traced")
    assert {f"strategy:{strategy}", "policy:llm"} <= set(root["tags"])
    meta = _metadata(root)
    cost = meta if "llm_calls" in meta else root["outputs"]["cost"]  # metadata once answer() uses traced_run
    assert cost["llm_calls"] == reported[f"{strategy}_llm_calls"]
    trace = _trace(runs, root_id)
    assert NODES.get(strategy, set()) <= {r["name"] for r in trace if r.get("run_type") == "chain"}
    roles = [r for r in trace if r.get("run_type") == "llm"]
    assert len(roles) == reported[f"{strategy}_llm_calls"] > 0  # every LLM call is a traced role run
    assert all(any(t.startswith("role:") for t in r["tags"]) for r in roles)
    assert all(_metadata(r)["namespace"] == "traced" for r in roles)


def _check_traced_run(runs: dict[str, dict[str, Any]], reported: dict[str, Any]) -> None:
    root_id, root = _root(runs, "ingest", "traced-root")
    assert root_id == reported["traced_run_id"]
    assert root["inputs"] == {"sessions": 1} and root["outputs"] == {"sessions": 1}
    meta = _metadata(root)
    assert meta["llm_calls"] == 0 and meta["total_tokens"] == 0 and "wall_time_s" in meta  # cost figures
    assert meta["policy"] == "heuristic" and meta["topic_delta"] == 0.9
    children = [r for r in runs.values() if str(r.get("parent_run_id")) == root_id]
    assert [c["name"] for c in children] == ["ingest graph"]
    assert "strategy:ingest" in children[0]["tags"] and _metadata(children[0])["namespace"] == "traced-root"


def test_traced_runs_arrive_with_names_tags_metadata_and_cost(
    tmp_path: Path, child_env: Any, capture_server: Any
) -> None:
    reported = _run_child(tmp_path, child_env, capture_server.url, tracing=True)
    runs = capture_server.runs()
    keys = {k.lower(): v for r in capture_server.run_requests() for k, v in r["headers"].items()}
    assert keys.get("x-api-key") == "lsv2_pt_fake_key_for_tests"
    _check_ingest(runs, reported)
    _check_traced_run(runs, reported)
    present = [s for s in STRATEGY_GRAPHS if f"{s}_llm_calls" in reported]
    assert present == [s for s in STRATEGY_GRAPHS if (PROJECT_ROOT / "graphs" / "strategies" / f"{s}.py").exists()]
    for strategy in present:
        _check_strategy(runs, reported, strategy)


def test_nothing_is_sent_when_tracing_is_off(tmp_path: Path, child_env: Any, capture_server: Any) -> None:
    reported = _run_child(tmp_path, child_env, capture_server.url, tracing=False)
    assert reported["ingest_llm_calls"] > 0 and reported["traced_run_id"] is None
    assert capture_server.requests == []  # not even the client's /info probe
