"""The CompassMem search graph: planner -> localize -> parallel explorers -> merge (loop) -> refine -> respond.

Every candidate an explorer queues enters the ONE global priority queue (the paper's 4.3.2, Eq. 11: an event's
priority is its best similarity to a still-unsatisfied subgoal), and each explorer of a superstep takes the
globally best queued event; the paths are bookkeeping (an event queued from a path's current node extends it).
An ANSWER ends its path only. A round runs until the queue is empty or every subgoal is satisfied (Section
4.3.3's "the Responder is invoked when the global candidate queue becomes empty, and all subgoals are
satisfied" read with the action prompt's ANSWER, "exploration will STOP" once all are satisfied), within the
project's per-round step cap ``max_steps`` (an extension; None, the paper's budget, in ``faithful``). Explorers
of one superstep run as parallel ``Send`` branches (or one batched call); the merge node applies their
decisions, annotating each kept event with the subgoals it supports (the satisfaction vector derives from them).
Each node is a module-level function of ``(state, runtime)`` that finds its resources through
``resources_of(runtime)``; wherever the LLM and the no-LLM policy decide differently it asks the run's
``CompassPolicy`` (``agents.compass_policy``, built by ``_setup`` from the policy the planner pinned) and never
tests the policy's name. Studio loads ``graph`` from this module.

``CompassContext.faithful`` is the paper's configuration (``FAITHFUL_OVERRIDES``: the project's extensions of
the search off); docs/fidelity.md lists each element and measures each extension as an ablation.

Calls that would add nothing are not made (the paper's decisions stay the LLM's):
- the first round's candidate starts rank against the question, known before planning, so the planner picks the
  starts in its own call (``plan_starts``; a reply that picks none leaves them to the localizer's call);
- a single candidate start is the only valid pick: it is taken without a call;
- no refinement round when every subgoal is satisfied, when every event was read (a round starts from unread
  events only), or when the LLM refiner only repeats the question or the previous query (the paper's text does
  not say what a repeated query does; a round from it would repeat the first; the refiner's call is spent, the
  round's are not).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Annotated, Any, Literal, NotRequired

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, FallbackRecord
from logicmap.agents.compass_policy import (
    CompassPolicy,
    Decided,
    Explored,
    SearchProgress,
    compass_policy,
    event_priorities,
    render_with_turns,
)
from logicmap.agents.responder import EvidenceText
from logicmap.graphs.runtime.pin import pin_run, pinned_snapshot, snapshot_of
from logicmap.graphs.runtime.resources import Resources, resources_of, run_context
from logicmap.graphs.runtime.result import CONTEXT_WEIGHT, AnswerResult, EvidenceItem, rank_turns
from logicmap.graphs.runtime.tracing import traced_graph
from logicmap.graphs.strategies.strategy import (
    AnswerOutput,
    QuestionInput,
    StrategyContext,
    StrategyState,
    cited_turn_texts,
    finish_run,
    graph_strategy,
)
from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.indexes.graph import EventGraph, Ranking
from logicmap.memory.retrieval.query import (
    QueryEncoder,
)
from logicmap.memory.retrieval.retrieval import event_index, reciprocal_rank_fusion
from logicmap.memory.runtime.deadline import check_deadline

__all__ = [
    "FAITHFUL_OVERRIDES",
    "RANKING_RECIPES",
    "CompassContext",
    "CompassInput",
    "CompassOutput",
    "CompassState",
    "Decision",
    "ExploreTask",
    "SearchPath",
    "answer",
    "build_compass_graph",
    "builder",
    "explore",
    "explore_all",
    "graph",
    "localize",
    "merge",
    "planner",
    "refine",
    "respond",
    "route_refined",
    "route_search",
]

# Named localization recipes: how events are ranked against the query.
#   dense  - event summary embeddings (the paper's)
#   hybrid - dense and BM25 over summaries, fused by reciprocal rank
#   turns  - an event scores as its best-matching cited turn (for extractive, turn-concatenating summaries)
#   auto   - dense for the LLM policy (concise written summaries), turns for the no-LLM policy
RANKING_RECIPES = ("auto", "dense", "hybrid", "turns")


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class CompassContext(StrategyContext):
    """Per-run settings and budgets of the compass graph (shown as a form in Studio)."""

    recipe: Literal["auto", "dense", "hybrid", "turns"] = "auto"
    """How events are ranked against the query: dense (summary embeddings), hybrid (dense + BM25, fused),
    turns (an event scores as its best cited turn); auto = dense with an LLM, turns without."""
    top_k: int = 5
    """Events ranked for the query that are candidate starting points."""
    top_p: int = 5
    """Distinct topics whose best event is also a candidate starting point."""
    max_starts: int = 5
    """Most starting points the search begins from."""
    plan_starts: bool = True
    """The planner also picks the first round's starting points (its candidates rank against the question, known
    before planning): one LLM call instead of the planner's and the localizer's. When its reply picks none, the
    localizer picks them in its own call."""
    explorers: int = 3
    """Explorers per superstep: the best queued events explored in parallel (the paper's three)."""
    max_steps: int | None = 6
    """Most explorer supersteps per search round (the first search and each refinement round): a project
    cost cap. None: the paper's budget, a round runs until the global queue is empty or every subgoal is
    satisfied (each event is read at most once, so a round reads at most every event)."""
    max_refinements: int = 1
    """Query refinements when subgoals stay unsatisfied."""
    explorer_mode: Literal["parallel", "batched"] = "parallel"
    """parallel = one explorer call per event (Send branches); batched = one call for the superstep's events."""
    keep_threshold: float = 0.25
    """No-LLM policy: an event with at least this similarity to a subgoal is kept as evidence."""
    satisfy_threshold: float = 0.55
    """No-LLM policy: a subgoal with kept evidence this similar to it counts as satisfied."""
    expand_threshold: float = 0.2
    """No-LLM policy: an event at least this similar to an open subgoal has its neighbours queued."""
    context_turns: int = 10
    """The responder's context budget in turns. The no-LLM policy cannot judge whether evidence answers a
    subgoal (similarity only hints at it), so it searches best-first until its evidence fills this budget
    and no unread event could still place a turn in it."""
    context_weight: float = CONTEXT_WEIGHT
    """A turn scores max(its own similarity, context_weight x its event's similarity, context_weight x the
    similarity of the question it replies to): a reply that only makes sense with its event or question
    ("A vintage film camera.") ranks with them (memory.turn_scoring.context_turn_scores)."""
    name_free_readings: bool = True
    """Match every search text also without its names (memory.text.query_readings): names dominate a sentence
    embedding, so "Where exactly did Sam propose to Nadia?" finds every turn about Sam and Nadia first."""
    ranker: Literal["learned", "similarity"] = "learned"
    """How the no-LLM policy ranks its evidence turns. learned: every turn of the namespace is scored by the
    graph-feature reranker (memory.ranking: a learned ranker over its event's, topic's, neighbours' and question's
    similarity, lexical match, speaker); the best context_turns join the evidence with their events. similarity: the
    context_weight formula, over the explored events only."""
    traversal: bool = False
    """No-LLM policy with the learned ranker: add the second hop (memory.traversal). From the ranker's best
    turns, follow the event graph (same event, relations, topic, named entities shared across sessions) and
    rank every turn again with how it was reached. Off by default: on the development conversations it did
    not beat the ranker alone (README, "Evidence recall")."""

    faithful: bool = False
    """The paper's configuration: every project extension of the search off (name-free query readings, the
    per-round step cap, the planner picking the starts in its call, the turn-level and learned no-LLM
    rankings), and the paper's Action Decision and Refinement Query prompts (Appendix F.2) for the LLM roles. The
    paper's budget then holds: three explorers, one refinement round, each round until the queue is empty or
    every subgoal is satisfied. ``compass:faithful`` in the registry's variants."""


# The project's extensions of the search, each off in the paper's configuration (``faithful``); the
# evaluation measures each as an ablation (docs/fidelity.md, "CompassMem").
FAITHFUL_OVERRIDES: dict[str, Any] = {
    "name_free_readings": False,
    "max_steps": None,
    "plan_starts": False,
    "recipe": "dense",
    "ranker": "similarity",
    "traversal": False,
}


@with_config(ConfigDict(use_attribute_docstrings=True))
class CompassInput(QuestionInput):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""


class SearchPath(TypedDict):
    """One explorer's path: it starts at a start node (or at a candidate another path left in the queue) and
    moves along the relations of the node it is on."""

    explorer: int
    """Which explorer walks it (0 .. explorers-1)."""
    origin: str | None
    """The event whose explorer queued the path's first node; None for a start node."""
    nodes: list[str]
    """The events walked, in order; the last one is the node the explorer is on."""
    end: str | None
    """Why the path ended: ANSWER, no candidates (nothing queued from its node), budget, satisfied; None while it walks."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class CompassOutput(AnswerOutput, total=False):
    """What a compass run returns: the answer, its evidence, what it cost."""

    evidence: list[EvidenceItem]
    """The events the answer was written from, each with the turns (dia ids) it cites."""
    cited_ids: list[str]
    """The evidence ids the responder cited."""
    kept: list[str]
    """The event ids the search kept as evidence."""
    support: dict[str, list[int]]
    """Each event the search kept, with the numbers of the subgoals it supports (the progress tracking)."""


class Decision(TypedDict):
    """One explorer decision on one event, tagged with the superstep it was made in."""

    step: int
    event_id: str
    action: str
    next_events: list[str]
    satisfied_subgoals: list[int]


class CompassState(StrategyState, total=False):
    """The search state: subgoals and their satisfaction, the priority queue, the paths, the kept evidence, the answer.

    ``namespace`` is the run's, resolved once by the planner from the context or config (never an input).
    ``satisfied`` derives from ``support``: a subgoal is satisfied once a kept event supports it. ``step``
    counts every superstep of the run; ``round_step`` those of the current round (the budget)."""

    subgoals: list[str]
    satisfied: list[bool]
    support: dict[str, list[int]]
    query: str
    planned_starts: list[str]
    repeated_query: bool
    localized: list[str]
    queue: dict[str, float]
    queued_from: dict[str, list[str]]
    paths: list[SearchPath]
    frontier: list[str]
    visited: list[str]
    kept: list[str]
    step: int
    round_step: int
    refinements: int
    done: bool
    decisions: Annotated[list[Decision], operator.add]
    cited_ids: list[str]
    evidence: list[EvidenceItem]
    evidence_ranking: list[str]
    log: Annotated[list[dict[str, Any]], operator.add]


class ExploreTask(TypedDict):
    """What one explorer branch (or the batched explorer) is sent: the search so far and its events."""

    namespace: str
    policy: NotRequired[str | None]
    generation: int | None
    pending: NotRequired[int]
    question: str
    subgoals: list[str]
    satisfied: list[bool]
    kept: list[str]
    support: NotRequired[dict[str, list[int]]]
    event_ids: list[str]
    arrived_from: NotRequired[dict[str, str]]
    step: int


# -- helpers ------------------------------------------------------------------------------------
def _ctx(runtime: Runtime[CompassContext] | None) -> CompassContext:
    ctx = run_context(runtime, CompassContext)
    if ctx.faithful:
        ctx = replace(ctx, **FAITHFUL_OVERRIDES)
    return ctx


def _trace(namespace: str, policy: str, ctx: CompassContext) -> dict[str, Any]:
    """``tags`` and ``metadata`` for a role call, so LLM runs filter by strategy and policy."""
    return {
        "tags": ["strategy:compass", f"policy:{policy}"],
        "metadata": {"namespace": namespace, "explorer_mode": ctx.explorer_mode, "max_steps": ctx.max_steps},
    }


def _event_graph(pin: Mapping[str, Any], runtime: Runtime[CompassContext] | None) -> EventGraph:
    """The event graph of the run's pinned snapshot (``pin``: the state, or an explorer's task)."""
    return EventGraph.of(pinned_snapshot(pin, runtime))


def _encoder(ctx: CompassContext, res: Resources) -> QueryEncoder:
    return QueryEncoder(res.embeddings, name_free_readings=ctx.name_free_readings)


def _setup(
    pin: Mapping[str, Any],
    runtime: Runtime[CompassContext] | None,
) -> tuple[CompassContext, Resources, CompassPolicy]:
    """A node's context, resources and the run's policy object (``agents.compass_policy.compass_policy``) from
    the pinned policy (``pin``: the state or an explorer's task; the context's, resolved alike, for a node called
    alone on a hand-made state). An ``auto`` recipe becomes the policy's."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    name = pin.get("policy") or ctx.policy
    policy = compass_policy(
        name,
        lambda: res.llm,
        encoder=_encoder(ctx, res),
        keep_threshold=ctx.keep_threshold,
        satisfy_threshold=ctx.satisfy_threshold,
        expand_threshold=ctx.expand_threshold,
        context_turns=ctx.context_turns,
        context_weight=ctx.context_weight,
        learned_ranking=ctx.ranker == "learned",
        traversal=ctx.traversal,
        method=res.method,
        paper_prompts=ctx.faithful,
        **_trace(pin.get("namespace") or "", name, ctx),
    )
    if ctx.recipe == "auto":
        ctx = replace(ctx, recipe=policy.ranking_recipe)
    return ctx, res, policy


