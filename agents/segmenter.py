"""Segmenter role: a session's turns -> events. LLM with validation, or embedding change points.

The change-point segmenter is both the LLM role's fallback and the no-LLM policy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

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
from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.language.timeparse import find_time_phrases, out_of_range_phrases, resolve_relative
from logicmap.memory.records.records import Turn
from logicmap.prompts import segment as prompt
from logicmap.prompts.segment import Segmentation, SegmentedEvent

__all__ = [
    "changepoint_segments",
    "complete_segmentation",
    "finalize_times",
    "render_turns",
    "segment_session",
    "segment_windows",
    "time_phrase_notes",
    "turns_summary",
    "validate_segmentation",
]

_DATE_RE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


def render_turns(turns: Sequence[Turn]) -> str:
    return "\n".join(t.render() for t in turns)


def turns_summary(turns: Sequence[Turn]) -> str:
    """The no-LLM policy's summary of an event: its turns as they were said."""
    return " ".join(
        f"{t.speaker}: {t.text}" + (f" [image: {t.image_caption}]" if t.image_caption else "") for t in turns
    )


def changepoint_segments(
    turns: Sequence[Turn], vectors: np.ndarray, *, min_size: int = 2, max_size: int = 4
) -> Segmentation:
    """Deterministic segmentation: cut where consecutive turns' similarity drops below mean - 0.5 sd.

    Segments keep between ``min_size`` and ``max_size`` turns (a short session may give one segment).
    A question and the other speaker's reply (an adjacency pair) stay in one segment, which may then
    hold ``max_size + 1`` turns: the reply ("A vintage film camera.") means little without the question.
    """
    n = len(turns)
    if n == 0:
        return Segmentation(events=[])
    unit = normalize(np.asarray(vectors, dtype=np.float32))
    sims = np.array([float(unit[i] @ unit[i + 1]) for i in range(n - 1)]) if n > 1 else np.array([])
    threshold = float(sims.mean() - 0.5 * sims.std()) if sims.size else 0.0
    groups: list[list[int]] = [[0]]
    for i in range(1, n):
        current = groups[-1]
        cut = sims[i - 1] < threshold and len(current) >= min_size
        if turns[i].answers(turns[i - 1]) and len(current) <= max_size:
            current.append(i)
        elif cut or len(current) >= max_size:
            groups.append([i])
        else:
            current.append(i)
    if len(groups) > 1 and len(groups[-1]) < min_size and len(groups[-2]) + len(groups[-1]) <= max_size + 1:
        groups[-2].extend(groups.pop())
    events = []
    for group in groups:
        members = [turns[i] for i in group]
        events.append(
            SegmentedEvent(
                summary=turns_summary(members),
                turn_ids=[t.dia_id for t in members],
                participants=list(dict.fromkeys(t.speaker for t in members)),
            )
        )
    return Segmentation(events=events)


def validate_segmentation(result: Segmentation, turns: Sequence[Turn]) -> list[str]:
    """Problems a retry can fix: unknown turn ids, empty events, malformed dates."""
    known = {t.dia_id for t in turns}
    problems: list[str] = []
    if turns and not result.events:
        problems.append("no events: every session has at least one event")
    for i, event in enumerate(result.events):
        if not event.summary.strip():
            problems.append(f"event {i}: empty summary")
        if not event.turn_ids:
            problems.append(f"event {i}: cites no turn ids")
        unknown = [t for t in event.turn_ids if t not in known]
        if unknown:
            problems.append(f"event {i}: unknown turn ids {unknown}; valid ids are {sorted(known)}")
        if event.date and not _DATE_RE.match(event.date.strip()):
            problems.append(f"event {i}: date {event.date!r} is not YYYY-MM-DD, YYYY-MM or YYYY")
        if len(event.participants) > 3:
            problems.append(f"event {i}: at most 3 participants")
    return problems


def _cover_all_turns(result: Segmentation, turns: Sequence[Turn]) -> Segmentation:
    """Turns no event cites join the event of the nearest earlier cited turn, so no turn is orphaned."""
    order = {t.dia_id: i for i, t in enumerate(turns)}
    events = [e.model_copy(deep=True) for e in result.events]
    for e in events:
        e.turn_ids = sorted(dict.fromkeys(e.turn_ids), key=lambda t: order[t])
    owner = {t: i for i, e in enumerate(events) for t in e.turn_ids}
    for turn in turns:
        if turn.dia_id in owner:
            continue
        earlier = [owner[t.dia_id] for t in turns[: order[turn.dia_id]] if t.dia_id in owner]
        target = earlier[-1] if earlier else 0
        events[target].turn_ids.append(turn.dia_id)
        events[target].turn_ids.sort(key=lambda t: order[t])
        owner[turn.dia_id] = target
    return Segmentation(events=events)


