"""MRAgent topic abstraction prompt: a label and a description for each clustered set of events (Eq. 18).

The paper obtains topic nodes "by applying an LLM-based abstraction function to the set of episodic segments"
(Appendix B.1, Eq. 18); its dialogue processing prompt (Appendix E) names each topic with a "Topic description".
Here the clusters come from the topic layer and the model abstracts each one: a short label and a one or two
sentence description of what its events share. All changed topics of a session go in one call.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_LABEL_WORDS",
    "SYSTEM_MARKER",
    "VERSION",
    "TopicAbstract",
    "TopicAbstractSet",
    "build_messages",
]

VERSION = "mragent-abstract-topics-v1"
SYSTEM_MARKER = "You abstract topics from clusters of events"
MAX_LABEL_WORDS = 6
MAX_LABEL_CHARS = 60
MAX_DESCRIPTION_CHARS = 300


class TopicAbstract(BaseModel):
    topic: str = Field(description="The topic id as listed, e.g. 'T3'.")
    label: str = Field(
        description=f"A short concrete name for what the events share (at most {MAX_LABEL_WORDS} words)."
    )
    description: str = Field(description="One or two sentences: the recurring pattern of the topic's events.")


class TopicAbstractSet(BaseModel):
    topics: list[TopicAbstract] = Field(default_factory=list, description="One entry per listed topic.")


def build_messages(topics_text: str) -> list[BaseMessage]:
    """``topics_text``: one block per topic, its id then its events (the most central first)."""
    system = (
        f"{SYSTEM_MARKER} of one conversation memory. Each topic is a cluster of episodic events that share a "
        "recurring semantic pattern. For every listed topic give a short concrete label (at most "
        f"{MAX_LABEL_WORDS} words, e.g. 'adoption agency visits') and a description of one or two sentences of "
        "what its events have in common, using only what the events say. Use each listed topic id exactly once; "
        "invent no topic.\n" + schema_instructions(TopicAbstractSet)
    )
    return [SystemMessage(content=system), HumanMessage(content=f"Topics:\n{topics_text}")]
