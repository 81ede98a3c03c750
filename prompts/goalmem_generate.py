"""Goal-Mem answer prompt: the utterance, the grounded goal and ONLY the supporting memories -> answer."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts import goalmem_paper
from logicmap.prompts.common import schema_instructions

__all__ = ["SYSTEM_MARKER", "VERSION", "GoalAnswer", "build_messages"]

VERSION = "goalmem-generate-v1"
SYSTEM_MARKER = "You are the Goal-Mem responder."


class GoalAnswer(BaseModel):
    answer: str = Field(description="A short answer (a phrase or one sentence) to the question.")


def build_messages(
    utterance: str,
    grounded_goal: str,
    substitution: str,
    supporting: Sequence[tuple[str, str]],
    *,
    paper: bool = False,
) -> list[BaseMessage]:
    """``paper``: the answer rules of the paper's unification prompt (Appendix I.2: "I dont know" when a required
    value is not grounded, no hedged answers)."""
    system = (
        (
            f"{SYSTEM_MARKER} Answer the question from the proved goal and the memories that support it.\n"
            f"{goalmem_paper.ANSWER_RULES}\n" + schema_instructions(GoalAnswer)
        )
        if paper
        else (
            f"{SYSTEM_MARKER} Answer the question from the proved goal and the memories that support it, and "
            "nothing else. Be brief; resolve relative dates against the memories' dates.\n"
            + schema_instructions(GoalAnswer)
        )
    )
    lines = [
        f"Question: {utterance}",
        f"Proved goal: {grounded_goal}",
        f"Substitution: {substitution}",
        "Supporting memories:",
        *(f"{mid}: {text}" for mid, text in supporting),
    ]
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]
