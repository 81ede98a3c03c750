"""Responder prompt: a short answer from the kept evidence only, relative times turned into dates.

Two versions: the project's (``abstain=True``: "Not mentioned" when the evidence does not say; the rerank,
baseline and Memory-R2 strategies) and CompassMem's Response Generation Prompt (Appendix F.2,
``abstain=False``): never state that the information is insufficient, give a reasonable, justified answer.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["PAPER_REQUIREMENTS", "VERSION", "Answer", "build_messages"]

VERSION = "respond-v2"


class Answer(BaseModel):
    answer: str = Field(description="A short phrase answering the question.")
    cited_ids: list[str] = Field(default_factory=list, description="Ids of the evidence items the answer rests on.")


# CompassMem's Response Generation Prompt (Appendix F.2), its requirements in the paper's words.
PAPER_REQUIREMENTS = (
    "Your task is to answer the QUESTION based on the provided CONTEXT.\n"
    "Requirements:\n"
    "- Be concise and direct: Provide ONLY the answer in the form of a short phrase, not a sentence. No "
    "explanations or additional commentary.\n"
    "- Original wording: If the context contains direct statements that answer the question, use the original "
    "wording from the context.\n"
    "- Inference: If the context doesn't have direct statements, you may summarize and infer the answer from "
    "the relevant information.\n"
    "- Time Reference Calculation: If there is a question about time references (like 'last year', 'two months "
    "ago', etc.), calculate the actual date based on the memory timestamp. Example: If a memory from 4 May 2022 "
    "mentions 'went to India last year,' then the trip occurred in 2021.\n"
    "- Specific Dates: Always convert relative time references to specific dates, months, or years.\n"
    "- Reasonable Justification: If you are uncertain or lack sufficient information, do not state that the "
    "information is insufficient. Instead, provide a reasonable and well-justified answer based on general "
    "knowledge.\n"
    "- Keep it brief: Keep your answer brief and to the point.\n"
)


def build_messages(
    question: str, evidence_text: str, question_date: str | None = None, *, abstain: bool = True
) -> list[BaseMessage]:
    """The responder's messages; ``abstain=False`` is CompassMem's Appendix F.2 prompt (no abstention)."""
    if not abstain:
        system = (
            PAPER_REQUIREMENTS
            + "Cite the ids of the context items the answer rests on.\n"
            + schema_instructions(Answer)
        )
        when = f"\nThe question is asked on {question_date}." if question_date else ""
        return [
            SystemMessage(content=system),
            HumanMessage(content=f"CONTEXT:\n{evidence_text}\n\nQUESTION:\n{question}{when}\n\nANSWER:"),
        ]
    system = (
        "You answer a question about a long conversation using ONLY the evidence given. Answer with a short "
        "phrase (a few words), not a sentence. Turn relative times ('last year', 'yesterday') into dates "
        "using the dates shown with the evidence. If the evidence does not contain the answer, say "
        "'Not mentioned'.\n" + schema_instructions(Answer)
    )
    when = f"\nThe question is asked on {question_date}." if question_date else ""
    return [
        SystemMessage(content=system),
        HumanMessage(content=f"Evidence:\n{evidence_text}\n\nQuestion: {question}{when}"),
    ]
