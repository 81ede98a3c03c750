"""Forward baseline prompt: answer a question from retrieved memories, citing the ones used."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["SYSTEM_MARKER", "VERSION", "ForwardAnswer", "build_messages"]

VERSION = "forward-answer-v1"
SYSTEM_MARKER = "You answer a question from retrieved memories."


class ForwardAnswer(BaseModel):
    answer: str = Field(description="A short answer; 'I don't know' when the memories do not say.")
    cited: list[str] = Field(default_factory=list, description="Ids of the memories the answer rests on.")


def build_messages(question: str, memories: Sequence[tuple[str, str]]) -> list[BaseMessage]:
    system = (
        f"{SYSTEM_MARKER} Use only the memories; resolve relative dates against their dates; be brief.\n"
        + schema_instructions(ForwardAnswer)
    )
    lines = [f"Question: {question}", "Memories:", *(f"{mid}: {text}" for mid, text in memories)]
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]