def _priorities(
    graph: EventGraph, ids: list[str], subgoals: list[str], satisfied: list[bool], ctx: CompassContext, res: Resources
) -> dict[str, float]:
    """The queue's priorities; the recipe decides how an event's text is scored against a subgoal."""
    return event_priorities(graph, ids, subgoals, satisfied, _encoder(ctx, res), by_turns=ctx.recipe == "turns")


def _progress(state: Mapping[str, Any], **override: Any) -> SearchProgress:
    """The search so far as the policy reads it (``override``: values newer than ``state``'s)."""
    fields = {
        "question": state.get("question", ""),
        "subgoals": state.get("subgoals", []),
        "satisfied": state.get("satisfied", []),
        "kept": state.get("kept", []),
        "support": state.get("support") or {},
    }
    return SearchProgress(**{**fields, **override})


def _best(queue: dict[str, float], ids: list[str]) -> str:
    """The best queued event among ``ids`` (ties by id)."""
    return min(ids, key=lambda e: (-queue[e], e))


def _schedule(
    paths: list[SearchPath],
    queue: dict[str, float],
    queued_from: dict[str, list[str]],
    explorers: int,
) -> tuple[list[SearchPath], list[str], dict[str, float]]:
    """The superstep's frontier from the ONE global priority queue (paper, 4.3.2 Coordination): each explorer
    takes the globally best queued event, whoever queued it (a path's own candidates compete with every
    other queued event). The paths are bookkeeping: an event queued from a walking path's current node
    extends that path, any other starts a new one; a path ends when nothing queued came from its node."""
    paths = [SearchPath(**{**p, "nodes": list(p["nodes"])}) for p in paths]
    queue = dict(queue)
    priority: dict[str, float] = {}
    extended: set[int] = set()
    for slot in range(explorers):
        check_deadline("while compass explorers chose their next events")
        if not queue:
            break
        nxt = _best(queue, list(queue))
        priority[nxt] = queue.pop(nxt)
        sources = queued_from.get(nxt, [])
        walking = [
            i for i, p in enumerate(paths) if p["end"] is None and i not in extended and p["nodes"][-1] in sources
        ]
        if walking:
            paths[walking[0]]["nodes"].append(nxt)
            extended.add(walking[0])
        else:
            paths.append(SearchPath(explorer=slot, origin=sources[0] if sources else None, nodes=[nxt], end=None))
            extended.add(len(paths) - 1)
    for i, path in enumerate(paths):
        if (
            path["end"] is None
            and i not in extended
            and not any(path["nodes"][-1] in queued_from.get(e, []) for e in queue)
        ):
            path["end"] = "no candidates"
    frontier = sorted(priority, key=lambda e: (-priority[e], e))  # dispatched (and kept) best first
    return paths, frontier, queue


