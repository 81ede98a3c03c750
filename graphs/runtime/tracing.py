"""LangSmith tracing for graph runs: readable run names, tags (strategy, policy), metadata (namespace, budgets).

Cost figures go on the root run. Tracing is LangSmith's own switch: with LANGSMITH_TRACING unset nothing is sent.
``traced_graph(builder.compile(name=...))`` gives a graph whose own root run carries all of it on every path
(Python, CLI, the LangGraph API server, Studio), and whose routers leave no runs of their own. Public API only:
LangChain's config helpers and callback managers for the root run, LangSmith's ``tracing_context`` for routers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
    merge_configs,
)
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.typing import ContextT, InputT, OutputT, StateT
from pydantic import BaseModel

from logicmap.agents.base import Cost
from logicmap.agents.provider import RunScope, run_scope
from logicmap.graphs.runtime.entry import with_caller_config
from logicmap.graphs.runtime.resources import Resources, default_resources, resolve_policy, server_mode
from logicmap.memory.runtime.deadline import check_deadline, current_deadline
from logicmap.memory.runtime.input_limits import check_question
from logicmap.memory.runtime.tenancy import resolve_namespace

__all__ = [
    "TracedGraph",
    "TracedStateGraph",
    "traced_strategy",
    "invoke_strategy",
    "check_question_once",
    "question_run",
    "TracedRun",
    "cost_metadata",
    "role_trace",
    "run_config",
    "run_metadata",
    "run_tags",
    "graph_run_config",
    "traced_graph",
    "traced_run",
    "tracing_enabled",
]


def tracing_enabled() -> bool:
    """Whether LangSmith tracing is on (``LANGSMITH_TRACING=true`` or an enclosing ``tracing_context``)."""
    from langsmith.utils import tracing_is_enabled

    return bool(tracing_is_enabled())


def run_tags(strategy: str, policy: str, *extra: str) -> list[str]:
    """``strategy:<name>`` and ``policy:<name>`` first, so runs filter the same way in every project."""
    return [f"strategy:{strategy}", f"policy:{policy}", *extra]


def _budget_items(budgets: Any) -> dict[str, Any]:
    if budgets is None:
        return {}
    if dataclasses.is_dataclass(budgets) and not isinstance(budgets, type):
        # Not asdict(): it deep-copies every field, and a context may carry a retriever or a client.
        # ``resources`` (store, models) is what the run runs against, not a budget: kept out of the metadata.
        budgets = {f.name: getattr(budgets, f.name) for f in dataclasses.fields(budgets) if f.name != "resources"}
    elif isinstance(budgets, BaseModel):
        budgets = budgets.model_dump()
    # Metadata values must stay small and JSON-friendly: nested structures become their repr.
    return {
        str(k): v if isinstance(v, str | int | float | bool) or v is None else repr(v) for k, v in dict(budgets).items()
    }


def run_metadata(strategy: str, *, namespace: str, policy: str, budgets: Any = None, **extra: Any) -> dict[str, Any]:
    """Metadata of a graph run: strategy, namespace, policy, then each budget (a dataclass, model or mapping).

    ``namespace`` and ``policy`` win over a budget of the same name (a context's namespace may be a template,
    its policy the one asked for rather than the one the run can use)."""
    return {"strategy": strategy, **_budget_items(budgets), "namespace": namespace, "policy": policy, **extra}


def run_config(
    strategy: str,
    *,
    namespace: str,
    policy: str,
    budgets: Any = None,
    run_name: str | None = None,
    tags: Sequence[str] = (),
    metadata: Mapping[str, Any] | None = None,
    recursion_limit: int | None = None,
) -> RunnableConfig:
    """The config to invoke a graph with. Tags and metadata are inherited by every node and LLM role run."""
    config: RunnableConfig = {
        "run_name": run_name or strategy,
        "tags": run_tags(strategy, policy, *tags),
        "metadata": run_metadata(strategy, namespace=namespace, policy=policy, budgets=budgets, **dict(metadata or {})),
    }
    if recursion_limit is not None:
        config["recursion_limit"] = recursion_limit
    return config


def role_trace(config: RunnableConfig) -> dict[str, Any]:
    """``tags`` and ``metadata`` keyword arguments for ``run_role`` (when a role is called outside a graph run)."""
    return {"tags": list(config.get("tags", [])), "metadata": dict(config.get("metadata", {}))}


def cost_metadata(cost: Cost | None) -> dict[str, Any]:
    """A run's cost as flat metadata keys (LangSmith filters and charts on them)."""
    cost = cost or Cost()
    return {
        "llm_calls": cost.llm_calls,
        "prompt_tokens": cost.prompt_tokens,
        "completion_tokens": cost.completion_tokens,
        "total_tokens": cost.total_tokens,
        "tokens_estimated": cost.tokens_estimated,
        "wall_time_s": round(cost.wall_time_s, 3),
    }


