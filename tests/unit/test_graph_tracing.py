"""Graphs that trace themselves (graphs/runtime/tracing.py ``TracedGraph``): a graph invoked directly, as the API server and
Studio do, gets the same root run as a CLI run: name, ``strategy:``/``policy:`` tags, namespace and budgets metadata,
cost at its end; routers leave no runs; a retried LLM call is marked.

The tracer is LangChain's own ``LangChainTracer``, with only the sending replaced by recording what would be sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.tracers.context import tracing_v2_callback_var
from langchain_core.tracers.langchain import LangChainTracer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from logicmap.agents.base import Cost
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.runtime.tracing import TracedGraph

STRATEGIES = ("compass", "rerank", "goalmem", "real", "reconstruct")
QUESTION = "What is the name of Maya's dog?"


class RecordingTracer(LangChainTracer):
    """A ``LangChainTracer`` whose posts and patches land in ``sent`` (run id -> the run as it would be sent)."""

    def __init__(self, sent: dict[str, dict[str, Any]] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("client", object())  # never used: nothing is sent
        super().__init__(**kwargs)
        self.sent = {} if sent is None else sent

    def copy_with_metadata_defaults(self, **kwargs: Any) -> LangChainTracer:
        copy = super().copy_with_metadata_defaults(**kwargs)
        assert isinstance(copy, RecordingTracer)  # LangChain copies a tracer as its own class
        copy.sent = self.sent
        return copy

    def _record(self, run: Any) -> None:
        if run.extra.get("__disabled"):  # inside LangSmith's tracing_context(enabled=False): never sent
            return
        self.sent[str(run.id)] = {
            "name": run.name,
            "run_type": run.run_type,
            "parent": run.parent_run_id,
            "tags": list(run.tags or []),
            "metadata": dict(run.extra.get("metadata") or {}),
            "outputs": run.outputs,
        }

    def _persist_run_single(self, run: Any) -> None:
        self._record(run)

    def _update_run_single(self, run: Any) -> None:
        self._record(run)

    def roots(self) -> list[dict[str, Any]]:
        return [r for r in self.sent.values() if r["parent"] is None]

    def runs_named(self, names: set[str]) -> list[str]:
        return [r["name"] for r in self.sent.values() if r["name"] in names]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, sample: Any) -> Iterator[Resources]:
    """The sample's first two sessions ingested without an LLM, in namespace ``traced``."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from tests.conftest import make_resources

    res = make_resources(tmp_path_factory.mktemp("traced-memory"))
    ingest_conversation(
        sample.model_copy(update={"sessions": sample.sessions[:2]}), "traced", resources=res, policy="heuristic"
    )
    yield res
    res.store.close()


def _scripted(memory: Resources) -> Resources:
    """The same store, with a chat model that never replies valid JSON: every role runs, retries, falls back."""
    return dataclasses.replace(memory, llm_=ScriptedChatModel(default="no JSON here"))


def _routers(graph: TracedGraph) -> set[str]:
    return {spec.path.name for branches in graph.builder.branches.values() for spec in branches.values()}


def _check_root(tracer: RecordingTracer, final: dict[str, Any], strategy: str, policy: str) -> dict[str, Any]:
    roots = tracer.roots()
    assert [r["name"] for r in roots] == [strategy]
    root = roots[0]
    assert {f"strategy:{strategy}", f"policy:{policy}"} <= set(root["tags"])
    assert not [t for t in root["tags"] if t.startswith("policy:") and t != f"policy:{policy}"]
    meta = root["metadata"]
    assert meta["strategy"] == strategy and meta["namespace"] == "traced" and meta["policy"] == policy
    assert "resources" not in meta
    cost = final["cost"]
    assert meta["llm_calls"] == cost.llm_calls and meta["total_tokens"] == cost.total_tokens
    assert meta["wall_time_s"] > 0 and cost.wall_time_s > 0  # the run's wall time, in the trace and the state
    return root


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_strategy_graph_invoked_directly_carries_its_root_run(memory: Resources, strategy: str) -> None:
    module = importlib.import_module(f"logicmap.graphs.strategies.{strategy}")
    graph = module.graph
    assert isinstance(graph, TracedGraph)
    context_type = graph.builder.context_schema
    tracer = RecordingTracer()
    final = graph.invoke(
        {"question": QUESTION},
        config={"callbacks": [tracer]},
        context=context_type(policy="llm", namespace="traced", resources=_scripted(memory)),
    )
    root = _check_root(tracer, final, strategy, "llm")
    assert final["cost"].llm_calls > 0
    budgets = {f.name for f in dataclasses.fields(context_type)} - {"resources", "policy", "namespace"}
    assert budgets <= set(root["metadata"])  # every budget of the context
    assert tracer.runs_named(_routers(graph)) == []  # conditional edges leave no runs
    calls = [r for r in tracer.sent.values() if r["run_type"] == "llm"]
    assert len(calls) == final["cost"].llm_calls
    retries = [r for r in calls if "retry" in r["tags"]]
    assert retries and all(r["metadata"]["attempt"] == 2 for r in retries)
    assert not [r for r in calls if "retry" not in r["tags"] and "attempt" in r["metadata"]]