def _end_paths(paths: list[SearchPath], reason: str) -> list[SearchPath]:
    """The paths with every walking one ended for ``reason`` (the round is over)."""
    return [SearchPath(**{**p, "end": p["end"] or reason}) for p in paths]


def _satisfaction(n_subgoals: int, kept: list[str], support: dict[str, list[int]]) -> list[bool]:
    """The satisfaction vector, derived from the kept events' annotations: subgoal i is satisfied once a kept
    event supports it."""
    supported = {i for e in kept for i in support.get(e, [])}
    return [i in supported for i in range(n_subgoals)]


def _decisions(step: int, explored: Explored) -> list[Decision]:
    return [
        Decision(
            step=step, event_id=eid, action=d.action, next_events=d.next_events, satisfied_subgoals=d.satisfied_subgoals
        )
        for eid, d in explored
    ]


def _rank_events(
    graph: EventGraph, query: str, ctx: CompassContext, res: Resources, visited: set[str] | frozenset[str] = frozenset()
) -> Ranking:
    """Every unvisited event best first for ``query``, by the context's recipe (``RANKING_RECIPES``); sorted
    as far as it is read."""
    similarity = graph.turn_similarities if ctx.recipe == "turns" else graph.similarities
    sims = np.max([similarity(v) for v in _encoder(ctx, res).vectors([query])[0]], axis=0)
    if ctx.recipe != "hybrid":
        return graph.ranked(sims, visited)
    bm = event_index(graph.snapshot).scores(query)  # rows in snapshot.events order, as graph.ids
    fused = [e for e, _ in reciprocal_rank_fusion([graph.ranking(sims), graph.ranking(bm)])]
    return Ranking(np.array(fused, dtype=object), -np.arange(len(fused), dtype=np.float64), visited)


