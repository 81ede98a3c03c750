"""Tracing with no gaps, seen on a local collector: a LangSmith ``Client`` pointed at a loopback HTTP server that
records the runs it is sent (``POST /runs``, ``PATCH /runs/<id>``), with tracing switched on the way
``LANGSMITH_TRACING=true`` switches it on (``langsmith.tracing_context``).

Every strategy of the registry (the graphs, and the plain functions dense, bm25 and the forward baselines), the chatbot
however compiled, and the chatbot as the API server runs it: one root run, named, tagged ``strategy:``/``policy:``,
with the resolved namespace (never a template) and the cost in its metadata and outputs; no run of a router; a chat
turn's output reports the fallbacks of that turn's ingestion.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import langsmith
import pytest
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.checkpoint.memory import InMemorySaver

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.runtime.resources import Resources, set_default_resources, set_server_mode
from tests.conftest import make_resources

QUESTION = "What is the name of Maya's dog?"


class Collector:
    """A loopback LangSmith endpoint: the runs it received, by id, each as created then patched."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> Any:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    raw = gzip.decompress(raw)
                return json.loads(raw) if raw else {}

            def _reply(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def do_GET(self) -> None:  # the client's /info probe
                self._reply()

            def do_POST(self) -> None:
                body = self._body()
                if self.path.rstrip("/").endswith("/runs"):
                    with collector.lock:
                        collector.runs.setdefault(str(body["id"]), {}).update(body)
                self._reply()

            def do_PATCH(self) -> None:
                body = self._body()
                with collector.lock:
                    run = collector.runs.setdefault(self.path.rstrip("/").rsplit("/", 1)[1], {})
                    extra = {**(run.get("extra") or {}), **(body.get("extra") or {})}
                    run.update({**body, "extra": extra})
                self._reply()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.client = langsmith.Client(
            api_url=f"http://127.0.0.1:{self.server.server_port}", api_key="local", auto_batch_tracing=False
        )

    def capture(self, call: Any) -> Any:
        """``call()`` with tracing on, sent to this collector; returns its result (the runs are in ``runs``)."""
        self.runs.clear()
        with langsmith.tracing_context(enabled=True, client=self.client, project_name="local"):
            result = call()
        wait_for_all_tracers()
        return result

    def roots(self) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if not r.get("parent_run_id")]

    def named(self, names: set[str]) -> list[str]:
        return [r["name"] for r in self.runs.values() if r.get("name") in names]


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    found = Collector()
    yield found
    found.server.shutdown()


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, sample: Any) -> Iterator[Resources]:
    """The sample's first two sessions ingested without an LLM: namespace ``alice``, and ``alice-r2`` with R2 facts."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    res = make_resources(tmp_path_factory.mktemp("collected"))
    two = sample.model_copy(update={"sessions": sample.sessions[:2]})
    ingest_conversation(two, "alice", resources=res, policy="heuristic")
    ingest_conversation(two, "alice-r2", resources=res, policy="heuristic", memory_manager="r2")
    yield res
    res.store.close()


def _scripted(memory: Resources) -> Resources:
    """The same store with a chat model that never replies valid JSON: every role calls, retries, falls back."""
    return dataclasses.replace(memory, llm_=ScriptedChatModel(default="no JSON here"))


def _routers() -> set[str]:
    from logicmap.graphs.chat.chatbot import builder as chat_builder
    from logicmap.graphs.strategies.registry import GRAPH_STRATEGIES

    builders = [s.graph.builder for s in GRAPH_STRATEGIES.values()] + [chat_builder]
    return {spec.path.name for b in builders for branches in b.branches.values() for spec in branches.values()}


def _check_root(collector: Collector, name: str, policy: str, namespace: str) -> dict[str, Any]:
    roots = collector.roots()
    assert [r["name"] for r in roots] == [name]
    root = roots[0]
    assert {f"strategy:{name}", f"policy:{policy}"} <= set(root["tags"])
    meta = root["extra"]["metadata"]
    assert meta["namespace"] == namespace and meta["policy"] == policy
    assert meta["llm_calls"] >= 0 and meta["wall_time_s"] > 0 and "total_tokens" in meta
    assert "cost" in json.dumps(root["outputs"])
    assert collector.named(_routers()) == []  # routers leave no runs
    return root


def test_every_strategy_sends_one_root_run(collector: Collector, memory: Resources) -> None:
    from logicmap.graphs.strategies.registry import STRATEGIES, answer

    assert {"dense", "bm25", "forward_react"} <= set(STRATEGIES)
    for name in STRATEGIES:
        namespace = "alice-r2" if name == "r2" else "alice"
        result = collector.capture(
            partial(answer, name, QUESTION, namespace, resources=_scripted(memory), policy="llm")
        )
        root = _check_root(collector, name, "llm", namespace)
        assert root["extra"]["metadata"]["llm_calls"] == result.cost.llm_calls > 0, name
        llm_runs = [r for r in collector.runs.values() if r.get("run_type") == "llm"]
        assert len(llm_runs) == result.cost.llm_calls, name  # every role call nests under the one root


def _turn(graph: Any, context: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    config = config or {"configurable": {"thread_id": str(uuid.uuid4()), "user_id": "alice"}}
    # A statement, not a question: a chat stores a user's statement as evidence (its ingestion runs the roles whose
    # fallbacks the turn reports), a question only as the context of the reply.
    return graph.invoke(
        {"messages": [("user", "My dog Biscuit is a beagle and loves the beach.")]}, config, context=context
    )


def _check_chat_turn(collector: Collector, out: dict[str, Any]) -> None:
    root = _check_root(collector, "chatbot", "llm", "alice")
    assert root["extra"]["metadata"]["llm_calls"] == out["cost"]["llm_calls"] > 0
    # The turn's ingestion fell back (the script never replies valid JSON): its roles are in the turn's output.
    ingest_roles = {"segmenter", "relation_extractor", "fact_extractor", "cue_extractor", "coref_judge"}
    assert out["memory_write"]["status"] == "stored" and out["memory_write"]["llm_calls"] > 0
    assert {f["role"] for f in out["fallbacks"]} & ingest_roles


@pytest.mark.parametrize("compiled", ["module graph", "build().compile()", "build().compile(checkpointer)"])
def test_the_chatbot_however_compiled_sends_one_root_run(
    collector: Collector, memory: Resources, compiled: str
) -> None:
    from logicmap.graphs.chat.chatbot import ChatContext, build_chatbot_graph, graph

    bot = {
        "module graph": graph,
        "build().compile()": build_chatbot_graph().compile(),
        "build().compile(checkpointer)": build_chatbot_graph().compile(checkpointer=InMemorySaver()),
    }[compiled]
    context = ChatContext(namespace="{user_id}", strategy="dense", remember_mode="sync", resources=_scripted(memory))
    out = collector.capture(lambda: _turn(bot, context))
    _check_chat_turn(collector, out)


def test_the_served_chatbot_sends_one_root_run_with_the_resolved_tenant(
    collector: Collector, memory: Resources
) -> None:
    """As the LangGraph API server runs it: the assistant's context mirrored into ``configurable`` (and from there
    into the metadata, as a template), the authenticated user in ``configurable``, process-wide resources."""
    from logicmap.graphs.chat.chatbot import graph

    context = {"namespace": "{user_id}", "strategy": "dense", "remember_mode": "sync"}  # the turn stored in its run
    config = {
        "configurable": {**context, "langgraph_auth_user_id": "alice", "thread_id": str(uuid.uuid4())},
        "metadata": {**context, "langgraph_api_version": "test"},
    }
    set_default_resources(_scripted(memory))
    set_server_mode(True)
    try:
        out = collector.capture(lambda: _turn(graph, context, config))
    finally:
        set_server_mode(False)
        set_default_resources(None)
    _check_chat_turn(collector, out)
    assert collector.roots()[0]["extra"]["metadata"]["namespace"] == "alice"  # never '{user_id}'
