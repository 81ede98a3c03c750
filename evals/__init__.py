"""Benchmark harness: metrics (evals.metrics), the runner (evals.runner), reports (evals.report), bench scripts.

Submodules are imported on demand, so ``from evals.metrics import token_f1`` loads no model or graph.
"""

__all__: list[str] = []
