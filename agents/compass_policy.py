"""CompassMem's search policies: one ``CompassPolicy`` per run, chosen once from the run's pinned policy name.

``compass_policy(name, llm, ...)`` is the one place the name is compared: ``"heuristic"`` gives the
``RuleCompassPolicy`` (the no-LLM rules: queue priorities, the similarity explorer's decision, its stopping test,
the learned evidence ranking, the extractive answer), any other name the ``LLMCompassPolicy`` (the planner,
localizer, explorer, refiner and responder roles, each with its recorded fallback). ``graphs.strategies.compass`` asks the
policy at each decision point and never tests the name. Reads the event graph (``memory``); knows nothing of
``graphs``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

import numpy as np
from langchain_core.language_models import BaseChatModel

from logicmap.agents.answerers import answer_from_evidence
from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome
from logicmap.agents.explorer import ExplorerView, explore_batch, explore_event, similarity_decision
from logicmap.agents.localizer import pick_starts
from logicmap.agents.planner import clause_subgoals, plan_subgoals, plan_with_starts, refine_query
from logicmap.agents.responder import EvidenceText, respond
from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.retrieval.query import QueryEncoder, learned_turn_scores
from logicmap.memory.retrieval.turn_scoring import CONTEXT_WEIGHT, context_turn_scores
from logicmap.prompts.explore import ExplorerDecision
from logicmap.prompts.respond import Answer

__all__ = [
    "CompassPolicy",
    "Decided",
    "LLMCompassPolicy",
    "PlannedSearch",
    "RefinedSearch",
    "RuleCompassPolicy",
    "SearchProgress",
    "compass_policy",
    "event_priorities",
    "event_view",
    "evidence_context",
    "evidence_filled",
    "heuristic_decision",
    "open_subgoals",
    "query_key",
    "render_with_turns",
]

T = TypeVar("T")


def open_subgoals(subgoals: Sequence[str], satisfied: Sequence[bool]) -> list[str]:
    """The subgoals still to satisfy; all of them once every one is."""
    return [g for g, done in zip(subgoals, satisfied) if not done] or list(subgoals)


def event_priorities(
    graph: EventGraph,
    event_ids: Sequence[str],
    subgoals: Sequence[str],
    satisfied: Sequence[bool],
    encoder: QueryEncoder,
    *,
    by_turns: bool = False,
) -> dict[str, float]:
    """Priority of a queued event = its max similarity to a still-unsatisfied subgoal (to any subgoal once
    every one is satisfied), recomputed from the satisfaction vector so it never goes stale. ``by_turns``:
    an event scores as its best-matching cited turn instead of its summary."""
    if not event_ids:
        return {}
    open_goals = open_subgoals(subgoals, satisfied)
    if not open_goals:  # a question without content words: no subgoal to rank against
        return {e: 0.0 for e in event_ids}
    goal_vectors = np.vstack(encoder.vectors(open_goals))
    if by_turns:
        rows = np.array([graph.index_of(e) for e in event_ids], dtype=np.int64)
        scores = np.max([graph.turn_similarities(g, rows) for g in goal_vectors], axis=0)
    else:
        matrix = np.vstack([graph.vector(e) for e in event_ids])
        scores = (matrix @ goal_vectors.T).max(axis=1)
    return {e: float(s) for e, s in zip(event_ids, scores)}


def evidence_filled(
    graph: EventGraph,
    encoder: QueryEncoder,
    *,
    kept: Sequence[str],
    subgoals: Sequence[str],
    satisfied: Sequence[bool],
    visited: Sequence[str],
    queue: Mapping[str, float],
    context_turns: int,
    context_weight: float = CONTEXT_WEIGHT,
) -> bool:
    """The no-LLM stopping test: the kept evidence fills ``context_turns`` and no queued or unseen event can
    improve it. An event's priority (its best turn or summary similarity) bounds the score of every turn it
    holds, so the search is best-first with a stopping bound."""
    kept = [e for e in kept if e in graph]
    open_goals = open_subgoals(subgoals, satisfied)
    if not kept or not open_goals:
        return bool(kept)
    goals = np.vstack(encoder.vectors(open_goals))
    groups = [(e, graph.events[e].turn_ids) for e in kept]
    scores = list(context_turn_scores(graph.snapshot, goals, groups, context_weight=context_weight).values())
    if len(scores) < context_turns:
        return False
    # Unqueued events are bounded by their localization score: a better one means localizing again.
    seen = set(visited) | set(queue)
    unseen = [i for i, e in enumerate(graph.ids) if e not in seen]
    outside = float(np.max([graph.turn_similarities(g)[unseen] for g in goals])) if unseen else float("-inf")
    best_left = max(max(queue.values(), default=float("-inf")), outside)
    return best_left <= sorted(scores, reverse=True)[context_turns - 1]


def heuristic_decision(
    graph: EventGraph,
    event_id: str,
    subgoals: Sequence[str],
    satisfied: Sequence[bool],
    encoder: QueryEncoder,
    *,
    keep_threshold: float,
    satisfy_threshold: float,
    expand_threshold: float,
) -> ExplorerDecision:
    """The no-LLM explorer (``agents.explorer.similarity_decision``) on one event. It reads what an LLM
    explorer reads: the summary and the raw turns it cites; it may expand to the event's real neighbours."""
    neighbors = list(dict.fromkeys(n.event_id for n in graph.neighbors(event_id)))
    snapshot = graph.snapshot
    turn_vectors = [snapshot.turn_vectors[t] for t in graph.events[event_id].turn_ids if t in snapshot.turn_vectors]
    readings = normalize(np.vstack([graph.vector(event_id), *turn_vectors]))
    return similarity_decision(
        readings,
        encoder.vectors(list(subgoals)),
        satisfied,
        neighbors,
        np.vstack([graph.vector(n) for n in neighbors]) if neighbors else np.zeros((0, 1)),
        keep_threshold=keep_threshold,
        satisfy_threshold=satisfy_threshold,
        expand_threshold=expand_threshold,
    )


