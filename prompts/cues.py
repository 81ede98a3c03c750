"""Cue extractor prompt (MRAgent): a session's turns -> Cue-Tag-Content units and facts about people.

Each unit is one statement of a turn rewritten to stand alone (pronouns replaced by names, "I" by the
speaker), with short tags and its cues; the reply feeds the Cue-Tag-Content layer (memory/records/cues.py).
``build_paper_messages`` is MRAgent's Dialogue Processing Prompt (Appendix E: every sentence preserved, pronouns
replaced, one concrete tag of at most two words, times normalised to YYYY-MM-DD, a question merged with its answer,
personal information) with its Keyword Extraction Prompt's rules for the cues (``IngestContext.faithful``); the
reply is the same typed ``CueExtraction``. Its "at least ten concrete topics" are not asked: the topic layer is the
clustered one, labelled by the topic abstractor (docs/fidelity.md).
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "PAPER_DIALOGUE_PROCESSING",
    "PAPER_VERSION",
    "VERSION",
    "CueExtraction",
    "CueWord",
    "MemoryUnit",
    "PersonFact",
    "build_messages",
    "build_paper_messages",
]

VERSION = "cues-v2"
PAPER_VERSION = "cues-paper-v1"

# MRAgent, Appendix E: the Dialogue Processing Prompt's task and rules, then the Keyword Extraction Prompt's, word
# for word (the reply format is the typed schema; a sentence is a unit, its keywords its cues).
PAPER_DIALOGUE_PROCESSING = """You are a dialogue processor. Only output valid JSON.
Task: For each sentence in the dialogue:
- Preserve every original sentence.
- Replace all pronouns with explicit entities or noun phrases from context.
- Do not modify verbs, adjectives, or other words.
- Assign a short concrete `tag` (at most two words).
- Normalize time to `YYYY-MM-DD` using `conversation_time`.
- If a question is answered by the next sentence, merge them.
Personal Information: Extract person-related facts into `personal_sentences`. If a fact appears in a sentence, also add a concise normalized version.
ID Rules: `id` must be `origin:number`, where `origin` exactly matches `dia_id`. Do not invent new IDs.
Keywords (the cues of each sentence): extract 2-30 keywords directly from the original text.
- Do not invent, paraphrase, or generalize keywords.
- Only include words or phrases that explicitly appear in the text.
- Do not include inferred or implicit concepts.
- Extract all explicit keywords of the following types if present: entity, topic, verb, time, location, task, event, people."""


class CueWord(BaseModel):
    cue: str = Field(
        description="A keyword as said in the session: a name, place, time, activity or thing (a name, not a pronoun)."
    )
    kind: Literal["person", "place", "entity", "time", "activity", "quantity"] = "entity"


class MemoryUnit(BaseModel):
    turn_id: str = Field(description="dia id of the turn the statement comes from, e.g. 'D1:2'.")
    content: str = Field(
        description="The statement rewritten to stand alone: pronouns replaced by the names they refer to, 'I' by "
        "the speaker's name, e.g. 'Ana adopted Biscuit in May'."
    )
    tags: list[str] = Field(
        default_factory=list, description="1-3 tags of 1-3 words saying what it is about, e.g. 'pet', 'new job'."
    )
    cues: list[CueWord] = Field(default_factory=list, description="The keywords of the statement, names resolved.")


class PersonFact(BaseModel):
    person: str = Field(description="Who the fact is about (a speaker or someone they mention).")
    aspect: str = Field(description="1-2 words: preference, work, home, family, pet, hobby, food, drink, health, ...")
    content: str = Field(description="The fact in one short sentence, e.g. 'Leo's favourite food is sushi'.")
    cues: list[str] = Field(default_factory=list, description="Keywords of the fact as said in the turns.")
    turn_id: str = Field(description="dia id of the turn that states the fact, e.g. 'D1:6'.")


class CueExtraction(BaseModel):
    units: list[MemoryUnit] = Field(default_factory=list)
    person_facts: list[PersonFact] = Field(default_factory=list)


def build_messages(session_text: str, session_date: str | None) -> list[BaseMessage]:
    system = (
        "You index one session of a conversation for later recall. For each statement worth remembering, "
        "write a memory unit: the turn it comes from; its content rewritten so it stands alone (replace "
        "every pronoun by the name it refers to, 'I' and 'my' by the speaker's name, keep dates and time "
        "phrases); 1-3 short tags saying what it is about; and its cues: keywords as they were said (names "
        "of people, pets and places, dates and time phrases, activities, foods, objects, numbers with "
        "units). Then list lasting facts about people: preferences, attributes, jobs, homes, relatives, "
        "pets, hobbies, each with the turn that states it. Skip small talk.\n" + schema_instructions(CueExtraction)
    )
    human = f"Session date: {session_date or 'unknown'}\nTurns:\n{session_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_paper_messages(session_text: str, session_date: str | None) -> list[BaseMessage]:
    """The Dialogue Processing Prompt; each sentence is a unit (``turn_id``: its origin dia id, ``content``: the
    sentence with pronouns replaced, ``tags``: its one tag, ``cues``: its keywords), ``person_facts`` the
    ``personal_sentences``."""
    system = PAPER_DIALOGUE_PROCESSING + "\n" + schema_instructions(CueExtraction)
    human = f"conversation_time: {session_date or 'unknown'}\nDialogue:\n{session_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
