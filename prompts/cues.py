"""Cue extractor prompt: a session's turns and events -> verbatim cues with short tags, and facts about people.

One call per session; the reply feeds MRAgent's Cue-Tag-Content layer (memory/cues.py).
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "CueExtraction", "EventCue", "PersonFact", "build_messages"]

VERSION = "cues-v1"


class EventCue(BaseModel):
    cue: str = Field(description="A keyword copied verbatim from the turns: a name, place, time, activity or thing.")
    kind: Literal["person", "place", "entity", "time", "activity", "quantity"] = "entity"
    event: str = Field(description="Key of the event the cue belongs to, e.g. 'E2'.")
    tag: str = Field(description="1-3 words saying how the cue figures in the event, e.g. 'pet', 'new job', 'race time'.")


class PersonFact(BaseModel):
    person: str = Field(description="Who the fact is about (a speaker or someone they mention).")
    aspect: str = Field(description="1-2 words: preference, work, home, family, pet, hobby, food, drink, health, ...")
    content: str = Field(description="The fact in one short sentence, e.g. 'Leo's favourite food is sushi'.")
    cues: list[str] = Field(default_factory=list, description="Keywords of the fact copied verbatim from the turns.")
    turn_id: str = Field(description="dia id of the turn that states the fact, e.g. 'D1:6'.")


class CueExtraction(BaseModel):
    cues: list[EventCue] = Field(default_factory=list)
    person_facts: list[PersonFact] = Field(default_factory=list)


def build_messages(session_text: str, events_text: str, session_date: str | None) -> list[BaseMessage]:
    system = (
        "You index one session of a conversation for later recall. List the cues of each event: "
        "keywords copied exactly as they were said (names of people, pets and places, dates and time "
        "phrases, activities, foods, objects, numbers with units), each with the event key it belongs "
        "to and a short tag (1-3 words) saying what role it plays there. Then list lasting facts about "
        "people: preferences, attributes, jobs, homes, relatives, pets, hobbies, each with the turn "
        "that states it. Skip small talk.\n" + schema_instructions(CueExtraction)
    )
    human = f"Session date: {session_date or 'unknown'}\nEvents:\n{events_text}\nTurns:\n{session_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
