"""Named answering strategies, resolved lazily: ``answer(strategy, question, namespace, ...)``.

Each strategy module provides ``answer(question, namespace, *, resources=None, policy="auto", **options)``
returning an ``AnswerResult``.
"""

from __future__ import annotations

import importlib
from typing import Any

from logicmap.agents.provider import run_scope
from logicmap.graphs.resources import Resources, default_resources
from logicmap.graphs.result import AnswerResult
from logicmap.memory.input_limits import check_question

__all__ = ["STRATEGIES", "answer", "strategy_function"]

STRATEGIES: dict[str, str] = {
    "compass": "logicmap.graphs.compass:answer",
    "rerank": "logicmap.graphs.rerank:answer",
    "goalmem": "logicmap.graphs.goalmem:answer",
    "real": "logicmap.graphs.real:answer",
    "reconstruct": "logicmap.graphs.reconstruct:answer",
    "forward_reformulate": "logicmap.graphs.forward:answer_reformulate",
    "forward_reflect": "logicmap.graphs.forward:answer_reflect",
    "forward_react": "logicmap.graphs.forward:answer_react",
    "dense": "logicmap.graphs.baselines:answer_dense",
    "bm25": "logicmap.graphs.baselines:answer_bm25",
    "r2": "logicmap.graphs.r2:answer",
}


def strategy_function(name: str) -> Any:
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
    module, attr = STRATEGIES[name].split(":")
    return getattr(importlib.import_module(module), attr)


def answer(
    strategy: str, question: str, namespace: str, *, resources: Resources | None = None, **options: Any
) -> AnswerResult:
    """Answer ``question`` from ``namespace`` with the named strategy, within the run's deadline.

    A question longer than ``LOGICMAP_MAX_QUESTION_CHARS`` raises ``InputTooLargeError`` before any work."""
    run = strategy_function(strategy)
    settings = (resources or default_resources()).settings
    check_question(question, settings, where=f"answer(strategy={strategy!r})")
    with run_scope(settings):
        return run(question, namespace, resources=resources, **options)
