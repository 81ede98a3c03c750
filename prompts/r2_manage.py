"""Memory-R2 memory manager prompt: current facts + new facts -> ADD / UPDATE / DELETE / NOOP edits.

Also the prompt of the small answerer that scores a fact memory on QA pairs (the training reward).
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "ANSWER_ROLE_MARKER",
    "ANSWER_VERSION",
    "ROLE_MARKER",
    "VERSION",
    "FactAnswer",
    "ManagerEdit",
    "MemoryEdits",
    "build_answer_messages",
    "build_messages",
]

VERSION = "r2-manage-v1"
ANSWER_VERSION = "r2-answer-v1"

ROLE_MARKER = "You are the memory manager"
ANSWER_ROLE_MARKER = "You answer questions from a fact memory"


class ManagerEdit(BaseModel):
    op: Literal["ADD", "UPDATE", "DELETE", "NOOP"] = Field(
        description="ADD: store the new fact. UPDATE: rewrite memory fact `id` with the new information "
        "(its old text is kept in history). DELETE: memory fact `id` is contradicted or obsolete. "
        "NOOP: memory already holds it, or it is not worth keeping."
    )
    fact: int = Field(description="Number of the new fact this edit decides (0, 1, ...).")
    id: str | None = Field(None, description="Memory fact id, e.g. 'F3': required for UPDATE and DELETE.")
    text: str | None = Field(
        None, description="ADD/UPDATE: the text to store (merge old and new details); omit to use the new fact as is."
    )


class MemoryEdits(BaseModel):
    edits: list[ManagerEdit]


class FactAnswer(BaseModel):
    answer: str = Field(description="A short answer: a few words, a name, a date or a number.")


def build_messages(memory_text: str, new_facts_text: str) -> list[BaseMessage]:
    system = (
        f"{ROLE_MARKER} of a long-term fact memory. You see the facts already in memory (with ids) and "
        "new facts (numbered). Decide exactly one edit per new fact:\n"
        "- ADD when the new fact is new information;\n"
        "- UPDATE when it changes or refines a memory fact about the same subject and attribute "
        "(write the merged text);\n"
        "- DELETE when it shows a memory fact is no longer true;\n"
        "- NOOP when memory already holds it or it is not worth keeping.\n"
        "Never ADD a fact memory already holds; use only ids shown in memory; change each memory fact "
        "at most once. List the edits in this fixed order: all ADD edits first, then UPDATE, then "
        "DELETE, then NOOP.\n" + schema_instructions(MemoryEdits)
    )
    human = f"Memory:\n{memory_text}\n\nNew facts:\n{new_facts_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_answer_messages(question: str, facts_text: str) -> list[BaseMessage]:
    system = (
        f"{ANSWER_ROLE_MARKER}. Answer with a few words taken from the facts; if they do not say, "
        "answer 'unknown'.\n" + schema_instructions(FactAnswer)
    )
    human = f"Facts:\n{facts_text or '(none)'}\n\nQuestion: {question}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
