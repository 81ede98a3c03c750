"""Goal-Mem's policy, chosen once per run: the LLM roles (``agents.goalmem``) or the no-LLM rules.

One method per decision the graph (``graphs.strategies.goalmem``) makes with a model or without one: ``parse`` the question
into a goal, ``decompose`` it (the breadth loop), ``unify`` the open subgoals with the retrieved memories,
``refine`` unresolved subgoals into antecedents (the depth loop) and ``generate`` the answer. ``goalmem_policy``
is the one place that reads the policy name. The rules are the roles' fallbacks used without a request and
without a ``FallbackRecord`` (the no-LLM policy is chosen, it is not a failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import Cost, RoleOutcome
from logicmap.agents.goalmem import (
    UnifyStep,
    checked_unification,
    decompose_goal,
    generate_answer,
    goal_of,
    next_decomposition,
    parse_utterance,
    refine_subgoals,
    rule_of,
    unify_subgoals,
    wh_goal,
)
from logicmap.agents.goalmem_heuristics import MemoryLine, heuristic_answer, lexical_unification
from logicmap.memory.records.nl_logic import Atom, Goal, Rule, Substitution, Term
from logicmap.prompts.goalmem_generate import GoalAnswer
from logicmap.prompts.goalmem_refine import Refinement
from logicmap.prompts.goalmem_unify import Unification

__all__ = ["RULES", "GoalMemPolicy", "LLMGoalMemPolicy", "RuleGoalMemPolicy", "goalmem_policy"]

Antecedents = tuple[list[tuple[str, Atom]], RoleOutcome[Refinement]]


class GoalMemPolicy(Protocol):
    """The decisions of a Goal-Mem run. ``max_attempts`` is what the run's call budget allows a role (2: with
    its retry); the rules make no request and ignore it."""

    def parse(self, utterance: str, *, max_attempts: int = 2) -> RoleOutcome[Goal]:
        """The question as an NL-Logic goal."""
        ...

    def decompose(
        self, utterance: str, goal: Goal, failed: Sequence[tuple[Rule, str]], *, max_attempts: int = 2
    ) -> RoleOutcome[Rule]:
        """A rule ``subgoals => goal`` unlike the failed ones (with what each left unproved)."""
        ...

    def unify(
        self,
        utterance: str,
        subgoals: dict[str, Atom],
        memories: Sequence[MemoryLine],
        substitution: Substitution,
        *,
        max_attempts: int = 2,
    ) -> tuple[UnifyStep, RoleOutcome[Unification]]:
        """One batched unification of the open subgoals with the memories, checked."""
        ...

    def refine(
        self,
        utterance: str,
        goal: Goal,
        substitution: Substitution,
        unresolved: dict[str, tuple[Atom, str]],
        memories: Sequence[MemoryLine],
        known_types: dict[str, Term],
        existing: set[str],
        *,
        max_attempts: int = 2,
    ) -> Antecedents:
        """One antecedent per unresolved frontier subgoal (new ones only)."""
        ...

    def generate(
        self,
        utterance: str,
        goal: Goal,
        substitution: Substitution,
        supporting: Sequence[MemoryLine],
        *,
        max_attempts: int = 2,
    ) -> RoleOutcome[GoalAnswer]:
        """The answer from the grounded goal and the supporting memories."""
        ...


@dataclass(frozen=True)
class LLMGoalMemPolicy:
    """The roles of ``agents.goalmem`` on the run's chat model (each validated, retried once, else its fallback,
    recorded; without a model every role falls back, recorded)."""

    llm: BaseChatModel | None
    method: str = "function_calling"
    paper_prompts: bool = False
    """The paper's prompts (Appendix I) for decompose, unify, refine and generate (``GoalMemContext.faithful``)."""

    def parse(self, utterance: str, *, max_attempts: int = 2) -> RoleOutcome[Goal]:
        return parse_utterance(self.llm, utterance, method=self.method, max_attempts=max_attempts)

    def decompose(
        self, utterance: str, goal: Goal, failed: Sequence[tuple[Rule, str]], *, max_attempts: int = 2
    ) -> RoleOutcome[Rule]:
        return decompose_goal(
            self.llm, utterance, goal, failed, method=self.method, max_attempts=max_attempts, paper=self.paper_prompts
        )

    def unify(
        self,
        utterance: str,
        subgoals: dict[str, Atom],
        memories: Sequence[MemoryLine],
        substitution: Substitution,
        *,
        max_attempts: int = 2,
    ) -> tuple[UnifyStep, RoleOutcome[Unification]]:
        return unify_subgoals(
            self.llm,
            utterance,
            subgoals,
            memories,
            substitution,
            method=self.method,
            max_attempts=max_attempts,
            paper=self.paper_prompts,
        )

    def refine(
        self,
        utterance: str,
        goal: Goal,
        substitution: Substitution,
        unresolved: dict[str, tuple[Atom, str]],
        memories: Sequence[MemoryLine],
        known_types: dict[str, Term],
        existing: set[str],
        *,
        max_attempts: int = 2,
    ) -> Antecedents:
        return refine_subgoals(
            self.llm,
            utterance,
            goal,
            substitution,
            unresolved,
            memories,
            known_types,
            existing,
            method=self.method,
            max_attempts=max_attempts,
            paper=self.paper_prompts,
        )

    def generate(
        self,
        utterance: str,
        goal: Goal,
        substitution: Substitution,
        supporting: Sequence[MemoryLine],
        *,
        max_attempts: int = 2,
    ) -> RoleOutcome[GoalAnswer]:
        return generate_answer(
            self.llm,
            utterance,
            goal,
            substitution,
            supporting,
            method=self.method,
            max_attempts=max_attempts,
            paper=self.paper_prompts,
        )


