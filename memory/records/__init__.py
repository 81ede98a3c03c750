"""The records memory holds and what they mean: the pydantic records, the record kinds, each method's records, items, tombstones and forgetting.

Like every room of ``memory``: deterministic, no LLM, nothing from ``agents``, ``graphs``, ``tools`` or ``evals``.

| module | owns |
| --- | --- |
| ``chat_turns`` | what a chat turn is to memory: a statement is evidence, a question only context |
| ``cues`` | MRAgent's cue-tag-content layer |
| ``facts`` | REAL's temporal facts: validity intervals, cardinality-aware non-destructive updates |
| ``forgetting`` | what forgetting turns retires or rewrites, followed through ``kinds``, as one change set with its audit |
| ``items`` | store items (``LogicMapStore``): namespace tuples, keys as hashed sessions, item text, value filters |
| ``kinds`` | the registry of record kinds: record class, change-set and vector fields, id, what each derives from |
| ``nl_logic`` | Goal-Mem's NL-Logic terms, goals and substitutions |
| ``r2`` | Memory-R2's fact memory with copy-on-write snapshots |
| ``records`` | the pydantic records: turn, event, relation, topic, fact, cue, tag; ids and namespace validation |
| ``tombstones`` | what a forget leaves: hashes of each forgotten turn, never its text |
"""

__all__: list[str] = []
