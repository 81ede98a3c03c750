"""Active-set pruner role (MRAgent): after each tool round, keep only the memories that support the question.

The model names the memories to keep and whether they already answer the question; its deterministic rule
(the no-LLM policy and the fallback) keeps the memories most similar to the question above a floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.memory.indexes.embeddings import cosine_matrix
from logicmap.prompts import reconstruct_prune as prompt
from logicmap.prompts.reconstruct_prune import CandidateSelection, PruneDecision

__all__ = ["keep_most_similar", "prune_active", "select_candidates"]


def keep_most_similar(
    question: str, memories: Sequence[tuple[str, str]], embeddings: Embeddings, *, floor: float, limit: int
) -> PruneDecision:
    """The rule: the ``limit`` memories most similar to the question among those at least ``floor`` similar,
    in their original order (navigation goes on: the rule never decides that the question is answered)."""
    if not memories:
        return PruneDecision()
    vectors = embeddings.embed_documents([text for _, text in memories])
    scores = cosine_matrix([embeddings.embed_query(question)], vectors)[0]
    ranked = sorted(range(len(memories)), key=lambda i: -float(scores[i]))
    chosen = {i for i in ranked[: max(limit, 0)] if float(scores[i]) >= floor}
    return PruneDecision(keep=[key for i, (key, _) in enumerate(memories) if i in chosen])


def prune_active(
    llm: BaseChatModel | None,
    question: str,
    memories: Sequence[tuple[str, str]],
    *,
    embeddings: Embeddings,
    floor: float,
    limit: int,
    question_date: str | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[PruneDecision]:
    """``memories`` are ``(key, rendered text)`` of the active set; the decision keeps some of the keys.

    Without a model the rule decides (and the outcome records that no model was configured)."""
    keys = [key for key, _ in memories]
    lines = "\n".join(f"{key}: {text}" for key, text in memories)

    def validate(decision: PruneDecision) -> list[str]:
        unknown = [k for k in decision.keep if k not in keys]
        return [f"unknown memory keys {unknown}; keep keys from {keys}"] if unknown else []

    return run_role(
        llm,
        role="active_pruner",
        messages=prompt.build_messages(question, lines, question_date),
        schema=PruneDecision,
        validate=validate,
        fallback=lambda: keep_most_similar(question, memories, embeddings, floor=floor, limit=limit),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )


def select_candidates(
    llm: BaseChatModel | None,
    question: str,
    context_text: str,
    candidates: Sequence[tuple[str, str]],
    *,
    embeddings: Embeddings,
    floor: float,
    limit: int,
    question_date: str | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[PruneDecision]:
    """The paper's routing step (MRAgent Eq. 9, ``faithful``): only the new ``candidates`` (``(key, text)``) are
    judged, with the reconstructed context shown; the decision keeps some of their keys and never routes to the
    answer (C_LLM decides that). The same rule (the candidates most similar to the question) is the fallback."""
    keys = [key for key, _ in candidates]
    lines = "\n".join(f"{key}: {text}" for key, text in candidates)

    def validate(selection: CandidateSelection) -> list[str]:
        unknown = [k for k in selection.keep if k not in keys]
        return [f"unknown candidate keys {unknown}; keep keys from {keys}"] if unknown else []

    outcome = run_role(
        llm,
        role="active_router",
        messages=prompt.build_candidate_messages(question, context_text, lines, question_date),
        schema=CandidateSelection,
        validate=validate,
        fallback=lambda: CandidateSelection(
            keep=keep_most_similar(question, candidates, embeddings, floor=floor, limit=limit).keep
        ),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.CANDIDATE_VERSION},
    )
    return RoleOutcome(
        output=PruneDecision(keep=outcome.output.keep),
        cost=outcome.cost,
        fallback=outcome.fallback,
        attempts=outcome.attempts,
    )
