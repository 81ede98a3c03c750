"""REAL fact extractor prompt: one session's turns -> atomic, temporal, confidence-rated facts."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["RELATION_VOCABULARY", "VERSION", "ExtractedFact", "FactExtraction", "build_messages"]

VERSION = "real-extract-v1"

# Canonical relation names the extractor is asked to prefer: the fact layer knows their cardinality.
RELATION_VOCABULARY = (
    "lives_in, works_at, occupation, married_to, age, favourite_food, favourite_drink, studies_at "
    "(one value at a time); likes, dislikes, visited, has_pet, adopted, friend_of, sister, brother, hobby, "
    "owns, drinks, wants, plans, started, finished, signed_up_for, is_a, helped, decided_because "
    "(several values at once)"
)


class ExtractedFact(BaseModel):
    head: str = Field(
        description="The entity the fact is about, by name (the speaker's name for 'I'), never a pronoun."
    )
    relation: str = Field(description="A short snake_case relation, preferably from the vocabulary, e.g. lives_in.")
    tail: str = Field(description="The value: a name, place, thing or short phrase, never a pronoun.")
    turn_ids: list[str] = Field(description="dia ids of the turns that state it, e.g. ['D4:1'].")
    intent: Literal["FACT", "CAUSAL", "TEMPORAL", "CONTRAST", "EVOLUTION"] = Field(
        default="FACT",
        description="FACT: a plain attribute; CAUSAL: a reason or consequence; TEMPORAL: anchored to a time; "
        "CONTRAST: a difference or negation; EVOLUTION: a change from an earlier state.",
    )
    hedged: bool = Field(
        default=False, description="True when stated with doubt: maybe, I think, probably, might, planning."
    )
    confidence: float | None = Field(
        default=None, description="0..1 how certain the statement is (assertions about 0.9)."
    )
    time_phrase: str | None = Field(default=None, description="Words saying when it became true, copied from the turn.")
    date: str | None = Field(
        default=None, description="YYYY-MM-DD, YYYY-MM or YYYY when it became true, if stated or derivable."
    )
    ended: bool = Field(
        default=False, description="True when the turn says the fact stopped being true ('I no longer ...')."
    )
    single_valued: bool | None = Field(
        default=None,
        description="For a relation outside the vocabulary: true if the head can have only one value at a time.",
    )


class FactExtraction(BaseModel):
    facts: list[ExtractedFact]


def build_messages(session_text: str, session_date: str | None, speakers: list[str]) -> list[BaseMessage]:
    system = (
        "You are the REAL fact extractor. From one session of a conversation, extract atomic facts "
        "(head, relation, tail) about the people and things discussed: where people live and work, what "
        "they like, own, did, plan, and why. One fact per triple; split compound statements. Replace 'I', "
        "'me', 'my' by the speaker's name and 'you' by the other speaker's name. Give the time the fact "
        "became true when the turn states it ('two weeks ago', 'last month'), resolved against the session "
        "date; otherwise leave date empty. Mark hedged statements (maybe, I think, probably, might). "
        f"Relation vocabulary: {RELATION_VOCABULARY}.\n" + schema_instructions(FactExtraction)
    )
    human = (
        f"Session date: {session_date or 'unknown'}\nSpeakers: {', '.join(speakers) or 'unknown'}\n"
        f"Turns:\n{session_text}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
