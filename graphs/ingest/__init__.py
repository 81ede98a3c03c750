"""Ingest: a conversation written into a namespace, one session at a time (segment -> relate -> fuse -> topics -> facts and cues in parallel -> commit). Nothing here imports the strategies' room.

Its modules use ``memory``, ``prompts``, ``agents`` and ``tools``; which other rooms of ``graphs`` they may not import is ``tests/unit/test_layering.py``'s ``ROOM_RULES``.

| module | owns |
| --- | --- |
| ``cues`` | MRAgent's cue-tag records for a session |
| ``enrich`` | the enrichers' shared request and result (``EnrichRequest``, ``Enrichment``) |
| ``facts`` | REAL's temporal facts for a session |
| ``ingest`` | the ingest graph and ``ingest_conversation`` / ``aingest_conversation`` |
| ``nodes`` | the ingest graph's nodes, its context (``IngestContext``) and reports |
| ``r2`` | Memory-R2's memory manager (ADD / UPDATE / DELETE / NOOP) per session |
| ``redo`` | the redo graph: events and relations rebuilt after a forget |
"""

__all__: list[str] = []
