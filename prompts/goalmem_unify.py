"""Goal-Mem unification prompt: all active subgoals and the retrieved memories in ONE call.

The model binds variables to values the memories state and says which memories support each subgoal.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts import goalmem_paper
from logicmap.prompts.common import schema_instructions
from logicmap.prompts.goalmem_parse import NL_LOGIC_PRIMER

__all__ = ["SYSTEM_MARKER", "VERSION", "Binding", "SubgoalResult", "Unification", "build_messages"]

VERSION = "goalmem-unify-v2"
SYSTEM_MARKER = "You are the Goal-Mem unifier."


class Binding(BaseModel):
    variable: str = Field(description="A variable name of the subgoal, e.g. x.")
    value: str = Field(description="The value the memories state for it, in their words, e.g. 'iced matcha latte'.")
    type: str | None = Field(None, description="The value's type; it must agree with the variable's type.")


class SubgoalResult(BaseModel):
    subgoal: str = Field(description="The subgoal id, e.g. G1.")
    resolved: bool = Field(description="True only if the cited memories entail the subgoal with these bindings.")
    bindings: list[Binding] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list, description="Ids of the memories that support it, e.g. ['D2:4'].")
    reason: str = Field("", description="Short: why it holds, or what is missing.")


class Unification(BaseModel):
    results: list[SubgoalResult]


def build_messages(
    utterance: str,
    substitution: str,
    subgoals: Sequence[tuple[str, str]],
    memories: Sequence[tuple[str, str]],
    *,
    paper: bool = False,
) -> list[BaseMessage]:
    """``subgoals``: (id, rendered subgoal with the substitution applied); ``memories``: (id, line). ``paper``: the
    paper's Unification prompt (Appendix I.2: the entity-anchor check, the unification process, its example)."""
    system = (
        (
            f"{SYSTEM_MARKER}\n{goalmem_paper.UNIFY_RULES}\nCite only ids from the Memories list and bind every variable of "
            "a resolved subgoal: these are checked.\n"
            f"{NL_LOGIC_PRIMER}\nExample:\n{goalmem_paper.UNIFY_EXAMPLES}\n" + schema_instructions(Unification)
        )
        if paper
        else (
            f"{SYSTEM_MARKER} For every subgoal decide whether the memories prove it. A subgoal is resolved when "
            "cited memories entail it (paraphrase is fine, guessing is not) and each of its variables is bound to a "
            "value that fits the variable's type. You judge the fit and the entailment: a value of another kind "
            "can fit when the memory entails it (an ingredient can give the flavor asked for; give the value's own "
            "type). Bindings must agree with the current substitution and with each other (one thing per variable); "
            "you judge whether two names are the same thing. Cite only ids from the Memories list and bind every "
            "variable of a resolved subgoal: these are checked. If a subgoal needs something the memories do not "
            "state, leave it unresolved and say what is missing.\n"
            f"{NL_LOGIC_PRIMER}\n" + schema_instructions(Unification)
        )
    )
    lines = [
        f"Question: {utterance}",
        f"Current substitution: {substitution}",
        "Subgoals:",
        *(f"{sid}: {text}" for sid, text in subgoals),
        "Memories:",
        *(f"{mid}: {text}" for mid, text in memories),
    ]
    if not memories:
        lines.append("(none retrieved)")
    return [SystemMessage(content=system), HumanMessage(content="\n".join(lines))]
