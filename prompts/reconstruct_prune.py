"""Active-set pruner prompt (MRAgent): after a tool round, which memories of the active set support the question.

The reply keeps memories by their keys (``M1``, ``M2`` ...) and says whether the kept ones already answer it.
``build_candidate_messages`` is the paper's routing step R_LLM(x, H(t), Z~(t+1)) (Eq. 9; MRAgent's ``faithful``):
the reconstructed context is shown, only the new candidates carry keys, and the reply selects among them
(``CandidateSelection``); the paper gives this step no prompt of its own, so its words are Section 4.2's.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "CANDIDATE_VERSION",
    "VERSION",
    "CandidateSelection",
    "PruneDecision",
    "build_candidate_messages",
    "build_messages",
]

VERSION = "reconstruct-prune-v1"
CANDIDATE_VERSION = "reconstruct-route-paper-v1"


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


class CandidateSelection(BaseModel):
    """The new candidates to add to the reconstructed context."""

    keep: list[str] = Field(
        default_factory=list,
        description="Keys of the new candidates that are relevant to the question, e.g. ['M1', 'M4']; leave out the rest.",
    )


def build_candidate_messages(
    question: str, context_text: str, candidates_text: str, question_date: str | None = None
) -> list[BaseMessage]:
    """R_LLM (MRAgent Eq. 9): select the most relevant of the newly retrieved memory contents, given the question
    and the context reconstructed so far (which stays as it is)."""
    system = (
        "You route the memory reconstruction of an agent answering a question from a long conversation. Below "
        "are the context it has reconstructed so far and the NEW candidate memories its last tool calls "
        "retrieved, each with a key. Based on the semantic associations between the question, the reconstructed "
        "context and the new candidates, select the most relevant new candidates and prune the irrelevant ones, "
        "so that the accumulated context remains concise and focused. The reconstructed context is kept as it "
        "is; only the new candidates are selected.\n" + schema_instructions(CandidateSelection)
    )
    human = (
        f"Question: {question}\n"
        + (f"Asked on: {question_date}\n" if question_date else "")
        + f"Reconstructed context:\n{context_text or '(empty)'}\n"
        + f"New candidates:\n{candidates_text or '(none)'}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
