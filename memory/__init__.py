"""The memory layer: records, the store, indexes and loaders. No LLM, no graph, no agent.

The rule of this layer: everything here is deterministic and imports nothing from ``logicmap.agents``,
``logicmap.graphs``, ``logicmap.tools`` or ``logicmap.evals``. Every record lives under a namespace (a tenant);
readers see only committed generations (``store.MemoryStore.snapshot``), and anything derived from a
snapshot (the event graph, BM25 and cue indexes, the ranker's arrays) is cached on it with
``NamespaceSnapshot.derived``.

The modules live in rooms (sub-packages), each with its own module table.

| room | holds |
| --- | --- |
| ``store`` | the storage port (``StoragePort``), its backends (Chroma, in-process, PostgreSQL) and the commit protocol |
| ``records`` | the pydantic ``records``, the record ``kinds``, each method's records (``facts``, ``cues``, ``nl_logic``, ``r2``), ``items``, ``chat_turns``, ``tombstones``, ``forgetting`` |
| ``indexes`` | what is derived from a snapshot to search it: ``embeddings``, ``graph`` (``EventGraph``), ``topics``, ``cue_extraction``, ``cue_index``, ``snapshot_file`` |
| ``retrieval`` | no-LLM retrieval: ``retrieval`` (BM25, dense), ``query`` (``QueryEncoder``), ``backbones``, ``ranking``, ``ranking_keys``, ``turn_scoring``, ``turn_ranker_weights``, ``traversal``, ``traversal_weights``, ``fact_paths``, ``answer_slots`` |
| ``language`` | ``text``, ``timeparse``, ``lexicon`` |
| ``files`` | ``loaders`` (conversations), ``backup`` (namespace export and restore) |
| ``runtime`` | ``tenancy``, ``contention``, ``deadline``, ``input_limits``, ``blocking`` |
"""

__all__: list[str] = []
