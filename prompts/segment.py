"""Segmenter prompt: a session's turns -> events with summary, time, participants and cited turns."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["PAPER_GUIDANCE", "RECORD_RULES", "VERSION", "SegmentedEvent", "Segmentation", "build_messages"]

VERSION = "segment-v2"

# CompassMem's Event Extraction Prompt (Appendix F.1), its goals condensed in the paper's words (the full text
# would not leave the combined analyst room for turns in an 8k context); the project adds what
# its records need (every turn cited by one event, times resolved against the session date). The paper's
# count, 6-10 events, is for LoCoMo sessions of about 20 turns; it says nothing of shorter ones, so a short
# session may have fewer (the aggressive combining is the rule that matters).
PAPER_GUIDANCE = (
    "Extract logically coherent events in chronological order, each a complete logical unit. AGGRESSIVELY "
    "COMBINE related micro-events to avoid fragmentation: merge same participants on the same topic, a decision "
    "+ action + completion, temporally close related turns (within 3-5 utterances), aspects of one situation, "
    "follow-ups and clarifications. PRESERVE ALL important details in each summary: outcomes, specific facts, "
    "numbers, dates, places, emotions, conditions, and what shared images show. People involved: at most 3. "
    "Event count: 6-10 comprehensive events (a short session may have fewer); prefer fewer, more detailed events."
)
# What the project's records need besides: each turn is cited once, and times are resolved.
RECORD_RULES = (
    "Every turn belongs to exactly one event; an event covers consecutive turns. Resolve relative times "
    "('yesterday', 'last year', 'two months ago') against the session date."
)


class SegmentedEvent(BaseModel):
    summary: str = Field(
        description="One or two sentences saying what happened, keeping names, numbers, dates, places, "
        "feelings and what shared images show."
    )
    turn_ids: list[str] = Field(description="dia ids of the turns this event comes from, e.g. ['D3:1','D3:2'].")
    participants: list[str] = Field(default_factory=list, description="At most 3 people involved.")
    time_phrase: str | None = Field(
        default=None, description="The words that say when it happened, copied from the turns ('last year', '8 May')."
    )
    date: str | None = Field(
        default=None,
        description="Absolute date YYYY-MM-DD (or YYYY-MM, YYYY) when stated or derivable from the session date.",
    )


class Segmentation(BaseModel):
    events: list[SegmentedEvent]


def build_messages(session_text: str, session_date: str | None) -> list[BaseMessage]:
    system = (
        "You are an expert information extraction system: you split one session of a multi-turn dialog into "
        "meaningful events.\n" + PAPER_GUIDANCE + "\n" + RECORD_RULES + "\n" + schema_instructions(Segmentation)
    )
    human = f"Session date: {session_date or 'unknown'}\nTurns:\n{session_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
