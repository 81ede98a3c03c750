"""Strategy specs as named on the command line (``goalmem:bm25``) and their resolution to answer functions.

An unknown strategy is a user error; a strategy whose module has not landed is reported as unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["VARIANTS", "VARIANT_OPTIONS", "StrategySpec", "parse_strategy", "resolve_strategies"]


@dataclass(frozen=True)
class StrategySpec:
    """A strategy as named on the command line: ``goalmem:bm25`` is Goal-Mem over the BM25 backbone."""

    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


# What the part after ":" picks, per strategy: the option it sets and the values it takes.
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "goalmem": ("backbone", ("bm25", "dense", "events", "faithful")),
    # the no-LLM evidence ranking (learned = the graph-feature reranker), the paper's configuration, and one
    # project extension off each (the ablations of docs/fidelity.md, "CompassMem")
    "compass": (
        "ranker",
        ("learned", "similarity", "traversal", "faithful", "no-readings", "no-step-cap", "no-plan-starts", "dense"),
    ),
    # the paper's configuration of each other method (docs/fidelity.md)
    "real": ("faithful", ("faithful",)),
    "reconstruct": ("faithful", ("faithful",)),
    "r2": ("faithful", ("faithful",)),
}
# Variants that set more than the one option, or another option: ``compass:traversal`` is the graph-feature
# reranker plus the second hop; ``compass:faithful`` the paper's configuration (every extension off), and each
# other method's ``faithful`` its paper's prompts and rules.
VARIANT_OPTIONS: dict[str, dict[str, Any]] = {
    "compass:traversal": {"ranker": "learned", "traversal": True},
    "compass:faithful": {"faithful": True},
    "goalmem:faithful": {"faithful": True},
    "real:faithful": {"faithful": True},
    "reconstruct:faithful": {"faithful": True},
    "r2:faithful": {"faithful": True},
    "compass:no-readings": {"name_free_readings": False},
    "compass:no-step-cap": {"max_steps": None},
    "compass:no-plan-starts": {"plan_starts": False},
    "compass:dense": {"recipe": "dense"},
}


def parse_strategy(spec: str) -> StrategySpec:
    """``name`` or ``name:variant``: ``goalmem:bm25`` (Goal-Mem's backbone), ``compass:similarity`` (the no-LLM
    compass ranking evidence by similarity instead of the graph-feature reranker), ``compass:traversal`` (the graph-feature
    reranker plus the second hop along the event graph)."""
    spec = spec.strip()
    name, _, variant = spec.partition(":")
    if not variant:
        return StrategySpec(label=spec, name=name)
    option, allowed = VARIANTS.get(name, ("backbone", ()))
    if allowed and variant not in allowed:
        raise ValueError(
            f"unknown variant {variant!r} of {name}; choose from {', '.join(f'{name}:{v}' for v in allowed)}"
        )
    return StrategySpec(label=spec, name=name, options=VARIANT_OPTIONS.get(f"{name}:{variant}", {option: variant}))


def resolve_strategies(specs: Iterable[str]) -> tuple[list[tuple[StrategySpec, Callable[..., Any]]], dict[str, str]]:
    """The strategies that can run, and the reason each other one cannot (a module not landed yet).

    An unknown strategy name is a user error and raises ``ValueError``.
    """
    from logicmap.graphs.strategies.registry import STRATEGIES, strategy_function

    available: list[tuple[StrategySpec, Callable[..., Any]]] = []
    unavailable: dict[str, str] = {}
    for raw in specs:
        spec = parse_strategy(raw)
        if spec.name not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {spec.name!r}; choose from {sorted(STRATEGIES)} (goalmem:bm25|dense|events)"
            )
        if any(s.label == spec.label for s, _ in available) or spec.label in unavailable:
            continue
        try:
            available.append((spec, strategy_function(spec.name)))
        except (ImportError, AttributeError) as exc:
            unavailable[spec.label] = f"{type(exc).__name__}: {exc}"
    return available, unavailable
