"""Relation extractor role: typed relations between a session's events, validated against the session.

Fallback (and no-LLM policy): a temporal_before chain in conversation order.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import Cost, RoleOutcome, run_role
from logicmap.agents.windowing import (
    ContextBudget,
    WindowedOutcome,
    fit_lines,
    merge_outcomes,
    plan_windows,
    prompt_chars,
    run_windows,
)
from logicmap.memory.records.records import Turn
from logicmap.prompts import relate as prompt
from logicmap.prompts.relate import ExtractedRelation, RelationSet

__all__ = ["RELATION_OVERLAP", "chain_relations", "extract_relations", "relate_session", "validate_relations"]

RELATION_OVERLAP = 2  # events shared by adjacent windows, so relations across the boundary are found


def chain_relations(event_keys: Sequence[str], turn_ids: Sequence[Sequence[str]]) -> RelationSet:
    """``E1 temporal_before E2 temporal_before E3 ...``, each edge citing the turns of both ends."""
    return RelationSet(
        relations=[
            ExtractedRelation(
                source=a, target=b, label="temporal_before", turn_ids=[*turn_ids[i][-1:], *turn_ids[i + 1][:1]]
            )
            for i, (a, b) in enumerate(zip(event_keys, event_keys[1:]))
        ]
    )


def validate_relations(result: RelationSet, event_keys: Sequence[str], turns: Sequence[Turn]) -> list[str]:
    keys = set(event_keys)
    known_turns = {t.dia_id for t in turns}
    problems = []
    for i, rel in enumerate(result.relations):
        if rel.source not in keys or rel.target not in keys:
            problems.append(
                f"relation {i}: endpoints must be events of this session {sorted(keys)}, got {rel.source!r} -> {rel.target!r}"
            )
        elif rel.source == rel.target:
            problems.append(f"relation {i}: an event cannot relate to itself")
        if not rel.label.strip():
            problems.append(f"relation {i}: empty label")
        unknown = [t for t in rel.turn_ids if t not in known_turns]
        if unknown:
            problems.append(f"relation {i}: unknown turn ids {unknown}")
    return problems


def extract_relations(
    llm: BaseChatModel | None,
    events_text: str,
    event_keys: Sequence[str],
    event_turns: Sequence[Sequence[str]],
    turns: Sequence[Turn],
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    turns_text: str | None = None,
) -> RoleOutcome[RelationSet]:
    """One call for the listed events (``turns_text``: the turns as shown, default every turn rendered)."""
    if len(event_keys) < 2:  # nothing to relate: no call spent
        return RoleOutcome(output=RelationSet(relations=[]), cost=Cost())
    outcome = run_role(
        llm,
        role="relation_extractor",
        messages=prompt.build_messages(
            events_text, "\n".join(t.render() for t in turns) if turns_text is None else turns_text
        ),
        schema=RelationSet,
        validate=lambda r: validate_relations(r, event_keys, turns),
        fallback=lambda: chain_relations(event_keys, event_turns),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    # Normalise labels so the same relation is spelled one way.
    for rel in outcome.output.relations:
        rel.label = rel.label.strip().lower().replace(" ", "_").replace("-", "_")
    return outcome


def _event_lines(keys: Sequence[str], summaries: Sequence[str], event_turns: Sequence[Sequence[str]]) -> list[str]:
    return [f"{k}: {s} (turns {', '.join(t)})" for k, s, t in zip(keys, summaries, event_turns)]


def _window_turns(turns: Sequence[Turn], event_turns: Sequence[Sequence[str]]) -> list[Turn]:
    cited = {t for ids in event_turns for t in ids}
    return [t for t in turns if t.dia_id in cited]


def _window_task(
    llm: BaseChatModel | None,
    summaries: Sequence[str],
    event_turns: Sequence[Sequence[str]],
    turns: Sequence[Turn],
    budget: ContextBudget,
    notes: list[str],
    options: dict[str, Any],
) -> partial[RoleOutcome[RelationSet]]:
    """One window's call: its events keyed E1.. and the turns they cite (clipped when one event is too large)."""
    keys = [f"E{i + 1}" for i in range(len(summaries))]
    events = _event_lines(keys, summaries, event_turns)
    lines, clipped = fit_lines(
        [*events, *(t.render() for t in turns)],
        lambda shown: prompt_chars(
            prompt.build_messages("\n".join(shown[: len(events)]), "\n".join(shown[len(events) :]))
        ),
        budget.prompt_chars,
        labels=[*(f"event {k}" for k in keys), *(f"turn {t.dia_id}" for t in turns)],
        role="relation_extractor",
    )
    notes.extend(clipped)
    return partial(
        extract_relations,
        llm,
        "\n".join(lines[: len(events)]),
        keys,
        event_turns,
        turns,
        turns_text="\n".join(lines[len(events) :]),
        **options,
    )


def relate_session(
    llm: BaseChatModel | None,
    summaries: Sequence[str],
    event_turns: Sequence[Sequence[str]],
    turns: Sequence[Turn],
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    budget: ContextBudget | None = None,
) -> WindowedOutcome[RelationSet]:
    """Relations between a session's events (keyed ``E1..``), in overlapping windows of events that fit the budget.

    A session that fits is one call with every turn, as ``extract_relations``. A longer one is cut into
    runs of consecutive events with the turns they cite; adjacent runs share their boundary events.
    """
    budget = budget or ContextBudget()
    options: dict[str, Any] = {"method": method, "tags": tags, "metadata": metadata}
    overhead = prompt_chars(prompt.build_messages("", ""))
    all_lines = _event_lines([f"E{i + 1}" for i in range(len(summaries))], summaries, event_turns)

    def size(start: int, end: int) -> int:
        window_turns = _window_turns(turns, event_turns[start:end])
        return overhead + len("\n".join(all_lines[start:end])) + len("\n".join(t.render() for t in window_turns))

    windows = plan_windows(len(summaries), size, budget.prompt_chars, overlap=RELATION_OVERLAP)
    if len(windows) <= 1:
        windows = [(0, len(summaries))]
    else:  # a relation needs two events: a window of one too-large event takes its neighbour (both clipped)
        windows = [(start, max(end, min(start + 2, len(summaries)))) for start, end in windows]
    notes: list[str] = []
    tasks = [
        _window_task(
            llm,
            summaries[start:end],
            event_turns[start:end],
            turns if len(windows) == 1 else _window_turns(turns, event_turns[start:end]),
            budget,
            notes,
            options,
        )
        for start, end in windows
    ]
    outcomes = run_windows(tasks)
    merged: dict[tuple[str, str, str], ExtractedRelation] = {}
    for (start, _), outcome in zip(windows, outcomes):
        for rel in outcome.output.relations:
            source, target = f"E{start + int(rel.source[1:])}", f"E{start + int(rel.target[1:])}"
            merged.setdefault((source, rel.label, target), rel.model_copy(update={"source": source, "target": target}))
    return merge_outcomes(RelationSet(relations=list(merged.values())), outcomes, notes)
