"""Goal-Mem refinement prompt: for each unresolved frontier subgoal, one antecedent whose grounding it needs.

One depth step of backward chaining: retrieving the antecedent should make the subgoal provable.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts import goalmem_paper
from logicmap.prompts.common import schema_instructions
from logicmap.prompts.goalmem_parse import NL_LOGIC_PRIMER

__all__ = ["SYSTEM_MARKER", "VERSION", "Antecedent", "Refinement", "build_messages"]

VERSION = "goalmem-refine-v2"
SYSTEM_MARKER = "You are the Goal-Mem refiner."


class Antecedent(BaseModel):
    subgoal: str = Field(description="Id of the unresolved subgoal, e.g. G1.")
    antecedent: str = Field(
        description="One atomic NL-Logic formula that shares a variable or constant with the subgoal and "
        "whose answer would ground it, e.g. 'Maya visited (y:cafe) last week'."
    )


class Refinement(BaseModel):
    antecedents: list[Antecedent] = Field(default_factory=list)


def build_messages(
    utterance: str,
    goal: str,
    substitution: str,
    unresolved: Sequence[tuple[str, str, str]],
    memories: Sequence[tuple[str, str]],
    *,
    paper: bool = False,
) -> list[BaseMessage]:
    """``unresolved``: (id, rendered subgoal, what was missing); ``memories``: (id, line) already seen. ``paper``: the
    paper's Refinement prompt (Appendix I.3: its objective, its seven principles, its examples)."""
    system = (
        (
            f"{SYSTEM_MARKER}\n{goalmem_paper.REFINE_RULES}\nOne antecedent per unresolved subgoal.\n"
            f"{NL_LOGIC_PRIMER}\nExamples:\n{goalmem_paper.REFINE_EXAMPLES}\n" + schema_instructions(Refinement)
        )
        if paper
        else (
            f"{SYSTEM_MARKER} Some subgoals could not be proved from the memories retrieved for them. For each, "
            "name exactly one antecedent: the intermediate fact that, once found in memory, would ground the subgoal's "
            "variables (which cafe, which person, which date). Ask for something the seen memories do not already "
            "settle; reuse the subgoal's variable names. Give an empty list when no antecedent would help.\n"
            f"{NL_LOGIC_PRIMER}\n" + schema_instructions(Refinement)
        )
    )
    lines = [
        f"Question: {utterance}",
        f"Goal: {goal}",
        f"Current substitution: {substitution}",
        "Unresolved subgoals:",
        *(f"{sid}: {text}  (missing: {why or 'unknown'})" for sid, text, why in unresolved),
        "Memories seen so far:",
        *(f"{mid}: {text}" for mid, text in memories),
    ]
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]
