"""The memory layer: records, the store, indexes and loaders. No LLM, no graph, no agent.

The rule of this layer: everything here is deterministic and imports nothing from ``logicmap.agents``,
``logicmap.graphs``, ``logicmap.tools`` or ``logicmap.evals``. Every record lives under a namespace (a tenant);
readers see only committed generations (``store.MemoryStore.snapshot``), and anything derived from a
snapshot (the event graph, BM25 and cue indexes, the ranker's arrays) is cached on it with
``NamespaceSnapshot.derived``.

| module | owns |
| --- | --- |
| ``records`` | the pydantic records: turn, event, relation, topic, fact, cue, tag; ids and namespace validation |
| ``store`` | a package: ``MemoryStore`` over Chroma; its rooms are ``process`` (the directory lock), ``health`` (damaged stores), ``core``, ``generations`` and ``commits`` (the commit protocol), ``snapshots`` (the snapshot cache), ``purge`` (physical removal, namespace deletion), ``queries``, ``model`` and ``errors`` |
| ``forgetting`` | what forgetting turns retires or rewrites, followed through ``kinds``, as one change set with its audit record |
| ``tombstones`` | what a forget leaves so forgotten memory does not come back: hashes of each forgotten turn, never its text |
| ``items`` | store items (``LogicMapStore``): namespace tuples, keys as hashed sessions, item text, value filters |
| ``kinds`` | the registry of record kinds: each kind's record class, change-set and vector fields, id, and the records it derives from |
| ``snapshot_file`` | vector tables and the persisted per-namespace snapshot cache (checked, rebuilt when stale) |
| ``backup`` | a namespace exported to a checksummed JSONL file and restored into an empty namespace in one commit |
| ``graph`` | ``EventGraph``: a snapshot's events and relations as compact arrays, with a ``networkx.MultiDiGraph`` view |
| ``topics`` | the topic layer: k-means, incremental assignment, periodic re-clustering |
| ``embeddings`` | the embedder factory (MiniLM offline, OpenAI, hashing) and the cache |
| ``retrieval``, ``backbones``, ``ranking``, ``ranking_keys`` | BM25 and dense search, Goal-Mem backbones, the graph-feature reranker (a learned turn ranker) and its extra keys (session, event, facts, feedback, bridges, dates) |
| ``turn_scoring``, ``turn_ranker_weights`` | the reranker's per-turn features and its shipped weights |
| ``traversal``, ``traversal_weights`` | the second hop of the no-LLM compass (off by default) and its weights |
| ``fact_paths`` | REAL's fact paths and their scores |
| ``cue_extraction``, ``cue_index`` | the no-LLM cue builder and the cue index |
| ``lexicon`` | the general word lists the no-LLM policies use (no fitted vocabulary) |
| ``answer_slots`` | the no-LLM answer's sentence: what the question asks for, and the evidence sentence that holds it |
| ``tenancy`` | which tenant a run belongs to: namespace templates, the authority, thread fingerprints |
| ``contention``, ``deadline``, ``input_limits`` | writers waiting for a namespace, the run's deadline, question and message size limits |
| ``chat_turns`` | what a chat turn is to memory: a user's statement is evidence, a question or an untrusted reply only context |
| ``facts`` | REAL's temporal facts: validity intervals, cardinality-aware non-destructive updates |
| ``cues`` | MRAgent's cue-tag-content layer |
| ``nl_logic`` | Goal-Mem's NL-Logic terms, goals and substitutions |
| ``r2`` | Memory-R2's fact memory with copy-on-write snapshots |
| ``text``, ``timeparse`` | the one text toolkit (tokens, stems, stop words, sentences) and the one date module |
| ``loaders`` | LoCoMo, LongMemEval and JSONL conversations, validated before anything is written |
| ``blocking`` | the one bounded executor the async API awaits blocking work on (no thread per call) |
"""

__all__: list[str] = []
