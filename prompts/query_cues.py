"""MRAgent query cue prompt: the keywords of a question, taken word for word from it (EXTRACTCUES, Algorithm 1).

The paper's keyword extraction prompt (Appendix E) applied to the question: 2-30 keywords that appear in the text,
of the kinds entity, topic, verb, time, location, task, event, people; nothing invented or paraphrased.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["MAX_KEYWORDS", "SYSTEM_MARKER", "VERSION", "QueryCues", "build_messages"]

VERSION = "mragent-query-cues-v1"
SYSTEM_MARKER = "You extract the cues of a question"
MAX_KEYWORDS = 30


class QueryCues(BaseModel):
    """The question's keywords, each as it appears in the question."""

    keywords: list[str] = Field(
        default_factory=list,
        description="Keywords copied from the question: names, places, things, activities, times, events.",
    )


def build_messages(question: str) -> list[BaseMessage]:
    system = (
        f"{SYSTEM_MARKER} for a memory that links keywords (cues) to what was said. Extract the question's "
        f"keywords directly from its text: at most {MAX_KEYWORDS}, of these kinds when present: entity, topic, "
        "verb, time, location, task, event, people. Do not invent, paraphrase or generalize a keyword; copy only "
        "words or phrases that appear in the question; leave out question words and inferred concepts.\n"
        + schema_instructions(QueryCues)
    )
    return [SystemMessage(content=system), HumanMessage(content=f"Question: {question}")]
