"""Planner role: 2-5 subgoals for a question, and a refined query for the subgoals still unsatisfied.

When the first round's candidate events are known before planning, the same call also picks the starting events
(``plan_with_starts``): one call instead of the planner's and the localizer's.
Fallbacks (and no-LLM policy): subgoals from the question's clauses (and no starts picked: the localizer picks
them); the refined query joins what is missing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.memory.retrieval.retrieval import tokenize
from logicmap.prompts import plan as prompt
from logicmap.prompts.plan import PaperRefinedQuery, Plan, PlanAndStarts, RefinedQuery

__all__ = ["clause_subgoals", "plan_subgoals", "plan_with_starts", "refine_query"]

_CLAUSE_SPLIT = re.compile(r"\s*(?:[,;]|\band\b|\bbecause\b|\bafter\b|\bbefore\b|\bwhile\b)\s*", re.IGNORECASE)


def clause_subgoals(question: str, limit: int = 5) -> list[str]:
    """The question's clauses that carry content words; the whole question when it has one clause."""
    text = question.strip().rstrip("?").strip()
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(text) if len(tokenize(p)) >= 2]
    if len(parts) <= 1:
        return [text or question]
    return parts[:limit]


def _validate_plan(plan: Plan | PlanAndStarts) -> list[str]:
    goals = [g for g in plan.subgoals if g.strip()]
    if not 2 <= len(goals) <= 5:
        return [f"give 2 to 5 non-empty subgoals, got {len(goals)}"]
    return []


def _clean_subgoals(subgoals: list[str], question: str) -> list[str]:
    return [g.strip() for g in subgoals if g.strip()][:5] or [question.strip() or "?"]


def plan_subgoals(
    llm: BaseChatModel | None,
    question: str,
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[Plan]:
    outcome = run_role(
        llm,
        role="planner",
        messages=prompt.build_messages(question),
        schema=Plan,
        validate=_validate_plan,
        fallback=lambda: Plan(subgoals=clause_subgoals(question)),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    outcome.output.subgoals = _clean_subgoals(outcome.output.subgoals, question)
    return outcome


def plan_with_starts(
    llm: BaseChatModel | None,
    question: str,
    candidates: Sequence[tuple[str, str]],
    *,
    max_starts: int = 5,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[PlanAndStarts]:
    """Subgoals and the starting events among ``candidates`` (``(event id, rendered text)`` in ranking order) in
    one call. A reply that picks no start is valid: the localizer then picks them in its own call."""
    ids = [c[0] for c in candidates]

    def validate(plan: PlanAndStarts) -> list[str]:
        problems = _validate_plan(plan)
        unknown = [e for e in plan.start_ids if e not in ids]
        if unknown:
            problems.append(f"unknown start ids {unknown}; choose from {ids}")
        if len(set(plan.start_ids)) > max_starts:
            problems.append(f"pick at most {max_starts} start events")
        return problems

    outcome = run_role(
        llm,
        role="planner",
        messages=prompt.build_plan_and_starts_messages(
            question, "\n".join(f"{i}: {t}" for i, t in candidates), max_starts
        ),
        schema=PlanAndStarts,
        validate=validate,
        fallback=lambda: PlanAndStarts(subgoals=clause_subgoals(question)),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    outcome.output.subgoals = _clean_subgoals(outcome.output.subgoals, question)
    outcome.output.start_ids = list(dict.fromkeys(outcome.output.start_ids))[:max_starts]
    return outcome


def refine_query(
    llm: BaseChatModel | None,
    question: str,
    missing: list[str],
    found: str,
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    satisfied: list[str] | None = None,
) -> RoleOutcome[RefinedQuery]:
    """``satisfied`` given: the paper's Refinement Query Prompt, which lists the satisfied sub-goals too
    (``faithful``); the reply keeps its Target Sub-goals (``PaperRefinedQuery``)."""
    if satisfied is not None:
        return run_role(
            llm,
            role="refiner",
            messages=prompt.build_paper_refine_messages(question, satisfied, missing, found),
            schema=PaperRefinedQuery,
            validate=lambda r: [] if r.query.strip() else ["empty query"],
            fallback=lambda: PaperRefinedQuery(query=" ".join(missing) or question),
            method=method,
            tags=tags,
            metadata={**(metadata or {}), "prompt_version": prompt.PAPER_REFINE_VERSION},
        )
    return run_role(
        llm,
        role="refiner",
        messages=prompt.build_refine_messages(question, missing, found),
        schema=RefinedQuery,
        validate=lambda r: [] if r.query.strip() else ["empty query"],
        fallback=lambda: RefinedQuery(query=" ".join(missing) or question),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