@dataclasses.dataclass
class TracedRun:
    """A graph run in progress: invoke the graph with ``config``, then ``finish`` with the result."""

    config: RunnableConfig
    run_tree: Any = None

    @property
    def run_id(self) -> str | None:
        return str(self.run_tree.id) if self.run_tree is not None else None

    def finish(self, outputs: BaseModel | Mapping[str, Any], cost: Cost | None = None) -> None:
        """Record the outputs and the cost figures on the root run (a no-op when tracing is off)."""
        if self.run_tree is None:
            return
        data = outputs.model_dump(mode="json") if isinstance(outputs, BaseModel) else dict(outputs)
        if cost is None:
            found = getattr(outputs, "cost", None) if isinstance(outputs, BaseModel) else data.get("cost")
            cost = found if isinstance(found, Cost) else Cost.model_validate(found) if found else None
        self.run_tree.add_metadata(cost_metadata(cost))
        self.run_tree.end(outputs=data)


@contextlib.contextmanager
def traced_run(
    strategy: str,
    *,
    namespace: str,
    policy: str,
    inputs: Mapping[str, Any],
    budgets: Any = None,
    tags: Sequence[str] = (),
    metadata: Mapping[str, Any] | None = None,
    recursion_limit: int | None = None,
) -> Iterator[TracedRun]:
    """A root run named ``strategy`` around one graph invocation, carrying cost figures when it ends.

    With tracing off this creates nothing and yields a plain ``run_config`` (graph run named ``strategy``).
    With tracing on, the graph runs as its child ``"<strategy> graph"``.
    """
    if not tracing_enabled():
        yield TracedRun(
            run_config(
                strategy,
                namespace=namespace,
                policy=policy,
                budgets=budgets,
                tags=tags,
                metadata=metadata,
                recursion_limit=recursion_limit,
            )
        )
        return
    import langsmith

    config = run_config(
        strategy,
        namespace=namespace,
        policy=policy,
        budgets=budgets,
        run_name=f"{strategy} graph",
        tags=tags,
        metadata=metadata,
        recursion_limit=recursion_limit,
    )
    with langsmith.trace(
        name=strategy, run_type="chain", inputs=dict(inputs), tags=config["tags"], metadata=config["metadata"]
    ) as root:
        yield TracedRun(config=config, run_tree=root)


R = TypeVar("R", bound=BaseModel)


