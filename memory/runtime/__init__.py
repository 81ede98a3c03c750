"""What bounds a run: its tenant, its deadline, its input sizes, writers waiting for a namespace, the one executor blocking work runs on, and the memory a batch frees.

Like every room of ``memory``: deterministic, no LLM, nothing from ``agents``, ``graphs``, ``tools`` or ``evals``.

| module | owns |
| --- | --- |
| ``blocking`` | the one bounded executor the async API awaits blocking work on (no thread per call) |
| ``contention`` | writers waiting for a namespace |
| ``deadline`` | the run's deadline |
| ``heap`` | handing memory a batch freed back to the system (``malloc_trim``) |
| ``input_limits`` | question and message size limits |
| ``tenancy`` | which tenant a run belongs to: namespace templates, the authority, thread fingerprints |
"""

__all__: list[str] = []
