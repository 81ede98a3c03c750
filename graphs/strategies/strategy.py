"""What every answering strategy shares: the ``Strategy`` record, its input and output schemas, its context
fields, and the one runner of a strategy graph.

``graphs.strategies.registry`` holds the registry of the records; each strategy module declares its own ``STRATEGY``
here-shaped, so no strategy repeats the question input, the answer/cost/fallbacks output, the namespace, policy
and resources fields of its context, or the ``answer()`` body that runs its graph.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, FallbackRecord, add_cost
from logicmap.graphs.runtime.context import RunContext
from logicmap.graphs.runtime.entry import check_keywords
from logicmap.graphs.runtime.resources import (
    Resources,
    context_for_run,
    resources_of,
    run_context,
    with_resources,
)
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
from logicmap.graphs.runtime.tracing import invoke_strategy
from logicmap.memory.runtime.tenancy import python_caller
from logicmap.memory.store import NamespaceSnapshot

__all__ = [
    "AnswerOutput",
    "QuestionInput",
    "Strategy",
    "StrategyContext",
    "StrategyState",
    "cited_turn_texts",
    "finish_run",
    "graph_strategy",
    "run_graph",
]


StrategyContext = RunContext
"""The context every strategy graph's own context class extends: ``RunContext``'s policy, namespace and resources."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class QuestionInput(TypedDict):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""

    # Descriptions as ``Field`` metadata, not attribute docstrings: a subclass's schema keeps them.
    question: Annotated[str, Field(description="The question to answer from the namespace's memory.")]
    question_date: NotRequired[
        Annotated[
            str | None,
            Field(
                description=(
                    'When the question is asked (e.g. "2023-05-08"), for questions relative to that day; unset = undated.'
                )
            ),
        ]
    ]


@with_config(ConfigDict(use_attribute_docstrings=True))
class AnswerOutput(TypedDict, total=False):
    """What every strategy run returns: the answer, what it cost, and the roles that fell back."""

    answer: Annotated[str, Field(description="The answer, written from the evidence only.")]
    cost: Annotated[Cost, Field(description="LLM calls and tokens the run spent (none without an LLM)."), add_cost]
    fallbacks: Annotated[
        list[FallbackRecord],
        Field(description="Roles that fell back to their deterministic rule, and why."),
        operator.add,
    ]
    result: Annotated[
        AnswerResult,
        Field(
            description=(
                "The run's AnswerResult, built by the graph's final node (finish): answer, evidence with cited turns, "
                "cost, steps, fallbacks, details. Exactly what answer() returns in Python."
            )
        ),
    ]


class StrategyState(TypedDict, total=False):
    """The state keys every strategy graph shares: the run's pin (namespace, resolved policy and snapshot
    generation, resolved once by its first node: ``graphs.runtime.pin``), the question, and the answer with its cost and
    fallbacks."""

    namespace: str
    policy: str
    generation: int
    pending: int
    question: str
    question_date: str | None
    answer: str
    cost: Annotated[Cost, add_cost]
    fallbacks: Annotated[list[FallbackRecord], operator.add]
    result: AnswerResult


ResultBuilder = Callable[[str, str, dict[str, Any], Any, Resources, float], AnswerResult]
"""``result(question, namespace, final state, context, resources, elapsed seconds) -> AnswerResult``."""


def cited_turn_texts(snapshot: NamespaceSnapshot, evidence: Sequence[EvidenceItem]) -> dict[str, str]:
    """Each turn ``evidence`` cites, rendered from the run's pinned memory (a result's ``details["turn_texts"]``: what
    a reader sees behind events, facts and paths)."""
    return {t: snapshot.turns[t].render() for item in evidence for t in item.turn_ids if t in snapshot.turns}


def finish_run(state: Mapping[str, Any], runtime: Any, context: type, build: ResultBuilder) -> dict[str, Any]:
    """What a strategy graph's final node (``finish``) returns: the run's ``AnswerResult`` built from its state, its
    context and its pinned memory; the graph stamps the run's wall time on its cost as the run ends."""
    ctx: Any = run_context(runtime, context)
    return {"result": build(state["question"], state["namespace"], dict(state), ctx, resources_of(runtime), 0.0)}


@dataclass(frozen=True)
class Strategy:
    """One answering strategy: its name, how to run it, and (for a graph strategy) its compiled graph and schemas.

    ``run(question, namespace, *, resources=None, policy="auto", **options) -> AnswerResult`` is the strategy's
    ``answer``; ``variants`` are the ``name:variant`` labels the evaluation accepts (``compass:traversal``)."""

    name: str
    run: Callable[..., AnswerResult]
    graph: Any = None
    context: type | None = None
    variants: tuple[str, ...] = ()

    @property
    def options(self) -> frozenset[str]:
        """The keyword options ``run`` takes besides ``resources``, ``policy`` and ``config`` (a graph's context
        fields and input fields but the question, and ``context``; a function's own keyword parameters)."""
        found = getattr(self.run, "options", None)
        if found is None:
            found = _keyword_parameters(self.run)
        return frozenset(found)

    @property
    def input_schema(self) -> Any:
        return None if self.graph is None else self.graph.builder.input_schema

    @property
    def output_schema(self) -> Any:
        return None if self.graph is None else self.graph.builder.output_schema


