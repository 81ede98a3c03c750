"""REAL path evaluator prompt: score every candidate path of one beam step in a single call."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "PathScore", "PathScores", "build_messages"]

VERSION = "real-evaluate-v3"


class PathScore(BaseModel):
    path_id: str = Field(description="The path id as listed, e.g. 'P3'.")
    relevance: float = Field(description="0..1: how relevant the path is to the question.")
    coherence: float = Field(description="0..1: whether the facts chain logically and their times agree.")
    sufficiency: float = Field(
        description="0..1: entity-specific answer sufficiency: whether the path alone answers the part of the "
        "question that involves its own root entity (its first entity), even if other parts stay open."
    )


class PathScores(BaseModel):
    scores: list[PathScore]


def build_messages(question: str, paths_text: str, reference_time: str | None) -> list[BaseMessage]:
    system = (
        "You are the REAL path evaluator. Each candidate path is a chain of facts from a conversation's "
        "memory, each with its validity interval and confidence. Score every path once for query "
        "relevance, logical coherence (facts connect, times are consistent) and entity-specific answer "
        "sufficiency: each path starts at one root entity of the question and is not expected to answer the "
        "whole question; score whether it answers the sub-question about that root entity (its attribute "
        "value, causal link or temporal event). The list holds the current search paths together with "
        "their one-fact extensions (and, marked 'repair', hypotheses of facts the conversation may state "
        "indirectly): score them on one scale, so an extension scores above its path only when the added "
        "fact brings the answer closer.\n" + schema_instructions(PathScores)
    )
    human = f"Question: {question}\nFacts valid at: {reference_time or 'any time'}\nCandidate paths:\n{paths_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
