"""What changes memory after ingest: fast writes and the consolidator that builds them into memory, and forgetting.

Its modules use ``memory``, ``prompts``, ``agents`` and ``tools``; which other rooms of ``graphs`` they may not import is ``tests/unit/test_layering.py``'s ``ROOM_RULES``.

| module | owns |
| --- | --- |
| ``consolidate`` | the write path: fast writes to the pending log and the consolidator that builds them into memory |
| ``forget`` | forget, update, list and get memories, delete a namespace (``logicmap.forget`` and its async twins) |
| ``replacement`` | the forget a replacing commit carries |
"""

__all__: list[str] = []
