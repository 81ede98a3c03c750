"""Coreference judge prompt: for each (new event, stored event) pair, same event, overlap, or neither.

``build_paper_messages`` is CompassMem's Event Coreference & Overlap Prompt (Appendix F.1) word for word, one
pair per call (its four criteria and its ``reasoning`` field), used by ``IngestContext.faithful``; the reply is
the typed ``PaperCorefVerdict`` (the paper's JSON keys)."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "PAPER_COREF",
    "PAPER_VERSION",
    "VERSION",
    "CorefVerdict",
    "CorefVerdicts",
    "PaperCorefVerdict",
    "build_messages",
    "build_paper_messages",
]

VERSION = "coref-v1"
PAPER_VERSION = "coref-paper-v1"

# CompassMem, Appendix F.1, "Event Coreference & Overlap Prompt", word for word up to its output keys (the reply
# format is the typed schema below, whose fields are the paper's keys).
PAPER_COREF = """You are an expert at analyzing events and determining if they refer to the same real-world occurrence or have significant overlap.

Given two event descriptions extracted from different dialog sessions, determine:
1. Whether they describe the SAME event (same occurrence at the same time).
2. Whether they have SIGNIFICANT OVERLAP (mention or relate to the same real-world situation/topic).

Consider these factors:
- Do they involve the same people/participants?
- Do they describe the same actions, situations, or topics?
- Do they have compatible time references?
- Would merging their information create a more complete picture of ONE event?"""


class CorefVerdict(BaseModel):
    pair: int = Field(description="The pair number.")
    same_event: bool = Field(description="Both describe the same real-world event.")
    has_overlap: bool = Field(False, description="Different events that are closely related.")
    relation_type: str | None = Field(
        None, description="When overlapping: the relation from the new to the stored event."
    )


class CorefVerdicts(BaseModel):
    verdicts: list[CorefVerdict]


def build_messages(pairs_text: str) -> list[BaseMessage]:
    system = (
        "For each numbered pair of a NEW event and a STORED event from the same person's memory, decide "
        "whether they are the same real-world event (then they will be merged), different but related "
        "(give the relation type, e.g. elaboration, causal, temporal_after), or unrelated. Give one "
        "verdict per pair.\n" + schema_instructions(CorefVerdicts)
    )
    return [SystemMessage(content=system), HumanMessage(content=pairs_text)]


class PaperCorefVerdict(BaseModel):
    """The paper's output keys: same_event, has_overlap, relation_type, reasoning."""

    same_event: bool = Field(description="true if they are the same event")
    has_overlap: bool = Field(description="true if they refer to the same situation")
    relation_type: str | None = Field(None, description="suggest relation type if overlap")
    reasoning: str = Field("", description="brief explanation")


def build_paper_messages(new_text: str, stored_text: str) -> list[BaseMessage]:
    system = PAPER_COREF + "\n\nOutput a JSON object with these exact keys.\n" + schema_instructions(PaperCorefVerdict)
    human = f"Event 1 (new session):\n{new_text}\n\nEvent 2 (stored):\n{stored_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
