"""Localizer prompt: pick the starting events for exploration among the candidates."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["INSTRUCTIONS", "VERSION", "StartPicks", "build_messages"]

VERSION = "localize-v2"  # v2: CompassMem's Memory Node Selection Prompt (App. F), candidates with similarity


class StartPicks(BaseModel):
    event_ids: list[str] = Field(description="Ids of the candidate events to start exploring from (at most 5).")


# CompassMem, Appendix F, "Memory Node Selection Prompt" (its instructions; its free-text "Selected Nodes: [...]
# Reasoning: ..." format is replaced by the typed reply every role here gives).
INSTRUCTIONS = (
    "Select the nodes that are HIGHLY LIKELY to contain information relevant to one or more sub-goals.\n"
    "- Be selective: only choose nodes whose summaries clearly indicate relevance to specific sub-goals.\n"
    "- Maximum {max_starts} nodes: select at most {max_starts} nodes to explore.\n"
    "- Diversity: try to select nodes that address different sub-goals if possible.\n"
    "- Quality over quantity: it's better to select 2 highly relevant nodes than {max_starts} marginally relevant "
    "ones.\n"
    "- If a node's summary is vague or doesn't clearly relate to any sub-goal, DON'T select it.\n"
    "- Consider both the summary content and the similarity score."
)


def build_messages(question: str, subgoals: list[str], candidates_text: str, max_starts: int) -> list[BaseMessage]:
    system = (
        "You are selecting the most promising memory nodes to explore for answering a question.\n"
        + INSTRUCTIONS.format(max_starts=max_starts)
        + "\n"
        + schema_instructions(StartPicks)
    )
    human = (
        f"QUESTION: {question}\nSUB-GOALS:\n- "
        + "\n- ".join(subgoals)
        + f"\nCANDIDATE NODES (retrieved by semantic similarity):\n{candidates_text}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
