"""Benchmark harness: metrics (evals.metrics), strategy specs (evals.specs), the judge model (evals.judge), result
records (evals.records), the run loop (evals.runner), reports (evals.report), the eval commands (evals.cli), bench scripts.

Submodules are imported on demand, so ``from evals.metrics import token_f1`` loads no model or graph.
"""

__all__: list[str] = []