@dataclass(frozen=True)
class _GraphRun:
    """How ``run_graph`` runs one strategy graph (the parts that differ between strategies)."""

    name: str
    graph: Any
    context: type
    recursion_limit: Callable[[Any], int]
    tags: Callable[[Any], Sequence[str]] = lambda ctx: ()
    make_context: Callable[[Any, str, dict[str, Any]], Any] | None = None
    check: Callable[[Any, Resources, str], None] | None = None
    input_keys: frozenset[str] = field(default_factory=frozenset)
    extra_options: frozenset[str] = field(default_factory=frozenset)

    @property
    def options(self) -> frozenset[str]:
        """The options ``run_graph`` takes: the context's fields (but the namespace, policy and resources, which are
        arguments of their own), the input's (but the question), ``context`` and the graph's extra ones."""
        fields = set(getattr(self.context, "__dataclass_fields__", {})) - {"namespace", "policy", "resources"}
        return frozenset(fields | (self.input_keys - {"question"}) | self.extra_options | {"context"})

    def __call__(self, question: str, namespace: str, **kwargs: Any) -> AnswerResult:
        """Answer ``question`` from ``namespace`` with this graph (``run_graph``): the strategy's ``answer``."""
        return run_graph(self, question, namespace, **kwargs)


def run_graph(
    spec: _GraphRun,
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: str = "auto",
    context: Any = None,
    config: RunnableConfig | None = None,
    **options: Any,
) -> AnswerResult:
    """Answer ``question`` from ``namespace`` with the strategy's graph; options override its context fields,
    and those that name an input field (``question_date``, ``reference_time``) go into the graph's input; any other
    option is a ``TypeError`` naming the close valid ones. ``config`` (a ``RunnableConfig``) is merged into the
    graph's run: its callbacks see it, its tags and metadata join the run's."""
    check_keywords(
        "answer", options, spec.options | {"resources", "policy", "config"}, of=f" for strategy {spec.name!r}"
    )
    inputs: dict[str, Any] = {"question": question}
    for key in ("question_date", *sorted(spec.input_keys - {"question", "question_date"})):
        if key in spec.input_keys:
            inputs[key] = options.pop(key, None)
    if spec.make_context is not None:
        ctx = spec.make_context(context, policy, options)
    else:
        ctx = context_for_run(spec.context, context, policy, options)
    ctx, res = with_resources(ctx, resources, namespace=namespace)
    res.store.require_namespace(namespace)  # the store refuses an invalid name (its boundary) before any read
    if spec.check is not None:
        spec.check(ctx, res, namespace)
    with python_caller(namespace):  # the caller named it: the graph takes it as it is (memory.tenancy)
        return invoke_strategy(
            spec.name,
            spec.graph,
            inputs,
            ctx,
            namespace=namespace,
            tags=list(spec.tags(ctx)),
            recursion_limit=spec.recursion_limit(ctx),
            make_result=_final_result,
            config=config,
        )


def _final_result(final: dict[str, Any], elapsed: float) -> AnswerResult:
    """The ``AnswerResult`` the graph's final node built (with the run's wall time, as the graph's output has it)."""
    result: AnswerResult = final["result"]
    return result


def graph_strategy(
    name: str,
    graph: Any,
    context: type,
    *,
    recursion_limit: Callable[[Any], int],
    tags: Callable[[Any], Sequence[str]] = lambda ctx: (),
    make_context: Callable[[Any, str, dict[str, Any]], Any] | None = None,
    check: Callable[[Any, Resources, str], None] | None = None,
    variants: tuple[str, ...] = (),
    extra_options: tuple[str, ...] = (),
) -> Strategy:
    """The ``Strategy`` of a graph: its ``run`` is ``run_graph`` with what differs for this graph; the graph's final
    node (``finish_run``) builds the ``AnswerResult`` that ``run`` returns. ``extra_options``: options its
    ``make_context`` reads that are no context field (goalmem's ``k``)."""
    run = _GraphRun(
        name,
        graph,
        context,
        recursion_limit,
        tags,
        make_context,
        check,
        frozenset(_keys(graph.builder.input_schema)),
        frozenset(extra_options),
    )
    return Strategy(name=name, run=run, graph=graph, context=context, variants=variants)


def _keys(schema: Any) -> Mapping[str, Any]:
    return getattr(schema, "__annotations__", {}) or {}


def _keyword_parameters(run: Any) -> set[str]:
    """A plain strategy function's keyword parameters but the question, the namespace, resources and policy."""
    import inspect

    target = getattr(run, "answer", run)  # a traced strategy runs its ``answer``
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = inspect.signature(target).parameters.values()
    return {p.name for p in params if p.kind in kinds} - {"question", "namespace", "resources", "policy"}
