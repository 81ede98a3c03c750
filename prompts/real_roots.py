"""REAL root planner prompt: a question -> root entities to start the search from, each with an intent."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "RootEntity", "RootPlan", "build_messages"]

VERSION = "real-roots-v1"


class RootEntity(BaseModel):
    entity: str = Field(description="An entity from the list of known entities, spelled as listed.")
    intent: Literal["FACT", "CAUSAL", "TEMPORAL", "CONTRAST", "EVOLUTION"] = Field(
        description="What to explore from it: FACT attributes, CAUSAL reasons, TEMPORAL times, "
        "CONTRAST differences, EVOLUTION changes over time."
    )


class RootPlan(BaseModel):
    roots: list[RootEntity] = Field(description="1 to 3 root entities, most important first.")
    reference_time: str | None = Field(
        None,
        description="The time the question asks about: YYYY-MM-DD, YYYY-MM or YYYY; 'now' for the present; "
        "null when the question is not about one time.",
    )
    include_uncertain: bool = Field(
        False, description="True when the question asks about plans, guesses or uncertain facts."
    )


def build_messages(question: str, entities: list[str], latest_date: str | None) -> list[BaseMessage]:
    system = (
        "You are the REAL root planner. Given a question about a long conversation and the entities its "
        "memory holds facts about, choose the root entities the answer should be searched from, and for "
        "each the exploration intent. Say which time the question is about.\n" + schema_instructions(RootPlan)
    )
    human = (
        f"Question: {question}\nLatest conversation date: {latest_date or 'unknown'}\n"
        f"Known entities: {'; '.join(entities)}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
