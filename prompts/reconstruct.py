"""Reconstruction prompts (MRAgent): the navigator that calls memory tools, and the forced final answer.

The navigator answers by calling ``submit_answer``; the final-answer prompt asks for the same typed answer.
``build_paper_navigator_messages`` and ``build_paper_final_messages`` are the paper's QA and Tool-Use Prompt
(Appendix E: its two modes and its answer rules, no abstention), used by ``ReconstructContext.faithful``; the
answer stays the typed ``submit_answer`` call (the paper's ``{"mode": "answer", ...}`` JSON as a tool call).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from logicmap.prompts.common import schema_instructions

__all__ = [
    "ANSWER_TOOL",
    "PAPER_ANSWER_RULES",
    "PAPER_VERSION",
    "VERSION",
    "PaperReconstructedAnswer",
    "ReconstructedAnswer",
    "answer_tool_spec",
    "budget_note",
    "build_final_messages",
    "build_navigator_messages",
    "build_paper_final_messages",
    "build_paper_navigator_messages",
]

VERSION = "reconstruct-v2"
PAPER_VERSION = "reconstruct-paper-v1"

# MRAgent, Appendix E, "MRAgent QA and Tool-Use Prompt", word for word.
_PAPER_INTRO = (
    "You are a question-answering agent with access to event-based memory. Answer the question if sufficient "
    "evidence exists; otherwise, query memory tools to gather more information."
)
PAPER_ANSWER_RULES = (
    "Answer Rules:\n"
    "- Yes/No questions: output `Yes`, `No`, `Likely yes`, or `Likely no`.\n"
    "- Location questions: answer with a specific place name.\n"
    "- Counting questions: answer with the number of relevant items.\n"
    "- Other questions: output the minimal concrete entity or phrase."
)
ANSWER_TOOL = "submit_answer"


class ReconstructedAnswer(BaseModel):
    """The answer to the question, reconstructed from memory."""

    answer: str = Field(description="A short, direct answer. Say 'not in memory' when the memory does not say.")
    cited_event_ids: list[str] = Field(
        default_factory=list, description="Ids of the events the answer rests on, e.g. ['S3-E2']."
    )
    cited_turn_ids: list[str] = Field(
        default_factory=list, description="dia ids of the turns that state it, e.g. ['D3:5']."
    )
    confidence: float = Field(0.5, ge=0.0, le=1.0, description="How sure you are, 0 to 1.")


class PaperReconstructedAnswer(ReconstructedAnswer):
    """The answer to the question, by the paper's answer rules (no abstention)."""

    answer: str = Field(
        description="The answer, by the answer rules (Yes/No, a place name, a number, or the "
        "minimal concrete entity or phrase)."
    )


def answer_tool_spec(paper: bool = False) -> dict[str, Any]:
    """``submit_answer`` as an OpenAI-style tool: calling it is answer mode (``paper``: the paper's answer
    description, without the project's abstention)."""
    schema = PaperReconstructedAnswer if paper else ReconstructedAnswer
    return {
        "type": "function",
        "function": {
            "name": ANSWER_TOOL,
            "description": "Give the final answer with the event and turn ids it rests on. Call it alone, once.",
            "parameters": schema.model_json_schema(),
        },
    }


