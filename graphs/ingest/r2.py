"""Ingest enricher for Memory-R2: the extractor proposes a session's facts, the manager edits the R2 fact memory.

Runs in the ingest graph's ``r2`` node when the run asks for the Memory-R2 manager (``IngestContext.memory_manager``).
The manager's ADD / UPDATE / DELETE / NOOP batch is decided against the memory as of the previous committed
session, validated as a whole (one retry with the problems, then the deterministic manager, recorded), and the
records it wrote join the session's change set: they become visible atomically with the session, or not at all.
UPDATE keeps the old text in the record's history and DELETE keeps the record, marked deleted by the session.
"""

from __future__ import annotations

from logicmap.agents.base import Cost, FallbackRecord
from logicmap.agents.r2 import heuristic_edits
from logicmap.graphs.ingest.enrich import Enrichment, EnrichRequest, request_policy
from logicmap.memory.records.r2 import (
    CandidateFact,
    EditReport,
    FactEdit,
    FactMemory,
    InvalidEditBatch,
    fact_memory_from_records,
)
from logicmap.memory.store import NamespaceSnapshot

__all__ = ["MEMORY_MANAGERS", "enrich", "r2_memory"]

MEMORY_MANAGERS = ("none", "r2")


def r2_memory(snapshot: NamespaceSnapshot) -> FactMemory:
    """The namespace's R2 fact memory as of ``snapshot`` (its generation is the memory's step)."""
    return fact_memory_from_records(snapshot.namespace, snapshot.r2_facts.values(), step=snapshot.generation)


def _decide(
    request: EnrichRequest, memory: FactMemory
) -> tuple[list[CandidateFact], list[FactEdit], Cost, list[FallbackRecord]]:
    """The session's candidate facts and the manager's (valid) edit batch, with what the roles cost: the run's
    policy decides (``IngestPolicy.r2_edits``: the model's extractor and manager, or one fact per turn and the
    deterministic manager)."""
    turns, session = request.turns, request.session
    speakers = list(dict.fromkeys(t.speaker for t in [*request.snapshot.turns.values(), *turns]))
    date = session.timestamp_text or (session.timestamp.date().isoformat() if session.timestamp else None)
    decided = request_policy(request).r2_edits(memory, turns, speakers, date)
    candidates, edits = decided.output
    return candidates, edits, decided.cost, decided.fallbacks


def _apply(
    memory: FactMemory,
    candidates: list[CandidateFact],
    edits: list[FactEdit],
    session_id: str,
    fallbacks: list[FallbackRecord],
) -> EditReport:
    """Apply the batch (validated whole); a batch that still fails is replaced by the deterministic manager's."""
    try:
        return memory.apply(edits, candidates, session_id=session_id)
    except InvalidEditBatch as exc:
        fallbacks.append(
            FallbackRecord(
                role="r2_manager",
                reason="edit batch invalid at apply: deterministic manager used",
                errors=exc.problems[:5],
            )
        )
        return memory.apply(heuristic_edits(memory, candidates), candidates, session_id=session_id)


def enrich(request: EnrichRequest) -> Enrichment:
    """The R2 fact records this session's manager batch wrote (new, updated and deleted versions), with vectors."""
    enrichment = Enrichment(kind="r2")
    if not request.turns:
        return enrichment
    memory = r2_memory(request.snapshot)
    candidates, edits, cost, fallbacks = _decide(request, memory)
    report = _apply(memory, candidates, edits, request.session.session_id, fallbacks)
    records = memory.changed_in(report)
    # A deleted record keeps its text, so its stored vector is reused rather than recomputed.
    stored = request.snapshot.r2_fact_vectors
    fresh = [r for r in records if r.id not in stored or r.id in report.updated]
    vectors = dict(zip((r.id for r in fresh), request.embeddings.embed_documents([r.text for r in fresh]), strict=True))
    enrichment.r2_facts = records
    enrichment.r2_fact_vectors = [list(map(float, vectors[r.id] if r.id in vectors else stored[r.id])) for r in records]
    enrichment.cost, enrichment.fallbacks = cost, fallbacks
    return enrichment
