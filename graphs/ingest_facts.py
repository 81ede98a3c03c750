"""Ingest enricher for REAL's temporal facts (placeholder until the REAL issue lands: adds nothing)."""

from __future__ import annotations

from graphs.enrich import EnrichRequest, Enrichment

__all__ = ["enrich"]


def enrich(request: EnrichRequest) -> Enrichment:
    return Enrichment()
