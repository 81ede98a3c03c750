"""Goal-Mem decomposition prompt: a goal -> a rule whose body is atomic subgoals (one breadth step).

Earlier failed decompositions are shown so the new one differs from them.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts import goalmem_paper
from logicmap.prompts.common import schema_instructions
from logicmap.prompts.goalmem_parse import NL_LOGIC_PRIMER

__all__ = ["SYSTEM_MARKER", "VERSION", "Decomposition", "build_messages"]

VERSION = "goalmem-decompose-v1"
SYSTEM_MARKER = "You are the Goal-Mem decomposer."


class Decomposition(BaseModel):
    subgoals: list[str] = Field(
        description="1-5 atomic NL-Logic formulas that together prove the goal; each can be checked against "
        "one memory of the conversation. Reuse the goal's variable names and types."
    )
    rationale: str = Field("", description="One sentence: why proving these subgoals proves the goal.")


def build_messages(
    utterance: str, goal: str, failed: Sequence[tuple[str, str]] = (), *, paper: bool = False
) -> list[BaseMessage]:
    """``failed``: earlier decompositions (rendered rules) with why each failed. ``paper``: the paper's Goal
    Decomposition prompts (Appendix I.1.1, and I.1.2 after a failure) with their few-shot examples."""
    if paper:
        return _paper_messages(utterance, goal, failed)
    system = (
        f"{SYSTEM_MARKER} Backward chaining: split the goal into atomic subgoals, each a single fact that a "
        "memory (one utterance or event of the conversation) could state, such that the subgoals together "
        "entail the goal. Shared variables link the subgoals (the cafe Maya visited is the cafe where she had "
        "the drink). A goal that is already atomic may be its own single subgoal.\n"
        f"{NL_LOGIC_PRIMER}\n" + schema_instructions(Decomposition)
    )
    lines = [f"Question: {utterance}", f"Goal: {goal}"]
    if failed:
        lines.append(
            "These decompositions were tried and failed; give a DIFFERENT one (other subgoals, other wording or split):"
        )
        lines.extend(f"- {rule}  (failed: {why})" for rule, why in failed)
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]


def _paper_messages(utterance: str, goal: str, failed: Sequence[tuple[str, str]]) -> list[BaseMessage]:
    rules = goalmem_paper.DECOMPOSE_RULES + ("\n" + goalmem_paper.NEXT_HOP_RULES if failed else "")
    system = (
        f"{SYSTEM_MARKER}\n{rules}\nThe subgoals prove the goal below (reuse its variable names and types).\n"
        f"{NL_LOGIC_PRIMER}\nExamples:\n{goalmem_paper.DECOMPOSE_EXAMPLES}\n" + schema_instructions(Decomposition)
    )
    lines = [f"Question: {utterance}", f"Goal: {goal}"]
    if failed:
        lines.append("Existing rules/decompositions that should NOT be repeated:")
        lines.extend(f"- {rule}  (failed: {why})" for rule, why in failed)
        lines.append("New goal decomposition:")
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]
