"""What is derived from a snapshot to search it: embeddings, the event graph, topics, the cue index, and the persisted snapshot cache.

Like every room of ``memory``: deterministic, no LLM, nothing from ``agents``, ``graphs``, ``tools`` or ``evals``.

| module | owns |
| --- | --- |
| ``cue_extraction`` | the no-LLM cue builder |
| ``cue_index`` | the cue index |
| ``embeddings`` | the embedder factory (MiniLM offline, OpenAI, hashing) and the cache |
| ``graph`` | ``EventGraph``: a snapshot's events and relations as compact arrays, with a ``networkx`` view |
| ``kmeans`` | the topic layer's k-means in numpy (scikit-learn's labels, without importing it) |
| ``snapshot_file`` | vector tables and the persisted per-namespace snapshot cache (checked, rebuilt when stale) |
| ``topics`` | the topic layer: k-means, incremental assignment, periodic re-clustering |
"""

__all__: list[str] = []
