"""Memory-R2's own answer prompt (Fig. 8 of the paper), used by ``R2Context.faithful``.

The rules and the step-by-step approach are the paper's words, as far as the text we have (a review page) gives
them; the memories are grouped per speaker (the user whose turns a memory came from), and the final answer is the
``<answer>...</answer>`` span of the reply, as the paper parses it. The reply is typed (``SpanAnswer``: the paper's
free text in one field) so that the role keeps its validation (the span must be there), retry and fallback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["PAPER_ANSWER_PROMPT", "ROLE_MARKER", "VERSION", "SpanAnswer", "answer_span", "build_messages"]

VERSION = "r2-answer-paper-v1"
ROLE_MARKER = "You are an intelligent memory assistant"

# Memory-R2, Fig. 8 (Appendix B), the items the review page keeps, word for word.
PAPER_ANSWER_PROMPT = f"""{ROLE_MARKER} tasked with retrieving accurate information from conversation memories.
# INSTRUCTIONS:
1. Carefully analyze all provided memories from both speakers
2. Pay special attention to the timestamps to determine the answer
3. If the question asks about a specific event or fact, look for direct evidence in the memories
4. If the memories contain contradictory information, prioritize the most recent memory
5. If there is a question about time references (like "last year", "two months ago", etc.), calculate the actual date based on the memory timestamp. For example, if a memory from 4 May 2022 mentions "went to India last year," then the trip occurred in 2021
6. Always convert relative time references to specific dates, months, or years. For example, convert "last year" to "2022" or "two months ago" to "March 2023" based on the memory timestamp. Ignore the reference while answering the question
7. Focus only on the content of the memories from both speakers. Do not confuse character names mentioned in memories with the actual users who created those memories
8. If memories are insufficient and the question is about a general world fact, you may use reliable general world knowledge
9. Keep the final answer concise, typically no more than 10-12 words; do not omit essential entities or dates.
# APPROACH (Think step by step):
1. First, examine all memories that contain information related to the question
2. Examine the timestamps and content of these memories carefully
3. Look for explicit mentions of dates, times, locations, or events that answer the question
4. If the answer requires calculation (e.g., converting relative time references), show your work
5. Formulate a precise, concise answer based on the evidence in the memories, using general world knowledge only if memories are insufficient
6. Double-check that your answer directly addresses the question asked
7. Ensure your final answer is specific and avoids vague time references
Output the final answer only in this format, with no extra text: <answer>YOUR_FINAL_ANSWER</answer>"""

_SPAN = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


class SpanAnswer(BaseModel):
    """The paper's reply: the step-by-step reasoning, then the final answer in its span."""

    response: str = Field(
        description="Your step-by-step reasoning, then the final answer as <answer>YOUR_FINAL_ANSWER</answer>."
    )


def answer_span(text: str) -> str | None:
    """The last ``<answer>...</answer>`` span of a reply, stripped (None without one, or when it is empty)."""
    found = [m.strip() for m in _SPAN.findall(text)]
    return found[-1] if found and found[-1] else None


def build_messages(question: str, memories_by_speaker: Sequence[tuple[str, Sequence[str]]]) -> list[BaseMessage]:
    """``memories_by_speaker``: each user with their memories' lines (``timestamp: text``)."""
    blocks = [
        f"Memories for user {speaker}:\n" + ("\n".join(lines) or "(none)") for speaker, lines in memories_by_speaker
    ]
    system = PAPER_ANSWER_PROMPT + "\n" + schema_instructions(SpanAnswer)
    human = (
        "\n\n".join(blocks or ["(no memories)"]) + f"\n\nQuestion: {question}\n"
        "Answer step by step, and output the final answer in this format, with no extra text: "
        "<answer>YOUR_FINAL_ANSWER</answer>"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