# -- what an LLM role is shown ------------------------------------------------------------------
def render_with_turns(graph: EventGraph, eid: str) -> str:
    """An event's summary with the raw turns it cites, each dated by its session."""
    turns = graph.turns_of(eid)
    raw = "\n".join(
        f"    {t.render()} ({t.session_time.date().isoformat() if t.session_time else 'undated'})" for t in turns
    )
    return f"{graph.events[eid].render()}\n{raw}"


@dataclass(frozen=True)
class SearchProgress:
    """What the search knows at a decision point: the question, the subgoals with their satisfaction, the kept
    evidence with the subgoals each supports."""

    question: str
    subgoals: Sequence[str]
    satisfied: Sequence[bool]
    kept: Sequence[str] = ()
    support: Mapping[str, Sequence[int]] = field(default_factory=dict)


def evidence_context(progress: SearchProgress, graph: EventGraph) -> str:
    """What every explorer is told: the question, the subgoals with their satisfaction, the kept evidence with
    the subgoals each supports."""
    lines = [f"Question: {progress.question}", "Subgoals:"]
    for i, (goal, done) in enumerate(zip(progress.subgoals, progress.satisfied)):
        lines.append(f"  {i}. [{'x' if done else ' '}] {goal}")
    lines.append("Kept evidence:" if progress.kept else "Kept evidence: (none yet)")
    for eid in progress.kept:
        goals = ", ".join(map(str, progress.support.get(eid, []))) or "none"
        lines.append(f"- (supports subgoals: {goals}) {render_with_turns(graph, eid)}")
    return "\n".join(lines)


def _label(graph: EventGraph, source: str, target: str) -> str:
    for n in graph.neighbors(source):
        if n.event_id == target:
            return n.label if n.direction == "out" else f"{n.label} (incoming)"
    return "related"


def event_view(graph: EventGraph, eid: str, came_from: str | None = None) -> ExplorerView:
    """The event with its raw turns (and, on a path, the relation it was reached by) and its neighbours."""
    neighbors = [
        (n.event_id, n.label if n.direction == "out" else f"{n.label} (incoming)", graph.events[n.event_id].render())
        for n in graph.neighbors(eid)
    ]
    text = render_with_turns(graph, eid)
    if came_from is not None:
        text += f"\n  (this path reached it from {came_from} by [{_label(graph, came_from, eid)}])"
    return ExplorerView(eid, text, neighbors)


def query_key(text: str) -> str:
    """A search query with case, spacing and punctuation set aside (two queries are one when their keys are)."""
    return " ".join("".join(c for c in text.casefold() if c.isalnum() or c.isspace()).split())


# -- the policy objects -------------------------------------------------------------------------
@dataclass(frozen=True)
class Decided(Generic[T]):
    """A policy's decision with what it cost and the fallbacks it recorded (none for the rule policy)."""

    value: T
    cost: Cost = field(default_factory=Cost)
    fallbacks: list[FallbackRecord] = field(default_factory=list)


