"""Query cue role (MRAgent's EXTRACTCUES): the question's keywords, matched against the stored cue set.

The model lists keywords copied from the question (validated: each must appear in it); they are matched to stored
cues (``CueIndex.find_cues``) to seed the active set. The lexical matcher (``CueIndex.cues_of_text``) is the
no-LLM policy and the recorded fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field

from logicmap.agents.base import Cost, FallbackRecord, run_role
from logicmap.memory.indexes.cue_index import CueIndex
from logicmap.memory.records.cues import cue_key
from logicmap.memory.records.records import Cue
from logicmap.prompts import query_cues as prompt
from logicmap.prompts.query_cues import MAX_KEYWORDS, QueryCues

__all__ = ["QueryCueOutcome", "extract_query_cues", "validate_query_cues"]


class QueryCueOutcome(BaseModel):
    """The question's stored cues, the keywords they came from (``None`` for the lexical matcher) and the cost."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cues: list[Cue]
    keywords: list[str] | None = None
    fallback: FallbackRecord | None = None
    cost: Cost = Field(default_factory=Cost)


def validate_query_cues(result: QueryCues, question: str) -> list[str]:
    """Problems a retry can fix: no keyword, too many, or a keyword that is not in the question."""
    problems: list[str] = []
    if not result.keywords:
        problems.append("give at least one keyword from the question")
    if len(result.keywords) > MAX_KEYWORDS:
        problems.append(f"give at most {MAX_KEYWORDS} keywords, not {len(result.keywords)}")
    padded = f" {cue_key(question)} "
    invented = [k for k in result.keywords if not cue_key(k) or f" {cue_key(k)} " not in padded]
    if invented:
        problems.append(f"keywords {invented} are not in the question; copy words or phrases as they appear in it")
    return problems


def _matched(index: CueIndex, keywords: Sequence[str], limit: int) -> list[Cue]:
    """Stored cues for the keywords (the best match of each, then partial matches), persons last."""
    found: list[Cue] = []
    for keyword in keywords:
        found.extend(cue for cue, _ in index.find_cues(keyword, limit=2))
    unique = list({c.id: c for c in found}.values())
    unique.sort(key=lambda c: c.kind == "person")
    return unique[:limit]


def extract_query_cues(
    llm: BaseChatModel | None,
    question: str,
    index: CueIndex,
    *,
    limit: int = 8,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> QueryCueOutcome:
    """The question's cues: the model's keywords matched to stored cues; without a model, the lexical matcher
    (not a fallback: the no-LLM policy). A reply still invalid after the retry falls back to it (recorded)."""
    if llm is None:
        return QueryCueOutcome(cues=index.cues_of_text(question, limit=limit))
    outcome = run_role(
        llm,
        role="query_cues",
        messages=prompt.build_messages(question),
        schema=QueryCues,
        validate=lambda r: validate_query_cues(r, question),
        fallback=QueryCues,
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    if outcome.fallback is not None:
        return QueryCueOutcome(
            cues=index.cues_of_text(question, limit=limit), fallback=outcome.fallback, cost=outcome.cost
        )
    keywords = list(dict.fromkeys(k.strip() for k in outcome.output.keywords))
    return QueryCueOutcome(cues=_matched(index, keywords, limit), keywords=keywords, cost=outcome.cost)
