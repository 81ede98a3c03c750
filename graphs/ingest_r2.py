"""Ingest enricher for Memory-R2: the extractor proposes a session's facts, the manager edits the R2 fact memory.

Runs in the ingest graph's ``r2`` node when the run asks for the Memory-R2 manager (``IngestContext.memory_manager``).
The manager's ADD / UPDATE / DELETE / NOOP batch is decided against the memory as of the previous committed
session, validated as a whole (one retry with the problems, then the deterministic manager, recorded), and the
records it wrote join the session's change set: they become visible atomically with the session, or not at all.
UPDATE keeps the old text in the record's history and DELETE keeps the record, marked deleted by the session.
"""

from __future__ import annotations

from functools import partial

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome
from logicmap.agents.r2 import (
    candidates_from,
    extract_facts,
    fallback_extraction,
    heuristic_edits,
    manage_memory,
)
from logicmap.agents.windowing import plan_windows, prompt_chars, run_windows
from logicmap.graphs.enrich import Enrichment, EnrichRequest
from logicmap.memory.r2 import (
    CandidateFact,
    EditReport,
    FactEdit,
    FactMemory,
    InvalidEditBatch,
    fact_memory_from_records,
)
from logicmap.memory.records import Turn
from logicmap.memory.store import NamespaceSnapshot
from logicmap.prompts import r2_extract
from logicmap.prompts.r2_extract import FactExtraction

__all__ = ["MEMORY_MANAGERS", "enrich", "r2_memory"]

MEMORY_MANAGERS = ("none", "r2")


def r2_memory(snapshot: NamespaceSnapshot) -> FactMemory:
    """The namespace's R2 fact memory as of ``snapshot`` (its generation is the memory's step)."""
    return fact_memory_from_records(snapshot.namespace, snapshot.r2_facts.values(), step=snapshot.generation)


def _turn_chars(turn: Turn) -> int:
    return len(turn.dia_id) + len(turn.speaker) + len(turn.text) + len(turn.image_caption or "") + 32


def _extract(
    request: EnrichRequest, speakers: list[str], date: str | None
) -> tuple[list[CandidateFact], Cost, list[FallbackRecord]]:
    """The session's candidate facts: one extractor call per window of turns that fits the model's context."""
    turns = request.turns
    room = request.budget.prompt_chars - prompt_chars(r2_extract.build_messages("", date, speakers))
    sizes = [_turn_chars(t) for t in turns]
    windows = plan_windows(len(turns), lambda start, end: sum(sizes[start:end]), room)
    tasks = [
        partial(extract_facts, request.llm, turns[start:end], session_date=date, speakers=speakers,
                method=request.method, tags=request.tags, metadata=request.metadata)
        for start, end in windows
    ]
    outcomes: list[RoleOutcome[FactExtraction]] = run_windows(tasks)
    candidates = [c for outcome in outcomes for c in candidates_from(outcome.output)]
    cost = sum((o.cost for o in outcomes), Cost())
    return candidates, cost, [o.fallback for o in outcomes if o.fallback is not None]


def _decide(
    request: EnrichRequest, memory: FactMemory
) -> tuple[list[CandidateFact], list[FactEdit], Cost, list[FallbackRecord]]:
    """The session's candidate facts and the manager's (valid) edit batch, with what the roles cost."""
    turns, session = request.turns, request.session
    speakers = list(dict.fromkeys(t.speaker for t in [*request.snapshot.turns.values(), *turns]))
    if request.policy == "heuristic" or request.llm is None:
        # The no-LLM policy: one third-person fact per turn, the deterministic manager (never a random choice).
        candidates = candidates_from(fallback_extraction(turns, speakers))
        fallbacks = (
            []
            if request.policy == "heuristic"
            else [FallbackRecord(role="r2_extractor", reason="no chat model configured")]
        )
        return candidates, heuristic_edits(memory, candidates), Cost(), fallbacks
    date = session.timestamp_text or (session.timestamp.date().isoformat() if session.timestamp else None)
    candidates, cost, fallbacks = _extract(request, speakers, date)
    # on_invalid="fallback": an invalid batch is retried once with its problems, then the deterministic manager
    # decides (recorded); no rng and no temperature, so that manager never samples.
    decision = manage_memory(
        request.llm,
        memory,
        candidates,
        method=request.method,
        on_invalid="fallback",
        tags=request.tags,
        metadata=request.metadata,
    )
    fallbacks += [decision.fallback] if decision.fallback is not None else []
    return candidates, decision.edits, cost + decision.cost, fallbacks


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
        fallbacks.append(FallbackRecord(role="r2_manager", reason="edit batch invalid at apply: deterministic "
                                        "manager used", errors=exc.problems[:5]))
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