def finalize_times(result: Segmentation, turns: Sequence[Turn], session_time: datetime | None) -> Segmentation:
    """Resolve each event's time phrase against the session date (a phrase is looked for in its turns)."""
    by_id = {t.dia_id: t for t in turns}
    events = []
    for event in result.events:
        phrase = event.time_phrase
        if not phrase:
            found = find_time_phrases(" ".join(by_id[t].text for t in event.turn_ids if t in by_id))
            phrase = found[0] if found else None
        date = event.date.strip() if event.date and _DATE_RE.match(event.date.strip()) else None
        if date is None and phrase:
            date = resolve_relative(phrase, session_time)
        events.append(event.model_copy(update={"time_phrase": phrase, "date": date}))
    return Segmentation(events=events)


def complete_segmentation(result: Segmentation, turns: Sequence[Turn], session_time: datetime | None) -> Segmentation:
    """The windows' events made whole: every turn cited (an orphan joins the event before it), times resolved."""
    return finalize_times(_cover_all_turns(result, turns), turns, session_time)


def segment_windows(turns: Sequence[Turn], session_date: str | None, budget: ContextBudget) -> list[tuple[int, int]]:
    """The turn windows a session is segmented in (one when its prompt fits the budget)."""
    lines = [t.render() for t in turns]
    overhead = prompt_chars(prompt.build_messages("", session_date))
    ends = np.cumsum([0, *(len(line) + 1 for line in lines)])
    windows = plan_windows(
        len(turns),
        lambda start, end: overhead + int(ends[end] - ends[start]) - 1,
        budget.prompt_chars,
        cut_ok=lambda i: not turns[i].answers(turns[i - 1]),
    )
    return windows or [(0, 0)]


def _window_messages(
    turns: Sequence[Turn], session_date: str | None, budget: ContextBudget, notes: list[str]
) -> list[BaseMessage]:
    """A window's prompt; a turn too large for any window is shown clipped (and noted)."""
    lines, clipped = fit_lines(
        [t.render() for t in turns],
        lambda shown: prompt_chars(prompt.build_messages("\n".join(shown), session_date)),
        budget.prompt_chars,
        labels=[f"turn {t.dia_id}" for t in turns],
        role="segmenter",
    )
    notes.extend(clipped)
    return prompt.build_messages("\n".join(lines), session_date)


def time_phrase_notes(turns: Sequence[Turn], session_time: datetime | None) -> list[str]:
    """One note per turn whose time phrases name no date in years 1-9999 at the session date ("99999999 days
    ago", "tomorrow" on 31 December 9999): the phrases are dropped, not saturated, and the report says so."""
    notes = []
    for turn in turns:
        dropped = out_of_range_phrases(turn.text, session_time)
        if dropped:
            when = session_time.date().isoformat() if session_time else "undated"
            more = f" (and {len(dropped) - 1} more)" if len(dropped) > 1 else ""
            notes.append(
                f"dates: turn {turn.dia_id}: time phrase {dropped[0][:60]!r}{more} names no date in "
                f"years 1-9999 at session date {when}; dropped"
            )
    return notes


def segment_session(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    vectors: np.ndarray,
    *,
    session_time: datetime | None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    budget: ContextBudget | None = None,
) -> WindowedOutcome[Segmentation]:
    """Events of a session, segmented in windows that fit the context budget and concatenated in order.

    Without a model (or after a failed retry) a window is segmented at embedding change points.
    """
    budget = budget or ContextBudget()
    session_date = session_time.isoformat() if session_time else None
    options: dict[str, Any] = {
        "method": method,
        "tags": tags,
        "metadata": {**(metadata or {}), "prompt_version": prompt.VERSION},
    }
    notes: list[str] = []
    windows = segment_windows(turns, session_date, budget)
    tasks = [
        partial(
            run_role,
            llm,
            role="segmenter",
            messages=_window_messages(turns[start:end], session_date, budget, notes),
            schema=Segmentation,
            validate=partial(validate_segmentation, turns=turns[start:end]),
            fallback=partial(changepoint_segments, turns[start:end], vectors[start:end]),
            **options,
        )
        for start, end in windows
    ]
    outcomes = run_windows(tasks)
    merged = Segmentation(events=[event for outcome in outcomes for event in outcome.output.events])
    outcome = merge_outcomes(merged, outcomes, notes)
    outcome.output = complete_segmentation(outcome.output, turns, session_time)
    return outcome