def _candidates(
    graph: EventGraph,
    query: str,
    visited: set[str],
    ctx: CompassContext,
    res: Resources,
) -> tuple[list[str], list[str], list[str], dict[str, float]]:
    """The unvisited top-k events for ``query``, the best event of each of the first p topics, and both together
    (the candidate starting points). The paper's localization (4.3.2): "selects candidates from the first p distinct
    topic clusters appearing in the ranked list"; it is silent on how many per topic (its Appendix F "Cluster-based
    Node Selection Prompt", at most 3 per cluster, is never placed in the algorithm): one, the best ranked. p = 0
    is the paper's no-clustering setting (Section 5.3): no topic candidates. Last, each candidate's ranking score
    (the Memory Node Selection Prompt shows the candidates with their similarity scores)."""
    ranking = _rank_events(graph, query, ctx, res, visited)
    top = ranking.head(ctx.top_k)
    diverse = graph.topic_leaders(ranking, ctx.top_p) if ctx.top_p > 0 else []
    candidates = list(dict.fromkeys([*top, *diverse]))
    return top, diverse, candidates, {e: ranking.score(e) for e in candidates}


def _first_candidates(graph: EventGraph, question: str, ctx: CompassContext, res: Resources) -> list[str]:
    """The first round's candidate starts for the planner to pick from (``plan_starts``): they rank against the
    question, known before planning."""
    return _candidates(graph, question, set(), ctx, res)[2] if ctx.plan_starts and len(graph) else []