def invoke_strategy(
    strategy: str,
    compiled: Any,
    inputs: Mapping[str, Any],
    context: Any,
    *,
    namespace: str,
    recursion_limit: int,
    make_result: Callable[[dict[str, Any], float], R],
    tags: Sequence[str] = (),
    config: RunnableConfig | None = None,
) -> R:
    """Run a strategy's compiled graph: ``make_result(final state, elapsed seconds)`` builds the answer.

    The graph's own root run is the trace's root (a ``TracedGraph`` names and tags it and puts the cost on it),
    the same shape as a run through the API server. The question's run (its check, retry policy and deadline:
    ``question_run``) is the one ``answer()`` entered, else one entered here with the context's settings. The
    caller's ``config`` is merged in (``with_caller_config``): its callbacks see the run, its tags and metadata are
    the run's.
    """
    carried = getattr(context, "resources", None)
    settings = (carried if isinstance(carried, Resources) else default_resources()).settings
    started = time.perf_counter()
    caller = config
    config = {"run_name": strategy, "tags": list(tags), "recursion_limit": recursion_limit}
    if not isinstance(compiled, TracedGraph):  # a plain compiled graph: tag and describe its run here
        config = run_config(
            strategy,
            namespace=namespace,
            policy=context.policy,
            budgets=context,
            tags=tags,
            recursion_limit=recursion_limit,
        )
    config = with_caller_config(config, caller)
    # The whole final state, not only the output schema Studio shows: the result is built from it.
    state_keys = list(compiled.builder.schemas[compiled.builder.state_schema])
    with question_run(inputs.get("question"), settings, where=f"the {strategy} graph's input"):
        final = compiled.invoke(dict(inputs), config=config, context=context, output_keys=state_keys)
    return make_result(final, time.perf_counter() - started)


# -- a question's run, entered once -------------------------------------------------------------------


def _entered_for(question: Any) -> bool:
    """Whether the enclosing run was entered for ``question`` (``question_run``), which was checked then."""
    scope = current_deadline()
    return isinstance(scope, RunScope) and isinstance(question, str) and scope.question == question


@contextlib.contextmanager
def question_run(question: Any, settings: Any, *, where: str) -> Iterator[None]:
    """The run of one question, entered once: ``question`` checked against the settings' limit (``check_question``:
    ``InputTooLargeError`` before the run's work) and a run scope opened with their retry policy and deadline
    (``agents.provider.run_scope``). Each entry of a question run enters it (``answer()``, a strategy's own run, a
    strategy graph invoked directly); inside a run already entered for this question (``answer()``, then the
    strategy's run, then its graph) it checks nothing and opens nothing again: the run keeps its scope."""
    if _entered_for(question):
        yield
        return
    check_question(question, settings, where=where)
    with run_scope(settings) as scope:
        scope.question = question
        yield


def check_question_once(question: Any, settings: Any, *, where: str) -> None:
    """``check_question``, unless the enclosing run was entered for this question (``question_run``: checked then)."""
    if not _entered_for(question):
        check_question(question, settings, where=where)


# -- graphs that trace themselves ---------------------------------------------------------------------


def _context_object(schema: Any, context: Any) -> Any:
    """The run's context as the graph's context type (LangGraph builds it the same way), or None."""
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return context
    if context is None:
        with contextlib.suppress(TypeError):
            return schema()
        return None
    if isinstance(context, dict):
        names = {f.name for f in dataclasses.fields(schema)}
        return schema(**{k: v for k, v in context.items() if k in names})
    return context


def _policy_used(policy: str, resources: Resources) -> str:
    """The policy a run can use, as its trace's tag says: ``llm`` (asked for, or ``auto``) only when the run has a chat
    model (``auto`` resolved by the one rule, ``graphs.runtime.resources.resolve_policy``); ``heuristic`` as it is."""
    return resolve_policy("auto", resources) if policy in ("auto", "llm") else policy


def _resolved_policy(ctx: Any) -> str | None:
    """The policy a run can use: ``llm`` (asked for, or ``auto``) only when a chat model is configured, as
    every graph's roles decide (``graphs.runtime.resources.resolve_policy``)."""
    policy = getattr(ctx, "policy", None)
    if policy not in ("auto", "llm"):
        return policy
    carried = getattr(ctx, "resources", None)
    return _policy_used(policy, carried if isinstance(carried, Resources) else default_resources())


def _run_namespace(ctx: Any, inputs: Any, configurable: Mapping[str, Any]) -> str | None:
    """The namespace a run reads and writes: its context's (a name or a template), else its input's, else
    ``configurable["namespace"]``, resolved as the run's first node resolves it (on the API server the
    deployment's template is the authority: ``graphs.runtime.resources.run_namespace``); None when it names none or
    names it wrongly (the graph itself reports that)."""
    template = getattr(ctx, "namespace", None)
    named = inputs.get("namespace") if isinstance(inputs, dict) else None
    if not template and isinstance(named, str):
        return named
    authority = default_resources().settings.server_namespace if server_mode() else None
    try:
        return resolve_namespace(template, configurable, authority=authority)
    except ValueError:
        return None


