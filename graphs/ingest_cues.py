"""Ingest enricher for MRAgent's cue-tag layer (placeholder until the MRAgent issue lands: adds nothing)."""

from __future__ import annotations

from graphs.enrich import EnrichRequest, Enrichment

__all__ = ["enrich"]


def enrich(request: EnrichRequest) -> Enrichment:
    return Enrichment()
