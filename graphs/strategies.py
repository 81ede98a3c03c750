"""The registry of answering strategies: ``answer(strategy, question, namespace, ...)``.

``STRATEGIES`` maps each name to its ``Strategy`` record (``graphs.strategy``): its ``run`` (the strategy's
``answer(question, namespace, *, resources=None, policy="auto", **options)`` returning an ``AnswerResult``), and
for a graph strategy its compiled graph, context class and input/output schemas. The CLI's choices, the
chatbot's ``StrategyName``, ``FORWARD_STRATEGIES`` and ``studio/langgraph.json`` (checked by a test) derive
from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from langchain_core.runnables import RunnableConfig

from logicmap.agents.provider import run_scope
from logicmap.graphs import baselines, compass, forward, goalmem, r2, real, reconstruct, rerank
from logicmap.graphs.entry import check_keywords
from logicmap.graphs.resources import Resources, default_resources
from logicmap.graphs.result import AnswerResult
from logicmap.graphs.strategy import Strategy
from logicmap.memory.blocking import run_blocking
from logicmap.memory.input_limits import check_question

__all__ = ["GRAPH_STRATEGIES", "STRATEGIES", "Strategy", "StrategyName", "aanswer", "answer", "strategy_function"]

STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        reconstruct.STRATEGY,
        compass.STRATEGY,
        rerank.STRATEGY,
        goalmem.STRATEGY,
        real.STRATEGY,
        *forward.FORWARD_STRATEGIES.values(),
        baselines.DENSE,
        baselines.BM25,
        r2.STRATEGY,
    )
}
"""Every strategy by name, in the order the chatbot's form lists them."""

GRAPH_STRATEGIES: dict[str, Strategy] = {name: s for name, s in STRATEGIES.items() if s.graph is not None}
"""The strategies that are one compiled graph (``<module>:graph`` in ``studio/langgraph.json``)."""

if TYPE_CHECKING:  # a type checker cannot read the registry: any name type-checks, the run refuses unknown ones
    StrategyName: TypeAlias = str
else:
    StrategyName = Literal[tuple(STRATEGIES)]
"""A strategy's name, as a choice list (the registry's names, known at import): the chatbot's and the MCP server's
``strategy`` parameter, a choice list in Studio's form."""


def strategy_function(name: str) -> Any:
    """The named strategy's ``answer`` function; ``ValueError`` naming the choices for an unknown name."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
    return STRATEGIES[name].run


def _check_options(strategy: str, options: dict[str, Any]) -> None:
    """``TypeError`` for an option the named strategy does not take, naming the close ones it does."""
    valid = STRATEGIES[strategy].options | {"resources", "policy", "config"}
    check_keywords("answer", options, valid, of=f" for strategy {strategy!r}")


def answer(
    strategy: str, question: str, namespace: str, *, resources: Resources | None = None,
    config: RunnableConfig | None = None, **options: Any
) -> AnswerResult:
    """Answer ``question`` from ``namespace`` with the named strategy, within the run's deadline.

    ``options`` are the strategy's (``STRATEGIES[strategy].options``, and ``policy``); an unknown one raises
    ``TypeError`` naming the close valid ones. ``config`` is a LangChain ``RunnableConfig`` merged into the run as a
    runnable's ``invoke`` merges it: its callbacks see the run, its tags and metadata join the run's, its
    ``run_name`` names it. A question longer than ``LOGICMAP_MAX_QUESTION_CHARS`` raises ``InputTooLargeError``
    before any work."""
    run = strategy_function(strategy)
    _check_options(strategy, options)
    settings = (resources or default_resources()).settings
    check_question(question, settings, where=f"answer(strategy={strategy!r})")
    if config is not None:
        options["config"] = config
    with run_scope(settings):
        result: AnswerResult = run(question, namespace, resources=resources, **options)
    return result


async def aanswer(
    strategy: str, question: str, namespace: str, *, resources: Resources | None = None,
    config: RunnableConfig | None = None, **options: Any
) -> AnswerResult:
    """``answer`` awaited: the run (its store reads, embeddings and sync model calls) goes to the shared bounded
    executor (``memory.blocking``), so the event loop keeps running and concurrent calls never add threads."""
    strategy_function(strategy)  # an unknown name fails here, before any work is queued
    _check_options(strategy, options)  # and an unknown option
    return await run_blocking(answer, strategy, question, namespace, resources=resources, config=config, **options)
