"""LangSmith tracing for graph runs: readable run names, tags (strategy, policy), metadata (namespace, budgets).

Cost figures go on the root run. Tracing is LangSmith's own switch: with LANGSMITH_TRACING unset nothing is sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from logicmap.agents.base import Cost
from logicmap.agents.provider import run_scope

__all__ = [
    "invoke_strategy",
    "TracedRun",
    "cost_metadata",
    "role_trace",
    "run_config",
    "run_metadata",
    "run_tags",
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
        str(k): v if isinstance(v, str | int | float | bool) or v is None else repr(v)
        for k, v in dict(budgets).items()
    }


def run_metadata(strategy: str, *, namespace: str, policy: str, budgets: Any = None, **extra: Any) -> dict[str, Any]:
    """Metadata of a graph run: strategy, namespace, policy, then each budget (a dataclass, model or mapping)."""
    return {"strategy": strategy, "namespace": namespace, "policy": policy, **_budget_items(budgets), **extra}


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
        yield TracedRun(run_config(strategy, namespace=namespace, policy=policy, budgets=budgets, tags=tags,
                                   metadata=metadata, recursion_limit=recursion_limit))  # fmt: skip
        return
    import langsmith

    config = run_config(strategy, namespace=namespace, policy=policy, budgets=budgets, run_name=f"{strategy} graph",
                        tags=tags, metadata=metadata, recursion_limit=recursion_limit)  # fmt: skip
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
) -> R:
    """Run a strategy's compiled graph inside its root run: ``make_result(final state, elapsed seconds)``
    builds the answer, whose cost is attached to the root run. The run's retry policy and deadline come from
    the context's settings (``agents.provider.run_scope``)."""
    from logicmap.graphs.resources import Resources, default_resources

    carried = getattr(context, "resources", None)
    settings = (carried if isinstance(carried, Resources) else default_resources()).settings
    started = time.perf_counter()
    with run_scope(settings), traced_run(
        strategy, namespace=namespace, policy=context.policy, budgets=context,
        inputs={"question": inputs.get("question"), "namespace": namespace}, tags=tags, recursion_limit=recursion_limit,
    ) as run:
        # The whole final state, not only the output schema Studio shows: the result is built from it.
        state_keys = list(compiled.builder.schemas[compiled.builder.state_schema])
        final = compiled.invoke(dict(inputs), config=run.config, context=context, output_keys=state_keys)
        result = make_result(final, time.perf_counter() - started)
        run.finish(result)
    return result
