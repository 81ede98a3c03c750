"""Ingest enricher for MRAgent's cue-tag layer: the session's cues and tags, added to its change set.

With the LLM policy the cue-extractor role builds the layer (statements rewritten with pronouns resolved,
their tags and cues); the lexical builder is its recorded fallback, and the no-LLM policy itself. The
records commit with the session, so they become visible atomically with it.
"""

from __future__ import annotations

from logicmap.agents.cue_extractor import session_cue_links, window_links
from logicmap.graphs.enrich import Enrichment, EnrichRequest, capped_turn_notes
from logicmap.memory.cue_extraction import aspect_prototypes, build_cue_layer

__all__ = ["enrich"]


def enrich(request: EnrichRequest) -> Enrichment:
    """Cues and tags for one session: the cue extractor's with the LLM policy (its own call, or the cue part of
    the session analyst's reply), else the lexical builder's."""
    session_ids = {t.dia_id for t in request.turns}
    # Only events that hold this session's turns get new links (merged older events keep theirs).
    events = [e for e in request.events if session_ids.intersection(e.turn_ids)]
    enrichment = Enrichment(kind="cues")
    by_model = request.policy == "llm" and request.llm is not None
    links = []
    layers = request.layers.cue_windows if request.layers is not None else None
    if by_model and layers is not None:  # extracted in the session analyst's combined call
        windows = [(w.start, w.end) for w in layers]
        links = window_links(request.turns, events, windows, [w.extraction for w in layers])
        enrichment.fallbacks.extend(request.layers.cue_fallbacks)
    elif by_model:
        links, outcome = session_cue_links(
            request.llm, request.turns, events, session_time=request.session.timestamp, method=request.method,
            tags=request.tags, metadata=request.metadata, budget=request.budget,
        )
        enrichment.cost = outcome.cost
        enrichment.fallbacks.extend(outcome.fallbacks)
        enrichment.notes.extend(outcome.notes)
    batch = build_cue_layer(
        request.namespace, request.turns, events, extra_links=links, heuristic=not by_model,
        existing_cues=request.snapshot.cues, existing_tags=request.snapshot.tags,
        prototypes=aspect_prototypes(request.embeddings),
    )
    if not by_model or enrichment.fallbacks:  # the lexical builder ran: it reads only a long turn's beginning
        enrichment.notes.extend(capped_turn_notes(request.turns, "cue_patterns"))
    enrichment.cues = batch.cues
    enrichment.tags = batch.tags
    if batch.cues:
        vectors = request.embeddings.embed_documents([c.text for c in batch.cues])
        enrichment.cue_vectors = [list(map(float, v)) for v in vectors]
    return enrichment
