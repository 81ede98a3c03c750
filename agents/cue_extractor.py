"""Cue extractor role: one LLM call per session for MRAgent's cue-tag layer, or the no-LLM extraction.

The model's cues are kept only when they occur verbatim in the session; the heuristic links are
always built as well, so a weak model adds to the layer and never empties it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
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


def extract_session_cues(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    events: Sequence[Event],
    *,
    session_time: datetime | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict | None = None,
) -> RoleOutcome[CueExtraction]:
    """The model's cues and person facts for a session (an empty extraction is the fallback)."""
    events_text = "\n".join(f"{key}: {e.summary[:400]} (turns {', '.join(e.turn_ids)})"
                            for key, e in _event_keys(events).items())
    return run_role(
        llm,
        role="cue_extractor",
        messages=prompt.build_messages(_session_text(turns), events_text,
                                       session_time.isoformat() if session_time else None),
        schema=CueExtraction,
        validate=lambda r: validate_extraction(r, events, turns),
        fallback=CueExtraction,
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
