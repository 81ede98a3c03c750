"""The contract of ingest enrichers: extra records (facts, cues, tags) built for a session before commit.

The ingest graph calls ``graphs.ingest.facts.enrich`` in its ``facts`` node,
``graphs.ingest.cues.enrich`` in its ``cues`` node and ``graphs.ingest.r2.enrich`` in its ``r2`` node (only
with the Memory-R2 manager), parallel branches; each returns an ``Enrichment``
that the commit node adds to the session's change set, so the extra records become visible atomically
with the session. When the session analyst already extracted a layer in its combined call
(``EnrichRequest.layers``), the enricher builds the records from that part instead of calling its role.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from logicmap.agents.base import Cost, FallbackRecord
from logicmap.agents.ingest_policy import IngestPolicy, ingest_policy
from logicmap.agents.session_analyst import SessionLayers
from logicmap.agents.windowing import ContextBudget
from logicmap.memory.files.loaders import Session
from logicmap.memory.language.text import PATTERN_TEXT_LIMIT
from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.records.r2 import FactRecord
from logicmap.memory.records.records import Cue, Event, Fact, Tag, Turn
from logicmap.memory.store import ChangeSet, NamespaceSnapshot

__all__ = [
    "ENRICHERS",
    "EnrichRequest",
    "Enrichment",
    "add_enrichments",
    "apply_enrichment",
    "capped_turn_notes",
    "request_policy",
]

ENRICHERS = ("facts", "cues", "r2")  # the order their records join a change set (whatever order they finished in)


@dataclass
class EnrichRequest:
    """What an enricher sees: the session, its turns and events (after fusion), the committed state."""

    namespace: str
    session: Session
    turns: list[Turn]
    events: list[Event]
    snapshot: NamespaceSnapshot
    policy: str  # "llm" or "heuristic"
    llm: BaseChatModel | None
    embeddings: Any
    method: str = "function_calling"
    budget: ContextBudget = field(default_factory=ContextBudget)
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    layers: SessionLayers | None = None  # the session analyst's facts and cue parts: no call of the enricher's own
    paper_prompts: bool = False  # the papers' construction prompts (``IngestContext.faithful``)


def request_policy(request: EnrichRequest) -> IngestPolicy:
    """The ``IngestPolicy`` (``agents.ingest_policy``) an enricher decides with: the request's policy name and
    chat model, with its model settings and trace."""
    return ingest_policy(
        request.policy,
        request.llm,
        method=request.method,
        budget=request.budget,
        tags=request.tags,
        metadata=request.metadata,
        paper_prompts=request.paper_prompts,
    )


class Enrichment(BaseModel):
    """Records an enricher adds to the change set, with what it cost and any fallback it used."""

    facts: list[Fact] = Field(default_factory=list)
    fact_vectors: list[list[float]] = Field(default_factory=list)
    cues: list[Cue] = Field(default_factory=list)
    cue_vectors: list[list[float]] = Field(default_factory=list)
    tags: list[Tag] = Field(default_factory=list)
    r2_facts: list[FactRecord] = Field(default_factory=list)
    r2_fact_vectors: list[list[float]] = Field(default_factory=list)
    retire: dict[str, list[str]] = Field(default_factory=dict)
    cost: Cost = Field(default_factory=Cost)
    fallbacks: list[FallbackRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    kind: str = Field(default="facts", description="Which enricher made it: one of ENRICHERS.")


# The record kinds (and their vectors) an enricher can add, in registry order: the fields ``Enrichment`` shares with
# ``ChangeSet``.
_ENRICHED_FIELDS = tuple(
    name
    for kind in RECORD_KINDS
    for name in (kind.field, kind.vector_field)
    if name is not None and name in Enrichment.model_fields
)


def add_enrichments(left: list[Enrichment] | None, right: list[Enrichment] | None) -> list[Enrichment]:
    """LangGraph reducer: the parallel enrichers' results add up; ``None`` clears them for a new session."""
    if right is None:
        return []
    return [*(left or []), *right]


def apply_enrichment(change: ChangeSet, enrichment: Enrichment) -> ChangeSet:
    """The change set with the enrichment's records added."""
    retire = {k: list(v) for k, v in change.retire.items()}
    for kind, ids in enrichment.retire.items():
        retire.setdefault(kind, []).extend(i for i in ids if i not in retire.get(kind, []))
    update: dict[str, Any] = {"retire": retire}
    for name in _ENRICHED_FIELDS:
        update[name] = [*getattr(change, name), *getattr(enrichment, name)]
    return change.model_copy(update=update)


def capped_turn_notes(turns: list[Turn], role: str) -> list[str]:
    """One note per turn longer than ``PATTERN_TEXT_LIMIT``: the no-LLM patterns read only its beginning."""
    return [
        f"{role}: turn {t.dia_id}: {len(t.text):,} characters; the no-LLM patterns read its first "
        f"{PATTERN_TEXT_LIMIT:,}"
        for t in turns
        if len(t.text) > PATTERN_TEXT_LIMIT
    ]
