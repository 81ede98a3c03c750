"""Localizer role: the LLM picks starting events among topic-diverse candidates; fallback takes the top ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.prompts import localize as prompt
from logicmap.prompts.localize import StartPicks

__all__ = ["pick_starts"]


def pick_starts(
    llm: BaseChatModel | None,
    question: str,
    subgoals: list[str],
    candidates: Sequence[tuple[str, str]],
    *,
    max_starts: int = 5,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[StartPicks]:
    """``candidates`` are ``(event id, rendered text)`` in ranking order."""
    ids = [c[0] for c in candidates]

    def validate(picks: StartPicks) -> list[str]:
        unknown = [e for e in picks.event_ids if e not in ids]
        problems = [f"unknown event ids {unknown}; choose from {ids}"] if unknown else []
        if not picks.event_ids:
            problems.append("pick at least one event")
        if len(picks.event_ids) > max_starts:
            problems.append(f"pick at most {max_starts} events")
        return problems

    outcome = run_role(
        llm,
        role="localizer",
        messages=prompt.build_messages(question, subgoals, "\n".join(f"{i}: {t}" for i, t in candidates), max_starts),
        schema=StartPicks,
        validate=validate,
        fallback=lambda: StartPicks(event_ids=ids[:max_starts]),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    outcome.output.event_ids = list(dict.fromkeys(outcome.output.event_ids))[:max_starts]
    return outcome
