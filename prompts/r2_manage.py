"""Memory-R2 memory manager prompt: new facts, each with its related memories (ids) -> ADD / UPDATE / DELETE / NOOP.

The decision procedure is the paper's (Memory-R2, Appendix B, Figure 7): per new fact, DELETE each related memory it
contradicts, then NOOP if a related memory already holds it, else UPDATE a related memory it refines, else ADD.

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

VERSION = "r2-manage-v2"
ANSWER_VERSION = "r2-answer-v1"

ROLE_MARKER = "You are the memory manager"
ANSWER_ROLE_MARKER = "You answer questions from a fact memory"


class ManagerEdit(BaseModel):
    op: Literal["ADD", "UPDATE", "DELETE", "NOOP"] = Field(
        description="ADD: store the new fact. UPDATE: rewrite related memory `id`, keeping all it said and adding "
        "the new detail. DELETE: related memory `id` is explicitly contradicted by the new fact. "
        "NOOP: related memory `id` already holds the new fact (same person, topic and meaning)."
    )
    fact: int = Field(description="Number of the new fact this edit decides (0, 1, ...).")
    id: str | None = Field(
        None, description="A memory id from the new fact's related memories, e.g. 'F3': required for UPDATE and DELETE."
    )
    text: str | None = Field(
        None, description="ADD/UPDATE: the text to store (merge old and new details); omit to use the new fact as is."
    )


class MemoryEdits(BaseModel):
    edits: list[ManagerEdit]


class FactAnswer(BaseModel):
    answer: str = Field(description="A short answer: a few words, a name, a date or a number.")


def build_messages(memory_text: str, new_facts_text: str) -> list[BaseMessage]:
    """``memory_text``: the memories related to the new facts, one ``F<n>: text`` a line; ``new_facts_text``: the
    numbered new facts, each with its related memory ids."""
    system = (
        f"{ROLE_MARKER} of a long-term fact memory. You see new facts (numbered), each with the ids of its related "
        "memories, and the text of those memories. For each new fact, follow this procedure in order:\n"
        "1. Does the new fact explicitly contradict one of its related memories? Then DELETE that memory (one DELETE "
        "per contradicted memory) and go on with step 2.\n"
        "2. Does one of its related memories already hold the new fact (same person, same topic, same meaning, "
        "even if worded differently)? Then NOOP with that memory's id. Stop.\n"
        "3. Does one of its related memories refer to the same entity or event, and the new fact refines, "
        "progresses or confirms it? Then UPDATE that memory: write the merged text, keeping every fact it held. "
        "Stop.\n"
        "4. Otherwise ADD the new fact. Stop.\n"
        "So every new fact gets exactly one ADD, UPDATE or NOOP, plus a DELETE for each related memory it "
        "contradicts. Memory is monotonic: never lose a fact unless it is explicitly contradicted; do not delete "
        "a memory because it is old. Use only the related memory ids listed for that fact; change each memory at "
        "most once. List the edits in this fixed order: all ADD edits first, then UPDATE, then DELETE, then NOOP.\n"
        + schema_instructions(MemoryEdits)
    )
    human = f"Related memories:\n{memory_text}\n\nNew facts:\n{new_facts_text}"
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_answer_messages(question: str, facts_text: str) -> list[BaseMessage]:
    system = (
        f"{ANSWER_ROLE_MARKER}. Answer with a few words taken from the facts; if they do not say, "
        "answer 'unknown'.\n" + schema_instructions(FactAnswer)
    )
    human = f"Facts:\n{facts_text or '(none)'}\n\nQuestion: {question}"
    return [SystemMessage(content=system), HumanMessage(content=human)]
