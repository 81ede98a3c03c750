"""``RunContext``: the fields every graph's context declares (each strategy's and ingest's).

A graph's own context class extends it with its budgets and settings; the strategies' base is
``graphs.strategies.strategy.StrategyContext`` (this class), ingest's is ``IngestContext``, so ingest needs
nothing from the strategies' room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict, with_config

from logicmap.graphs.runtime.resources import ResourcesField, namespace_field, policy_field, resources_field

__all__ = ["RunContext"]


@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class RunContext:
    """The context fields every graph of a run declares (each strategy's and ingest's): its policy, its tenant
    and its resources; a graph's own context class adds its budgets and settings."""

    policy: Literal["auto", "llm", "heuristic"] = policy_field()
    namespace: str | None = namespace_field()
    resources: ResourcesField = resources_field()
