"""Explorer prompts: SKIP / EXPAND / ANSWER for one event (or for a batch of events in one call)."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "BatchDecision", "ExplorerDecision", "build_batch_messages", "build_messages"]

VERSION = "explore-v2"

_RULES = (
    "You walk one path of the graph; other explorers walk other paths. Actions: SKIP = the event does not "
    "help; EXPAND = the event helps (it is kept as evidence) and the neighbours you list may hold more (your "
    "path goes on from this event); ANSWER = the event helps and completes what this path looks for (it is "
    "kept and your path ends here; the other explorers go on). next_events: at most 3 ids, only from the "
    "listed neighbours. satisfied_subgoals: numbers of the subgoals this event supplies (the event is "
    "annotated with them; a subgoal counts as satisfied once a kept event supplies it)."
)


class ExplorerDecision(BaseModel):
    action: Literal["SKIP", "EXPAND", "ANSWER"]
    next_events: list[str] = Field(default_factory=list, description="Neighbour ids to explore next (at most 3).")
    satisfied_subgoals: list[int] = Field(
        default_factory=list, description="Numbers of the subgoals this event supplies (its annotation)."
    )


class EventDecision(ExplorerDecision):
    event_id: str


class BatchDecision(BaseModel):
    decisions: list[EventDecision]


def build_messages(context: str, event_text: str, neighbors_text: str) -> list[BaseMessage]:
    system = (
        "You explore a memory graph of events to answer a question. Decide what to do with the current "
        "event. " + _RULES + "\n" + schema_instructions(ExplorerDecision)
    )
    human = f"{context}\n\nCurrent event:\n{event_text}\n\nNeighbours:\n{neighbors_text or '(none)'}"
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_batch_messages(context: str, events_text: str) -> list[BaseMessage]:
    system = (
        "You explore a memory graph of events to answer a question. Decide for EACH listed event, one "
        "decision per event id. " + _RULES + "\n" + schema_instructions(BatchDecision)
    )
    return [SystemMessage(content=system), HumanMessage(content=f"{context}\n\nEvents:\n{events_text}")]
