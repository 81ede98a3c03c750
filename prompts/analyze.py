"""Session analyst prompt: one call segments a session's turns and extracts its facts and memory units.

The reply has one part per layer: ``events`` (the segmenter's), ``facts`` (REAL's fact extractor's) and
``units`` + ``person_facts`` (MRAgent's cue extractor's), each with that role's own schema, so each part is
validated, and falls back, on its own (``agents.session_analyst``). A run that extracts only facts or only
cues asks for those parts alone.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions
from logicmap.prompts.cues import MemoryUnit, PersonFact
from logicmap.prompts.real_extract import RELATION_VOCABULARY, ExtractedFact
from logicmap.prompts.segment import PAPER_GUIDANCE, RECORD_RULES, SegmentedEvent

__all__ = [
    "VERSION",
    "SegmentationWithCues",
    "SegmentationWithFacts",
    "SessionAnalysis",
    "analysis_schema",
    "build_messages",
]

VERSION = "analyze-v2"


class SegmentationWithFacts(BaseModel):
    events: list[SegmentedEvent]
    facts: list[ExtractedFact]


class SegmentationWithCues(BaseModel):
    events: list[SegmentedEvent]
    units: list[MemoryUnit] = Field(default_factory=list)
    person_facts: list[PersonFact] = Field(default_factory=list)


class SessionAnalysis(BaseModel):
    events: list[SegmentedEvent]
    facts: list[ExtractedFact]
    units: list[MemoryUnit] = Field(default_factory=list)
    person_facts: list[PersonFact] = Field(default_factory=list)


def analysis_schema(facts: bool, cues: bool) -> type[BaseModel]:
    """The reply type for the layers a run extracts (at least one of facts and cues)."""
    if facts and cues:
        return SessionAnalysis
    return SegmentationWithFacts if facts else SegmentationWithCues


# The events part gives the segmenter's own guidance (CompassMem's Appendix F.1), word for word, so the
# combined call and the separate segmenter are asked the same (tests/unit/test_paper_trace_compass.py checks
# that they then yield the same events and relations).
_EVENTS = "events: " + PAPER_GUIDANCE + "\n" + RECORD_RULES
_FACTS = (
    "facts: atomic facts (head, relation, tail) about the people and things discussed: where people live and "
    "work, what they like, own, did, plan, and why. One fact per triple; split compound statements. Replace "
    "'I', 'me', 'my' by the speaker's name and 'you' by the other speaker's name. Give the time the fact became "
    "true when the turn states it ('two weeks ago', 'last month'), resolved against the session date; otherwise "
    "leave date empty. Mark hedged statements (maybe, I think, probably, might). "
    f"Relation vocabulary: {RELATION_VOCABULARY}."
)
_CUES = (
    "units: for each statement worth remembering, a memory unit: the turn it comes from; its content rewritten "
    "so it stands alone (replace every pronoun by the name it refers to, 'I' and 'my' by the speaker's name, "
    "keep dates and time phrases); 1-3 short tags saying what it is about; and its cues: keywords as they were "
    "said (names of people, pets and places, dates and time phrases, activities, foods, objects, numbers with "
    "units). Skip small talk.\n- person_facts: lasting facts about people: preferences, attributes, jobs, homes, "
    "relatives, pets, hobbies, each with the turn that states it."
)


def build_messages(
    session_text: str, session_date: str | None, speakers: list[str], *, facts: bool = True, cues: bool = True
) -> list[BaseMessage]:
    parts = [_EVENTS, *([_FACTS] if facts else []), *([_CUES] if cues else [])]
    system = (
        "You analyse one session of a conversation for a long-term memory, in one reply with several parts:\n- "
        + "\n- ".join(parts)
        + "\nEvery part cites the dia ids of the turns it comes from.\n"
        + schema_instructions(analysis_schema(facts, cues))
    )
    human = (
        f"Session date: {session_date or 'unknown'}\nSpeakers: {', '.join(speakers) or 'unknown'}\n"
        f"Turns:\n{session_text}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
