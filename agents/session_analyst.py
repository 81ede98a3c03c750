"""Session analyst role: one call per window segments a session and extracts its facts and memory units.

One typed reply (``prompts.analyze``) stands for three roles: the segmenter's events, REAL's facts and MRAgent's
memory units. Each part is validated by its own role's rules; a part still invalid after one retry uses that
role's fallback (change points, the fact patterns, the lexical cue builder) and records a fallback under that
role's name, while the reply's other parts are kept. The facts and cue parts travel to the ingest's facts and
cues nodes as ``SessionLayers``, which build the records once the session's events are fused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from logicmap.agents.base import Cost, FallbackRecord, PartsOutcome, RoleOutcome, RolePart, run_role_parts
from logicmap.agents.cue_extractor import validate_extraction as validate_cues
from logicmap.agents.fact_extractor import merge_extractions, pattern_extraction
from logicmap.agents.fact_extractor import validate_extraction as validate_facts
from logicmap.agents.segmenter import (
    changepoint_segments,
    complete_segmentation,
    segment_windows,
    validate_segmentation,
)
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
from logicmap.prompts import analyze as prompt
from logicmap.prompts.cues import CueExtraction, MemoryUnit, PersonFact
from logicmap.prompts.real_extract import FactExtraction
from logicmap.prompts.segment import Segmentation

__all__ = [
    "MIN_TURN_ROOM",
    "ROLE",
    "CueWindow",
    "SessionLayers",
    "analysis_windows",
    "analyze_session",
    "combined_pays",
]

ROLE = "session_analyst"
SEGMENTER, FACTS, CUES = "segmenter", "fact_extractor", "cue_extractor"
MIN_TURN_ROOM = 1000  # characters of turns a combined prompt must leave room for, else the roles run separately


class CueWindow(BaseModel):
    """A window of the session's turns (``[start, end)``) and the model's cue extraction for it."""

    start: int
    end: int
    extraction: CueExtraction | None = None
    """None: the window's cue part fell back (the lexical builder links its turns)."""


class SessionLayers(BaseModel):
    """The facts and cue parts of a session's analysis, for the ingest's facts and cues nodes."""

    facts: FactExtraction | None = None
    fact_fallbacks: list[FallbackRecord] = Field(default_factory=list)
    cue_windows: list[CueWindow] | None = None
    cue_fallbacks: list[FallbackRecord] = Field(default_factory=list)

    def renamed(self, moved: Mapping[str, str]) -> SessionLayers:
        """The layers with the session's turn ids renamed (a rebase chose new ids for some turns)."""
        if not moved:
            return self
        layers = self.model_copy(deep=True)
        for fact in layers.facts.facts if layers.facts else []:
            fact.turn_ids = [moved.get(t, t) for t in fact.turn_ids]
        for window in layers.cue_windows or []:
            items: list[MemoryUnit | PersonFact] = [
                *(window.extraction.units if window.extraction else []),
                *(window.extraction.person_facts if window.extraction else []),
            ]
            for item in items:
                item.turn_id = moved.get(item.turn_id, item.turn_id)
        return layers


def _overhead(session_date: str | None, speakers: list[str], facts: bool, cues: bool) -> int:
    return prompt_chars(prompt.build_messages("", session_date, speakers, facts=facts, cues=cues))


def analysis_windows(
    turns: Sequence[Turn], session_date: str | None, budget: ContextBudget, *, facts: bool, cues: bool
) -> list[tuple[int, int]]:
    """The turn windows of a combined call: its prompt is larger and its reply holds one part per layer."""
    room = ContextBudget(budget.context_tokens, reply_parts=1 + facts + cues).prompt_chars
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    overhead = _overhead(session_date, speakers, facts, cues)
    ends = np.cumsum([0, *(len(t.render()) + 1 for t in turns)])
    windows = plan_windows(
        len(turns),
        lambda start, end: overhead + int(ends[end] - ends[start]) - 1,
        room,
        cut_ok=lambda i: not turns[i].answers(turns[i - 1]),
    )
    return windows or [(0, 0)]


def combined_pays(
    turns: Sequence[Turn], session_date: str | None, budget: ContextBudget, *, facts: bool, cues: bool
) -> bool:
    """Whether the combined prompt fits the budget with room for turns (``MIN_TURN_ROOM``) and makes no more
    calls than the separate roles (each of which needs at least the segmenter's windows): false for a context
    too small for its instructions, or a session so long that its smaller windows cost more calls."""
    room = ContextBudget(budget.context_tokens, reply_parts=1 + facts + cues).prompt_chars
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    if _overhead(session_date, speakers, facts, cues) + MIN_TURN_ROOM > room:
        return False
    combined = len(analysis_windows(turns, session_date, budget, facts=facts, cues=cues))
    return combined <= (1 + facts + cues) * len(segment_windows(turns, session_date, budget))


