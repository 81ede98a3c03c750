"""Ingest enricher for REAL's temporal facts: extract a session's facts and apply the update rules.

Runs in the ingest graph's ``facts`` node; the facts (new ones and new versions of closed or confirmed
ones) join the session's change set, so they become visible atomically with the session.
"""

from __future__ import annotations

from logicmap.agents.base import Cost
from logicmap.agents.fact_extractor import facts_from_extraction
from logicmap.graphs.ingest.enrich import Enrichment, EnrichRequest, capped_turn_notes, request_policy
from logicmap.memory.records.facts import apply_fact_updates, fact_text

__all__ = ["enrich"]


def enrich(request: EnrichRequest) -> Enrichment:
    """Facts for one session: one LLM call per window of the session (or the pattern extractor, or the facts
    part of the session analyst's reply), then cardinality-aware updates."""
    turns = list(request.turns)
    if not turns:
        return Enrichment()
    cost, fallbacks, notes = Cost(), [], []
    speakers = list(dict.fromkeys(t.speaker for t in [*request.snapshot.turns.values(), *turns]))
    layers = request.layers
    if layers is not None and layers.facts is not None:  # extracted in the session analyst's combined call
        extraction, fallbacks = layers.facts, list(layers.fact_fallbacks)
        if fallbacks:
            notes.extend(capped_turn_notes(turns, "fact_patterns"))
    else:
        decided = request_policy(request).extract_facts(turns, speakers)
        extraction, cost, notes = decided.output, decided.cost, decided.notes
        fallbacks.extend(decided.fallbacks)
        if decided.by_rules or decided.fallbacks:
            notes.extend(capped_turn_notes(turns, "fact_patterns"))
    candidates = facts_from_extraction(extraction, turns, request.namespace)
    update = apply_fact_updates(request.snapshot.facts, candidates)
    if not update.facts:
        return Enrichment(cost=cost, fallbacks=fallbacks, notes=notes)
    # A closed or confirmed fact keeps its text, so its stored vector is reused rather than recomputed.
    stored = request.snapshot.fact_vectors
    missing = [f for f in update.facts if f.id not in stored]
    fresh = dict(
        zip((f.id for f in missing), request.embeddings.embed_documents([fact_text(f) for f in missing]), strict=True)
    )
    vectors = [
        list(map(float, stored[f.id])) if f.id in stored else list(map(float, fresh[f.id])) for f in update.facts
    ]
    return Enrichment(facts=update.facts, fact_vectors=vectors, cost=cost, fallbacks=fallbacks, notes=notes)
