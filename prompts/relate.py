"""Relation extractor prompt: typed relations between the events of one session."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["LABELS", "VERSION", "ExtractedRelation", "RelationSet", "build_messages"]

VERSION = "relate-v2"

# The paper's examples of relation types (Appendix F.1): "These are examples, not a closed set."
LABELS = (
    "causal",
    "motivation",
    "enablement",
    "follow_up",
    "temporal_before",
    "temporal_after",
    "contrast",
    "part_of",
    "parallel",
    "elaboration",
)


class ExtractedRelation(BaseModel):
    source: str = Field(description="Event id, e.g. 'E1'.")
    target: str = Field(description="Event id, e.g. 'E2'.")
    label: str = Field(
        description="A SHORT, free-form label that best characterizes the link, e.g. "
        + ", ".join(LABELS)
        + " (examples, not a closed set)."
    )
    turn_ids: list[str] = Field(default_factory=list, description="dia ids of the turns that support it.")


class RelationSet(BaseModel):
    relations: list[ExtractedRelation]


def build_messages(events_text: str, turns_text: str) -> list[BaseMessage]:
    # CompassMem's Event Relation Extraction Prompt (Appendix F.1), in the paper's words.
    system = (
        "You are an expert information extraction system. Given a list of extracted events from a dialog, identify "
        "meaningful pairwise relations between them (logical relations of one session's events).\n"
        "Goals:\n"
        "- Consider ALL unordered pairs of events within the same session (not only adjacent events).\n"
        "- Extract pairwise event relations with a SHORT, free-form label in type that best characterizes the link.\n"
        f"- Relation types can include: {', '.join(LABELS)}. These are examples, not a closed set.\n"
        "- Add relations only when meaningful. Prefer specific semantic links over trivial temporal ordering.\n"
        "- It is acceptable to have no temporal edges if they add no insight.\n"
        "Critical guidelines:\n"
        "- IMPORTANT: For temporal relations (follow_up, temporal_before, temporal_after), base them on the ACTUAL "
        "TIME when events occurred in the real world, NOT on when they are described in the dialog. Focus on the "
        "chronological sequence of reality.\n"
        "- For each relation, cite minimal evidence utterance ids that support the linkage between the two events.\n"
        "Use only the listed event ids.\n" + schema_instructions(RelationSet)
    )
    human = f"Events:\n{events_text}\n\nTurns:\n{turns_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
