"""Forward baseline prompt: self-reflection on a draft answer -> sufficient, or a follow-up query."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["SYSTEM_MARKER", "VERSION", "Reflection", "build_messages"]

VERSION = "forward-reflect-v1"
SYSTEM_MARKER = "You check whether retrieved memories suffice to answer a question."


class Reflection(BaseModel):
    sufficient: bool = Field(description="True when the memories fully support the draft answer.")
    missing: str = Field(default="", description="What is missing, if anything.")
    query: str | None = Field(default=None, description="A follow-up search query for what is missing.")


def build_messages(question: str, draft: str, memories: Sequence[tuple[str, str]]) -> list[BaseMessage]:
    system = (
        f"{SYSTEM_MARKER} Reflect on the draft answer: is every part of it stated by the memories? If not, "
        "say what is missing and give one search query that would find it.\n" + schema_instructions(Reflection)
    )
    lines = [
        f"Question: {question}",
        f"Draft answer: {draft}",
        "Memories:",
        *(f"{mid}: {text}" for mid, text in memories),
    ]
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]
