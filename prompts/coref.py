"""Coreference judge prompt: for each (new event, stored event) pair, same event, overlap, or neither."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "CorefVerdict", "CorefVerdicts", "build_messages"]

VERSION = "coref-v1"


class CorefVerdict(BaseModel):
    pair: int = Field(description="The pair number.")
    same_event: bool = Field(description="Both describe the same real-world event.")
    has_overlap: bool = Field(False, description="Different events that are closely related.")
    relation_type: str | None = Field(None, description="When overlapping: the relation from the new to the stored event.")


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
