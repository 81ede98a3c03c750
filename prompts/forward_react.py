"""Forward baseline prompt: one ReAct step (think, then search the memory or answer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["SYSTEM_MARKER", "VERSION", "ReactStep", "build_messages"]

VERSION = "forward-react-v1"
SYSTEM_MARKER = "You are a ReAct agent answering from a memory search tool."


class ReactStep(BaseModel):
    thought: str = Field(default="", description="Brief reasoning about what is known and what to do next.")
    action: Literal["search", "answer"]
    query: str | None = Field(default=None, description="The search query when action is search.")
    answer: str | None = Field(default=None, description="The final answer when action is answer.")
    cited: list[str] = Field(default_factory=list, description="Ids of the memories the answer rests on.")


def build_messages(question: str, transcript: Sequence[str], searches_left: int) -> list[BaseMessage]:
    system = (
        f"{SYSTEM_MARKER} Each step: think, then either search the conversation memory (action 'search' with a "
        "query) or give the final answer (action 'answer'). Search for one missing fact at a time; answer as "
        f"soon as the observations suffice. Searches left: {searches_left}.\n" + schema_instructions(ReactStep)
    )
    lines = [f"Question: {question}", *transcript] if transcript else [f"Question: {question}", "(no searches yet)"]
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]
