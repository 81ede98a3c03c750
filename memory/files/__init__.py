"""Memory in and out of files: conversations loaded and validated, namespaces backed up and restored.

Like every room of ``memory``: deterministic, no LLM, nothing from ``agents``, ``graphs``, ``tools`` or ``evals``.

| module | owns |
| --- | --- |
| ``backup`` | a namespace exported to a checksummed JSONL file and restored into an empty namespace in one commit |
| ``loaders`` | LoCoMo, LongMemEval and JSONL conversations, validated before anything is written |
"""

__all__: list[str] = []
