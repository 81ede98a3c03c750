"""The ``logicmap`` program (``python -m logicmap``, the ``logicmap`` console script): every command in one parser.

The memory commands come from ``graphs.surfaces.cli``; the eval commands (demo, eval, train-data) from ``evals.cli``, which
sits above graphs and joins them in ``evals.cli.main``: code of the package that runs the program (a benchmark)
imports that, never this top-level module.
"""

from __future__ import annotations

import sys

from logicmap.evals.cli import main

__all__ = ["main"]


if __name__ == "__main__":
    sys.exit(main())