def graph_run_config(strategy: str, inputs: Any, config: RunnableConfig, context: Any, schema: Any) -> RunnableConfig:
    """What a strategy's graph run adds to its caller's ``config``: tags ``strategy:``/``policy:`` (unless the
    caller set them), metadata strategy, namespace, resolved policy and budgets (the caller's keys win)."""
    ctx = _context_object(schema, context)
    namespace = _run_namespace(ctx, inputs, config.get("configurable") or {})
    policy = _resolved_policy(ctx)
    metadata = run_metadata(strategy, namespace=namespace or "", policy=policy or "", budgets=ctx)
    if namespace is None:
        metadata.pop("namespace")
    if policy is None:
        metadata.pop("policy")
    caller_tags = list(config.get("tags") or [])
    wanted = [f"strategy:{strategy}"] + ([f"policy:{policy}"] if policy else [])
    tags = [t for t in wanted if not any(c.startswith(t.split(":")[0] + ":") for c in caller_tags)]
    # The caller's keys win, but for the resolved namespace and policy: a server copies the run's context (a
    # template such as '{user_id}', an unresolved 'auto') into the metadata, and filtering by tenant needs the name.
    resolved: dict[str, Any] = {k: metadata[k] for k in ("namespace", "policy") if k in metadata}
    return {"tags": [*tags, *caller_tags], "metadata": {**metadata, **dict(config.get("metadata") or {}), **resolved}}


class _RootCost(BaseCallbackHandler):
    """Keeps a graph run's cost on its root run, for the tracer to send with the root's end.

    The cost is what the graph's ``cost`` reducer sums: the ``cost`` of every node update (the root's direct
    children), so it does not depend on the graph's output schema or stream mode. Wall time is the run's. The
    figures are refreshed as each node ends, so they are in place whichever handler sees the root's end first
    (a graph run inside another run gets its parent's handlers ahead of its own).
    """

    run_inline = True

    def __init__(self, root_id: uuid.UUID, tracer: Any, *, summed: bool = True) -> None:
        self.root_id = root_id
        self.tracer = tracer
        self.summed = summed  # whether the run's cost is the sum of its steps' (a ``cost`` reducer)
        self.started = time.perf_counter()
        self.cost = Cost()
        self._lock = threading.Lock()

    def on_chain_end(
        self, outputs: Any, *, run_id: uuid.UUID, parent_run_id: uuid.UUID | None = None, **kwargs: Any
    ) -> None:
        spent = _cost_of(outputs)
        if parent_run_id == self.root_id and spent is not None and self.summed:
            with self._lock:
                self.cost = self.cost + spent.model_copy(update={"wall_time_s": 0.0})
        if run_id == self.root_id and spent is not None:  # the run's own total, when its output carries one
            with self._lock:
                self.cost = spent.model_copy(update={"wall_time_s": 0.0})
        if parent_run_id == self.root_id or run_id == self.root_id:
            self._annotate()

    def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        if run_id == self.root_id:
            self._annotate()

    def _annotate(self) -> None:
        run = self.tracer.run_map.get(str(self.root_id))
        if run is None:  # tracing disabled for this run, or its end already sent
            return
        with self._lock:
            cost = self.cost.model_copy(update={"wall_time_s": time.perf_counter() - self.started})
            # A new dict: the run's metadata mapping may be shared with the callback manager that made it.
            run.extra["metadata"] = {**(run.extra.get("metadata") or {}), **cost_metadata(cost)}


def _cost_of(outputs: Any) -> Cost | None:
    """The ``cost`` a run's output carries (a state update, a final state, an ``AnswerResult``), or None."""
    found = outputs.get("cost") if isinstance(outputs, dict) else getattr(outputs, "cost", None)
    if not found:
        return None
    return found if isinstance(found, Cost) else Cost.model_validate(found)