@dataclass(frozen=True)
class PlannedSearch:
    """The planner's subgoals and the first round's starting points it picked (none: the localizer picks)."""

    subgoals: list[str]
    starts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RefinedSearch:
    """The refined query; ``repeated`` when it only repeats the question or the previous query."""

    query: str
    repeated: bool = False


Explored = list[tuple[str, ExplorerDecision]]
"""An explorer's decisions, ``(event id, decision)`` in the order they were made."""


def _fallbacks(outcome: RoleOutcome[Any]) -> list[FallbackRecord]:
    return [outcome.fallback] if outcome.fallback else []


class CompassPolicy(Protocol):
    """Every decision of the compass search that differs between the LLM policy and the no-LLM rules."""

    @property
    def ranking_recipe(self) -> Literal["dense", "turns"]:
        """The localization recipe ``auto`` stands for: ``dense`` ranks written summaries, ``turns`` ranks
        events by their best cited turn (extractive summaries concatenate turns)."""
        ...

    def plan(
        self, graph: EventGraph, question: str, candidates: Callable[[], Sequence[str]], *, max_starts: int
    ) -> Decided[PlannedSearch]:
        """The subgoals; with the first round's ``candidates`` (called only when needed), the starts among them."""
        ...

    def starts(
        self,
        graph: EventGraph,
        question: str,
        subgoals: Sequence[str],
        top: Sequence[str],
        diverse: Sequence[str],
        candidates: Sequence[str],
        *,
        max_starts: int,
        scores: Mapping[str, float] | None = None,
    ) -> Decided[list[str]]:
        """The round's starting points among ``candidates`` (the ``top`` ranked and the ``diverse`` topic leaders)."""
        ...

    def explore(
        self, graph: EventGraph, progress: SearchProgress, event_id: str, came_from: str | None
    ) -> Decided[Explored]:
        """One explorer's SKIP / EXPAND / ANSWER on one event (reached from ``came_from`` on its path)."""
        ...

    def explore_batch(
        self, graph: EventGraph, progress: SearchProgress, event_ids: Sequence[str], arrived_from: Mapping[str, str]
    ) -> Decided[Explored]:
        """The decisions on every event of a superstep (batched mode)."""
        ...

    def evidence_filled(
        self, graph: EventGraph, progress: SearchProgress, visited: Sequence[str], queue: Mapping[str, float]
    ) -> bool:
        """Whether the evidence suffices once every subgoal is satisfied."""
        ...

    def refine(
        self, question: str, missing: Sequence[str], found: str, previous_query: str, satisfied: Sequence[str] = ()
    ) -> Decided[RefinedSearch]:
        """A new search query for the ``missing`` subgoals (``satisfied``: the others, which the paper's prompt lists)."""
        ...

    def evidence(self, graph: EventGraph, question: str, kept: Sequence[str]) -> tuple[list[str], list[str]]:
        """The events the responder reads (the kept ones, possibly joined by others) and their turns ranked
        (empty: no ranking of the policy's own)."""
        ...

    def respond(self, question: str, evidence: Sequence[EvidenceText], question_date: str | None) -> Decided[Answer]:
        """The answer from ``evidence`` only."""
        ...


