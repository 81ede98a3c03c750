"""Planner prompts: subgoals for a question, and a refined query aimed at unsatisfied subgoals."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "Plan", "RefinedQuery", "build_messages", "build_refine_messages"]

VERSION = "plan-v1"


class Plan(BaseModel):
    subgoals: list[str] = Field(
        description="2 to 5 short pieces of information that together answer the question, in the order to find them."
    )


class RefinedQuery(BaseModel):
    query: str = Field(description="A new search query aimed at the missing information.")


def build_messages(question: str) -> list[BaseMessage]:
    system = (
        "You plan how to answer a question from a person's long conversation memory. Break the question "
        "into 2 to 5 subgoals: the pieces of information to find (who, what, when, why), each a short "
        "phrase.\n" + schema_instructions(Plan)
    )
    return [SystemMessage(content=system), HumanMessage(content=f"Question: {question}")]


def build_refine_messages(question: str, missing: list[str], found: str) -> list[BaseMessage]:
    system = (
        "A search of conversation memory found some evidence but not all the information needed. Write one "
        "new search query aimed at the missing information.\n" + schema_instructions(RefinedQuery)
    )
    human = f"Question: {question}\nStill missing:\n- " + "\n- ".join(missing) + f"\nFound so far:\n{found or '(nothing)'}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