def _parts(turns: Sequence[Turn], vectors: np.ndarray, speakers: list[str], facts: bool, cues: bool) -> list[RolePart]:
    parts = [
        RolePart(
            SEGMENTER,
            Segmentation,
            partial(changepoint_segments, turns, vectors),
            partial(validate_segmentation, turns=turns),
        )
    ]
    if facts:
        parts.append(
            RolePart(
                FACTS,
                FactExtraction,
                partial(pattern_extraction, turns, speakers),
                partial(validate_facts, turns=turns),
            )
        )
    if cues:
        parts.append(RolePart(CUES, CueExtraction, CueExtraction, partial(validate_cues, turns=turns)))
    return parts


def _window_task(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    vectors: np.ndarray,
    session_date: str | None,
    speakers: list[str],
    budget: ContextBudget,
    notes: list[str],
    options: dict[str, Any],
) -> partial[PartsOutcome]:
    facts, cues = options["facts"], options["cues"]
    room = ContextBudget(budget.context_tokens, reply_parts=1 + facts + cues).prompt_chars
    lines, clipped = fit_lines(
        [t.render() for t in turns],
        lambda shown: prompt_chars(
            prompt.build_messages("\n".join(shown), session_date, speakers, facts=facts, cues=cues)
        ),
        room,
        labels=[f"turn {t.dia_id}" for t in turns],
        role=f"{ROLE} ({SEGMENTER})",
    )
    notes.extend(clipped)
    return partial(
        run_role_parts,
        llm,
        role=ROLE,
        messages=prompt.build_messages("\n".join(lines), session_date, speakers, facts=facts, cues=cues),
        schema=prompt.analysis_schema(facts, cues),
        parts=_parts(turns, vectors, speakers, facts, cues),
        method=options["method"],
        tags=options["tags"],
        metadata=options["metadata"],
    )


def _part_outcomes(outcomes: Sequence[PartsOutcome], role: str) -> list[RoleOutcome[Any]]:
    """One role's outcome per window (the cost stays with the segmentation, which carries the calls)."""
    return [
        RoleOutcome(
            output=o.outputs[role],
            cost=Cost(),
            attempts=o.attempts,
            fallback=next((f for f in o.fallbacks if f.role == role), None),
        )
        for o in outcomes
    ]


def analyze_session(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    vectors: np.ndarray,
    *,
    session_time: datetime | None,
    facts: bool = True,
    cues: bool = True,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    budget: ContextBudget | None = None,
) -> tuple[WindowedOutcome[Segmentation], SessionLayers]:
    """The session's events (as ``segmenter.segment_session`` gives them, with every call's cost) and its
    facts and cue parts, from one combined call per window."""
    budget = budget or ContextBudget()
    session_date = session_time.isoformat() if session_time else None
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    options: dict[str, Any] = {
        "method": method,
        "tags": tags,
        "facts": facts,
        "cues": cues,
        "metadata": {**(metadata or {}), "prompt_version": prompt.VERSION},
    }
    windows = analysis_windows(turns, session_date, budget, facts=facts, cues=cues)
    notes: list[str] = []
    tasks = [
        _window_task(llm, turns[start:end], vectors[start:end], session_date, speakers, budget, notes, options)
        for start, end in windows
    ]
    outcomes = run_windows(tasks)
    parts = _part_outcomes(outcomes, SEGMENTER)
    segmentation = merge_outcomes(Segmentation(events=[e for p in parts for e in p.output.events]), parts, notes)
    segmentation.output = complete_segmentation(segmentation.output, turns, session_time)
    segmentation.cost = sum((o.cost for o in outcomes), Cost())
    layers = SessionLayers()
    if facts:
        parts = _part_outcomes(outcomes, FACTS)
        extraction = parts[0].output if len(parts) == 1 else merge_extractions([p.output for p in parts])
        merged = merge_outcomes(extraction, parts)
        layers.facts, layers.fact_fallbacks = merged.output, merged.fallbacks
    if cues:
        parts = _part_outcomes(outcomes, CUES)
        layers.cue_windows = [
            CueWindow(start=start, end=end, extraction=None if p.fallback else p.output)
            for (start, end), p in zip(windows, parts)
        ]
        layers.cue_fallbacks = merge_outcomes(CueExtraction(), parts).fallbacks
    return segmentation, layers
