"""Planner prompts: subgoals for a question (with the first round's starting events, when candidates are known),
and a refined query aimed at unsatisfied subgoals.

``build_paper_refine_messages`` is CompassMem's Refinement Query Prompt (Appendix F.2) word for word: the
satisfied and the unsatisfied sub-goals listed, a NEW query with different keywords that does NOT repeat the
original question, and its Target Sub-goals (``CompassContext.faithful``; the reply is the typed
``PaperRefinedQuery``)."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "PAPER_REFINE_VERSION",
    "VERSION",
    "PaperRefinedQuery",
    "Plan",
    "PlanAndStarts",
    "RefinedQuery",
    "build_messages",
    "build_paper_refine_messages",
    "build_plan_and_starts_messages",
    "build_refine_messages",
]

VERSION = "plan-v2"
PAPER_REFINE_VERSION = "refine-paper-v1"


class Plan(BaseModel):
    subgoals: list[str] = Field(
        description="2 to 5 short pieces of information that together answer the question, in the order to find them."
    )


class PlanAndStarts(BaseModel):
    subgoals: list[str] = Field(
        description="2 to 5 short pieces of information that together answer the question, in the order to find them."
    )
    start_ids: list[str] = Field(
        default_factory=list,
        description="Ids of the candidate events to start exploring from, chosen for the subgoals above.",
    )


class RefinedQuery(BaseModel):
    query: str = Field(description="A new search query aimed at the missing information.")


class PaperRefinedQuery(RefinedQuery):
    """The Refinement Query Prompt's reply: New Query and Target Sub-goals."""

    query: str = Field(
        description="New Query: your refined search query - single clear question or search phrase "
        "targeting unsatisfied sub-goals."
    )
    target_subgoals: list[int] = Field(
        default_factory=list, description="Target Sub-goals: which sub-goal numbers this query aims to satisfy."
    )


def build_messages(question: str) -> list[BaseMessage]:
    system = (
        "You plan how to answer a question from a person's long conversation memory. Break the question "
        "into 2 to 5 subgoals: the pieces of information to find (who, what, when, why), each a short "
        "phrase.\n" + schema_instructions(Plan)
    )
    return [SystemMessage(content=system), HumanMessage(content=f"Question: {question}")]


def build_plan_and_starts_messages(question: str, candidates_text: str, max_starts: int) -> list[BaseMessage]:
    """The planner's call when the first round's candidate events are known before planning: subgoals first, then
    the starting events chosen for them (what the localizer's own call would choose), in one reply."""
    system = (
        "You plan how to answer a question from a person's long conversation memory. First break the question "
        "into 2 to 5 subgoals: the pieces of information to find (who, what, when, why), each a short phrase. "
        f"Then choose where to start searching the memory graph of events: pick at most {max_starts} of the "
        "candidate events most likely to lead to the answer for those subgoals; prefer covering different topics.\n"
        + schema_instructions(PlanAndStarts)
    )
    human = f"Question: {question}\nCandidates:\n{candidates_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_refine_messages(question: str, missing: list[str], found: str) -> list[BaseMessage]:
    system = (
        "A search of conversation memory found some evidence but not all the information needed. Write one "
        "new search query aimed at the missing information.\n" + schema_instructions(RefinedQuery)
    )
    human = (
        f"Question: {question}\nStill missing:\n- " + "\n- ".join(missing) + f"\nFound so far:\n{found or '(nothing)'}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_paper_refine_messages(
    question: str, satisfied: list[str], missing: list[str], found: str
) -> list[BaseMessage]:
    """The Refinement Query Prompt (Appendix F.2); sub-goals are numbered as the planner listed them, satisfied first."""

    def listed(goals: list[str], start: int) -> str:
        return "\n".join(f"{start + i}. {g}" for i, g in enumerate(goals)) or "(none)"

    system = "You are an assistant whose role is to generate a refined search query to find missing information."
    human = (
        f"ORIGINAL QUESTION:\n{question}\n\nSUB-GOALS STATUS:\n\nSatisfied sub-goals:\n{listed(satisfied, 1)}\n\n"
        f"Unsatisfied sub-goals:\n{listed(missing, len(satisfied) + 1)}\n\n"
        f"INFORMATION COLLECTED SO FAR:\n{found or '(nothing)'}\n\n"
        "TASK:\nGenerate a NEW search query that specifically targets the UNSATISFIED sub-goals.\n\n"
        "Your new query should:\n"
        "1. Focus on the specific unsatisfied sub-goals.\n"
        "2. Be clear and specific.\n"
        "3. Use different keywords or phrases than the original question.\n"
        "4. Target information that would help satisfy the remaining sub-goals.\n"
        "5. NOT repeat the original question.\n\n"
        + schema_instructions(PaperRefinedQuery)
        + "\n\nGenerate your response:"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
