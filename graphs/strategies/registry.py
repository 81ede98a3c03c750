"""The registry of answering strategies: ``answer(strategy, question, namespace, ...)``.

``STRATEGIES`` maps each name to its ``Strategy`` record (``graphs.strategies.strategy``): its ``run`` (the strategy's
``answer(question, namespace, *, resources=None, policy="auto", **options)`` returning an ``AnswerResult``), and
for a graph strategy its compiled graph, context class and input/output schemas. The names and where each record
lives are written once, in ``graphs.strategies.names.STRATEGY_PATHS``; a strategy's module is imported when the
strategy is first used (``STRATEGIES[name]``), so importing this module compiles no graph. The CLI's choices, the
chatbot's ``StrategyName``, ``FORWARD_STRATEGIES`` and ``studio/langgraph.json`` (``studio_config_problems``,
checked by a test) derive from it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from langchain_core.runnables import RunnableConfig

from logicmap.graphs.runtime.entry import check_keywords
from logicmap.graphs.runtime.resources import Resources, default_resources
from logicmap.graphs.runtime.result import AnswerResult
from logicmap.graphs.runtime.tracing import question_run
from logicmap.graphs.strategies.names import STRATEGY_PATHS
from logicmap.graphs.strategies.strategy import Strategy
from logicmap.memory.runtime.blocking import run_blocking

__all__ = [
    "GRAPH_STRATEGIES",
    "STRATEGIES",
    "Strategy",
    "StrategyName",
    "aanswer",
    "answer",
    "graph_path",
    "strategy_function",
    "studio_config_problems",
]


def _load(name: str) -> Strategy:
    """The ``Strategy`` record ``STRATEGY_PATHS[name]`` names (its module imported now)."""
    module_name, attribute = STRATEGY_PATHS[name].split(":", 1)
    found: Any = getattr(importlib.import_module(module_name), attribute)
    if isinstance(found, Mapping):
        found = found[name]
    if not isinstance(found, Strategy) or found.name != name:
        raise TypeError(f"strategy {name!r}: {STRATEGY_PATHS[name]} is not the Strategy record named {name!r}")
    return found


_REGISTERED: dict[str, Strategy] = {}
"""Strategies registered at run time (``STRATEGIES[name] = strategy``): a test's, or an app's own; they come after
``STRATEGY_PATHS``'s in the order, and a name there is served from here while it is registered."""


def _names() -> list[str]:
    return [*STRATEGY_PATHS, *(name for name in _REGISTERED if name not in STRATEGY_PATHS)]


class _Registry(MutableMapping[str, Strategy]):
    """Strategies by name, each loaded on first use; ``graphs_only``: the strategies that are one compiled graph."""

    def __init__(self, *, graphs_only: bool = False) -> None:
        self._graphs_only = graphs_only
        self._loaded: dict[str, Strategy] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> Strategy:
        strategy = _REGISTERED.get(name)
        if strategy is None:
            if name not in STRATEGY_PATHS:
                raise KeyError(name)
            with self._lock:
                strategy = self._loaded.get(name)
            if strategy is None:
                strategy = _load(name)
                with self._lock:
                    strategy = self._loaded.setdefault(name, strategy)
        if self._graphs_only and strategy.graph is None:
            raise KeyError(name)
        return strategy

    def __setitem__(self, name: str, strategy: Strategy) -> None:
        if self._graphs_only:
            raise TypeError("register a strategy in STRATEGIES; GRAPH_STRATEGIES is a view of it")
        if not isinstance(strategy, Strategy) or strategy.name != name:
            raise TypeError(f"STRATEGIES[{name!r}] takes the Strategy record named {name!r}")
        _REGISTERED[name] = strategy

    def __delitem__(self, name: str) -> None:
        if self._graphs_only or name not in _REGISTERED:
            raise KeyError(f"{name!r}: only a strategy registered at run time can be removed")
        del _REGISTERED[name]

    def __iter__(self) -> Iterator[str]:
        if not self._graphs_only:
            return iter(_names())
        return iter([name for name in _names() if STRATEGIES[name].graph is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or (name not in STRATEGY_PATHS and name not in _REGISTERED):
            return False
        return not self._graphs_only or STRATEGIES[name].graph is not None


STRATEGIES: MutableMapping[str, Strategy] = _Registry()
"""Every strategy by name, in the order the chatbot's form lists them (``STRATEGY_PATHS``'s)."""

GRAPH_STRATEGIES: Mapping[str, Strategy] = _Registry(graphs_only=True)
"""The strategies that are one compiled graph (``<module>:graph`` in ``studio/langgraph.json``)."""


def graph_path(name: str) -> str:
    """Where a graph strategy's compiled graph is, for ``langgraph.json``: its record's module, ``:graph``."""
    return STRATEGY_PATHS[name].split(":", 1)[0] + ":graph"


def studio_config_problems(config: Mapping[str, Any]) -> list[str]:
    """What a ``langgraph.json`` (as a dict) lacks for the registry: every graph strategy listed under its name with
    its ``graph_path``, one line each. Empty when it serves them all."""
    graphs = config.get("graphs") or {}
    problems = []
    for name in GRAPH_STRATEGIES:
        entry = graphs.get(name)
        path = entry.get("path") if isinstance(entry, Mapping) else entry
        if path != graph_path(name):
            problems.append(f"graphs.{name}: expected path {graph_path(name)!r}, found {path!r}")
    return problems


if TYPE_CHECKING:  # a type checker cannot read the registry: any name type-checks, the run refuses unknown ones
    StrategyName: TypeAlias = str
else:
    StrategyName = Literal[tuple(STRATEGY_PATHS)]
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
    strategy: str,
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    config: RunnableConfig | None = None,
    **options: Any,
) -> AnswerResult:
    """Answer ``question`` from ``namespace`` with the named strategy, within the run's deadline.

    ``options`` are the strategy's (``STRATEGIES[strategy].options``, and ``policy``); an unknown one raises
    ``TypeError`` naming the close valid ones. ``config`` is a LangChain ``RunnableConfig`` merged into the run as a
    runnable's ``invoke`` merges it: its callbacks see the run, its tags and metadata join the run's, its
    ``run_name`` names it. A question longer than ``LOGICMAP_MAX_QUESTION_CHARS`` raises ``InputTooLargeError``
    before any work."""
    run = strategy_function(strategy)
    _check_options(strategy, options)
    carried = getattr(
        options.get("context"), "resources", None
    )  # the run's resources, as ``with_resources`` picks them
    settings = (resources or (carried if isinstance(carried, Resources) else default_resources())).settings
    if config is not None:
        options["config"] = config
    # The question's run is entered here, once: the strategy's run and its graph check nothing again.
    with question_run(question, settings, where=f"answer(strategy={strategy!r})"):
        result: AnswerResult = run(question, namespace, resources=resources, **options)
    return result


async def aanswer(
    strategy: str,
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    config: RunnableConfig | None = None,
    **options: Any,
) -> AnswerResult:
    """``answer`` awaited: the run (its store reads, embeddings and sync model calls) goes to the shared bounded
    executor (``memory.runtime.blocking``), so the event loop keeps running and concurrent calls never add threads."""
    strategy_function(strategy)  # an unknown name fails here, before any work is queued
    _check_options(strategy, options)  # and an unknown option
    return await run_blocking(answer, strategy, question, namespace, resources=resources, config=config, **options)
