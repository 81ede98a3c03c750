"""MRAgent's Cue-Tag-Content layer: verbatim cues linked by short tags to events and to facts about people.

This module is the layer's id scheme and record shapes: how a cue is keyed, the ids of cues, tags and
facts about people, and the link an extractor proposes. ``cue_extraction`` finds cues and builds a
session's records without a model; ``cue_index`` answers lookups over a committed snapshot.

Layout of the records. A cue is a keyword as it was said ("Biscuit", "Rua das Flores", "late April",
"pottery class"), one record per normalized text (id ``cue:<key>``). A tag links a cue to a target:

- ``target_kind="event"``: ``target_id`` is an event id, ``tag`` a short label of how the cue figures in
  it (an aspect such as ``pet`` or ``work``, else the cue's kind), ``content`` the sentence it came from,
  ``person`` its speaker;
- ``target_kind="fact"``: a semantic fact about a person (a preference or attribute). ``target_id`` is
  ``pf|<dia id>|<hash>`` (the turn it was stated in, so every fact cites a turn), ``person`` whom it is
  about, ``tag`` its aspect, ``content`` the fact itself. One tag per (cue, fact); the person's own
  name is always one of the cues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from logicmap.memory.language.text import singular
from logicmap.memory.records.records import Cue, Tag, stable_hash

__all__ = [
    "CueKind",
    "CueLayerBatch",
    "CueLink",
    "cue_id",
    "cue_key",
    "fact_source_turn",
    "normalize_cue",
    "personal_fact_id",
    "tag_id",
]

CueKind = Literal["person", "place", "entity", "time", "activity", "quantity"]


@dataclass(frozen=True)
class CueLink:
    """A cue to link to a target, as an extractor (heuristic or LLM) proposes it."""

    cue: str
    kind: str
    target_kind: Literal["event", "fact"]
    target_id: str
    tag: str
    person: str | None = None
    content: str | None = None


@dataclass
class CueLayerBatch:
    """The cue and tag records built for one session."""

    cues: list[Cue] = field(default_factory=list)
    tags: list[Tag] = field(default_factory=list)


def normalize_cue(text: str) -> str:
    """The key a cue is stored by: lowercase words without leading articles or possessive endings."""
    words = []
    for raw in re.findall(r"[\wÀ-ÿ'’-]+", (text or "").lower()):
        word = raw.replace("’", "'")
        word = re.sub(r"'s$", "", word).strip("'-")
        if word:
            words.append(word)
    while words and words[0] in ("the", "a", "an", "my", "his", "her", "their", "our", "your"):
        words.pop(0)
    return " ".join(words)


def cue_key(text: str) -> str:
    """The key a cue is looked up by: the normalized words, singular ("custard tarts" = "custard tart").

    Only plurals fold: "run" and "running" stay two keys, as they are two cues."""
    return " ".join(singular(w) for w in normalize_cue(text).split())


def cue_id(text: str) -> str:
    """Deterministic id of the cue for a text: the same keyword said twice is one cue."""
    key = normalize_cue(text)
    return "cue:" + (key.replace(" ", "_") if len(key) <= 80 else stable_hash(key))


def tag_id(cue: str, target_kind: str, target_id: str, tag: str) -> str:
    return "tag:" + stable_hash(cue, target_kind, target_id, tag.lower(), length=16)


def personal_fact_id(turn_id: str, person: str, aspect: str, content: str) -> str:
    """Id of a fact about a person: the turn it was stated in and a hash of what it says."""
    return f"pf|{turn_id}|{stable_hash(person.lower(), aspect.lower(), content, length=8)}"


def fact_source_turn(fact_id: str) -> str | None:
    """The dia id a personal fact cites (``None`` for ids of another shape)."""
    parts = fact_id.split("|")
    return parts[1] if len(parts) == 3 and parts[0] == "pf" else None