@dataclass(frozen=True)
class RuleCompassPolicy:
    """The no-LLM rules (``policy="heuristic"``): no model call, nothing recorded as a fallback."""

    encoder: QueryEncoder
    keep_threshold: float
    satisfy_threshold: float
    expand_threshold: float
    context_turns: int
    context_weight: float = CONTEXT_WEIGHT
    learned_ranking: bool = True
    traversal: bool = False

    @property
    def ranking_recipe(self) -> Literal["dense", "turns"]:
        return "turns"

    def plan(
        self, graph: EventGraph, question: str, candidates: Callable[[], Sequence[str]], *, max_starts: int
    ) -> Decided[PlannedSearch]:
        """The question's clauses; the starts are left to ``starts``."""
        return Decided(PlannedSearch(clause_subgoals(question)))

    def starts(
        self,
        graph: EventGraph,
        question: str,
        subgoals: Sequence[str],
        top: Sequence[str],
        diverse: Sequence[str],
        candidates: Sequence[str],
        *,
        max_starts: int,
        scores: Mapping[str, float] | None = None,
    ) -> Decided[list[str]]:
        """The two best topic leaders, then the top ranked."""
        return Decided(list(dict.fromkeys([*diverse[:2], *top]))[:max_starts])

    def _decide(self, graph: EventGraph, progress: SearchProgress, event_id: str) -> ExplorerDecision:
        return heuristic_decision(
            graph,
            event_id,
            progress.subgoals,
            progress.satisfied,
            self.encoder,
            keep_threshold=self.keep_threshold,
            satisfy_threshold=self.satisfy_threshold,
            expand_threshold=self.expand_threshold,
        )

    def explore(
        self, graph: EventGraph, progress: SearchProgress, event_id: str, came_from: str | None
    ) -> Decided[Explored]:
        return Decided([(event_id, self._decide(graph, progress, event_id))])

    def explore_batch(
        self, graph: EventGraph, progress: SearchProgress, event_ids: Sequence[str], arrived_from: Mapping[str, str]
    ) -> Decided[Explored]:
        return Decided([(e, self._decide(graph, progress, e)) for e in event_ids])

    def evidence_filled(
        self, graph: EventGraph, progress: SearchProgress, visited: Sequence[str], queue: Mapping[str, float]
    ) -> bool:
        """The stopping test (``evidence_filled``): similarity cannot tell whether evidence answers a subgoal."""
        return evidence_filled(
            graph,
            self.encoder,
            kept=progress.kept,
            subgoals=progress.subgoals,
            satisfied=progress.satisfied,
            visited=visited,
            queue=queue,
            context_turns=self.context_turns,
            context_weight=self.context_weight,
        )

    def refine(
        self, question: str, missing: Sequence[str], found: str, previous_query: str, satisfied: Sequence[str] = ()
    ) -> Decided[RefinedSearch]:
        """The missing subgoals' text (never marked repeated)."""
        return Decided(RefinedSearch(" ".join(missing) or question))

    def evidence(self, graph: EventGraph, question: str, kept: Sequence[str]) -> tuple[list[str], list[str]]:
        """With the learned ranking, the ranker's best ``context_turns`` turns join the evidence with their events,
        after what the search kept; the evidence's turns are then ranked by it."""
        if not self.learned_ranking:
            return list(kept), []
        scores = learned_turn_scores(graph.snapshot, question, self.encoder, traversal=self.traversal)
        ranking = sorted(scores, key=lambda t: -scores[t])
        owner = graph.event_of_turn
        best = [owner[t] for t in ranking[: self.context_turns] if t in owner]
        evidence_ids = list(dict.fromkeys([*kept, *best]))
        held = {t for e in evidence_ids for t in graph.events[e].turn_ids}
        return evidence_ids, [t for t in ranking if t in held]

    def respond(self, question: str, evidence: Sequence[EvidenceText], question_date: str | None) -> Decided[Answer]:
        """The extractive answer (``agents.answerers.answer_from_evidence``)."""
        return Decided(answer_from_evidence(question, evidence))


def _similarity(scores: Mapping[str, float] | None, event_id: str) -> str:
    """A candidate's score as the Memory Node Selection Prompt shows it (empty when the caller has none)."""
    return f" [similarity {scores[event_id]:.3f}]" if scores and event_id in scores else ""


