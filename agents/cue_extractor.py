"""Cue extractor role (MRAgent): one LLM call per session (or window) builds the Cue-Tag-Content units.

The model rewrites each statement to stand alone (pronouns resolved to names) and gives its tags and
cues; cues not said in the session are dropped. A window whose reply stays invalid after one retry gets
the lexical builder's links instead (``memory.indexes.cue_extraction.heuristic_links``), with a recorded fallback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.agents.windowing import (
    ContextBudget,
    WindowedOutcome,
    fit_lines,
    merge_outcomes,
    plan_windows,
    prompt_chars,
    run_windows,
)
from logicmap.memory.indexes.cue_extraction import heuristic_links
from logicmap.memory.records.cues import CueLink, normalize_cue, personal_fact_id
from logicmap.memory.records.records import Event, Turn
from logicmap.prompts import cues as prompt
from logicmap.prompts.cues import CueExtraction

__all__ = [
    "extract_session_cues",
    "links_from_extraction",
    "session_cue_links",
    "validate_extraction",
    "validate_paper_extraction",
    "window_links",
]

# A rewritten statement that still opens with one of these has not resolved who it is about.
_PRONOUNS = frozenset("i me my you your he him his she her hers it its we us our they them their".split())
_FIRST_WORD = re.compile(r"[A-Za-z']+")


def _opening_pronoun(content: str) -> str | None:
    match = _FIRST_WORD.search(content)
    return match.group(0) if match and match.group(0).lower() in _PRONOUNS else None


def validate_extraction(result: CueExtraction, turns: Sequence[Turn]) -> list[str]:
    """Problems a retry can fix: unknown turn ids, empty or unresolved content, units without cues or tags.

    Cues not said in the session are dropped later, not retried."""
    known = {t.dia_id for t in turns}
    problems = []
    bad_turns = sorted(
        {u.turn_id for u in result.units if u.turn_id not in known}
        | {f.turn_id for f in result.person_facts if f.turn_id not in known}
    )
    if bad_turns:
        problems.append(f"unknown turn ids {bad_turns}; valid ids are {sorted(known)}")
    for unit in result.units:
        pronoun = _opening_pronoun(unit.content)
        if not unit.content.strip():
            problems.append(f"the unit of {unit.turn_id} has no content")
        elif pronoun:
            problems.append(f"the unit of {unit.turn_id} starts with '{pronoun}': write the name it refers to")
        if not unit.cues or not [t for t in unit.tags if t.strip()]:
            problems.append(f"the unit of {unit.turn_id} needs 1-3 tags and at least one cue")
    return problems


def validate_paper_extraction(result: CueExtraction, turns: Sequence[Turn]) -> list[str]:
    """``validate_extraction`` and the Dialogue Processing Prompt's own rules: every turn kept (a unit for each),
    one tag of at most two words per unit."""
    problems = validate_extraction(result, turns)
    missing = sorted({t.dia_id for t in turns} - {u.turn_id for u in result.units})
    if missing:
        problems.append(f"preserve every original sentence: no unit for turns {missing}")
    for unit in result.units:
        if len(unit.tags) != 1 or len(unit.tags[0].split()) > 2:
            problems.append(f"the unit of {unit.turn_id} needs one short concrete tag (at most two words)")
    return problems


def links_from_extraction(result: CueExtraction, events: Sequence[Event], turns: Sequence[Turn]) -> list[CueLink]:
    """The extraction as cue links: each unit's cues tagged to the events that hold its turn, with the
    rewritten content; only cues said in the session and turns of the session are kept."""
    by_turn = {t.dia_id: t for t in turns}
    spoken = " " + normalize_cue(" ".join(f"{t.text} {t.image_caption or ''}" for t in turns)) + " "

    def said(text: str) -> bool:
        key = normalize_cue(text)
        return bool(key) and f" {key} " in spoken

    links: list[CueLink] = []
    for unit in result.units:
        turn = by_turn.get(unit.turn_id)
        if turn is None:
            continue
        tags = [t.strip() for t in unit.tags if t.strip()][:3]
        for event in (e for e in events if unit.turn_id in e.turn_ids):
            for cue in (c for c in unit.cues if said(c.cue)):
                links.extend(
                    CueLink(cue.cue, cue.kind, "event", event.id, tag, turn.speaker, unit.content.strip())
                    for tag in tags
                )
    for fact in result.person_facts:
        turn = by_turn.get(fact.turn_id)
        if turn is None or not fact.person.strip() or not fact.content.strip():
            continue
        aspect = fact.aspect.strip().lower() or "attribute"
        fid = personal_fact_id(turn.dia_id, fact.person, aspect, fact.content)
        links.append(CueLink(fact.person, "person", "fact", fid, aspect, fact.person, fact.content))
        for word in fact.cues:
            if said(word) and normalize_cue(word) != normalize_cue(fact.person):
                links.append(CueLink(word, "entity", "fact", fid, aspect, fact.person, fact.content))
    return links


def _window_task(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    session_date: str | None,
    budget: ContextBudget,
    notes: list[str],
    options: dict[str, Any],
    paper: bool = False,
) -> partial[RoleOutcome[CueExtraction]]:
    build = prompt.build_paper_messages if paper else prompt.build_messages
    lines, clipped = fit_lines(
        [t.render() for t in turns],
        lambda shown: prompt_chars(build("\n".join(shown), session_date)),
        budget.prompt_chars,
        labels=[f"turn {t.dia_id}" for t in turns],
        role="cue_extractor",
    )
    notes.extend(clipped)
    validate = validate_paper_extraction if paper else validate_extraction
    return partial(
        run_role,
        llm,
        role="cue_extractor",
        messages=build("\n".join(lines), session_date),
        schema=CueExtraction,
        validate=partial(validate, turns=turns),
        fallback=CueExtraction,
        **options,
    )


def _run(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    session_time: datetime | None,
    method: str,
    tags: Sequence[str],
    metadata: dict[str, Any] | None,
    budget: ContextBudget | None,
    paper: bool = False,
) -> tuple[list[tuple[int, int]], list[RoleOutcome[CueExtraction]], list[str]]:
    """The windows of the session (turn ranges), each window's outcome, and notes on clipped turns (``paper``: the
    Dialogue Processing Prompt, ``IngestContext.faithful``)."""
    budget = budget or ContextBudget()
    session_date = session_time.isoformat() if session_time else None
    version = prompt.PAPER_VERSION if paper else prompt.VERSION
    options: dict[str, Any] = {
        "method": method,
        "tags": tags,
        "metadata": {**(metadata or {}), "prompt_version": version},
    }
    overhead = prompt_chars((prompt.build_paper_messages if paper else prompt.build_messages)("", session_date))
    windows = plan_windows(
        len(turns),
        lambda start, end: overhead + len("\n".join(t.render() for t in turns[start:end])),
        budget.prompt_chars,
    ) or [(0, len(turns))]
    notes: list[str] = []
    tasks = [_window_task(llm, turns[start:end], session_date, budget, notes, options, paper) for start, end in windows]
    return windows, run_windows(tasks), notes


def extract_session_cues(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    *,
    session_time: datetime | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    budget: ContextBudget | None = None,
) -> WindowedOutcome[CueExtraction]:
    """The model's units and person facts for a session (an empty extraction where a window fell back).

    A session whose prompt does not fit the budget is sent in windows of turns."""
    _, outcomes, notes = _run(llm, turns, session_time, method, tags, metadata, budget)
    merged = CueExtraction()
    for outcome in outcomes:
        merged.units.extend(outcome.output.units)
        merged.person_facts.extend(outcome.output.person_facts)
    return merge_outcomes(merged if len(outcomes) > 1 else outcomes[0].output, outcomes, notes)


def session_cue_links(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    events: Sequence[Event],
    *,
    session_time: datetime | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    budget: ContextBudget | None = None,
    paper: bool = False,
) -> tuple[list[CueLink], WindowedOutcome[CueExtraction]]:
    """The session's cue links from the model; a window that fell back gets the lexical builder's links.

    Returns the links and the merged outcome (cost, each window's ``FallbackRecord``, notes)."""
    windows, outcomes, notes = _run(llm, turns, session_time, method, tags, metadata, budget, paper)
    extractions = [None if o.fallback is not None else o.output for o in outcomes]
    merged = CueExtraction()
    for extraction in extractions:
        if extraction is not None:
            merged.units.extend(extraction.units)
            merged.person_facts.extend(extraction.person_facts)
    return window_links(turns, events, windows, extractions), merge_outcomes(merged, outcomes, notes)


def window_links(
    turns: Sequence[Turn],
    events: Sequence[Event],
    windows: Sequence[tuple[int, int]],
    extractions: Sequence[CueExtraction | None],
) -> list[CueLink]:
    """The session's cue links, window by window: the model's extraction, or the lexical builder's links for a
    window whose extraction fell back (``None``)."""
    links: list[CueLink] = []
    for (start, end), extraction in zip(windows, extractions):
        window = list(turns[start:end])
        if extraction is None:
            ids = {t.dia_id for t in window}
            links.extend(heuristic_links(window, [e for e in events if ids.intersection(e.turn_ids)]))
        else:
            links.extend(links_from_extraction(extraction, events, window))
    return links
