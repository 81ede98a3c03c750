"""Segmenter prompt: a session's turns -> events with summary, time, participants and cited turns."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "SegmentedEvent", "Segmentation", "build_messages"]

VERSION = "segment-v1"


class SegmentedEvent(BaseModel):
    summary: str = Field(
        description="One or two sentences saying what happened, keeping names, numbers, dates, places, "
        "feelings and what shared images show."
    )
    turn_ids: list[str] = Field(description="dia ids of the turns this event comes from, e.g. ['D3:1','D3:2'].")
    participants: list[str] = Field(default_factory=list, description="At most 3 people involved.")
    time_phrase: str | None = Field(
        None, description="The words that say when it happened, copied from the turns ('last year', '8 May')."
    )
    date: str | None = Field(
        None, description="Absolute date YYYY-MM-DD (or YYYY-MM, YYYY) when stated or derivable from the session date."
    )


class Segmentation(BaseModel):
    events: list[SegmentedEvent]


def build_messages(session_text: str, session_date: str | None) -> list[BaseMessage]:
    system = (
        "You split one session of a conversation into events: coherent things that happened or were "
        "discussed. Every turn belongs to exactly one event; an event covers consecutive turns. "
        "Resolve relative times ('yesterday', 'last year', 'two months ago') against the session date.\n"
        + schema_instructions(Segmentation)
    )
    human = f"Session date: {session_date or 'unknown'}\nTurns:\n{session_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
