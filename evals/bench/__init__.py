"""Benchmark scripts that print numbers: overhead, scale and evidence recall (``python -m evals.bench.NAME``).

Never timed tests: they report figures, with the machine they ran on.
"""

__all__: list[str] = []
