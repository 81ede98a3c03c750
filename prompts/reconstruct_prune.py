"""Active-set pruner prompt (MRAgent): after a tool round, which memories of the active set support the question.

The reply keeps memories by their keys (``M1``, ``M2`` ...) and says whether the kept ones already answer it.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["VERSION", "PruneDecision", "build_messages"]

VERSION = "reconstruct-prune-v1"


class PruneDecision(BaseModel):
    """The memories of the active set to keep, and where the reconstruction goes next."""

    keep: list[str] = Field(
        default_factory=list,
        description="Keys of the memories that help answer the question, e.g. ['M1', 'M4']; leave out the rest.",
    )
    answer_now: bool = Field(
        default=False, description="True when the kept memories already answer the question; false to keep navigating."
    )


def build_messages(question: str, memories_text: str, question_date: str | None = None) -> list[BaseMessage]:
    system = (
        "You prune the working memory of an agent that reconstructs the answer to a question from a long "
        "conversation. Below are the memories it has gathered so far (events, turns, facts about people), "
        "each with a key. Keep only those that help answer the question: the ones that state the answer, "
        "or a person, time or cue that leads to it. Leave out memories about other people, times or topics. "
        "Then say whether the kept memories already answer the question.\n" + schema_instructions(PruneDecision)
    )
    human = (
        f"Question: {question}\n"
        + (f"Asked on: {question_date}\n" if question_date else "")
        + f"Memories:\n{memories_text or '(none)'}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
