"""Memory-R2 memory distillation prompt: the retrieved memories -> the ids of those that bear on the question.

The answer agent of Memory-R2 first distills the (up to 60) retrieved memories, then answers from what it kept.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["ROLE_MARKER", "VERSION", "MemorySelection", "build_messages"]

VERSION = "r2-distill-v1"

# Words the system prompt always contains: scripted test models route on them.
ROLE_MARKER = "You distill retrieved memories"


class MemorySelection(BaseModel):
    selected: list[str] = Field(
        description="Ids of the memories (e.g. 'F3') needed to answer the question, most useful first; "
        "an empty list when none of them bears on it."
    )


def build_messages(question: str, memories_text: str) -> list[BaseMessage]:
    system = (
        f"{ROLE_MARKER} before a question is answered. You see the question and memories retrieved for it "
        "(each with an id). Keep only the memories that help answer the question: the facts it asks about and "
        "those needed to reason to the answer (dates, people, places, changes over time). Drop the rest. "
        "Use only ids shown.\n" + schema_instructions(MemorySelection)
    )
    human = f"Question: {question}\n\nRetrieved memories:\n{memories_text or '(none)'}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