@dataclass(frozen=True)
class LLMCompassPolicy:
    """The paper's LLM roles (``policy="llm"``); each call tagged with ``tags``/``metadata`` and run with the
    structured-output ``method``. No chat model (``llm`` None): every role records its fallback."""

    llm: BaseChatModel | None
    method: str = "function_calling"
    tags: Sequence[str] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    paper_prompts: bool = False
    """The paper's Action Decision and Refinement Query prompts (Appendix F.2; ``CompassContext.faithful``)."""

    @property
    def ranking_recipe(self) -> Literal["dense", "turns"]:
        return "dense"

    @property
    def _trace(self) -> dict[str, Any]:
        return {"method": self.method, "tags": self.tags, "metadata": dict(self.metadata)}

    def plan(
        self, graph: EventGraph, question: str, candidates: Callable[[], Sequence[str]], *, max_starts: int
    ) -> Decided[PlannedSearch]:
        """Subgoals and, among several first-round candidates, the starts in the same call."""
        ids = list(candidates())
        if len(ids) > 1:
            both = plan_with_starts(
                self.llm, question, [(e, graph.events[e].render()) for e in ids], max_starts=max_starts, **self._trace
            )
            return Decided(PlannedSearch(both.output.subgoals, both.output.start_ids), both.cost, _fallbacks(both))
        # no choice to make: the localizer takes the one candidate (or finds none) without a call
        plan = plan_subgoals(self.llm, question, **self._trace)
        return Decided(PlannedSearch(plan.output.subgoals), plan.cost, _fallbacks(plan))

    def starts(
        self,
        graph: EventGraph,
        question: str,
        subgoals: Sequence[str],
        top: Sequence[str],
        diverse: Sequence[str],
        candidates: Sequence[str],
        *,
        max_starts: int,
        scores: Mapping[str, float] | None = None,
    ) -> Decided[list[str]]:
        """The localizer's pick; a single candidate is the only valid pick and is taken without a call."""
        if len(candidates) <= 1:
            return Decided(list(dict.fromkeys([*diverse[:2], *top]))[:max_starts])
        shown = [(e, graph.events[e].render() + _similarity(scores, e)) for e in candidates]
        outcome = pick_starts(self.llm, question, list(subgoals), shown, max_starts=max_starts, **self._trace)
        return Decided(outcome.output.event_ids, outcome.cost, _fallbacks(outcome))

    def explore(
        self, graph: EventGraph, progress: SearchProgress, event_id: str, came_from: str | None
    ) -> Decided[Explored]:
        outcome = explore_event(
            self.llm,
            evidence_context(progress, graph),
            event_view(graph, event_id, came_from),
            len(progress.subgoals),
            paper=self.paper_prompts,
            **self._trace,
        )
        return Decided([(event_id, outcome.output)], outcome.cost, _fallbacks(outcome))

    def explore_batch(
        self, graph: EventGraph, progress: SearchProgress, event_ids: Sequence[str], arrived_from: Mapping[str, str]
    ) -> Decided[Explored]:
        outcome = explore_batch(
            self.llm,
            evidence_context(progress, graph),
            [event_view(graph, e, arrived_from.get(e)) for e in event_ids],
            len(progress.subgoals),
            paper=self.paper_prompts,
            **self._trace,
        )
        return Decided([(d.event_id, d) for d in outcome.output.decisions], outcome.cost, _fallbacks(outcome))

    def evidence_filled(
        self, graph: EventGraph, progress: SearchProgress, visited: Sequence[str], queue: Mapping[str, float]
    ) -> bool:
        """The explorers decide when evidence suffices (their satisfied subgoals): always filled."""
        return True

    def refine(
        self, question: str, missing: Sequence[str], found: str, previous_query: str, satisfied: Sequence[str] = ()
    ) -> Decided[RefinedSearch]:
        """The refiner's query; repeated when it only repeats the question or ``previous_query``."""
        outcome = refine_query(
            self.llm,
            question,
            list(missing),
            found,
            satisfied=list(satisfied) if self.paper_prompts else None,
            **self._trace,
        )
        query = outcome.output.query
        repeated = any(query_key(query) == query_key(q) for q in (question, previous_query))
        return Decided(RefinedSearch(query, repeated), outcome.cost, _fallbacks(outcome))

    def evidence(self, graph: EventGraph, question: str, kept: Sequence[str]) -> tuple[list[str], list[str]]:
        return list(kept), []

    def respond(self, question: str, evidence: Sequence[EvidenceText], question_date: str | None) -> Decided[Answer]:
        """The paper's responder (Appendix F.2): a justified answer, never "insufficient"."""
        outcome = respond(self.llm, question, evidence, question_date=question_date, abstain=False, **self._trace)
        return Decided(outcome.output, outcome.cost, _fallbacks(outcome))


ChatModelSource = BaseChatModel | None | Callable[[], BaseChatModel | None]
"""A chat model, none, or a zero-argument callable returning one: called only when the LLM policy is chosen (a
no-LLM run never builds the configured model, which may refuse its settings)."""


def compass_policy(
    name: str,
    llm: ChatModelSource,
    *,
    encoder: QueryEncoder,
    keep_threshold: float,
    satisfy_threshold: float,
    expand_threshold: float,
    context_turns: int,
    context_weight: float = CONTEXT_WEIGHT,
    learned_ranking: bool = True,
    traversal: bool = False,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: Mapping[str, Any] | None = None,
    paper_prompts: bool = False,
) -> CompassPolicy:
    """The run's policy from its pinned (resolved) policy name: the rules for ``"heuristic"``, the LLM roles
    otherwise. The rule settings configure ``RuleCompassPolicy``; ``method``/``tags``/``metadata`` the LLM calls,
    ``paper_prompts`` the LLM roles' prompts (the paper's, ``faithful``)."""
    if name == "heuristic":
        return RuleCompassPolicy(
            encoder,
            keep_threshold=keep_threshold,
            satisfy_threshold=satisfy_threshold,
            expand_threshold=expand_threshold,
            context_turns=context_turns,
            context_weight=context_weight,
            learned_ranking=learned_ranking,
            traversal=traversal,
        )
    model = llm if llm is None or isinstance(llm, BaseChatModel) else llm()
    return LLMCompassPolicy(
        model, method=method, tags=tuple(tags), metadata=dict(metadata or {}), paper_prompts=paper_prompts
    )
