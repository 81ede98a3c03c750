"""Roles of the forward-reasoning baselines Goal-Mem is compared with: reformulate, answer, reflect, ReAct step.

Fallbacks: the question as its own query, an extractive answer (the best-matching sentence), "sufficient".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.answerers import answer_from_memory_lines
from logicmap.agents.base import RoleOutcome, run_role
from logicmap.agents.goalmem_heuristics import MemoryLine, content_stems
from logicmap.prompts import forward_answer, forward_react, forward_reflect, forward_reformulate
from logicmap.prompts.forward_answer import ForwardAnswer
from logicmap.prompts.forward_react import ReactStep
from logicmap.prompts.forward_reflect import Reflection
from logicmap.prompts.forward_reformulate import Reformulation

__all__ = [
    "answer_from_memories",
    "keyword_queries",
    "react_step",
    "reflect_on_answer",
    "reformulate_question",
    "scripted_react_step",
]


def _lines(memories: Sequence[MemoryLine]) -> list[tuple[str, str]]:
    return [(mid, f"({when or 'undated'}) {text}") for mid, text, when in memories]


def _tags(role: str, version: str) -> dict[str, Any]:
    return {"role": role, "tags": ["strategy:forward"], "metadata": {"prompt_version": version}}


def keyword_queries(question: str, max_queries: int = 3) -> Reformulation:
    """The reformulator's fallback and no-LLM rule: the question and its content words."""
    keywords = " ".join(w for w in re.findall(r"[A-Za-z0-9']+", question) if content_stems(w))
    return Reformulation(queries=list(dict.fromkeys(q for q in (question, keywords) if q.strip()))[:max_queries])


def scripted_react_step(
    question: str, memories: Sequence[MemoryLine], searches_left: int, *, searched: bool
) -> ReactStep:
    """The ReAct step's fallback and no-LLM rule: search the question once, then answer extractively."""
    if not searched and searches_left > 0:
        return ReactStep(thought="search the question", action="search", query=question)
    extracted = answer_from_memory_lines(question, memories)
    return ReactStep(
        thought="answer from the observations", action="answer", answer=extracted.answer, cited=extracted.cited
    )


def reformulate_question(
    llm: BaseChatModel | None,
    question: str,
    *,
    max_queries: int = 3,
    method: str = "function_calling",
) -> RoleOutcome[Reformulation]:
    """Search queries for the question. Fallback: ``keyword_queries``."""

    def validate(o: Reformulation) -> list[str]:
        queries = [q for q in o.queries if q.strip()]
        return [] if 1 <= len(queries) <= max_queries else [f"give 1 to {max_queries} non-empty queries"]

    return run_role(
        llm,
        messages=forward_reformulate.build_messages(question, max_queries),
        schema=Reformulation,
        validate=validate,
        fallback=lambda: keyword_queries(question, max_queries),
        method=method,
        **_tags("forward_reformulate", forward_reformulate.VERSION),
    )


def answer_from_memories(
    llm: BaseChatModel | None,
    question: str,
    memories: Sequence[MemoryLine],
    *,
    method: str = "function_calling",
) -> RoleOutcome[ForwardAnswer]:
    """An answer citing memory ids. Fallback: ``answers.answer_from_memory_lines``."""
    known = {mid for mid, _, _ in memories}

    def validate(o: ForwardAnswer) -> list[str]:
        problems = [] if o.answer.strip() else ["the answer is empty"]
        unknown = [c for c in o.cited if c not in known]
        if unknown:
            problems.append(f"unknown memory ids {unknown}; cite ids from the list")
        return problems

    return run_role(
        llm,
        messages=forward_answer.build_messages(question, _lines(memories)),
        schema=ForwardAnswer,
        validate=validate,
        fallback=lambda: answer_from_memory_lines(question, memories),
        method=method,
        **_tags("forward_answer", forward_answer.VERSION),
    )


def reflect_on_answer(
    llm: BaseChatModel | None,
    question: str,
    draft: str,
    memories: Sequence[MemoryLine],
    *,
    method: str = "function_calling",
) -> RoleOutcome[Reflection]:
    """Is the draft supported? Fallback: yes (which stops the reflection loop)."""

    def validate(o: Reflection) -> list[str]:
        if not o.sufficient and not (o.query and o.query.strip()):
            return ["when the memories are not sufficient, give a follow-up query"]
        return []

    return run_role(
        llm,
        messages=forward_reflect.build_messages(question, draft, _lines(memories)),
        schema=Reflection,
        validate=validate,
        fallback=lambda: Reflection(sufficient=True),
        method=method,
        **_tags("forward_reflect", forward_reflect.VERSION),
    )


def react_step(
    llm: BaseChatModel | None,
    question: str,
    transcript: Sequence[str],
    memories: Sequence[MemoryLine],
    searches_left: int,
    *,
    searched: bool,
    method: str = "function_calling",
) -> RoleOutcome[ReactStep]:
    """The next ReAct action. Fallback: ``scripted_react_step`` (search the question once, then answer
    extractively)."""
    known = {mid for mid, _, _ in memories}

    def validate(o: ReactStep) -> list[str]:
        if o.action == "search":
            if not (o.query and o.query.strip()):
                return ["a search step needs a query"]
            if searches_left <= 0:
                return ["no searches left: answer now"]
            return []
        problems = [] if (o.answer and o.answer.strip()) else ["an answer step needs an answer"]
        unknown = [c for c in o.cited if c not in known]
        if unknown:
            problems.append(f"unknown memory ids {unknown}")
        return problems

    return run_role(
        llm,
        messages=forward_react.build_messages(question, transcript, searches_left),
        schema=ReactStep,
        validate=validate,
        fallback=lambda: scripted_react_step(question, memories, searches_left, searched=searched),
        method=method,
        **_tags("forward_react", forward_react.VERSION),
    )
