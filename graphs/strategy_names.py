"""The names of the answering strategies, in the registry's order, importable without loading any graph.

The CLI's parser imports nothing heavy (``logicmap --help`` starts in well under a second), so it cannot import the
registry (``graphs.strategies.STRATEGIES``, which compiles every graph); it lists these names instead, and
``tests/unit/test_strategy_registry.py`` checks that they are exactly the registry's.
"""

from __future__ import annotations

__all__ = ["STRATEGY_NAMES"]

STRATEGY_NAMES: tuple[str, ...] = (
    "reconstruct", "compass", "rerank", "goalmem", "real", "forward_reformulate", "forward_reflect", "forward_react",
    "dense", "bm25", "r2",
)