# -- nodes --------------------------------------------------------------------------------------
def planner(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """Pin the run (its namespace, policy and snapshot generation: ``graphs.runtime.pin``), split the question into
    subgoals (clauses without an LLM) and, with ``plan_starts``, pick the first round's starting points in the
    same call; reset the search."""
    asked = _ctx(runtime)
    pin = pin_run(runtime, asked.namespace, asked.policy)
    ctx, res, policy = _setup(pin, runtime)
    graph = _event_graph(pin, runtime)
    question = state["question"]
    planned = policy.plan(
        graph, question, partial(_first_candidates, graph, question, ctx, res), max_starts=ctx.max_starts
    )
    subgoals, starts = planned.value.subgoals, planned.value.starts
    return {
        **pin,
        "subgoals": subgoals,
        "satisfied": [False] * len(subgoals),
        "query": question,
        "planned_starts": starts,
        "repeated_query": False,
        "support": {},
        "visited": [],
        "kept": [],
        "queue": {},
        "queued_from": {},
        "paths": [],
        "step": 0,
        "round_step": 0,
        "refinements": 0,
        "done": False,
        "cost": planned.cost,
        "fallbacks": planned.fallbacks,
        "log": [{"node": "planner", "subgoals": subgoals, "starts": starts}],
    }


def localize(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """Rank events for the query, pick starting points among the top k and distinct topics, queue them. The
    starts the planner picked are used as they are; one candidate is taken without a call (the only valid pick)."""
    ctx, res, policy = _setup(state, runtime)
    graph = _event_graph(state, runtime)
    if not len(graph):
        return {"frontier": [], "localized": [], "done": True, "log": [{"node": "localize", "empty": True}]}
    query = state.get("query") or state["question"]
    visited = set(state.get("visited", []))
    top, diverse, candidates, scores = _candidates(graph, query, visited, ctx, res)
    planned = [e for e in state.get("planned_starts", []) if e in candidates]
    picked = (
        Decided(planned)
        if planned
        else policy.starts(
            graph,
            state["question"],
            state["subgoals"],
            top,
            diverse,
            candidates,
            max_starts=ctx.max_starts,
            scores=scores,
        )
    )
    starts = picked.value
    queue = dict(state.get("queue", {}))
    queued_from = {e: list(src) for e, src in state.get("queued_from", {}).items()}
    for e in starts:
        if e not in visited:
            queue.setdefault(e, 0.0)
            queued_from.setdefault(e, [])  # a start node: no path led to it
    queue = _priorities(graph, list(queue), state["subgoals"], state["satisfied"], ctx, res)
    paths, frontier, queue = _schedule(state.get("paths", []), queue, queued_from, ctx.explorers)
    return {
        "planned_starts": [],  # used once: a refinement round picks its own
        "localized": list(dict.fromkeys([*state.get("localized", []), *top])),
        "queue": queue,
        "queued_from": {e: src for e, src in queued_from.items() if e in queue},
        "paths": paths,
        "frontier": frontier,
        "visited": [*state.get("visited", []), *frontier],
        "cost": picked.cost,
        "fallbacks": picked.fallbacks,
        "log": [{"node": "localize", "query": query, "candidates": candidates, "starts": starts}],
    }


def explore(state: ExploreTask, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """One explorer branch (parallel mode): decides for one event (``state``: the branch's ``Send`` task)."""
    _, _, policy = _setup(state, runtime)
    graph = _event_graph(state, runtime)
    eid = state["event_ids"][0]
    explored = policy.explore(graph, _progress(state), eid, state.get("arrived_from", {}).get(eid))
    return {
        "decisions": _decisions(state["step"], explored.value),
        "cost": explored.cost,
        "fallbacks": explored.fallbacks,
    }


def explore_all(state: ExploreTask, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """Batched mode (node ``explore_batch``): one call decides for every event of the superstep."""
    _, _, policy = _setup(state, runtime)
    graph = _event_graph(state, runtime)
    explored = policy.explore_batch(graph, _progress(state), state["event_ids"], state.get("arrived_from", {}))
    return {
        "decisions": _decisions(state["step"], explored.value),
        "cost": explored.cost,
        "fallbacks": explored.fallbacks,
    }


def _apply_decisions(graph: EventGraph, state: CompassState, decisions: list[Decision]) -> dict[str, Any]:
    """Kept events annotated with the subgoals they support, the queue (the neighbours an explorer chose, queued
    from the node it is on at priority 0) and the paths: an ANSWER ends its explorer's path, and only that one."""
    kept = list(state.get("kept", []))
    support = {e: list(goals) for e, goals in state.get("support", {}).items()}
    visited = set(state.get("visited", []))
    queue = dict(state.get("queue", {}))
    queued_from = {e: list(src) for e, src in state.get("queued_from", {}).items()}
    paths = [SearchPath(**{**p, "nodes": list(p["nodes"])}) for p in state.get("paths", [])]
    walking = {p["nodes"][-1]: p for p in paths if p["end"] is None}
    dispatched = {eid: i for i, eid in enumerate(state.get("frontier", []))}
    # Evidence is kept in the order the events were dispatched (best priority first).
    for d in sorted(decisions, key=lambda d: (dispatched.get(d["event_id"], len(dispatched)), d["event_id"])):
        eid = d["event_id"]
        if d["action"] in ("EXPAND", "ANSWER"):  # retained: annotated with the subgoals it supports
            if eid not in kept:
                kept.append(eid)
            goals = {i for i in d["satisfied_subgoals"] if 0 <= i < len(state["subgoals"])}
            support[eid] = sorted(goals | set(support.get(eid, [])))
        if d["action"] == "ANSWER":
            if eid in walking:
                walking[eid]["end"] = "ANSWER"
            continue  # the path ends here: its next events are not followed
        real = {n.event_id for n in graph.neighbors(eid)}
        for nxt in d["next_events"][:3]:
            if nxt in real and nxt not in visited:
                queue.setdefault(nxt, 0.0)
                sources = queued_from.setdefault(nxt, [])
                if eid not in sources:
                    sources.append(eid)
    return {"kept": kept, "support": support, "queue": queue, "queued_from": queued_from, "paths": paths}


def merge(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """Apply this superstep's decisions, derive the satisfaction vector, recompute the priorities, then stop
    (every subgoal satisfied, the round's step budget spent, nothing left to explore) or schedule the next frontier."""
    ctx, res, policy = _setup(state, runtime)
    graph = _event_graph(state, runtime)
    step = state.get("step", 0)
    decisions = [d for d in state.get("decisions", []) if d["step"] == step]
    applied = _apply_decisions(graph, state, decisions)
    kept, support, paths = applied["kept"], applied["support"], applied["paths"]
    satisfied = _satisfaction(len(state["subgoals"]), kept, support)
    visited = list(state.get("visited", []))
    # Priorities follow the satisfaction vector: recomputed for every queued event, never stale.
    queue = _priorities(graph, list(applied["queue"]), state["subgoals"], satisfied, ctx, res)
    ranked = dict(queue)
    step, round_step = step + 1, state.get("round_step", 0) + 1
    stop = None
    if ctx.max_steps is not None and round_step >= ctx.max_steps:
        stop = "budget"
    elif all(satisfied) and policy.evidence_filled(
        graph, _progress(state, kept=kept, satisfied=satisfied), visited, queue
    ):
        stop = "satisfied"
    frontier: list[str] = []
    if stop is None:
        paths, frontier, queue = _schedule(paths, queue, applied["queued_from"], ctx.explorers)
    else:
        paths = _end_paths(paths, stop)
    return {
        "kept": kept,
        "support": support,
        "satisfied": satisfied,
        "queue": queue,
        "queued_from": {e: src for e, src in applied["queued_from"].items() if e in queue},
        "paths": paths,
        "frontier": frontier,
        "visited": [*visited, *frontier],
        "step": step,
        "round_step": round_step,
        "done": stop is not None or not frontier,
        "log": [
            {
                "node": "merge",
                "step": step,
                "round_step": round_step,
                "decisions": decisions,
                "satisfied": satisfied,
                "support": support,
                "priorities": ranked,
                "stop": stop,
            }
        ],
    }


def refine(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """Write a new search query for the unsatisfied subgoals (their text, without an LLM); the next round
    searches from new start nodes with a fresh step budget. A refiner that only repeats the question (or the
    previous query) wrote nothing new: no refinement round follows (our choice; the paper's text is silent)."""
    _, _, policy = _setup(state, runtime)
    graph = _event_graph(state, runtime)
    missing = [g for g, done in zip(state["subgoals"], state["satisfied"]) if not done]
    found = "\n".join(graph.events[e].render() for e in state.get("kept", []))
    satisfied = [g for g, done in zip(state["subgoals"], state["satisfied"]) if done]
    refined = policy.refine(state["question"], missing, found, state.get("query") or "", satisfied)
    query, repeated = refined.value.query, refined.value.repeated
    return {
        "query": query,
        "repeated_query": repeated,
        "refinements": state.get("refinements", 0) + 1,
        "done": False,
        "round_step": 0,  # the refinement round gets its own step budget
        "cost": refined.cost,
        "fallbacks": refined.fallbacks,
        "log": [{"node": "refine", "query": query, "missing": missing, "repeated": repeated}],
    }


def respond(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """Answer from the kept evidence only (the rule policy's learned ranking may join more events: ``evidence``);
    the top-k localized events stand in when nothing was kept."""
    ctx, _, policy = _setup(state, runtime)
    graph = _event_graph(state, runtime)
    evidence_ids, ranking = policy.evidence(graph, state["question"], state.get("kept", []))
    fallbacks: list[FallbackRecord] = []
    if not evidence_ids:
        evidence_ids = list(state.get("localized", []))[: ctx.top_k]
        if evidence_ids:
            fallbacks.append(
                FallbackRecord(role="responder", reason="no evidence kept: answered from the top-k localized events")
            )
    evidence = [EvidenceText(e, render_with_turns(graph, e), graph.events[e].time) for e in evidence_ids]
    answered = policy.respond(state["question"], evidence, state.get("question_date"))
    return {
        "answer": answered.value.answer,
        "cited_ids": answered.value.cited_ids,
        "kept": evidence_ids,
        "evidence": [
            EvidenceItem(
                kind="event",
                id=e,
                text=graph.events[e].render(),
                turn_ids=graph.events[e].turn_ids,
                time=graph.events[e].time,
            )
            for e in evidence_ids
        ],
        "cost": answered.cost,
        "fallbacks": [*fallbacks, *answered.fallbacks],
        "evidence_ranking": ranking,
        "log": [{"node": "respond", "ranked_turns": ranking[: ctx.context_turns]}] if ranking else [],
    }


# -- routing ------------------------------------------------------------------------------------
def _arrivals(paths: list[SearchPath]) -> dict[str, str]:
    """Each walking path's current node, with the node it came from (its previous node, else its origin)."""
    arrived: dict[str, str] = {}
    for p in paths:
        before = p["nodes"][-2] if len(p["nodes"]) > 1 else p["origin"]
        if p["end"] is None and before is not None:
            arrived[p["nodes"][-1]] = before
    return arrived


def route_search(state: CompassState, runtime: Runtime[CompassContext]) -> list[Send] | Literal["refine", "respond"]:
    """Send the frontier to the explorers; else refine once when subgoals are unsatisfied (or, without an
    LLM, the evidence is not filled yet) and some event is still unread (a refinement round starts from unread
    events only, so with none left it could add nothing); else respond."""
    ctx = _ctx(runtime)
    frontier = state.get("frontier", [])
    if frontier and not state.get("done"):
        base: dict[str, Any] = {
            "namespace": state["namespace"],
            "policy": state.get("policy"),
            "generation": state.get("generation"),
            "pending": state.get("pending", 0),
            "question": state["question"],
            "subgoals": state["subgoals"],
            "satisfied": state["satisfied"],
            "kept": state.get("kept", []),
            "support": state.get("support", {}),
            "arrived_from": _arrivals(state.get("paths", [])),
            "step": state.get("step", 0),
        }
        if ctx.explorer_mode == "batched":
            return [Send("explore_batch", {**base, "event_ids": frontier})]
        return [Send("explore", {**base, "event_ids": [eid]}) for eid in frontier]
    _, _, policy = _setup(state, runtime)
    graph = _event_graph(state, runtime)
    wanting = not all(state.get("satisfied", [True])) or not policy.evidence_filled(
        graph, _progress(state), state.get("visited", []), state.get("queue", {})
    )
    unread = len(graph) > len(set(state.get("visited", [])))
    if wanting and unread and state.get("refinements", 0) < ctx.max_refinements:
        return "refine"
    return "respond"


def route_refined(state: CompassState) -> Literal["localize", "respond"]:
    """Search again from the refined query; a query that repeats an earlier one goes straight to the responder."""
    return "respond" if state.get("repeated_query") else "localize"


def build_compass_graph() -> StateGraph[CompassState, CompassContext, CompassInput, CompassOutput]:
    """The compass ``StateGraph`` (uncompiled); nodes find their resources in the run's context."""
    builder = StateGraph(
        CompassState, context_schema=CompassContext, input_schema=CompassInput, output_schema=CompassOutput
    )
    builder.add_node("planner", planner)
    builder.add_node("localize", localize)
    builder.add_node("explore", explore)
    builder.add_node("explore_batch", explore_all)
    builder.add_node("merge", merge)
    builder.add_node("refine", refine)
    builder.add_node("respond", respond)
    builder.add_node("finish", finish)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "localize")
    builder.add_conditional_edges("localize", route_search, ["explore", "explore_batch", "refine", "respond"])
    builder.add_edge("explore", "merge")
    builder.add_edge("explore_batch", "merge")
    builder.add_conditional_edges("merge", route_search, ["explore", "explore_batch", "refine", "respond"])
    builder.add_conditional_edges("refine", route_refined, ["localize", "respond"])
    builder.add_edge("respond", "finish")
    builder.add_edge("finish", END)
    return builder


def _result(
    question: str, namespace: str, final: dict[str, Any], ctx: CompassContext, res: Resources, elapsed: float
) -> AnswerResult:
    if ctx.faithful:  # the result orders evidence as the run searched: ``faithful``'s overrides apply here too
        ctx = replace(ctx, **FAITHFUL_OVERRIDES)
    snapshot = snapshot_of(res.store, {**final, "namespace": namespace})  # the run's pinned memory
    graph = EventGraph.of(snapshot)
    encoder = _encoder(ctx, res)
    q_vectors = encoder.embed(encoder.readings(question))
    sims = np.max([graph.similarities(v) for v in q_vectors], axis=0)
    event_sims = {eid: float(sims[graph.index_of(eid)]) for eid in final.get("kept", [])}
    ranking = final.get("evidence_ranking") or []  # the graph-feature reranker's order, when the respond node ranked
    position = {t: i for i, t in enumerate(ranking)}
    evidence = []
    for eid in final.get("kept", []):
        event = graph.events[eid]
        # Within an event, the turns most likely evidence (most similar to the question) come first.
        turn_ids = [t for t in event.turn_ids if t in snapshot.turn_vectors]
        if ranking:
            turn_ids.sort(key=lambda t: position.get(t, len(position)))
        else:
            turn_ids.sort(key=lambda t: -float((q_vectors @ normalize(snapshot.turn_vectors[t])).max()))
        evidence.append(
            EvidenceItem(
                kind="event", id=eid, text=event.render(), turn_ids=turn_ids, time=event.time, score=event_sims.get(eid)
            )
        )
    cost = (final.get("cost") or Cost()).model_copy(update={"wall_time_s": elapsed})
    return AnswerResult(
        strategy="compass",
        namespace=namespace,
        question=question,
        answer=final.get("answer", ""),
        evidence=evidence,
        cost=cost,
        steps=final.get("step", 0),
        fallbacks=final.get("fallbacks", []),
        turn_ranking=ranking or rank_turns(snapshot, q_vectors, evidence, context_weight=ctx.context_weight),
        details={
            "subgoals": final.get("subgoals", []),
            "satisfied": final.get("satisfied", []),
            "support": final.get("support", {}),
            "paths": final.get("paths", []),
            "visited": final.get("visited", []),
            "refinements": final.get("refinements", 0),
            "cited_ids": final.get("cited_ids", []),
            "explorer_mode": ctx.explorer_mode,
            "turn_texts": cited_turn_texts(snapshot, evidence),
        },
    )


def finish(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
    """The run's ``AnswerResult`` (the graph's ``result`` output, exactly what ``answer()`` returns), built from the
    final state and the run's pinned memory."""
    return finish_run(state, runtime, CompassContext, _result)


builder = build_compass_graph()
_compiled: CompiledStateGraph[Any, Any, Any, Any] = builder.compile(name="compass")  # traced_graph takes any graph
graph = traced_graph(_compiled)


def _recursion_limit(ctx: CompassContext) -> int:
    """LangGraph's step limit for a run: from the step cap; without one (the paper's budget) a round ends when
    the queue empties, which the event count bounds but the context does not know: a large bound."""
    steps = None if ctx.faithful else ctx.max_steps
    return 10 + 4 * ((steps if steps is not None else 2500) + 2) * (ctx.max_refinements + 1)


STRATEGY = graph_strategy(
    "compass",
    graph,
    CompassContext,
    variants=("traversal", "similarity", "faithful", "no-readings", "no-step-cap", "no-plan-starts", "dense"),
    tags=lambda ctx: [f"explorers:{ctx.explorer_mode}", *(["faithful"] if ctx.faithful else [])],
    recursion_limit=_recursion_limit,
)
answer = STRATEGY.run
