"""Explorer role: SKIP / EXPAND / ANSWER for an event, one call per event or one call per superstep.

An unparseable decision is retried once, then becomes SKIP and is recorded (never a silent EXPAND).
The similarity explorer is the no-LLM policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.prompts import explore as prompt
from logicmap.prompts.explore import (
    BatchDecision,
    EventDecision,
    ExplorerDecision,
    PaperBatchDecision,
    PaperEventDecision,
    PaperExplorerDecision,
)

__all__ = ["ExplorerView", "explore_batch", "explore_event", "similarity_decision", "validate_decision"]


@dataclass
class ExplorerView:
    """What an explorer sees of one event: its text with raw turns, and its neighbours with relations."""

    event_id: str
    event_text: str
    neighbors: list[tuple[str, str, str]]  # (neighbour id, relation label, neighbour text)

    def neighbors_text(self) -> str:
        return "\n".join(f"- {nid} [{label}] {text}" for nid, label, text in self.neighbors)


def validate_decision(decision: ExplorerDecision, view: ExplorerView, n_subgoals: int) -> list[str]:
    allowed = {nid for nid, _, _ in view.neighbors}
    problems = []
    bad = [e for e in decision.next_events if e not in allowed]
    if bad:
        problems.append(f"next_events {bad} are not neighbours of {view.event_id}; neighbours are {sorted(allowed)}")
    if len(decision.next_events) > 3:
        problems.append("at most 3 next_events")
    wrong = [i for i in decision.satisfied_subgoals if not 0 <= i < n_subgoals]
    if wrong:
        problems.append(f"satisfied_subgoals {wrong} out of range 0..{n_subgoals - 1}")
    return problems


def _skip() -> ExplorerDecision:
    return ExplorerDecision(action="SKIP")


def explore_event(
    llm: BaseChatModel | None,
    context: str,
    view: ExplorerView,
    n_subgoals: int,
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    paper: bool = False,
) -> RoleOutcome[ExplorerDecision]:
    """``paper``: the paper's Action Decision Prompt and its typed reply with a REASONING field (``faithful``)."""
    if paper:
        outcome = run_role(
            llm,
            role="explorer",
            messages=prompt.build_paper_messages(context, view.event_text, view.neighbors_text()),
            schema=PaperExplorerDecision,
            validate=lambda d: validate_decision(d, view, n_subgoals),
            fallback=lambda: PaperExplorerDecision(action="SKIP"),
            method=method,
            tags=tags,
            metadata={**(metadata or {}), "event_id": view.event_id, "prompt_version": prompt.PAPER_VERSION},
        )
        decision = ExplorerDecision.model_validate(outcome.output.model_dump(exclude={"reasoning"}))
        return RoleOutcome(output=decision, cost=outcome.cost, fallback=outcome.fallback, attempts=outcome.attempts)
    return run_role(
        llm,
        role="explorer",
        messages=prompt.build_messages(context, view.event_text, view.neighbors_text()),
        schema=ExplorerDecision,
        validate=lambda d: validate_decision(d, view, n_subgoals),
        fallback=_skip,
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "event_id": view.event_id, "prompt_version": prompt.VERSION},
    )


def explore_batch(
    llm: BaseChatModel | None,
    context: str,
    views: Sequence[ExplorerView],
    n_subgoals: int,
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    paper: bool = False,
) -> RoleOutcome[BatchDecision]:
    """One call decides for every event of the superstep; each event must get exactly one decision. ``paper``: the
    paper's Action Decision Prompt for each event (``faithful``)."""
    by_id = {v.event_id: v for v in views}

    def validate(batch: BatchDecision | PaperBatchDecision) -> list[str]:
        got = [d.event_id for d in batch.decisions]
        problems = []
        if sorted(got) != sorted(by_id):
            problems.append(f"give exactly one decision for each of {sorted(by_id)}, got {got}")
        for d in batch.decisions:
            if d.event_id in by_id:
                problems.extend(f"{d.event_id}: {p}" for p in validate_decision(d, by_id[d.event_id], n_subgoals))
        return problems

    text = "\n\n".join(
        f"Event {v.event_id}:\n{v.event_text}\nNeighbours:\n{v.neighbors_text() or '(none)'}" for v in views
    )
    if paper:
        outcome = run_role(
            llm,
            role="explorer_batch",
            messages=prompt.build_paper_batch_messages(context, text),
            schema=PaperBatchDecision,
            validate=validate,
            fallback=lambda: PaperBatchDecision(
                decisions=[PaperEventDecision(event_id=v.event_id, action="SKIP") for v in views]
            ),
            method=method,
            tags=tags,
            metadata={**(metadata or {}), "prompt_version": prompt.PAPER_VERSION},
        )
        batch = BatchDecision(
            decisions=[
                EventDecision.model_validate(d.model_dump(exclude={"reasoning"})) for d in outcome.output.decisions
            ]
        )
        return RoleOutcome(output=batch, cost=outcome.cost, fallback=outcome.fallback, attempts=outcome.attempts)
    return run_role(
        llm,
        role="explorer_batch",
        messages=prompt.build_batch_messages(context, text),
        schema=BatchDecision,
        validate=validate,
        fallback=lambda: BatchDecision(decisions=[EventDecision(event_id=v.event_id, action="SKIP") for v in views]),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )


def similarity_decision(
    event_vectors: np.ndarray,
    subgoal_vectors: np.ndarray | Sequence[np.ndarray],
    satisfied: Sequence[bool],
    neighbor_ids: Sequence[str],
    neighbor_vectors: np.ndarray,
    *,
    keep_threshold: float,
    satisfy_threshold: float,
    expand_threshold: float,
) -> ExplorerDecision:
    """The no-LLM explorer: keep an event similar to an open subgoal, satisfy subgoals it matches well,
    expand to the neighbours closest to the open subgoals.

    ``event_vectors`` are the unit vectors of what the explorer reads (the summary and the cited turns);
    a subgoal's similarity to the event is its best match among them. A subgoal is one unit vector or
    several (its readings, e.g. the subgoal and the subgoal without its names), matched by the best one.
    """
    readings = np.atleast_2d(event_vectors)
    goals = [np.atleast_2d(v) for v in subgoal_vectors]
    sims = np.array([float((readings @ g.T).max()) for g in goals])
    open_idx = [i for i, done in enumerate(satisfied) if not done] or list(range(len(satisfied)))
    relevance = float(max((sims[i] for i in open_idx), default=0.0))
    if relevance < keep_threshold:
        return ExplorerDecision(action="SKIP")
    now_satisfied = [i for i in range(len(satisfied)) if sims[i] >= satisfy_threshold and not satisfied[i]]
    state = [done or i in now_satisfied for i, done in enumerate(satisfied)]
    next_events: list[str] = []
    if len(neighbor_ids):
        still_open = [i for i, done in enumerate(state) if not done] or open_idx
        scores = np.max([(neighbor_vectors @ goals[i].T).max(axis=1) for i in still_open], axis=0)
        for j in np.argsort(-scores, kind="stable")[:3]:
            if scores[j] >= expand_threshold:
                next_events.append(neighbor_ids[j])
    action: Literal["EXPAND", "ANSWER"] = "ANSWER" if all(state) else "EXPAND"
    return ExplorerDecision(action=action, next_events=next_events, satisfied_subgoals=now_satisfied)
