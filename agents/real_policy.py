"""REAL's policy, chosen once per run: the LLM roles of ``agents.real`` or the no-LLM rules.

One method per decision the graph (``graphs.strategies.real``) makes with a model or without one: plan the ``roots``, score
(``evaluate``) the listed paths in one call, and ``answer`` from the kept paths. ``real_policy`` is the one place
that reads the policy name. The rules are the roles' similarity-and-overlap fallbacks, used without a request and
without a ``FallbackRecord``. The LLM policy on a run without a chat model uses the rules too, and records that
once (at the root planner).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome
from logicmap.agents.real import (
    answer_from_paths,
    evaluate_paths,
    heuristic_answer,
    heuristic_roots,
    heuristic_scores,
    plan_roots,
)
from logicmap.memory.retrieval.fact_paths import FactIndex, FactPath
from logicmap.prompts.real_answer import PathAnswer
from logicmap.prompts.real_evaluate import PathScores
from logicmap.prompts.real_roots import RootPlan

__all__ = ["RULES", "LLMRealPolicy", "RealPolicy", "RuleRealPolicy", "real_policy"]

Window = tuple[datetime | None, datetime | None]


class RealPolicy(Protocol):
    """The decisions of a REAL run."""

    def roots(self, question: str, index: FactIndex, similar: Sequence[str]) -> RoleOutcome[RootPlan]:
        """Root entities with an exploration intent each, the time named and whether uncertain facts count
        (``similar``: the ids of the facts most similar to the question)."""
        ...

    def evaluate(
        self,
        question: str,
        paths: Sequence[FactPath],
        index: FactIndex,
        *,
        similarities: Sequence[float],
        window: Window | None,
        reference_time: str | None,
    ) -> RoleOutcome[PathScores]:
        """Relevance, coherence and sufficiency of every listed path (labels P1..Pn), in one decision."""
        ...

    def answer(
        self,
        question: str,
        paths: Sequence[FactPath],
        index: FactIndex,
        *,
        reference_time: str | None,
        passing: bool,
    ) -> RoleOutcome[PathAnswer]:
        """The answer from the kept paths only."""
        ...


class RuleRealPolicy:
    """The no-LLM rules: entities named in the question (else the heads of the most similar facts), the
    similarity-and-overlap scores, the answer read off the best path."""

    def roots(self, question: str, index: FactIndex, similar: Sequence[str]) -> RoleOutcome[RootPlan]:
        named = similar if len(index) else ()  # no fact: nothing similar to fall back on
        return RoleOutcome(output=heuristic_roots(question, index, named), cost=Cost())

    def evaluate(
        self,
        question: str,
        paths: Sequence[FactPath],
        index: FactIndex,
        *,
        similarities: Sequence[float],
        window: Window | None,
        reference_time: str | None,
    ) -> RoleOutcome[PathScores]:
        labels = [f"P{i + 1}" for i in range(len(paths))]
        return RoleOutcome(output=heuristic_scores(question, paths, labels, index, similarities, window), cost=Cost())

    def answer(
        self,
        question: str,
        paths: Sequence[FactPath],
        index: FactIndex,
        *,
        reference_time: str | None,
        passing: bool,
    ) -> RoleOutcome[PathAnswer]:
        return RoleOutcome(output=heuristic_answer(question, paths, index, passing=passing), cost=Cost())


RULES = RuleRealPolicy()


@dataclass(frozen=True)
class LLMRealPolicy:
    """The roles of ``agents.real`` on the run's chat model, tagged with the run's ``tags`` and ``metadata``.
    Without a chat model (``llm`` None) it follows the rules, recorded once at the root planner."""

    llm: BaseChatModel | None
    method: str = "function_calling"
    tags: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def roots(self, question: str, index: FactIndex, similar: Sequence[str]) -> RoleOutcome[RootPlan]:
        if self.llm is None:
            rules = RULES.roots(question, index, similar)
            reason = "no chat model configured: heuristic policy used"
            return rules.model_copy(update={"fallback": FallbackRecord(role="real", reason=reason)})
        if not len(index):  # no fact to choose a root from: nothing to ask the planner
            return RULES.roots(question, index, similar)
        outcome = plan_roots(
            self.llm,
            question,
            index,
            similar_fact_ids=similar,
            method=self.method,
            tags=self.tags,
            metadata=self.metadata,
        )
        if not outcome.output.roots:  # every root the model named was unknown
            outcome.output = outcome.output.model_copy(
                update={"roots": heuristic_roots(question, index, similar).roots}
            )
        return outcome

    def evaluate(
        self,
        question: str,
        paths: Sequence[FactPath],
        index: FactIndex,
        *,
        similarities: Sequence[float],
        window: Window | None,
        reference_time: str | None,
    ) -> RoleOutcome[PathScores]:
        if self.llm is None:
            return RULES.evaluate(
                question, paths, index, similarities=similarities, window=window, reference_time=reference_time
            )
        return evaluate_paths(
            self.llm,
            question,
            paths,
            index,
            similarities=similarities,
            window=window,
            reference_time=reference_time,
            method=self.method,
            tags=self.tags,
            metadata=self.metadata,
        )

    def answer(
        self,
        question: str,
        paths: Sequence[FactPath],
        index: FactIndex,
        *,
        reference_time: str | None,
        passing: bool,
    ) -> RoleOutcome[PathAnswer]:
        if self.llm is None:
            return RULES.answer(question, paths, index, reference_time=reference_time, passing=passing)
        return answer_from_paths(
            self.llm,
            question,
            paths,
            index,
            reference_time=reference_time,
            passing=passing,
            method=self.method,
            tags=self.tags,
            metadata=self.metadata,
        )


def real_policy(
    name: str,
    llm: BaseChatModel | None,
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RealPolicy:
    """The run's policy from its pinned name (``auto`` already resolved): the rules for ``heuristic``, the LLM
    roles otherwise (``tags``/``metadata``: the run's tracing, put on every role call)."""
    if name == "heuristic":
        return RULES
    return LLMRealPolicy(llm, method, tuple(tags), dict(metadata or {}))
