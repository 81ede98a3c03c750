"""Localizer prompt: pick the starting events for exploration among the candidates."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "StartPicks", "build_messages"]

VERSION = "localize-v1"


class StartPicks(BaseModel):
    event_ids: list[str] = Field(description="Ids of the candidate events to start exploring from (at most 5).")


def build_messages(question: str, subgoals: list[str], candidates_text: str, max_starts: int) -> list[BaseMessage]:
    system = (
        f"You choose where to start searching a memory graph of events. Pick at most {max_starts} candidate "
        "events most likely to lead to the answer; prefer covering different topics.\n"
        + schema_instructions(StartPicks)
    )
    human = f"Question: {question}\nSubgoals:\n- " + "\n- ".join(subgoals) + f"\nCandidates:\n{candidates_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