def build_navigator_messages(
    question: str,
    *,
    question_date: str | None,
    cues_text: str,
    active_text: str,
    max_turns: int,
    max_tool_calls: int,
    topics_text: str = "",
) -> list[BaseMessage]:
    """``topics_text``: the topic nodes the active set belongs to (ids for ``query_topic_events``)."""
    system = (
        "You answer a question about a long conversation by reconstructing the memory of it. The memory "
        "is a graph of events (ids like 'S3-E2', each citing turns like 'D3:5'), keyword cues linked to "
        "events by short tags, topics grouping related events (ids like 'T2'), and facts about people. Work in "
        "turns. Each turn choose one mode:\n"
        f"- navigate: call memory tools (at most {max_tool_calls} calls per turn) to follow cues, read "
        "events and their turns, check dates and context, or look up facts about a person;\n"
        f"- answer: call {ANSWER_TOOL} with a short answer, the event and turn ids it rests on, and your confidence.\n"
        f"You have at most {max_turns} turns. Prefer exact words from the turns; resolve relative times "
        "('last week') against the date the turn was said. If memory does not say, answer 'not in memory'."
    )
    human = (
        f"Question: {question}\n"
        + (f"Asked on: {question_date}\n" if question_date else "")
        + f"Cues found in the question: {cues_text or 'none'}\n"
        + f"Active set (memories the cues lead to):\n{active_text or '(empty: follow other cues)'}"
        + (f"\nTopics of the active set:\n{topics_text}" if topics_text else "")
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_paper_navigator_messages(
    question: str,
    *,
    question_date: str | None,
    cues_text: str,
    active_text: str,
    max_turns: int,
    max_tool_calls: int,
    topics_text: str = "",
) -> list[BaseMessage]:
    """The paper's QA and Tool-Use Prompt (Appendix E) with the run's question and active set; the answer mode is
    the ``submit_answer`` call (its "supports" are the cited event and turn ids). The budgets (Appendix D.4) and
    the id formats are said so that the tools can be called; nothing else is added."""
    system = (
        f"{_PAPER_INTRO}\n\n{PAPER_ANSWER_RULES}\n\n"
        "Choose ONE mode:\n"
        f'(1) "answer" - if evidence is sufficient, call {ANSWER_TOOL} with the answer, the ids it rests on '
        "(supports: event ids like 'S3-E2', turn ids like 'D3:5') and your confidence 0.0-1.0.\n"
        '(2) "navigate" - if evidence is insufficient, call all relevant memory tools directly (no explanations).\n'
        f"At most {max_tool_calls} tool calls per turn and {max_turns} turns."
    )
    human = (
        f"Question: {question}\n"
        + (f"Asked on: {question_date}\n" if question_date else "")
        + f"Cues found in the question: {cues_text or 'none'}\n"
        + f"Active set (memories the cues lead to):\n{active_text or '(empty: follow other cues)'}"
        + (f"\nTopics of the active set:\n{topics_text}" if topics_text else "")
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]


def budget_note(turns_left: int, dropped: int, max_tool_calls: int) -> str:
    parts = []
    if dropped:
        parts.append(f"{dropped} tool call(s) were not run: at most {max_tool_calls} per turn.")
    if turns_left <= 1:
        parts.append(f"This is your last turn: call {ANSWER_TOOL} now with the best answer you have.")
    else:
        parts.append(f"{turns_left} turns left.")
    return " ".join(parts)


def build_final_messages(question: str, evidence_text: str, question_date: str | None = None) -> list[BaseMessage]:
    system = (
        "Answer a question about a conversation from the memories below only. Cite the event ids and "
        "turn ids the answer rests on, and say how sure you are. If the memories do not say, answer "
        "'not in memory' with low confidence.\n" + schema_instructions(ReconstructedAnswer)
    )
    human = (
        f"Question: {question}\n"
        + (f"Asked on: {question_date}\n" if question_date else "")
        + f"Memories:\n{evidence_text or '(none)'}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]


def build_paper_final_messages(
    question: str, evidence_text: str, question_date: str | None = None
) -> list[BaseMessage]:
    """The forced answer (the turns are spent) in the paper's answer mode: its answer rules, no abstention."""
    system = (
        f"{_PAPER_INTRO} The memory tools are no longer available: answer now from the memories below, with the "
        f"ids it rests on (supports) and your confidence.\n\n{PAPER_ANSWER_RULES}\n"
        + schema_instructions(PaperReconstructedAnswer)
    )
    human = (
        f"Question: {question}\n"
        + (f"Asked on: {question_date}\n" if question_date else "")
        + f"Memories:\n{evidence_text or '(none)'}"
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]
