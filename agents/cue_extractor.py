"""Cue extractor role: one LLM call per session for MRAgent's cue-tag layer, or the no-LLM extraction.

The model's cues are kept only when they occur verbatim in the session; the heuristic links are
always built as well, so a weak model adds to the layer and never empties it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import run_role
from logicmap.agents.windowing import (
    ContextBudget,
    WindowedOutcome,
    fit_lines,
    merge_outcomes,
    plan_windows,
    prompt_chars,
    run_windows,
)
from logicmap.memory.cues import CueLink, normalize_cue, personal_fact_id
from logicmap.memory.records import Event, Turn
from logicmap.prompts import cues as prompt
from logicmap.prompts.cues import CueExtraction

__all__ = ["extract_session_cues", "links_from_extraction", "validate_extraction"]


def _session_text(turns: Sequence[Turn]) -> str:
    return "\n".join(t.render() for t in turns)


def _event_keys(events: Sequence[Event]) -> dict[str, Event]:
    return {f"E{i + 1}": e for i, e in enumerate(events)}


def validate_extraction(result: CueExtraction, events: Sequence[Event], turns: Sequence[Turn]) -> list[str]:
    """Problems a retry can fix: unknown event keys or turn ids. Non-verbatim cues are dropped later, not retried."""
    keys = set(_event_keys(events))
    known_turns = {t.dia_id for t in turns}
    problems = []
    bad_events = sorted({c.event for c in result.cues if c.event not in keys})
    if bad_events:
        problems.append(f"unknown event keys {bad_events}; valid keys are {sorted(keys)}")
    bad_turns = sorted({f.turn_id for f in result.person_facts if f.turn_id not in known_turns})
    if bad_turns:
        problems.append(f"unknown turn ids {bad_turns}; valid ids are {sorted(known_turns)}")
    return problems


def links_from_extraction(result: CueExtraction, events: Sequence[Event], turns: Sequence[Turn]) -> list[CueLink]:
    """The extraction as cue links, keeping only cues said verbatim and targets that exist."""
    keys = _event_keys(events)
    by_turn = {t.dia_id: t for t in turns}
    spoken = " " + normalize_cue(" ".join(f"{t.text} {t.image_caption or ''}" for t in turns)) + " "

    def verbatim(text: str) -> bool:
        key = normalize_cue(text)
        return bool(key) and f" {key} " in spoken

    links: list[CueLink] = []
    for item in result.cues:
        event = keys.get(item.event)
        if event is None or not verbatim(item.cue) or not item.tag.strip():
            continue
        links.append(CueLink(item.cue, item.kind, "event", event.id, item.tag, None, None))
    for fact in result.person_facts:
        turn = by_turn.get(fact.turn_id)
        if turn is None or not fact.person.strip() or not fact.content.strip():
            continue
        aspect = fact.aspect.strip().lower() or "attribute"
        fid = personal_fact_id(turn.dia_id, fact.person, aspect, fact.content)
        links.append(CueLink(fact.person, "person", "fact", fid, aspect, fact.person, fact.content))
        for cue in fact.cues:
            if verbatim(cue) and normalize_cue(cue) != normalize_cue(fact.person):
                links.append(CueLink(cue, "entity", "fact", fid, aspect, fact.person, fact.content))
    return links


def _events_text(events: Sequence[Event]) -> str:
    return "\n".join(f"{key}: {e.summary[:400]} (turns {', '.join(e.turn_ids)})" for key, e in _event_keys(events).items())


def _window_events(events: Sequence[Event], turns: Sequence[Turn]) -> list[int]:
    """Indexes of the events that hold a turn of the window."""
    ids = {t.dia_id for t in turns}
    return [i for i, e in enumerate(events) if ids.intersection(e.turn_ids)]


def _window_task(llm: BaseChatModel | None, turns: Sequence[Turn], events: Sequence[Event], session_date: str | None,
                 budget: ContextBudget, notes: list[str], options: dict) -> partial:
    events_text = _events_text(events)
    lines, clipped = fit_lines(
        [t.render() for t in turns],
        lambda shown: prompt_chars(prompt.build_messages("\n".join(shown), events_text, session_date)),
        budget.prompt_chars, labels=[f"turn {t.dia_id}" for t in turns], role="cue_extractor",
    )
    notes.extend(clipped)
    return partial(
        run_role, llm, role="cue_extractor",
        messages=prompt.build_messages("\n".join(lines), events_text, session_date),
        schema=CueExtraction, validate=partial(validate_extraction, events=events, turns=turns),
        fallback=CueExtraction, **options,
    )


def extract_session_cues(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    events: Sequence[Event],
    *,
    session_time: datetime | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict | None = None,
    budget: ContextBudget | None = None,
) -> WindowedOutcome[CueExtraction]:
    """The model's cues and person facts for a session (an empty extraction is the fallback).

    A session whose prompt does not fit the budget is sent in windows of turns, each with the events that
    hold its turns; the windows' event keys are mapped back to the session's (``E1..`` over ``events``).
    """
    budget = budget or ContextBudget()
    session_date = session_time.isoformat() if session_time else None
    options = {"method": method, "tags": tags, "metadata": {**(metadata or {}), "prompt_version": prompt.VERSION}}
    overhead = prompt_chars(prompt.build_messages("", "", session_date))

    def size(start: int, end: int) -> int:
        window = turns[start:end]
        shown = [events[i] for i in _window_events(events, window)]
        return overhead + len(_events_text(shown)) + len("\n".join(t.render() for t in window))

    windows = plan_windows(len(turns), size, budget.prompt_chars) or [(0, 0)]
    if len(windows) == 1:
        windows, members = [(0, len(turns))], [list(range(len(events)))]
    else:
        members = [_window_events(events, turns[start:end]) for start, end in windows]
    notes: list[str] = []
    tasks = [
        _window_task(llm, turns[start:end], [events[i] for i in index], session_date, budget, notes, options)
        for (start, end), index in zip(windows, members)
    ]
    outcomes = run_windows(tasks)
    merged = CueExtraction()
    for index, outcome in zip(members, outcomes):
        for item in outcome.output.cues:
            local = int(item.event[1:]) - 1  # validated: a key of this window's events
            merged.cues.append(item.model_copy(update={"event": f"E{index[local] + 1}"}))
        merged.person_facts.extend(outcome.output.person_facts)
    return merge_outcomes(merged if len(outcomes) > 1 else outcomes[0].output, outcomes, notes)
