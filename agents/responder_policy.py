"""The policy of the strategies whose one LLM role is the responder (``graphs.strategies.rerank``, ``graphs.strategies.baselines``' dense
and bm25): whether the responder asks the chat model, and whether its fallback is recorded, as one object per run.

``responder_policy(name, llm)`` is the one place that reads the run's policy name: ``RuleResponderPolicy`` (the
no-LLM policy, ``heuristic``) answers with ``answers.answer_from_evidence`` and records nothing, since the rule is
the policy; ``LLMResponderPolicy`` asks the model and records the responder's fallback (with no model configured
the responder falls back on every question, and each is recorded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import FallbackRecord, RoleOutcome
from logicmap.agents.responder import EvidenceText, respond
from logicmap.prompts.respond import Answer

__all__ = ["LLMResponderPolicy", "ResponderPolicy", "RuleResponderPolicy", "responder_policy"]


class ResponderPolicy(Protocol):
    """The decisions of a run whose one LLM role is the responder."""

    def respond(
        self,
        question: str,
        evidence: Sequence[EvidenceText],
        *,
        question_date: str | None = None,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[Answer]:
        """The answer from ``evidence`` only."""
        ...

    def recorded(self, fallback: FallbackRecord | None) -> list[FallbackRecord]:
        """The fallbacks a role's outcome adds to the run's record."""
        ...


@dataclass(frozen=True)
class RuleResponderPolicy:
    """The no-LLM policy: the extractive answer (``answers.answer_from_evidence``), no fallback recorded."""

    def respond(
        self,
        question: str,
        evidence: Sequence[EvidenceText],
        *,
        question_date: str | None = None,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[Answer]:
        return respond(
            None, question, evidence, question_date=question_date, method=method, tags=tags, metadata=metadata
        )

    def recorded(self, fallback: FallbackRecord | None) -> list[FallbackRecord]:
        return []


@dataclass(frozen=True)
class LLMResponderPolicy:
    """The LLM policy: the responder asks ``llm`` (None: no model configured, so every answer is the recorded
    fallback)."""

    llm: BaseChatModel | None

    def respond(
        self,
        question: str,
        evidence: Sequence[EvidenceText],
        *,
        question_date: str | None = None,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[Answer]:
        return respond(
            self.llm, question, evidence, question_date=question_date, method=method, tags=tags, metadata=metadata
        )

    def recorded(self, fallback: FallbackRecord | None) -> list[FallbackRecord]:
        return [fallback] if fallback is not None else []


def responder_policy(name: str, llm: BaseChatModel | None) -> ResponderPolicy:
    """The run's policy object from its resolved policy name: the rule policy for ``heuristic``, else the LLM one."""
    if name == "heuristic":
        return RuleResponderPolicy()
    return LLMResponderPolicy(llm)