def test_the_ingest_graph_invoked_directly_carries_its_cost(memory: Resources, sample: Any) -> None:
    from logicmap.graphs.ingest.ingest import IngestContext, graph

    tracer = RecordingTracer()
    res = dataclasses.replace(_scripted(memory), store_=None, settings=memory.settings.model_copy())
    final = graph.invoke(
        {"sessions": sample.sessions[:1]},
        config={"callbacks": [tracer]},
        context=IngestContext(policy="llm", namespace="traced-ingest", resources=res),
    )
    root = tracer.roots()[0]
    assert root["name"] == "ingest" and {"strategy:ingest", "policy:llm"} <= set(root["tags"])
    assert root["metadata"]["namespace"] == "traced-ingest" and root["metadata"]["merge_threshold"] == 0.9
    assert root["metadata"]["llm_calls"] == final["cost"].llm_calls == final["reports"][0].cost.llm_calls > 0
    assert tracer.runs_named(_routers(graph)) == []
    res.store.close()


def test_the_policy_tag_is_the_policy_the_run_can_use(memory: Resources) -> None:
    from logicmap.graphs.strategies.compass import CompassContext, graph

    tracer = RecordingTracer()
    no_model = dataclasses.replace(memory, llm_=None)
    final = graph.invoke(
        {"question": QUESTION},
        config={"callbacks": [tracer]},
        context=CompassContext(policy="llm", namespace="traced", resources=no_model),
    )
    _check_root(tracer, final, "compass", "heuristic")  # "llm" asked for, no chat model configured
    assert final["cost"].llm_calls == 0


def test_an_async_run_gets_its_cost_before_the_root_run_is_sent(memory: Resources) -> None:
    from logicmap.graphs.strategies.goalmem import graph

    tracer = RecordingTracer()
    final = asyncio.run(
        graph.ainvoke(
            {"question": QUESTION},
            config={"callbacks": [tracer]},
            context={"policy": "llm", "namespace": "traced", "resources": _scripted(memory)},
        )
    )
    _check_root(tracer, final, "goalmem", "llm")
    assert tracer.runs_named(_routers(graph)) == []  # untraced on the async path too


def test_a_cli_run_has_one_root_run_the_graph_s_own(memory: Resources) -> None:
    from logicmap.graphs.strategies.registry import answer

    tracer = RecordingTracer()
    token = tracing_v2_callback_var.set(tracer)  # what LANGSMITH_TRACING=true installs, recording instead
    try:
        result = answer("compass", QUESTION, "traced", resources=_scripted(memory), policy="llm")
    finally:
        tracing_v2_callback_var.reset(token)
    roots = tracer.roots()
    assert [r["name"] for r in roots] == ["compass"]  # no outer wrapper: the same shape as a server run
    root = roots[0]
    assert {"strategy:compass", "policy:llm", "explorers:parallel"} <= set(root["tags"])
    assert root["metadata"]["namespace"] == "traced"
    assert root["metadata"]["llm_calls"] == result.cost.llm_calls > 0


def test_with_tracing_off_the_state_still_carries_the_wall_time(memory: Resources) -> None:
    from logicmap.graphs.strategies.real import RealContext, graph

    final = graph.invoke({"question": QUESTION}, context=RealContext(namespace="traced", resources=memory))
    assert isinstance(final["cost"], Cost) and final["cost"].wall_time_s > 0
    chunks = list(
        graph.stream(
            {"question": QUESTION},
            context=RealContext(namespace="traced", resources=memory),
            stream_mode=["values", "updates"],
        )
    )
    snapshots = [c for mode, c in chunks if mode == "values" and "cost" in c]
    times = [s["cost"].wall_time_s for s in snapshots]
    assert times and times == sorted(times) and times[-1] > 0  # the run's wall time so far, in every snapshot


def test_a_graph_run_inside_another_run_carries_its_cost_and_leaves_the_parent_s_tags(memory: Resources) -> None:
    from langchain_core.runnables import RunnableLambda

    from logicmap.graphs.strategies.registry import answer

    def turn(question: str) -> int:  # a chat turn that recalls with a strategy, as the chatbot's recall node does
        return answer("real", question, "traced", resources=_scripted(memory), policy="llm").cost.llm_calls

    tracer = RecordingTracer()
    calls = RunnableLambda(turn).with_config(run_name="chat turn").invoke(QUESTION, config={"callbacks": [tracer]})
    assert [r["name"] for r in tracer.roots()] == ["chat turn"]
    assert not [t for t in tracer.roots()[0]["tags"] if t.startswith(("strategy:", "policy:"))]
    real = [r for r in tracer.sent.values() if r["name"] == "real"]
    assert len(real) == 1 and real[0]["metadata"]["llm_calls"] == calls > 0
    assert {"strategy:real", "policy:llm"} <= set(real[0]["tags"])


class _Loop(TypedDict):
    n: int


def _step(state: _Loop) -> _Loop:
    return {"n": state["n"] + 1}


def _again(state: _Loop) -> str:
    return "step" if state["n"] < 40 else END


def test_a_traced_graph_keeps_langgraph_s_own_recursion_limit_and_hides_its_router() -> None:
    """Tracing adds tags, metadata and callbacks only: a run that names no recursion limit gets LangGraph's default
    (not LangChain's 25), and a loop's router leaves no run, sync or async."""
    from logicmap.graphs.runtime.tracing import traced_graph

    builder = StateGraph(_Loop)
    builder.add_node("step", _step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", _again, ["step", END])
    graph = traced_graph(builder.compile(name="loop"))
    tracer = RecordingTracer()
    assert graph.invoke({"n": 0}, config={"callbacks": [tracer]}) == {"n": 40}  # 40 steps: past 25
    assert asyncio.run(graph.ainvoke({"n": 0}, config={"callbacks": [tracer]})) == {"n": 40}
    assert [r["name"] for r in tracer.roots()] == ["loop", "loop"]
    assert tracer.runs_named({"_again"}) == [] and len(tracer.runs_named({"step"})) == 80
