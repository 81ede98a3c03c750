"""Forward baseline prompt: rewrite a question into a few search queries (query reformulation)."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["SYSTEM_MARKER", "VERSION", "Reformulation", "build_messages"]

VERSION = "forward-reformulate-v1"
SYSTEM_MARKER = "You rewrite a question into search queries."


class Reformulation(BaseModel):
    queries: list[str] = Field(description="1-3 short search queries over the conversation, most useful first.")


def build_messages(question: str, max_queries: int = 3) -> list[BaseMessage]:
    system = (
        f"{SYSTEM_MARKER} The queries search the utterances of a long conversation. Use the words the "
        f"speakers would have used; cover different aspects of the question; at most {max_queries} queries.\n"
        + schema_instructions(Reformulation)
    )
    return [SystemMessage(content=system), HumanMessage(content=f"Question: {question}")]
