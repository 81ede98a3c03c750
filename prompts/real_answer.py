"""REAL responder prompt: answer a question from the kept evidence paths only."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "PathAnswer", "build_messages"]

VERSION = "real-answer-v1"


class PathAnswer(BaseModel):
    answer: str = Field(description="A short answer; 'Not mentioned in the conversation' when the paths do not say.")
    path_ids: list[str] = Field(default_factory=list, description="Ids of the paths the answer relies on.")


def build_messages(question: str, paths_text: str, reference_time: str | None) -> list[BaseMessage]:
    system = (
        "You are the REAL answerer. Answer the question using only the evidence paths: chains of facts "
        "with validity intervals ([from -> to), 'open' means still true) and confidence. Prefer facts valid "
        "at the question's time; give dates when asked when.\n" + schema_instructions(PathAnswer)
    )
    human = f"Question: {question}\nReference time: {reference_time or 'any'}\nEvidence paths:\n{paths_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