def _with_root_cost(config: RunnableConfig, manager: Any, *, summed: bool = True) -> RunnableConfig:
    """``config`` with ``manager`` as its callbacks and, when a LangSmith tracer is among them, a ``_RootCost``
    handler (in front of it, so on a run of its own the root's end carries the full wall time)."""
    from langchain_core.tracers.langchain import LangChainTracer

    tracer = next((h for h in manager.handlers if isinstance(h, LangChainTracer)), None)
    if tracer is None:
        return config
    root_id = config.get("run_id")
    if root_id is None:  # no root run to annotate
        return config
    handler = _RootCost(root_id, tracer, summed=summed)
    manager.handlers.insert(0, handler)
    manager.inheritable_handlers.insert(0, handler)
    return {**config, "callbacks": manager}


def _stamped(values: Any, elapsed: float) -> Any:
    """A state snapshot whose ``cost`` (and its ``result``'s, a strategy run's ``AnswerResult``) carries the run's
    wall time so far."""
    if not isinstance(values, dict) or values.get("cost") is None:
        return values
    result = values.get("result")
    spent = getattr(result, "cost", None)
    if isinstance(result, BaseModel) and isinstance(spent, Cost):
        wall = {"wall_time_s": round(elapsed, 6)}
        values = {**values, "result": result.model_copy(update={"cost": spent.model_copy(update=wall)})}
    found = values["cost"]
    if isinstance(found, dict):  # a state of plain JSON values stays one
        return {**values, "cost": {**found, "wall_time_s": round(elapsed, 6)}}
    cost = found if isinstance(found, Cost) else Cost.model_validate(found)
    return {**values, "cost": cost.model_copy(update={"wall_time_s": round(elapsed, 6)})}


def _stamp_chunk(chunk: Any, stream_mode: Any, version: Any, started: float) -> Any:
    """``chunk`` of a stream with its state snapshots (``values`` mode, this graph's own) stamped."""
    elapsed = time.perf_counter() - started
    if version == "v2":
        if isinstance(chunk, dict) and chunk.get("type") == "values" and not chunk.get("ns"):
            return {**chunk, "data": _stamped(chunk.get("data"), elapsed)}
        return chunk
    if stream_mode == "values":
        return _stamped(chunk, elapsed)
    if isinstance(chunk, tuple) and len(chunk) == 2 and chunk[0] == "values":
        return ("values", _stamped(chunk[1], elapsed))
    if isinstance(chunk, tuple) and len(chunk) == 3 and chunk[0] == () and chunk[1] == "values":
        return ((), "values", _stamped(chunk[2], elapsed))
    return chunk


class TracedGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """A compiled strategy graph that traces itself the same way on every path.

    Its own root run is named after the graph, tagged ``strategy:<name>`` and ``policy:<resolved policy>``, carries
    namespace and budgets (the context's fields but ``resources``) as metadata, and ends with the cost figures
    (LLM calls, tokens, wall time). Every state snapshot it streams carries the run's wall time in
    ``cost.wall_time_s``. Build one with ``traced_graph(builder.compile(name=...))``.
    """

    def _run_config(
        self,
        input: Any,
        config: RunnableConfig | None,
        context: Any,
        manager_for: Callable[[RunnableConfig], BaseCallbackManager],
    ) -> RunnableConfig:
        """The caller's config, tagged and described for the run (read over the graph's own ``with_config`` and an
        enclosing run's config), with a new callback manager (``manager_for``: LangChain's, which copies a parent's,
        so the parent keeps its tags) that puts the cost on the root run. The rest (recursion limit, configurable)
        stays the caller's, for LangGraph to complete with its own defaults."""
        seen = ensure_config(merge_configs(self.config, config))  # what the run inherits, as LangChain reads it
        try:
            extra = graph_run_config(self.get_name(), input, seen, context, self.context_schema)
        except Exception:  # describing a run must never stop it; the graph reports bad context
            extra = {"tags": [f"strategy:{self.get_name()}", *seen.get("tags", [])]}
        run: RunnableConfig = {**(config or {}), **extra, "run_id": seen.get("run_id") or uuid.uuid4()}
        return _with_root_cost(run, manager_for({**seen, **run}), summed=self._cost_summed())

    def _cost_summed(self) -> bool:
        """Whether the state's ``cost`` is a reducer (each step adds its own) rather than a running total a step
        overwrites (the chatbot's): the root's cost is then the sum of its steps'."""
        from langgraph.channels.binop import BinaryOperatorAggregate

        return isinstance(self.channels.get("cost"), BinaryOperatorAggregate)

    def _check_input(self, input: Any, context: Any) -> Any:
        """A question longer than ``LOGICMAP_MAX_QUESTION_CHARS`` is refused before the run starts (every path:
        ``answer()``, Studio, the API server). Returns the run's settings for a question run not yet entered
        (``question_run``: ``answer()`` and a strategy's run enter it before invoking the graph), else None."""
        if not isinstance(input, dict) or "question" not in input or _entered_for(input["question"]):
            return None
        try:
            carried = getattr(_context_object(self.context_schema, context), "resources", None)
        except Exception:  # a bad context is the graph's to report; the default limits apply here
            carried = None
        settings = (carried if isinstance(carried, Resources) else default_resources()).settings
        check_question(input["question"], settings, where=f"the {self.get_name()} graph's input")
        return settings

    def stream(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> Iterator[Any]:
        settings = self._check_input(input, context)
        started = time.perf_counter()
        config = self._run_config(input, config, context, get_callback_manager_for_config)
        mode, version = kwargs.get("stream_mode") or self.stream_mode, kwargs.get("version")
        where = f"in the {self.get_name()} graph"
        with _question_scope(settings):
            for chunk in super().stream(input, config, context=context, **kwargs):
                yield _stamp_chunk(chunk, mode, version, started)
                check_deadline(where)  # between steps; long loops inside nodes check too

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        settings = self._check_input(input, context)
        started = time.perf_counter()
        config = self._run_config(input, config, context, get_async_callback_manager_for_config)
        mode, version = kwargs.get("stream_mode") or self.stream_mode, kwargs.get("version")
        where = f"in the {self.get_name()} graph"
        with _question_scope(settings):
            async for chunk in super().astream(input, config, context=context, **kwargs):
                yield _stamp_chunk(chunk, mode, version, started)
                check_deadline(where)


def _question_scope(settings: Any) -> contextlib.AbstractContextManager[Any]:
    """A question run invoked directly (Studio, the API server) gets the settings' retry policy and run deadline;
    one inside ``answer()`` (or any enclosing run scope) keeps its own."""
    if settings is None or current_deadline() is not None:
        return contextlib.nullcontext()
    return run_scope(settings)


class UntracedRouter(Runnable[Any, Any]):
    """A graph's router (the path of a conditional edge) that sends no run to LangSmith: a conditional edge is not
    a step worth a run of its own in the trace. It runs as LangGraph runs it (``path``, with the state and the
    runtime), inside LangSmith's ``tracing_context(enabled=False)``, which LangChain's tracer honours."""

    def __init__(self, path: Runnable[Any, Any]) -> None:
        self.path = path
        self.name = path.get_name()

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        from langsmith import tracing_context

        with tracing_context(enabled=False):
            return self.path.invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        from langsmith import tracing_context

        with tracing_context(enabled=False):
            return await self.path.ainvoke(input, config, **kwargs)


def _untrace_routers(builder: StateGraph[Any, Any, Any, Any]) -> bool:
    """Wrap each router of ``builder`` in an ``UntracedRouter`` (before it is compiled); whether any was not yet."""
    wrapped = False
    for branches in builder.branches.values():
        for name, spec in branches.items():
            if not isinstance(spec.path, UntracedRouter):
                branches[name] = spec._replace(path=UntracedRouter(spec.path))
                wrapped = True
    return wrapped


def _interrupts(nodes: Any) -> Any:
    """A compiled graph's interrupt nodes as ``compile`` takes them: ``"*"`` (all) or a list of names."""
    return nodes if nodes == "*" else list(nodes)


def traced_graph(compiled: CompiledStateGraph[Any, Any, Any, Any]) -> TracedGraph:
    """``compiled`` as a ``TracedGraph`` (strategy = the graph's name), its routers untraced (``UntracedRouter``;
    a graph compiled with plain routers is compiled again from its builder, with the same options)."""
    if _untrace_routers(compiled.builder):
        config = compiled.config
        compiled = compiled.builder.compile(
            compiled.checkpointer,
            cache=compiled.cache,
            store=compiled.store,
            interrupt_before=_interrupts(compiled.interrupt_before_nodes),
            interrupt_after=_interrupts(compiled.interrupt_after_nodes),
            debug=compiled.debug,
            name=compiled.name,
            transformers=compiled.stream_transformers,
        )
        compiled.config = config  # a ``with_config`` before ``traced_graph`` holds
    attrs = {k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"}  # as Pregel.copy does
    return TracedGraph(**attrs)


class TracedStateGraph(StateGraph[StateT, ContextT, InputT, OutputT]):
    """A ``StateGraph`` whose every ``compile()`` gives a ``TracedGraph``, named ``trace_name`` unless the caller
    names it: ``build_chatbot_graph().compile()`` traces as the module's ``graph`` does (one root run, named and
    tagged, with namespace and cost; routers leave none), not as an anonymous "LangGraph" run."""

    def __init__(
        self,
        state_schema: type[StateT],
        context_schema: type[ContextT] | None = None,
        *,
        input_schema: type[InputT] | None = None,
        output_schema: type[OutputT] | None = None,
        trace_name: str = "LangGraph",
    ) -> None:
        super().__init__(state_schema, context_schema, input_schema=input_schema, output_schema=output_schema)
        self.trace_name = trace_name

    def compile(self, *args: Any, **kwargs: Any) -> TracedGraph:
        if kwargs.get("name") is None:
            kwargs["name"] = self.trace_name
        _untrace_routers(self)
        return traced_graph(super().compile(*args, **kwargs))


@dataclasses.dataclass(frozen=True)
class _TracedStrategy:
    """``answer`` run as one root run named ``strategy`` (``traced_strategy``)."""

    strategy: str
    answer: Callable[..., Any]

    def __call__(
        self,
        question: str,
        namespace: str,
        *,
        resources: Resources | None = None,
        policy: str = "auto",
        config: RunnableConfig | None = None,
        **options: Any,
    ) -> Any:
        from langchain_core.runnables import RunnableLambda

        known = policy in ("auto", "llm", "heuristic")  # an unknown one is the strategy's to refuse
        used = _policy_used(policy, resources or default_resources()) if known else policy
        caller = config
        config = with_caller_config(
            run_config(self.strategy, namespace=namespace, policy=used, budgets=options), caller
        )
        config["run_id"] = (caller or {}).get("run_id") or uuid.uuid4()
        config = _with_root_cost(config, get_callback_manager_for_config(config), summed=False)
        kwargs = {"resources": resources, "policy": policy, **options}
        call = RunnableLambda(
            functools.partial(_call_strategy, self.answer, question, namespace, kwargs), name=self.strategy
        )
        return call.invoke({"question": question}, config)


def _call_strategy(answer: Callable[..., Any], question: str, namespace: str, kwargs: dict[str, Any], _: Any) -> Any:
    return answer(question, namespace, **kwargs)


def traced_strategy(strategy: str, answer: Callable[..., R]) -> Callable[..., R]:
    """A strategy that is a plain function (``dense``, ``bm25``, the forward baselines) run as one root run, as a
    graph strategy is: named ``strategy``, tagged ``strategy:``/``policy:``, namespace and options as metadata, the
    cost in its outputs and metadata; its LLM role runs nest under it. With tracing off it is one plain call."""
    return _TracedStrategy(strategy, answer)
