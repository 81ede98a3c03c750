"""Goal-Mem goal parser prompt: a user utterance -> an NL-Logic goal with typed answer variables.

Also holds the short NL-Logic primer every Goal-Mem prompt shows the model.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = ["NL_LOGIC_PRIMER", "SYSTEM_MARKER", "VERSION", "ParsedGoal", "build_messages"]

VERSION = "goalmem-parse-v1"
SYSTEM_MARKER = "You are the Goal-Mem goal parser."

NL_LOGIC_PRIMER = (
    "NL-Logic: an atomic formula is a short natural-language statement whose unknowns are typed variables "
    "written (x:type), e.g. `Maya had (x:drink) at (y:cafe)`. Variable names are lowercase identifiers; the "
    "same name means the same thing everywhere. Known things may be written as typed constants "
    '("Blue Finch":cafe) or simply as words. A goal lists the variables that answer the question: '
    "`find x: Maya had (x:drink) at (y:cafe) & Maya visited (y:cafe) last week`; a yes/no question is "
    "`check: Maya moved to Lisbon`. `&` joins formulas; do not use & ( ) inside the words."
)


class ParsedGoal(BaseModel):
    goal: str = Field(
        description="The utterance as one NL-Logic goal: 'find <answer variables>: <formula> & ...' or "
        "'check: <formula>'. Every answer variable must occur in a formula with its type."
    )


def build_messages(utterance: str) -> list[BaseMessage]:
    system = (
        f"{SYSTEM_MARKER} Translate the user's question about a past conversation into a goal in NL-Logic "
        "whose proof would answer it. Keep names, places and times from the question; give every unknown a "
        "precise type (drink, cafe, person, date, reason, ...). The answer variables are what the question asks for.\n"
        f"{NL_LOGIC_PRIMER}\n" + schema_instructions(ParsedGoal)
    )
    return [SystemMessage(content=system), HumanMessage(content=f"Question: {utterance}")]
