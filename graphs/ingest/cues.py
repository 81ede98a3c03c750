"""Ingest enricher for MRAgent's cue-tag layer: the session's cues and tags, added to its change set.

With the LLM policy the cue-extractor role builds the layer (statements rewritten with pronouns resolved,
their tags and cues); the lexical builder is its recorded fallback, and the no-LLM policy itself. The
records commit with the session, so they become visible atomically with it.
"""

from __future__ import annotations

from logicmap.graphs.ingest.enrich import Enrichment, EnrichRequest, capped_turn_notes, request_policy
from logicmap.memory.indexes.cue_extraction import aspect_prototypes, build_cue_layer

__all__ = ["enrich"]


def enrich(request: EnrichRequest) -> Enrichment:
    """Cues and tags for one session: the cue extractor's with the LLM policy (its own call, or the cue part of
    the session analyst's reply), else the lexical builder's."""
    session_ids = {t.dia_id for t in request.turns}
    # Only events that hold this session's turns get new links (merged older events keep theirs).
    events = [e for e in request.events if session_ids.intersection(e.turn_ids)]
    enrichment = Enrichment(kind="cues")
    decided = request_policy(request).cue_links(request.turns, events, request.session.timestamp, request.layers)
    links, enrichment.cost = decided.output, decided.cost
    enrichment.fallbacks.extend(decided.fallbacks)
    enrichment.notes.extend(decided.notes)
    batch = build_cue_layer(
        request.namespace,
        request.turns,
        events,
        extra_links=links,
        heuristic=decided.by_rules,
        existing_cues=request.snapshot.cues,
        existing_tags=request.snapshot.tags,
        prototypes=aspect_prototypes(request.embeddings),
    )
    if decided.by_rules or enrichment.fallbacks:  # the lexical builder ran: it reads only a long turn's beginning
        enrichment.notes.extend(capped_turn_notes(request.turns, "cue_patterns"))
    enrichment.cues = batch.cues
    enrichment.tags = batch.tags
    if batch.cues:
        vectors = request.embeddings.embed_documents([c.text for c in batch.cues])
        enrichment.cue_vectors = [list(map(float, v)) for v in vectors]
    return enrichment
