"""The CompassMem search graph: planner -> localize -> parallel explorers -> merge (loop) -> refine -> respond.

Explorers of one superstep run as parallel ``Send`` branches (or one batched call); the merge node
applies their decisions. Studio loads ``graph`` from this module.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, FallbackRecord, add_cost
from logicmap.agents.explorer import ExplorerView, explore_batch, explore_event, similarity_decision
from logicmap.agents.localizer import pick_starts
from logicmap.agents.planner import clause_subgoals, plan_subgoals, refine_query
from logicmap.agents.responder import EvidenceText, respond
from logicmap.graphs.resources import Resources, context_for_run, default_resources, run_context
from logicmap.graphs.result import CONTEXT_WEIGHT, AnswerResult, EvidenceItem, rank_turns, turn_scores
from logicmap.graphs.tracing import invoke_strategy
from logicmap.memory.embeddings import normalize
from logicmap.memory.graph import EventGraph
from logicmap.memory.ranking import default_ranker
from logicmap.memory.retrieval import event_index, reciprocal_rank_fusion
from logicmap.memory.store import NamespaceSnapshot
from logicmap.memory.text import query_readings

__all__ = [
    "RANKING_RECIPES",
    "CompassContext",
    "CompassState",
    "answer",
    "build_compass_graph",
    "builder",
    "graph",
]

# Named localization recipes: how events are ranked against the query.
#   dense  - event summary embeddings (the paper's)
#   hybrid - dense and BM25 over summaries, fused by reciprocal rank
#   turns  - an event scores as its best-matching cited turn (for extractive, turn-concatenating summaries)
#   auto   - dense for the LLM policy (concise written summaries), turns for the no-LLM policy
RANKING_RECIPES = ("auto", "dense", "hybrid", "turns")


@dataclass
class CompassContext:
    """Per-run settings and budgets of the compass graph (shown as a form in Studio)."""

    policy: Literal["llm", "heuristic"] = "llm"
    recipe: Literal["auto", "dense", "hybrid", "turns"] = "auto"
    top_k: int = 5
    top_p: int = 5
    max_starts: int = 5
    explorers: int = 3
    max_steps: int = 6
    max_refinements: int = 1
    explorer_mode: Literal["parallel", "batched"] = "parallel"
    keep_threshold: float = 0.25
    satisfy_threshold: float = 0.55
    expand_threshold: float = 0.2
    # The responder's context budget in turns. The no-LLM policy cannot judge whether evidence answers a
    # subgoal (similarity only hints at it), so it searches best-first until its evidence fills this budget
    # and no unread event could still place a turn in it.
    context_turns: int = 10
    # A turn scores max(its own similarity, context_weight x its event's similarity, context_weight x the
    # similarity of the question it replies to): a reply that only makes sense with its event or question
    # ("A vintage film camera.") ranks with them (graphs.result.turn_scores).
    context_weight: float = CONTEXT_WEIGHT
    # Match every search text also without its names (memory.text.query_readings): names dominate a sentence
    # embedding, so "Where exactly did Sam propose to Nadia?" finds every turn about Sam and Nadia first.
    name_free_readings: bool = True
    # How the no-LLM policy ranks its evidence turns. "learned": every turn of the namespace is scored by the
    # learned ranker over graph features (memory.ranking: its event's, topic's, neighbours' and question's
    # similarity, lexical match, speaker); the best context_turns join the evidence with their events, and the
    # evidence is ranked by it. "similarity": the turn_scores formula above, over the explored events only.
    ranker: Literal["learned", "similarity"] = "learned"


class Decision(TypedDict):
    step: int
    event_id: str
    action: str
    next_events: list[str]
    satisfied_subgoals: list[int]


class CompassState(TypedDict, total=False):
    namespace: str
    question: str
    question_date: str | None
    subgoals: list[str]
    satisfied: list[bool]
    query: str
    localized: list[str]
    queue: dict[str, float]
    frontier: list[str]
    visited: list[str]
    kept: list[str]
    step: int
    refinements: int
    done: bool
    decisions: Annotated[list[Decision], operator.add]
    answer: str
    cited_ids: list[str]
    evidence_ranking: list[str]
    cost: Annotated[Cost, add_cost]
    fallbacks: Annotated[list[FallbackRecord], operator.add]
    log: Annotated[list[dict[str, Any]], operator.add]


class ExploreTask(TypedDict):
    namespace: str
    question: str
    subgoals: list[str]
    satisfied: list[bool]
    kept: list[str]
    event_ids: list[str]
    step: int


def _ctx(runtime: Runtime[CompassContext] | None) -> CompassContext:
    ctx = run_context(runtime, CompassContext)
    if ctx.recipe == "auto":
        return replace(ctx, recipe="turns" if ctx.policy == "heuristic" else "dense")
    return ctx


def build_compass_graph(resources: Resources | None = None) -> StateGraph:
    """The compass ``StateGraph`` (uncompiled). Resources default to the process-wide settings."""

    def res() -> Resources:
        return resources or default_resources()

    def llm_for(ctx: CompassContext) -> Any:
        return None if ctx.policy == "heuristic" else res().llm

    def trace(state: dict[str, Any], ctx: CompassContext) -> dict[str, Any]:
        return {
            "tags": ["strategy:compass", f"policy:{ctx.policy}"],
            "metadata": {"namespace": state["namespace"], "explorer_mode": ctx.explorer_mode, "max_steps": ctx.max_steps},
        }

    def event_graph(namespace: str) -> EventGraph:
        return EventGraph.of(res().store.snapshot(namespace))

    def embed(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return normalize(np.asarray(res().embeddings.embed_documents(texts), dtype=np.float32))

    def query_vectors(graph: EventGraph, texts: list[str], ctx: CompassContext) -> list[np.ndarray]:
        """Each text's unit query vectors, one row per reading (``_reading_texts``), one embedding call."""
        readings = [_reading_texts(t, ctx) for t in texts]
        flat = embed([r for rs in readings for r in rs])
        bounds = np.cumsum([0, *(len(rs) for rs in readings)])
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def open_subgoals(subgoals: list[str], satisfied: list[bool]) -> list[str]:
        """The subgoals still to satisfy; all of them once every one is."""
        return [g for g, done in zip(subgoals, satisfied) if not done] or subgoals

    def priorities(
        graph: EventGraph, ids: list[str], subgoals: list[str], satisfied: list[bool], ctx: CompassContext
    ) -> dict[str, float]:
        """Priority = max similarity to a still-unsatisfied subgoal (all subgoals once every one is satisfied)."""
        if not ids:
            return {}
        open_goals = open_subgoals(subgoals, satisfied)
        if not open_goals:  # a question without content words: no subgoal to rank against
            return {e: 0.0 for e in ids}
        goal_vectors = np.vstack(query_vectors(graph, open_goals, ctx))
        if ctx.recipe == "turns":  # the recipe decides how an event's text is scored against a query
            index = {e: i for i, e in enumerate(graph.ids)}
            rows = [index[e] for e in ids]
            scores = np.max([graph.turn_similarities(g)[rows] for g in goal_vectors], axis=0)
        else:
            matrix = np.vstack([graph.vector(e) for e in ids])
            scores = (matrix @ goal_vectors.T).max(axis=1)
        return {e: float(s) for e, s in zip(ids, scores)}

    def evidence_filled(graph: EventGraph, state: dict[str, Any], ctx: CompassContext, queue: dict[str, float]) -> bool:
        """The LLM explorer decides when evidence suffices. The no-LLM one stops when its evidence fills the
        context budget and no queued event can improve it: an event's priority (its best turn or summary
        similarity) bounds the score of every turn it holds, so the search is best-first with a stopping bound.
        """
        if ctx.policy != "heuristic":
            return True
        kept = [e for e in state.get("kept", []) if e in graph]
        open_goals = open_subgoals(state["subgoals"], state["satisfied"])
        if not kept or not open_goals:
            return bool(kept)
        goals = np.vstack(query_vectors(graph, open_goals, ctx))
        evidence = [EvidenceItem(kind="event", id=e, text="", turn_ids=graph.events[e].turn_ids) for e in kept]
        scores = list(turn_scores(graph.snapshot, goals, evidence, context_weight=ctx.context_weight).values())
        if len(scores) < ctx.context_turns:
            return False
        # Unqueued events are bounded by their localization score: a better one means localizing again.
        seen = set(state.get("visited", [])) | set(queue)
        unseen = [i for i, e in enumerate(graph.ids) if e not in seen]
        outside = float(np.max([graph.turn_similarities(g)[unseen] for g in goals])) if unseen else float("-inf")
        best_left = max(max(queue.values(), default=float("-inf")), outside)
        return best_left <= sorted(scores, reverse=True)[ctx.context_turns - 1]

    def pop_frontier(queue: dict[str, float], n: int) -> tuple[list[str], dict[str, float]]:
        ranked = sorted(queue.items(), key=lambda kv: (-kv[1], kv[0]))
        frontier = [e for e, _ in ranked[:n]]
        return frontier, {e: p for e, p in ranked[n:]}

    def evidence_context(state: dict[str, Any], graph: EventGraph) -> str:
        lines = [f"Question: {state['question']}", "Subgoals:"]
        for i, (goal, done) in enumerate(zip(state["subgoals"], state["satisfied"])):
            lines.append(f"  {i}. [{'x' if done else ' '}] {goal}")
        lines.append("Kept evidence:" if state.get("kept") else "Kept evidence: (none yet)")
        for eid in state.get("kept", []):
            if eid in graph:
                lines.append(f"- {render_with_turns(graph, eid)}")
        return "\n".join(lines)

    def render_with_turns(graph: EventGraph, eid: str) -> str:
        turns = graph.turns_of(eid)
        raw = "\n".join(
            f"    {t.render()} ({t.session_time.date().isoformat() if t.session_time else 'undated'})" for t in turns
        )
        return f"{graph.events[eid].render()}\n{raw}"

    def view(graph: EventGraph, eid: str) -> ExplorerView:
        neighbors = [(n.event_id, n.label if n.direction == "out" else f"{n.label} (incoming)", graph.events[n.event_id].render())
                     for n in graph.neighbors(eid)]
        return ExplorerView(eid, render_with_turns(graph, eid), neighbors)

    # -- nodes ----------------------------------------------------------------------------------
    def planner(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        res().store.require_namespace(state["namespace"])
        if ctx.policy == "heuristic":
            subgoals, cost, fallbacks = clause_subgoals(state["question"]), Cost(), []
        else:
            outcome = plan_subgoals(llm_for(ctx), state["question"], method=res().method, **trace(state, ctx))
            subgoals, cost = outcome.output.subgoals, outcome.cost
            fallbacks = [outcome.fallback] if outcome.fallback else []
        return {
            "subgoals": subgoals,
            "satisfied": [False] * len(subgoals),
            "query": state["question"],
            "visited": [],
            "kept": [],
            "queue": {},
            "step": 0,
            "refinements": 0,
            "done": False,
            "cost": cost,
            "fallbacks": fallbacks,
            "log": [{"node": "planner", "subgoals": subgoals}],
        }

    def localize(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        graph = event_graph(state["namespace"])
        if not len(graph):
            return {"frontier": [], "localized": [], "done": True, "log": [{"node": "localize", "empty": True}]}
        query = state.get("query") or state["question"]
        similarity = graph.turn_similarities if ctx.recipe == "turns" else graph.similarities
        sims = np.max([similarity(v) for v in query_vectors(graph, [query], ctx)[0]], axis=0)
        dense_rank = [graph.ids[i] for i in np.argsort(-sims, kind="stable")]
        if ctx.recipe == "hybrid":
            bm = event_index(graph.snapshot).scores(query)  # rows in snapshot.events order, as graph.ids
            bm_rank = [graph.ids[i] for i in np.argsort(-bm, kind="stable")]
            ranking = [e for e, _ in reciprocal_rank_fusion([dense_rank, bm_rank])]
        else:
            ranking = dense_rank
        visited = set(state.get("visited", []))
        ranking = [e for e in ranking if e not in visited]
        top = ranking[: ctx.top_k]
        # Diversity: the best event of each of the first p distinct topics (an event without a topic is its own).
        seen_topics: list[str] = []
        diverse: list[str] = []
        for eid in ranking:
            topic = graph.topic_of.get(eid, f"solo:{eid}")
            if topic not in seen_topics:
                seen_topics.append(topic)
                diverse.append(eid)
                if len(seen_topics) >= ctx.top_p:
                    break
        candidates = list(dict.fromkeys([*top, *diverse]))
        cost, fallbacks = Cost(), []
        if ctx.policy == "heuristic" or not candidates:
            starts = list(dict.fromkeys([*diverse[:2], *top]))[: ctx.max_starts]
        else:
            outcome = pick_starts(
                llm_for(ctx), state["question"], state["subgoals"],
                [(e, graph.events[e].render()) for e in candidates], max_starts=ctx.max_starts,
                method=res().method, **trace(state, ctx),
            )
            starts, cost = outcome.output.event_ids, outcome.cost
            if outcome.fallback:
                fallbacks.append(outcome.fallback)
        queue = dict(state.get("queue", {}))
        queue.update({e: 0.0 for e in starts if e not in visited})
        queue = priorities(graph, list(queue), state["subgoals"], state["satisfied"], ctx)
        frontier, queue = pop_frontier(queue, ctx.explorers)
        return {
            "localized": list(dict.fromkeys([*state.get("localized", []), *top])),
            "queue": queue,
            "frontier": frontier,
            "visited": [*state.get("visited", []), *frontier],
            "cost": cost,
            "fallbacks": fallbacks,
            "log": [{"node": "localize", "query": query, "candidates": candidates, "starts": starts}],
        }

    def explore(task: ExploreTask, runtime: Runtime[CompassContext]) -> dict[str, Any]:
        """One explorer branch (parallel mode): decides for one event."""
        ctx = _ctx(runtime)
        graph = event_graph(task["namespace"])
        eid = task["event_ids"][0]
        if ctx.policy == "heuristic":
            return {"decisions": [heuristic_decision(graph, task, eid, ctx)]}
        outcome = explore_event(
            llm_for(ctx), evidence_context(task, graph), view(graph, eid), len(task["subgoals"]),
            method=res().method, **trace(task, ctx),
        )
        d = outcome.output
        return {
            "decisions": [Decision(step=task["step"], event_id=eid, action=d.action, next_events=d.next_events,
                                   satisfied_subgoals=d.satisfied_subgoals)],
            "cost": outcome.cost,
            "fallbacks": [outcome.fallback] if outcome.fallback else [],
        }

    def explore_all(task: ExploreTask, runtime: Runtime[CompassContext]) -> dict[str, Any]:
        """Batched mode: one call decides for every event of the superstep."""
        ctx = _ctx(runtime)
        graph = event_graph(task["namespace"])
        if ctx.policy == "heuristic":
            return {"decisions": [heuristic_decision(graph, task, e, ctx) for e in task["event_ids"]]}
        outcome = explore_batch(
            llm_for(ctx), evidence_context(task, graph), [view(graph, e) for e in task["event_ids"]],
            len(task["subgoals"]), method=res().method, **trace(task, ctx),
        )
        return {
            "decisions": [
                Decision(step=task["step"], event_id=d.event_id, action=d.action, next_events=d.next_events,
                         satisfied_subgoals=d.satisfied_subgoals)
                for d in outcome.output.decisions
            ],
            "cost": outcome.cost,
            "fallbacks": [outcome.fallback] if outcome.fallback else [],
        }

    def heuristic_decision(graph: EventGraph, task: ExploreTask, eid: str, ctx: CompassContext) -> Decision:
        """The no-LLM explorer reads what an LLM explorer reads: the summary and the raw turns it cites."""
        neighbors = list(dict.fromkeys(n.event_id for n in graph.neighbors(eid)))
        snapshot = graph.snapshot
        turn_vectors = [snapshot.turn_vectors[t] for t in graph.events[eid].turn_ids if t in snapshot.turn_vectors]
        readings = normalize(np.vstack([graph.vector(eid), *turn_vectors]))
        d = similarity_decision(
            readings,
            query_vectors(graph, task["subgoals"], ctx),
            task["satisfied"],
            neighbors,
            np.vstack([graph.vector(n) for n in neighbors]) if neighbors else np.zeros((0, 1)),
            keep_threshold=ctx.keep_threshold,
            satisfy_threshold=ctx.satisfy_threshold,
            expand_threshold=ctx.expand_threshold,
        )
        return Decision(step=task["step"], event_id=eid, action=d.action, next_events=d.next_events,
                        satisfied_subgoals=d.satisfied_subgoals)

    def merge(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        graph = event_graph(state["namespace"])
        step = state.get("step", 0)
        decisions = [d for d in state.get("decisions", []) if d["step"] == step]
        kept = list(state.get("kept", []))
        satisfied = list(state["satisfied"])
        visited = list(state.get("visited", []))
        queue = dict(state.get("queue", {}))
        answered = False
        dispatched = {eid: i for i, eid in enumerate(state.get("frontier", []))}
        # Evidence is kept in the order the events were dispatched (best priority first).
        for d in sorted(decisions, key=lambda d: (dispatched.get(d["event_id"], len(dispatched)), d["event_id"])):
            if d["action"] in ("EXPAND", "ANSWER") and d["event_id"] not in kept:
                kept.append(d["event_id"])
            for i in d["satisfied_subgoals"]:
                if 0 <= i < len(satisfied):
                    satisfied[i] = True
            if d["action"] == "ANSWER":
                answered = True
            real = {n.event_id for n in graph.neighbors(d["event_id"])}
            for nxt in d["next_events"][:3]:
                if nxt in real and nxt not in visited and nxt not in queue:
                    queue[nxt] = 0.0
        # Priorities follow the satisfaction vector: recomputed for every queued event, never stale.
        queue = priorities(graph, list(queue), state["subgoals"], satisfied, ctx)
        ranked = dict(queue)
        step += 1
        progress = {"kept": kept, "subgoals": state["subgoals"], "satisfied": satisfied, "visited": visited}
        done = step >= ctx.max_steps or ((answered or all(satisfied)) and evidence_filled(graph, progress, ctx, queue))
        frontier: list[str] = []
        if not done:
            frontier, queue = pop_frontier(queue, ctx.explorers)
        return {
            "kept": kept,
            "satisfied": satisfied,
            "queue": queue,
            "frontier": frontier,
            "visited": [*visited, *frontier],
            "step": step,
            "done": done,
            "log": [{"node": "merge", "step": step, "decisions": decisions, "satisfied": satisfied, "priorities": ranked}],
        }

    def refine(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        graph = event_graph(state["namespace"])
        missing = [g for g, done in zip(state["subgoals"], state["satisfied"]) if not done]
        found = "\n".join(graph.events[e].render() for e in state.get("kept", []) if e in graph)
        if ctx.policy == "heuristic":
            query, cost, fallbacks = " ".join(missing) or state["question"], Cost(), []
        else:
            outcome = refine_query(llm_for(ctx), state["question"], missing, found, method=res().method, **trace(state, ctx))
            query, cost = outcome.output.query, outcome.cost
            fallbacks = [outcome.fallback] if outcome.fallback else []
        return {
            "query": query,
            "refinements": state.get("refinements", 0) + 1,
            "done": False,
            "step": state.get("step", 0),
            "cost": cost,
            "fallbacks": fallbacks,
            "log": [{"node": "refine", "query": query, "missing": missing}],
        }

    def respond_node(state: CompassState, runtime: Runtime[CompassContext]) -> dict[str, Any]:
        ctx = _ctx(runtime)
        graph = event_graph(state["namespace"])
        evidence_ids = [e for e in state.get("kept", []) if e in graph]
        fallbacks: list[FallbackRecord] = []
        ranking: list[str] = []
        if ctx.policy == "heuristic" and ctx.ranker == "learned":
            # The ranker's best turns join the evidence with their events, after what the search kept;
            # the evidence's turns are then ranked by it (AnswerResult.turn_ranking).
            scores = learned_scores(graph.snapshot, state["question"], ctx, res())
            ranking = sorted(scores, key=lambda t: -scores[t])
            owner = graph.event_of_turn
            best = [owner[t] for t in ranking[: ctx.context_turns] if t in owner]
            evidence_ids = list(dict.fromkeys([*evidence_ids, *best]))
            held = {t for e in evidence_ids for t in graph.events[e].turn_ids}
            ranking = [t for t in ranking if t in held]
        if not evidence_ids:
            evidence_ids = [e for e in state.get("localized", []) if e in graph][: ctx.top_k]
            if evidence_ids:
                fallbacks.append(FallbackRecord(role="responder", reason="no evidence kept: answered from the top-k localized events"))
        evidence = [EvidenceText(e, render_with_turns(graph, e), graph.events[e].time) for e in evidence_ids]
        outcome = respond(
            llm_for(ctx), state["question"], evidence, question_date=state.get("question_date"),
            method=res().method, **trace(state, ctx),
        )
        if outcome.fallback and ctx.policy != "heuristic":
            fallbacks.append(outcome.fallback)
        return {
            "answer": outcome.output.answer,
            "cited_ids": outcome.output.cited_ids,
            "kept": evidence_ids,
            "cost": outcome.cost,
            "fallbacks": fallbacks,
            "evidence_ranking": ranking,
            "log": [{"node": "respond", "ranked_turns": ranking[: ctx.context_turns]}] if ranking else [],
        }

    # -- routing --------------------------------------------------------------------------------
    def route(state: CompassState, runtime: Runtime[CompassContext]) -> Any:
        ctx = _ctx(runtime)
        frontier = state.get("frontier", [])
        if frontier and not state.get("done"):
            base = {
                "namespace": state["namespace"],
                "question": state["question"],
                "subgoals": state["subgoals"],
                "satisfied": state["satisfied"],
                "kept": state.get("kept", []),
                "step": state.get("step", 0),
            }
            if ctx.explorer_mode == "batched":
                return [Send("explore_batch", {**base, "event_ids": frontier})]
            return [Send("explore", {**base, "event_ids": [eid]}) for eid in frontier]
        graph = event_graph(state["namespace"])
        wanting = not all(state.get("satisfied", [True])) or not evidence_filled(graph, state, ctx, state.get("queue", {}))
        if wanting and state.get("refinements", 0) < ctx.max_refinements and len(graph):
            return "refine"
        return "respond"

    builder = StateGraph(CompassState, context_schema=CompassContext)
    builder.add_node("planner", planner)
    builder.add_node("localize", localize)
    builder.add_node("explore", explore)
    builder.add_node("explore_batch", explore_all)
    builder.add_node("merge", merge)
    builder.add_node("refine", refine)
    builder.add_node("respond", respond_node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "localize")
    builder.add_conditional_edges("localize", route, ["explore", "explore_batch", "refine", "respond"])
    builder.add_edge("explore", "merge")
    builder.add_edge("explore_batch", "merge")
    builder.add_conditional_edges("merge", route, ["explore", "explore_batch", "refine", "respond"])
    builder.add_edge("refine", "localize")
    builder.add_edge("respond", END)
    return builder


def answer(
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: str = "llm",
    question_date: str | None = None,
    context: CompassContext | None = None,
    **options: Any,
) -> AnswerResult:
    """Answer ``question`` from ``namespace`` with the compass graph; options override ``CompassContext`` fields."""
    res = resources or default_resources()
    res.store.require_namespace(namespace)
    ctx = context_for_run(CompassContext, context, policy, options)
    return invoke_strategy(
        "compass", res.compiled("compass", build_compass_graph),
        {"namespace": namespace, "question": question, "question_date": question_date}, ctx,
        namespace=namespace, tags=[f"explorers:{ctx.explorer_mode}"],
        recursion_limit=10 + 4 * (ctx.max_steps + 2) * (ctx.max_refinements + 1),
        make_result=lambda final, elapsed: _result(question, namespace, final, ctx, res, elapsed),
    )


def _reading_texts(text: str, ctx: CompassContext) -> list[str]:
    """What a search text is matched as: itself and, unless turned off, itself without its names."""
    return query_readings(text) if ctx.name_free_readings else [text]


def _readings(question: str, ctx: CompassContext, res: Resources) -> np.ndarray:
    """Unit vectors of the question's readings (the question first)."""
    return normalize(np.asarray(res.embeddings.embed_documents(_reading_texts(question, ctx)), dtype=np.float32))


def learned_scores(snapshot: NamespaceSnapshot, question: str, ctx: CompassContext, res: Resources) -> dict[str, float]:
    """Every turn's score by the shipped learned ranker (``memory.ranking``)."""
    return default_ranker().scores(snapshot, question, _readings(question, ctx, res))


def _result(question: str, namespace: str, final: dict[str, Any], ctx: CompassContext, res: Resources,
            elapsed: float) -> AnswerResult:
    snapshot = res.store.snapshot(namespace)
    graph = EventGraph.of(snapshot)
    q_vectors = _readings(question, ctx, res)
    event_sims = dict(zip(graph.ids, np.max([graph.similarities(v) for v in q_vectors], axis=0).tolist()))
    ranking = final.get("evidence_ranking") or []  # the learned ranker's order, when the respond node ranked
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
        evidence.append(EvidenceItem(kind="event", id=eid, text=event.render(), turn_ids=turn_ids, time=event.time,
                                     score=event_sims.get(eid)))
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
            "visited": final.get("visited", []),
            "refinements": final.get("refinements", 0),
            "cited_ids": final.get("cited_ids", []),
            "explorer_mode": ctx.explorer_mode,
            "turn_texts": {t: snapshot.turns[t].render() for item in evidence for t in item.turn_ids if t in snapshot.turns},
        },
    )

builder = build_compass_graph()
graph = builder.compile()
