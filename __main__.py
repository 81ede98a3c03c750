"""The ``logicmap`` program (``python -m logicmap``, the ``logicmap`` console script): every command in one parser.

The memory commands come from ``graphs.cli``; the eval commands (demo, eval, train-data) from ``evals.cli``, which
sits above graphs, so only this top-level module joins them.
"""

from __future__ import annotations

import sys

from logicmap.evals.cli import add_eval_commands
from logicmap.graphs.cli import build_parser, run

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run one ``logicmap`` command: ingest, ask, graph, stats, namespaces, local-llm, chat, facts, demo, train-data, eval."""
    return run(build_parser(add_eval_commands), argv)


if __name__ == "__main__":
    sys.exit(main())
