"""The registry's index: each answering strategy's name and where its ``Strategy`` record lives, importable without
loading any graph.

A strategy is written once, here, as ``name -> "module:attribute"`` (an attribute that is a mapping is indexed by
the name: ``FORWARD_STRATEGIES``). ``graphs.strategies.registry.STRATEGIES`` imports a strategy's module only when it is first
used, so the CLI's parser, ``LogicMapStore`` and ``logicmap --help`` read the names without compiling a graph.

A strategy of another package is added without editing this file: ``LOGICMAP_STRATEGIES="toy=mypkg.toy:STRATEGY"``
(comma-separated ``name=module:attribute`` pairs, read once at import) appends it to the registry; it then runs
through ``answer()``, the CLI, the chatbot's ``strategy`` choice and the eval runner (docs/contributing.md).
"""

from __future__ import annotations

import os
import re

__all__ = ["STRATEGY_NAMES", "STRATEGY_PATHS", "extra_strategies"]

_BUILT_IN: dict[str, str] = {
    "reconstruct": "logicmap.graphs.strategies.reconstruct:STRATEGY",
    "compass": "logicmap.graphs.strategies.compass:STRATEGY",
    "rerank": "logicmap.graphs.strategies.rerank:STRATEGY",
    "goalmem": "logicmap.graphs.strategies.goalmem:STRATEGY",
    "real": "logicmap.graphs.strategies.real:STRATEGY",
    "forward_reformulate": "logicmap.graphs.strategies.forward:FORWARD_STRATEGIES",
    "forward_reflect": "logicmap.graphs.strategies.forward:FORWARD_STRATEGIES",
    "forward_react": "logicmap.graphs.strategies.forward:FORWARD_STRATEGIES",
    "dense": "logicmap.graphs.strategies.baselines:DENSE",
    "bm25": "logicmap.graphs.strategies.baselines:BM25",
    "r2": "logicmap.graphs.strategies.r2:STRATEGY",
}

_ENTRY = re.compile(r"^(?P<name>[a-z][a-z0-9_]{0,39})=(?P<path>[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")


def extra_strategies(spec: str | None) -> dict[str, str]:
    """The strategies ``LOGICMAP_STRATEGIES`` adds (``name=module:attribute``, comma-separated); ``ValueError`` in one
    line for an entry that is not one, or that names a built-in strategy."""
    extra: dict[str, str] = {}
    for entry in (spec or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        match = _ENTRY.match(entry)
        if match is None:
            raise ValueError(f"LOGICMAP_STRATEGIES: {entry[:60]!r} is not name=module:attribute (a lowercase name)")
        if match["name"] in _BUILT_IN or match["name"] in extra:
            raise ValueError(f"LOGICMAP_STRATEGIES: the strategy {match['name']!r} is already registered")
        extra[match["name"]] = match["path"]
    return extra


STRATEGY_PATHS: dict[str, str] = {**_BUILT_IN, **extra_strategies(os.environ.get("LOGICMAP_STRATEGIES"))}
"""Every strategy's name -> where its ``Strategy`` record lives, in the order the chatbot's form lists them."""

STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGY_PATHS)
"""The strategies' names (the CLI's choices)."""