class RuleGoalMemPolicy:
    """The no-LLM rules (``agents.goalmem_heuristics``): the wh-word goal, the heuristic decompositions in order,
    lexical unification, no refinement (which ends the depth loop), the answer variables' values."""

    def parse(self, utterance: str, *, max_attempts: int = 2) -> RoleOutcome[Goal]:
        return goal_of(RoleOutcome(output=wh_goal(utterance), cost=Cost()))

    def decompose(
        self, utterance: str, goal: Goal, failed: Sequence[tuple[Rule, str]], *, max_attempts: int = 2
    ) -> RoleOutcome[Rule]:
        return rule_of(goal, RoleOutcome(output=next_decomposition(goal, failed), cost=Cost()))

    def unify(
        self,
        utterance: str,
        subgoals: dict[str, Atom],
        memories: Sequence[MemoryLine],
        substitution: Substitution,
        *,
        max_attempts: int = 2,
    ) -> tuple[UnifyStep, RoleOutcome[Unification]]:
        grounded = [(sid, atom.apply(substitution)) for sid, atom in subgoals.items()]
        outcome = RoleOutcome(output=lexical_unification(grounded, memories, substitution), cost=Cost())
        return checked_unification(outcome, subgoals, memories, substitution, judged_by_model=False)

    def refine(
        self,
        utterance: str,
        goal: Goal,
        substitution: Substitution,
        unresolved: dict[str, tuple[Atom, str]],
        memories: Sequence[MemoryLine],
        known_types: dict[str, Term],
        existing: set[str],
        *,
        max_attempts: int = 2,
    ) -> Antecedents:
        return [], RoleOutcome(output=Refinement(antecedents=[]), cost=Cost())

    def generate(
        self,
        utterance: str,
        goal: Goal,
        substitution: Substitution,
        supporting: Sequence[MemoryLine],
        *,
        max_attempts: int = 2,
    ) -> RoleOutcome[GoalAnswer]:
        return RoleOutcome(output=GoalAnswer(answer=heuristic_answer(goal, substitution)), cost=Cost())


RULES = RuleGoalMemPolicy()
"""The rules, also what a role uses when the run's call budget is spent (``graphs.strategies.goalmem.generate``)."""


def goalmem_policy(
    name: str, llm: BaseChatModel | None, *, method: str = "function_calling", paper_prompts: bool = False
) -> GoalMemPolicy:
    """The run's policy from its pinned name (``auto`` already resolved): the rules for ``heuristic``, the LLM
    roles otherwise (``paper_prompts``: with the paper's prompts)."""
    if name == "heuristic":
        return RULES
    return LLMGoalMemPolicy(llm, method, paper_prompts)
