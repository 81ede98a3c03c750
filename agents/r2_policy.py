"""Memory-R2's answer agent policy (``graphs.strategies.r2``): the decisions that differ between a run with a chat model and
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

from logicmap.agents.answerers import answer_from_evidence
from logicmap.agents.base import Cost, RoleOutcome, run_role
from logicmap.agents.r2_distill import distill_memories
from logicmap.agents.responder import EvidenceText
from logicmap.agents.responder_policy import LLMResponderPolicy, ResponderPolicy, RuleResponderPolicy
from logicmap.memory.records.r2 import FactRecord
from logicmap.prompts import r2_answer
from logicmap.prompts.r2_distill import MemorySelection
from logicmap.prompts.respond import Answer

__all__ = ["LLMR2Policy", "R2Policy", "RuleR2Policy", "paper_answer", "r2_policy"]


def paper_answer(
    llm: BaseChatModel | None,
    question: str,
    evidence: Sequence[EvidenceText],
    speakers: Sequence[tuple[str, Sequence[str]]],
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[Answer]:
    """The answer with the paper's prompt (Fig. 8, ``faithful``): ``speakers`` groups the evidence ids per user; the
    reply's ``<answer>`` span is the answer (a reply without one is sent back once); the fallback is the extractive
    answer. The paper cites no ids: ``cited_ids`` stays empty."""
    by_id = {e.id: e for e in evidence}
    groups = [
        (who, [f"{by_id[i].time or 'undated'}: {by_id[i].text}" for i in ids if i in by_id]) for who, ids in speakers
    ]

    def validate(reply: r2_answer.SpanAnswer) -> list[str]:
        return [] if r2_answer.answer_span(reply.response) else ["no <answer>...</answer> span with the final answer"]

    outcome = run_role(
        llm,
        role="responder",
        messages=r2_answer.build_messages(question, groups),
        schema=r2_answer.SpanAnswer,
        validate=validate,
        fallback=lambda: r2_answer.SpanAnswer(
            response=f"<answer>{answer_from_evidence(question, evidence).answer}</answer>"
        ),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": r2_answer.VERSION},
    )
    answer = r2_answer.answer_span(outcome.output.response) or ""
    return RoleOutcome(
        output=Answer(answer=answer), cost=outcome.cost, fallback=outcome.fallback, attempts=outcome.attempts
    )


class R2Policy(ResponderPolicy, Protocol):
    """The decisions of one answer-agent run: distill the retrieved memories, answer from the kept ones
    (``respond``), record fallbacks (``recorded``)."""

    def distill(
        self,
        question: str,
        memories: Sequence[FactRecord],
        *,
        keep: int,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[MemorySelection]:
        """The retrieved memories that bear on the question."""
        ...

    def respond_paper(
        self,
        question: str,
        evidence: Sequence[EvidenceText],
        speakers: Sequence[tuple[str, Sequence[str]]],
        *,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[Answer]:
        """The answer with the paper's prompt (``faithful``; ``speakers``: each user with their memories' ids)."""
        ...


@dataclass(frozen=True)
class RuleR2Policy(RuleResponderPolicy):
    """The no-LLM policy: the ``keep`` most similar memories, the extractive answer, no fallback recorded."""

    def distill(
        self,
        question: str,
        memories: Sequence[FactRecord],
        *,
        keep: int,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[MemorySelection]:
        return distill_memories(None, question, memories, keep=keep, method=method, tags=tags, metadata=metadata)

    def respond_paper(
        self,
        question: str,
        evidence: Sequence[EvidenceText],
        speakers: Sequence[tuple[str, Sequence[str]]],
        *,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[Answer]:
        """The extractive answer, as ``respond`` (no model)."""
        return RoleOutcome(output=answer_from_evidence(question, evidence), cost=Cost())


@dataclass(frozen=True)
class LLMR2Policy(LLMResponderPolicy):
    """The LLM policy: the distiller and the responder ask ``llm`` (None: no model configured, every fallback
    recorded)."""

    def distill(
        self,
        question: str,
        memories: Sequence[FactRecord],
        *,
        keep: int,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[MemorySelection]:
        return distill_memories(self.llm, question, memories, keep=keep, method=method, tags=tags, metadata=metadata)

    def respond_paper(
        self,
        question: str,
        evidence: Sequence[EvidenceText],
        speakers: Sequence[tuple[str, Sequence[str]]],
        *,
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[Answer]:
        return paper_answer(self.llm, question, evidence, speakers, method=method, tags=tags, metadata=metadata)


def r2_policy(name: str, llm: BaseChatModel | None) -> R2Policy:
    """The run's policy object from its pinned policy name: the rule policy for ``heuristic``, else the LLM one."""
    if name == "heuristic":
        return RuleR2Policy()
    return LLMR2Policy(llm)
