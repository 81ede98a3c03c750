"""Judge prompt: is a generated answer to a memory question correct against the gold answer?

Generous on wording, strict on content, the grading LoCoMo-style evaluations use with an LLM judge.
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "JudgeVerdict", "build_messages"]

VERSION = "judge-v1"


class JudgeVerdict(BaseModel):
    reasoning: str = Field(description="One short sentence explaining the verdict.")
    label: Literal["CORRECT", "WRONG"] = Field(
        description="CORRECT if the generated answer matches the gold answer, else WRONG."
    )


def build_messages(question: str, gold_answer: str, generated_answer: str) -> list[BaseMessage]:
    system = (
        "You grade answers to questions about a long conversation. You get the question, the gold answer "
        "and a generated answer. Be generous about wording: the generated answer is CORRECT when it refers "
        "to the same thing, person, place or time as the gold answer, even if it is longer or phrased "
        "differently. For time questions, the same date, month or period in another format is CORRECT. "
        "It is WRONG when it misses the point of the gold answer, contradicts it, or says the information "
        "is not available when the gold answer gives it.\n" + schema_instructions(JudgeVerdict)
    )
    human = f"Question: {question}\nGold answer: {gold_answer}\nGenerated answer: {generated_answer}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
