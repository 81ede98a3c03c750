"""Explorer prompts: SKIP / EXPAND / ANSWER for one event (or for a batch of events in one call).

``build_paper_messages`` / ``build_paper_batch_messages`` are CompassMem's Action Decision Prompt (Appendix F.2)
word for word (its three actions, "ANSWER only when ALL sub-goals are SATISFIED", "Be conservative", DIRECT
evidence only, its REASONING field), used by ``CompassContext.faithful``; the reply is the typed
``PaperExplorerDecision`` (the paper's ACTION / NEXT_NODES / SATISFIED_SUBGOALS / REASONING lines as JSON fields)."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "PAPER_ACTION_DECISION",
    "PAPER_VERSION",
    "VERSION",
    "BatchDecision",
    "ExplorerDecision",
    "PaperBatchDecision",
    "PaperEventDecision",
    "PaperExplorerDecision",
    "build_batch_messages",
    "build_messages",
    "build_paper_batch_messages",
    "build_paper_messages",
]

VERSION = "explore-v2"
PAPER_VERSION = "explore-paper-v1"

# CompassMem, Appendix F.2, "Action Decision Prompt", word for word up to its response format (the reply format
# is the typed schema below; node ids are event ids, sub-goals are numbered from 0 as the context lists them).
PAPER_ACTION_DECISION = """You are an expert information evaluator. Your task is to decide which action to take for the current node based on how relevant and sufficient it is for answering the given question. You have THREE possible actions:

1. SKIP: The current node is NOT helpful for answering the question or satisfying any sub-goals.
 - Use SKIP when the current node contains completely irrelevant information.
 - The current node will be DISCARDED, not used in final answer.
 - You should specify which neighbor node(s) to explore next, OR specify NONE if ALL neighbors are irrelevant.
 - Multi-node selection rules: Maximum 3 nodes, only select HIGHLY relevant ones.
2. EXPAND: The current node IS helpful and helps satisfy some sub-goals, but NOT all sub-goals are satisfied yet.
 - Use EXPAND when the current node contains useful information for one or more sub-goals.
 - The current node will be KEPT and used in the final answer.
 - Specify neighbor node(s) to explore next to satisfy remaining sub-goals, OR specify NONE if no neighbors are relevant.
 - CRITICAL: You MUST indicate which sub-goals are now satisfied by this node + previously kept information. Only mark a sub-goal as satisfied if you have DIRECT evidence.
3. ANSWER: Use ONLY when ALL sub-goals are SATISFIED (or nearly all).
 - Use ANSWER when the previously kept information + current node together satisfy ALL sub-goals.
 - The current node will be KEPT and exploration will STOP.
 - CRITICAL: You MUST list ALL satisfied sub-goals to confirm completeness.
 - Be conservative: If ANY sub-goal remains unsatisfied, use EXPAND instead.

CRITICAL GUIDELINES:
- Check sub-goals systematically: For each action, explicitly evaluate which sub-goals are satisfied.
- ANSWER only when complete: Use ANSWER only when ALL (or all critical) sub-goals are satisfied.
- Navigate strategically: Choose next nodes that are likely to help satisfy remaining unsatisfied sub-goals.
- Be explicit about progress: Always indicate which sub-goals your current decision addresses.

IMPORTANT: (1) For SKIP, SATISFIED_SUBGOALS must be []; (2) For EXPAND/ANSWER: provide list even if empty; (3) Only include sub-goals with DIRECT evidence; (4) Do NOT speculate."""

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


class PaperExplorerDecision(ExplorerDecision):
    """The Action Decision Prompt's reply: ACTION, NEXT_NODES, SATISFIED_SUBGOALS and REASONING."""

    reasoning: str = Field(
        default="",
        description="Brief explanation: (1) info provided, (2) sub-goals satisfied, (3) sub-goals remaining, "
        "(4) why chosen next nodes target remaining sub-goals.",
    )


class PaperEventDecision(PaperExplorerDecision):
    event_id: str


class PaperBatchDecision(BaseModel):
    decisions: list[PaperEventDecision]


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


def _paper_context(context: str) -> str:
    """The run's context (question, numbered sub-goals with their status, kept evidence) under the paper's headings."""
    return context.replace("Kept evidence:", "PREVIOUSLY KEPT INFORMATION:", 1).replace("Question:", "QUESTION:", 1)


def build_paper_messages(context: str, event_text: str, neighbors_text: str) -> list[BaseMessage]:
    system = PAPER_ACTION_DECISION + "\n\n" + schema_instructions(PaperExplorerDecision)
    human = (
        f"{_paper_context(context)}\n\nCURRENT NODE INFORMATION:\n{event_text}\n\n"
        f"NEIGHBOR NODES (available for exploration):\n{neighbors_text or '(none)'}\n\nNow, make your decision:"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_paper_batch_messages(context: str, events_text: str) -> list[BaseMessage]:
    """The same prompt for every event of a superstep, one decision per event id (the batched explorer mode)."""
    system = (
        PAPER_ACTION_DECISION
        + "\n\nDecide for EACH listed current node, one decision per event id.\n\n"
        + schema_instructions(PaperBatchDecision)
    )
    human = f"{_paper_context(context)}\n\nCURRENT NODES:\n{events_text}\n\nNow, make your decisions:"
    return [SystemMessage(content=system), HumanMessage(content=human)]
