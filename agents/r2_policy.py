"""Memory-R2's answer agent policy (``graphs.r2``): the decisions that differ between a run with a chat model and
one without (the memory distillation and the answer), as one object per run.

``r2_policy(name, llm)`` is the one place that reads the run's pinned policy name: ``RuleR2Policy`` (``heuristic``)
keeps the most similar memories and answers extractively (``answers.answer_from_evidence``) and records nothing,
since those rules are the policy; ``LLMR2Policy`` asks the model for both and records each role's fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome
from logicmap.agents.r2_distill import distill_memories
from logicmap.agents.responder_policy import LLMResponderPolicy, ResponderPolicy, RuleResponderPolicy
from logicmap.memory.r2 import FactRecord
from logicmap.prompts.r2_distill import MemorySelection

__all__ = ["LLMR2Policy", "R2Policy", "RuleR2Policy", "r2_policy"]


class R2Policy(ResponderPolicy, Protocol):
    """The decisions of one answer-agent run: distill the retrieved memories, answer from the kept ones
    (``respond``), record fallbacks (``recorded``)."""

    def distill(self, question: str, memories: Sequence[FactRecord], *, keep: int, method: str, tags: Sequence[str],
                metadata: dict[str, Any]) -> RoleOutcome[MemorySelection]:
        """The retrieved memories that bear on the question."""
        ...


@dataclass(frozen=True)
class RuleR2Policy(RuleResponderPolicy):
    """The no-LLM policy: the ``keep`` most similar memories, the extractive answer, no fallback recorded."""

    def distill(self, question: str, memories: Sequence[FactRecord], *, keep: int, method: str, tags: Sequence[str],
                metadata: dict[str, Any]) -> RoleOutcome[MemorySelection]:
        return distill_memories(None, question, memories, keep=keep, method=method, tags=tags, metadata=metadata)


@dataclass(frozen=True)
class LLMR2Policy(LLMResponderPolicy):
    """The LLM policy: the distiller and the responder ask ``llm`` (None: no model configured, every fallback
    recorded)."""

    def distill(self, question: str, memories: Sequence[FactRecord], *, keep: int, method: str, tags: Sequence[str],
                metadata: dict[str, Any]) -> RoleOutcome[MemorySelection]:
        return distill_memories(self.llm, question, memories, keep=keep, method=method, tags=tags, metadata=metadata)


def r2_policy(name: str, llm: BaseChatModel | None) -> R2Policy:
    """The run's policy object from its pinned policy name: the rule policy for ``heuristic``, else the LLM one."""
    if name == "heuristic":
        return RuleR2Policy()
    return LLMR2Policy(llm)
