"""Memory-R2 fact extractor prompt: a session's turns -> self-contained third-person facts citing turns.

The extractor and the memory manager are two roles of one chat model; only the role prompt differs.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["ROLE_MARKER", "VERSION", "ExtractedFact", "FactExtraction", "build_messages"]

VERSION = "r2-extract-v1"

# Words the system prompt always contains: scripted test models route on them.
ROLE_MARKER = "You are the fact extractor"


class ExtractedFact(BaseModel):
    text: str = Field(
        description="One self-contained fact in the third person with full names (never 'I', 'my', 'you'), "
        "keeping numbers, dates, places and names, e.g. 'Maya adopted a golden retriever puppy named Biscuit'."
    )
    turn_ids: list[str] = Field(description="dia ids of the turns the fact comes from, e.g. ['D1:1'].")


class FactExtraction(BaseModel):
    facts: list[ExtractedFact]


def build_messages(turns_text: str, session_date: str | None, speakers: list[str]) -> list[BaseMessage]:
    system = (
        f"{ROLE_MARKER} of a long-term memory. From one session of a conversation, write the facts "
        "worth remembering about the people in it: events, plans, preferences, relationships, jobs, "
        "places, times. Each fact is one short sentence that makes sense on its own, in the third "
        "person with the speaker's name instead of pronouns, and cites the turns it comes from. "
        "Resolve relative times against the session date. Skip greetings and small talk.\n"
        + schema_instructions(FactExtraction)
    )
    who = ", ".join(speakers) if speakers else "unknown"
    human = f"Speakers: {who}\nSession date: {session_date or 'unknown'}\nTurns:\n{turns_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
