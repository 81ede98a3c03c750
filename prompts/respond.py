"""Responder prompt: a short answer from the kept evidence only, relative times turned into dates."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "Answer", "build_messages"]

VERSION = "respond-v1"


class Answer(BaseModel):
    answer: str = Field(description="A short phrase answering the question, or 'Not mentioned' if the evidence does not say.")
    cited_ids: list[str] = Field(default_factory=list, description="Ids of the evidence items the answer rests on.")


def build_messages(question: str, evidence_text: str, question_date: str | None = None) -> list[BaseMessage]:
    system = (
        "You answer a question about a long conversation using ONLY the evidence given. Answer with a short "
        "phrase (a few words), not a sentence. Turn relative times ('last year', 'yesterday') into dates "
        "using the dates shown with the evidence. If the evidence does not contain the answer, say "
        "'Not mentioned'.\n" + schema_instructions(Answer)
    )
    when = f"\nThe question is asked on {question_date}." if question_date else ""
    return [SystemMessage(content=system), HumanMessage(content=f"Evidence:\n{evidence_text}\n\nQuestion: {question}{when}")]
