"""Retrieval with no LLM: BM25 and dense search, backbones, the graph-feature reranker and its weights, the second hop, fact paths, query vectors and the no-LLM answer's sentence.

Like every room of ``memory``: deterministic, no LLM, nothing from ``agents``, ``graphs``, ``tools`` or ``evals``.

| module | owns |
| --- | --- |
| ``answer_slots`` | the no-LLM answer's sentence: what the question asks for, and the evidence sentence that holds it |
| ``backbones`` | Goal-Mem's retrieval backbones |
| ``fact_paths`` | REAL's fact paths and their scores |
| ``query`` | ``QueryEncoder`` (a search text as unit query vectors) and ``learned_turn_scores`` (the shipped reranker's turn scores) |
| ``ranking`` | the graph-feature reranker (a learned turn ranker) |
| ``ranking_keys`` | the reranker's extra keys (session, event, facts, feedback, bridges, dates) |
| ``retrieval`` | BM25 and dense search, reciprocal rank fusion, the event index |
| ``traversal`` | the second hop of the no-LLM compass (off by default) |
| ``traversal_weights`` | the second hop's weights |
| ``turn_ranker_weights`` | the reranker's shipped weights |
| ``turn_scoring`` | the reranker's per-turn features |
"""

__all__: list[str] = []
