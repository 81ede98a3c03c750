"""The forward-reasoning baselines' policy (``graphs.strategies.forward``), chosen once per run: the LLM roles of
``agents.goalmem_forward`` or the no-LLM rules.

One method per decision a baseline makes: ``reformulate`` the question into queries, ``answer`` from memories,
``reflect`` on a draft, take a ``react`` step. ``forward_policy`` is the one place that reads the policy name. The
rules are the roles' fallbacks used without a request and without a ``FallbackRecord``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from langchain_core.language_models import BaseChatModel

from logicmap.agents.answerers import answer_from_memory_lines
from logicmap.agents.base import Cost, RoleOutcome
from logicmap.agents.goalmem_forward import (
    answer_from_memories,
    keyword_queries,
    react_step,
    reflect_on_answer,
    reformulate_question,
    scripted_react_step,
)
from logicmap.agents.goalmem_heuristics import MemoryLine
from logicmap.prompts.forward_answer import ForwardAnswer
from logicmap.prompts.forward_react import ReactStep
from logicmap.prompts.forward_reflect import Reflection
from logicmap.prompts.forward_reformulate import Reformulation

__all__ = ["ForwardPolicy", "LLMForwardPolicy", "RuleForwardPolicy", "forward_policy"]


class ForwardPolicy(Protocol):
    """The decisions of a forward-reasoning baseline run."""

    def reformulate(self, question: str, *, max_queries: int = 3) -> RoleOutcome[Reformulation]:
        """Search queries for the question."""
        ...

    def answer(self, question: str, memories: Sequence[MemoryLine]) -> RoleOutcome[ForwardAnswer]:
        """An answer citing memory ids."""
        ...

    def reflect(self, question: str, draft: str, memories: Sequence[MemoryLine]) -> RoleOutcome[Reflection]:
        """Is the draft supported by the memories (else a follow-up query)?"""
        ...

    def react(
        self,
        question: str,
        transcript: Sequence[str],
        memories: Sequence[MemoryLine],
        searches_left: int,
        *,
        searched: bool,
    ) -> RoleOutcome[ReactStep]:
        """The next ReAct action: search or answer."""
        ...


@dataclass(frozen=True)
class LLMForwardPolicy:
    """The roles of ``agents.goalmem_forward`` on the run's chat model (validated, retried once, else the
    fallback, recorded)."""

    llm: BaseChatModel | None
    method: str = "function_calling"

    def reformulate(self, question: str, *, max_queries: int = 3) -> RoleOutcome[Reformulation]:
        return reformulate_question(self.llm, question, max_queries=max_queries, method=self.method)

    def answer(self, question: str, memories: Sequence[MemoryLine]) -> RoleOutcome[ForwardAnswer]:
        return answer_from_memories(self.llm, question, memories, method=self.method)

    def reflect(self, question: str, draft: str, memories: Sequence[MemoryLine]) -> RoleOutcome[Reflection]:
        return reflect_on_answer(self.llm, question, draft, memories, method=self.method)

    def react(
        self,
        question: str,
        transcript: Sequence[str],
        memories: Sequence[MemoryLine],
        searches_left: int,
        *,
        searched: bool,
    ) -> RoleOutcome[ReactStep]:
        return react_step(
            self.llm, question, transcript, memories, searches_left, searched=searched, method=self.method
        )


class RuleForwardPolicy:
    """The no-LLM rules: the question and its content words as queries, the extractive answer, a reflection that
    accepts the draft (one retrieval round), and a ReAct that searches the question once, then answers."""

    def reformulate(self, question: str, *, max_queries: int = 3) -> RoleOutcome[Reformulation]:
        return RoleOutcome(output=keyword_queries(question, max_queries), cost=Cost())

    def answer(self, question: str, memories: Sequence[MemoryLine]) -> RoleOutcome[ForwardAnswer]:
        return RoleOutcome(output=answer_from_memory_lines(question, memories), cost=Cost())

    def reflect(self, question: str, draft: str, memories: Sequence[MemoryLine]) -> RoleOutcome[Reflection]:
        return RoleOutcome(output=Reflection(sufficient=True), cost=Cost())

    def react(
        self,
        question: str,
        transcript: Sequence[str],
        memories: Sequence[MemoryLine],
        searches_left: int,
        *,
        searched: bool,
    ) -> RoleOutcome[ReactStep]:
        return RoleOutcome(
            output=scripted_react_step(question, memories, searches_left, searched=searched), cost=Cost()
        )


def forward_policy(name: str, llm: BaseChatModel | None, *, method: str = "function_calling") -> ForwardPolicy:
    """The run's policy from its resolved name: the rules for ``heuristic``, the LLM roles otherwise."""
    if name == "heuristic":
        return RuleForwardPolicy()
    return LLMForwardPolicy(llm, method)
