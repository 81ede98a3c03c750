"""Ingest enricher for MRAgent's cue-tag layer: the session's cues and tags, added to its change set.

With the LLM policy one cue-extractor call adds the model's cues and person facts to the no-LLM ones;
the records commit with the session, so they become visible atomically with it.
"""

from __future__ import annotations

from logicmap.agents.cue_extractor import extract_session_cues, links_from_extraction
from logicmap.graphs.enrich import Enrichment, EnrichRequest, capped_turn_notes
from logicmap.memory.cue_extraction import aspect_prototypes, build_cue_layer

__all__ = ["enrich"]


def enrich(request: EnrichRequest) -> Enrichment:
    """Cues and tags for one session: the no-LLM cue layer, plus one cue-extractor call with the LLM policy."""
    session_ids = {t.dia_id for t in request.turns}
    # Only events that hold this session's turns get new links (merged older events keep theirs).
    events = [e for e in request.events if session_ids.intersection(e.turn_ids)]
    enrichment = Enrichment(kind="cues")
    extra = []
    if request.policy == "llm" and request.llm is not None:
        outcome = extract_session_cues(
            request.llm, request.turns, events, session_time=request.session.timestamp, method=request.method,
            tags=request.tags, metadata=request.metadata, budget=request.budget,
        )
        enrichment.cost = outcome.cost
        enrichment.fallbacks.extend(outcome.fallbacks)
        enrichment.notes.extend(outcome.notes)
        extra = links_from_extraction(outcome.output, events, request.turns)
    batch = build_cue_layer(
        request.namespace, request.turns, events, extra_links=extra,
        existing_cues=request.snapshot.cues, existing_tags=request.snapshot.tags,
        prototypes=aspect_prototypes(request.embeddings),
    )
    enrichment.notes.extend(capped_turn_notes(request.turns, "cue_patterns"))
    enrichment.cues = batch.cues
    enrichment.tags = batch.tags
    if batch.cues:
        vectors = request.embeddings.embed_documents([c.text for c in batch.cues])
        enrichment.cue_vectors = [list(map(float, v)) for v in vectors]
    return enrichment
