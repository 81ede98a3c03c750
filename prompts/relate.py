"""Relation extractor prompt: typed relations between the events of one session."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["LABELS", "VERSION", "ExtractedRelation", "RelationSet", "build_messages"]

VERSION = "relate-v1"

LABELS = (
    "causal",
    "motivation",
    "enablement",
    "temporal_before",
    "temporal_after",
    "part_of",
    "contrast",
    "elaboration",
)


class ExtractedRelation(BaseModel):
    source: str = Field(description="Event id, e.g. 'E1'.")
    target: str = Field(description="Event id, e.g. 'E2'.")
    label: str = Field(description="Relation label, e.g. " + ", ".join(LABELS) + " (other labels allowed).")
    turn_ids: list[str] = Field(default_factory=list, description="dia ids of the turns that support it.")


class RelationSet(BaseModel):
    relations: list[ExtractedRelation]


def build_messages(events_text: str, turns_text: str) -> list[BaseMessage]:
    system = (
        "You find logical relations between the events of one conversation session: why one led to "
        "another (causal, motivation, enablement), real-world time order (temporal_before means the "
        "source happened before the target in the world, not in the conversation), part_of, contrast, "
        "elaboration. Use only the listed event ids; cite the supporting turns.\n"
        + schema_instructions(RelationSet)
    )
    human = f"Events:\n{events_text}\n\nTurns:\n{turns_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
