"""The ``real`` strategy graph: roots -> beam steps over temporal facts -> stop / expand / repair -> prune -> answer.

Each beam step spends ONE evaluator call on all candidate paths; failed steps get a counterfactual repair
from the rule table within a budget. Studio loads ``graph`` from this module.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, FallbackRecord, add_cost
from logicmap.agents.real import (
    answer_from_paths,
    cosine_to,
    evaluate_paths,
    heuristic_answer,
    heuristic_roots,
    heuristic_scores,
    plan_roots,
    relation_gloss,
    repair_candidates,
)
from logicmap.graphs.resources import (
    Resources,
    ResourcesField,
    context_for_run,
    namespace_field,
    policy_field,
    resources_field,
    resources_of,
    run_context,
    run_namespace,
    with_resources,
)
from logicmap.graphs.result import AnswerResult, EvidenceItem
from logicmap.graphs.tracing import invoke_strategy, traced_graph
from logicmap.memory.fact_paths import FactIndex, FactPath, SearchFilter, path_text, reference_window
from logicmap.memory.facts import entity_key, interval_text, parse_when, when_text
from logicmap.memory.records import Fact
from logicmap.memory.store import NamespaceSnapshot
from logicmap.prompts.real_roots import RootEntity, RootPlan

__all__ = [
    "RealContext",
    "RealInput",
    "RealOutput",
    "RealState",
    "after_evaluate",
    "after_expand",
    "after_repair",
    "answer",
    "answer_node",
    "build_real_graph",
    "builder",
    "evaluate",
    "expand",
    "fact_index",
    "graph",
    "prune",
    "repair",
    "roots",
]


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class RealContext:
    """Per-run settings of the REAL search (paper defaults; shown as a form in Studio)."""

    policy: Literal["auto", "llm", "heuristic"] = policy_field()
    beam_width: int = 5
    """Paths kept in the beam at each step."""
    depth: int = 3
    """Most expansion steps from the root entities."""
    candidates: int = 5
    """Outgoing facts considered per path and step (top-m by similarity)."""
    min_confidence: float = 0.8
    """Facts below this confidence are followed only when the question asks for uncertain ones."""
    relevance_threshold: float = 0.5
    """A path the evaluator scores below this relevance is dropped."""
    coherence_threshold: float = 0.5
    """A path the evaluator scores below this coherence is dropped."""
    sufficiency_threshold: float = 0.7
    """The search stops once a path is this sufficient to answer."""
    repair_budget: int = 2
    """Most counterfactual repairs when the beam fails."""
    top_k: int = 5
    """Paths kept as evidence after the global pruning."""
    namespace: str | None = namespace_field()
    resources: ResourcesField = resources_field()


@with_config(ConfigDict(use_attribute_docstrings=True))
class RealInput(TypedDict):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""

    question: str
    """The question to answer from the namespace's temporal facts."""
    question_date: NotRequired[str | None]
    """When the question is asked (YYYY-MM-DD, YYYY-MM or YYYY); unset = the latest time in memory."""
    reference_time: NotRequired[str | None]
    """The time the facts must be valid at (YYYY-MM-DD, YYYY-MM, YYYY or "now"); unset = the planner's reading."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class RealOutput(TypedDict, total=False):
    """What a REAL run returns: the answer, its evidence paths, what it cost."""

    answer: str
    """The answer, written from the kept fact paths only."""
    evidence: list[EvidenceItem]
    """The kept fact paths, each with its times, confidence and the turns (dia ids) it cites."""
    answer_paths: list[str]
    """The ids of the paths the answer used."""
    cost: Annotated[Cost, add_cost]
    """LLM calls and tokens the run spent."""
    fallbacks: Annotated[list[FallbackRecord], operator.add]
    """Roles that fell back to their deterministic rule, and why."""


class RealState(TypedDict, total=False):
    """The beam search; ``namespace`` is the run's, resolved once by ``roots`` (never an input)."""

    question: str
    namespace: str
    reference_time: str | None  # input override: YYYY-MM-DD, YYYY-MM, YYYY or "now"
    question_date: str | None  # when the question is asked ("now" means this time)
    roots: list[RootEntity]
    reference: str | None
    include_uncertain: bool
    beam: list[FactPath]
    candidates: list[FactPath]
    failed: list[str]
    tried: list[str]
    scored: Annotated[list[FactPath], operator.add]
    decision: str
    depth: int
    repairs: int
    evaluator_calls: int
    paths_visited: int
    kept: list[FactPath]
    passing: bool
    answer: str
    answer_paths: list[str]
    evidence: list[EvidenceItem]
    trail: Annotated[list[dict[str, Any]], operator.add]
    cost: Annotated[Cost, add_cost]
    fallbacks: Annotated[list[FallbackRecord], operator.add]


def _ctx(runtime: Runtime[RealContext] | None) -> RealContext:
    return run_context(runtime, RealContext)


# -- helpers ----------------------------------------------------------------------------------------


def _build_fact_index(snapshot: NamespaceSnapshot) -> FactIndex:
    return FactIndex(snapshot.facts)


def fact_index(snapshot: NamespaceSnapshot) -> FactIndex:
    """The snapshot's fact index, built once per snapshot (a committed generation)."""
    return snapshot.derived(_build_fact_index)


def _combined(path: FactPath) -> float:
    return round(0.4 * (path.relevance or 0.0) + 0.2 * (path.coherence or 0.0) + 0.4 * (path.sufficiency or 0.0), 4)


def _llm(ctx: RealContext, res: Resources) -> Any:
    """The chat model of the run, or None for the heuristic policy (or when none is configured)."""
    return None if ctx.policy == "heuristic" else res.llm


def _trace(state: RealState, ctx: RealContext) -> dict[str, Any]:
    return {"tags": ["strategy:real", f"policy:{ctx.policy}"], "metadata": {"namespace": state["namespace"]}}


def _load(state: RealState, res: Resources) -> tuple[NamespaceSnapshot, FactIndex]:
    snapshot = res.store.snapshot(state["namespace"])
    return snapshot, fact_index(snapshot)


def _query_vector(state: RealState, res: Resources) -> np.ndarray:
    return np.asarray(res.embeddings.embed_query(state["question"]), dtype=np.float32)


def _similar_facts(state: RealState, res: Resources, snapshot: NamespaceSnapshot,
                   index: FactIndex) -> list[tuple[str, float]]:
    """Every fact with a vector, most similar to the question first, with its similarity."""
    ids = [f for f in index.facts if f in snapshot.fact_vectors]
    if not ids:
        return []
    sims = cosine_to(_query_vector(state, res), np.vstack([snapshot.fact_vectors[f] for f in ids]))
    return [(ids[i], float(sims[i])) for i in np.argsort(-sims, kind="stable")]


def _search_filter(state: RealState, ctx: RealContext, index: FactIndex) -> SearchFilter:
    latest = parse_when(state.get("question_date")) or index.latest_time()
    return SearchFilter(
        window=reference_window(state.get("reference"), latest),
        min_confidence=ctx.min_confidence,
        include_uncertain=bool(state.get("include_uncertain")),
    )


def _rank(state: RealState, res: Resources, index: FactIndex, paths: list[FactPath], limit: int) -> list[FactPath]:
    """Top ``limit`` paths by similarity of the query to their last relation + target."""
    if not paths:
        return []
    texts = []
    for path in paths:
        fact = index.facts[path.fact_ids[-1]]
        texts.append(f"{relation_gloss(fact.relation)} {path.end}")
    sims = cosine_to(_query_vector(state, res), np.asarray(res.embeddings.embed_documents(texts), dtype=np.float32))
    ranked = [p.model_copy(update={"similarity": round(float(s), 4)}) for p, s in zip(paths, sims, strict=True)]
    ranked.sort(key=lambda p: (-p.similarity, p.id))
    return ranked[:limit]


def _open_beam(state: RealState, ctx: RealContext) -> list[FactPath]:
    """The beam paths that may still grow (below the depth limit)."""
    return [p for p in state.get("beam", []) if p.depth < ctx.depth]


def _outgoing(parent: FactPath, index: FactIndex, flt: SearchFilter, tried: set[str], step: int) -> list[FactPath]:
    """``parent`` extended by each admissible outgoing fact not on the path and not tried from it."""
    nodes = {entity_key(n) for n in parent.nodes}
    return [
        parent.extend(f, "out", step=step)
        for f in index.outgoing(parent.end)
        if f.id not in parent.fact_ids and entity_key(f.tail) not in nodes
        and f"{parent.id}|{f.id}" not in tried and flt.admits(f, parent.intent)
    ]


def _hypotheses(parent: FactPath, index: FactIndex, failed: list[Fact], flt: SearchFilter, tried: list[str],
                step: int) -> list[FactPath]:
    """``parent`` extended by the rule table's counterfactual candidates (facts not tried from it)."""
    exclude = {key.split("|", 1)[1] for key in tried if key.split("|", 1)[0] == parent.id}
    return [
        parent.extend(c.fact, c.direction, hypothesis=c.hypothesis, step=step)
        for c in repair_candidates(index, parent, failed, flt, exclude=exclude)
    ]


def _top_children(state: RealState, res: Resources, index: FactIndex, children: list[tuple[FactPath, list[FactPath]]],
                  limit: int) -> tuple[list[FactPath], list[str]]:
    """The top ``limit`` children of each parent and their ``parent|fact`` tried keys."""
    candidates: list[FactPath] = []
    keys: list[str] = []
    for parent, own in children:
        chosen = _rank(state, res, index, own, limit)
        candidates.extend(chosen)
        keys.extend(f"{parent.id}|{c.fact_ids[-1]}" for c in chosen)
    return candidates, keys


def _plan(state: RealState, ctx: RealContext, res: Resources, index: FactIndex,
          similar: list[str]) -> tuple[RootPlan, Cost, list[FallbackRecord]]:
    """The root plan: the LLM planner, or named entities / similarity without a model."""
    question = state["question"]
    fallbacks: list[FallbackRecord] = []
    llm = _llm(ctx, res)
    if ctx.policy == "llm" and llm is None:
        fallbacks.append(FallbackRecord(role="real", reason="no chat model configured: heuristic policy used"))
    if not len(index):
        return heuristic_roots(question, index), Cost(), fallbacks
    if llm is None:
        return heuristic_roots(question, index, similar), Cost(), fallbacks
    outcome = plan_roots(llm, question, index, similar_fact_ids=similar, method=res.method, **_trace(state, ctx))
    plan = outcome.output
    if outcome.fallback:
        fallbacks.append(outcome.fallback)
    if not plan.roots:  # every root the model named was unknown
        plan = plan.model_copy(update={"roots": heuristic_roots(question, index, similar).roots})
    return plan, outcome.cost, fallbacks


def _score(state: RealState, ctx: RealContext, res: Resources, index: FactIndex,
           candidates: list[FactPath]) -> tuple[list[FactPath], Cost, list[FallbackRecord]]:
    """ONE evaluator call (or the similarity heuristic) scores every candidate path."""
    llm = _llm(ctx, res)
    labels = [f"P{i + 1}" for i in range(len(candidates))]
    similarities = [p.similarity for p in candidates]
    cost = Cost()
    fallbacks: list[FallbackRecord] = []
    if llm is None:
        scores = heuristic_scores(state["question"], candidates, labels, index, similarities)
    else:
        outcome = evaluate_paths(llm, state["question"], candidates, index, similarities=similarities,
                                 reference_time=state.get("reference"), method=res.method, **_trace(state, ctx))
        scores, cost = outcome.output, outcome.cost
        if outcome.fallback:
            fallbacks.append(outcome.fallback)
    by_label = {s.path_id: s for s in scores.scores}
    scored = []
    for label, path in zip(labels, candidates, strict=True):
        s = by_label[label]
        path = path.model_copy(update={"relevance": s.relevance, "coherence": s.coherence, "sufficiency": s.sufficiency})
        scored.append(path.model_copy(update={"score": _combined(path)}))
    return scored, cost, fallbacks


def _next_beam(passing: list[FactPath], beam_width: int) -> list[FactPath]:
    """The best ``beam_width`` passing paths of each root, roots in first-seen order."""
    beam: list[FactPath] = []
    for root in dict.fromkeys(p.root for p in passing):
        mine = sorted((p for p in passing if p.root == root), key=lambda p: (-(p.score or 0), p.id))
        beam.extend(mine[:beam_width])
    return beam


def _path_evidence(path: FactPath, index: FactIndex) -> EvidenceItem:
    facts = [index.facts[f] for f in path.fact_ids]
    return EvidenceItem(
        kind="path",
        id=path.id,
        text=path_text(path, index),
        turn_ids=list(dict.fromkeys(t for f in facts for t in f.turn_ids)),
        time=interval_text(facts[-1]).strip("[)"),
        score=path.score if path.score is not None else path.similarity,
    )


# -- nodes ------------------------------------------------------------------------------------------


def roots(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """Root entities with an exploration intent each (LLM planner; named entities or similarity without one)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    namespace = run_namespace(ctx.namespace)
    res.store.require_namespace(namespace)
    state = {**state, "namespace": namespace}  # type: ignore[assignment]
    snapshot, index = _load(state, res)
    similar = [f for f, _ in _similar_facts(state, res, snapshot, index)[:10]]
    plan, cost, fallbacks = _plan(state, ctx, res, index, similar)
    reference = state.get("reference_time") or plan.reference_time
    return {
        "namespace": namespace,
        "roots": plan.roots,
        "reference": reference,
        "include_uncertain": plan.include_uncertain,
        "beam": [FactPath.start(r.entity, r.intent) for r in plan.roots],
        "candidates": [],
        "failed": [],
        "tried": [],
        "depth": 0,
        "repairs": 0,
        "evaluator_calls": 0,
        "paths_visited": 0,
        "cost": cost,
        "fallbacks": fallbacks,
        "trail": [{"node": "roots", "roots": [f"{r.entity} ({r.intent})" for r in plan.roots],
                   "reference_time": reference, "include_uncertain": plan.include_uncertain}],
    }


def expand(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """Plain expansion: each beam path's admissible outgoing facts, top-m by similarity."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    flt = _search_filter(state, ctx, index)
    tried = set(state.get("tried", []))
    step = state.get("evaluator_calls", 0) + 1
    children = [(p, _outgoing(p, index, flt, tried, step)) for p in _open_beam(state, ctx)]
    candidates, keys = _top_children(state, res, index, children, ctx.candidates)
    return {
        "candidates": candidates,
        "tried": [*state.get("tried", []), *keys],
        "trail": [{"node": "expand", "depth": max((p.depth for p in state.get("beam", [])), default=0),
                   "candidates": len(candidates)}],
    }


def evaluate(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """ONE evaluator call scores every candidate; then stop, expand, repair or prune."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    scored, cost, fallbacks = _score(state, ctx, res, index, state.get("candidates", []))
    passing = [p for p in scored if p.passes(ctx.relevance_threshold, ctx.coherence_threshold)]
    sufficient = [p for p in passing if (p.sufficiency or 0.0) >= ctx.sufficiency_threshold]
    depth = max((p.depth for p in scored), default=state.get("depth", 0))
    update: dict[str, Any] = {
        "scored": scored,
        "evaluator_calls": state.get("evaluator_calls", 0) + 1,
        "paths_visited": state.get("paths_visited", 0) + len(scored),
        "candidates": [],
        "failed": [p.fact_ids[-1] for p in scored if p not in passing],
        "cost": cost,
        "fallbacks": fallbacks,
    }
    if sufficient:
        decision = "stop"
    elif passing and depth < ctx.depth:
        decision = "expand"
        update["beam"] = _next_beam(passing, ctx.beam_width)
        update["depth"] = depth
    elif not passing and state.get("repairs", 0) < ctx.repair_budget:
        decision = "repair"
    else:
        decision = "prune"
    best = max(scored, key=lambda p: p.score or 0, default=None)
    update["decision"] = decision
    update["trail"] = [{
        "node": "evaluate", "step": update["evaluator_calls"], "candidates": len(scored), "passing": len(passing),
        "sufficient": len(sufficient), "decision": decision,
        "best": path_text(best, index) if best else None, "best_score": best.score if best else None,
    }]
    return update


def repair(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """Counterfactual repair: rule-table hypotheses turned into constrained traversals from the beam."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    flt = _search_filter(state, ctx, index)
    tried = state.get("tried", [])
    failed: list[Fact] = [index.facts[f] for f in state.get("failed", []) if f in index.facts]
    step = state.get("evaluator_calls", 0) + 1
    children = [(p, _hypotheses(p, index, failed, flt, tried, step)) for p in _open_beam(state, ctx)]
    candidates, keys = _top_children(state, res, index, children, ctx.candidates)
    return {
        "candidates": candidates,
        "repairs": state.get("repairs", 0) + 1,
        "tried": [*tried, *keys],
        "trail": [{"node": "repair", "round": state.get("repairs", 0) + 1, "candidates": len(candidates),
                   "hypotheses": sorted({(c.hypothesis or "").split(":")[0] for c in candidates})}],
    }


def prune(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """Global top-k over every scored path: passing paths first, best combined score first."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    snapshot, index = _load(state, res)
    best: dict[str, FactPath] = {}
    for path in state.get("scored", []):
        if path.id not in best or (path.score or 0) > (best[path.id].score or 0):
            best[path.id] = path
    passing = [p for p in best.values() if p.passes(ctx.relevance_threshold, ctx.coherence_threshold)]
    pool = passing or list(best.values())
    kept = sorted(pool, key=lambda p: (-(p.score or 0), p.depth, p.id))[: ctx.top_k]
    fallbacks: list[FallbackRecord] = []
    if not kept and index.facts:
        # Nothing was reachable from the roots: the most similar facts, unscored, as evidence.
        similar = _similar_facts(state, res, snapshot, index)
        for fact_id, sim in similar[: ctx.top_k]:
            fact = index.facts[fact_id]
            kept.append(FactPath.start(fact.head, "FACT").extend(fact, "out").model_copy(
                update={"similarity": round(sim, 4)}))
        if similar:
            fallbacks.append(FallbackRecord(role="real", reason="no path from the roots: most similar facts used"))
    return {"kept": kept, "passing": bool(passing), "fallbacks": fallbacks,
            "trail": [{"node": "prune", "scored": len(best), "passing": len(passing), "kept": len(kept)}]}


def answer_node(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """The answer from the kept paths only, with the paths serialized as evidence."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    kept = state.get("kept", [])
    llm = _llm(ctx, res)
    cost = Cost()
    fallbacks: list[FallbackRecord] = []
    if llm is None:
        result = heuristic_answer(state["question"], kept, index, passing=bool(state.get("passing")))
    else:
        outcome = answer_from_paths(llm, state["question"], kept, index, reference_time=state.get("reference"),
                                    passing=bool(state.get("passing")), method=res.method, **_trace(state, ctx))
        result, cost = outcome.output, outcome.cost
        if outcome.fallback:
            fallbacks.append(outcome.fallback)
    return {"answer": result.answer, "answer_paths": result.path_ids, "evidence": [_path_evidence(p, index) for p in kept],
            "cost": cost, "fallbacks": fallbacks}


# -- routers ----------------------------------------------------------------------------------------


def after_expand(state: RealState, runtime: Runtime[RealContext]) -> Literal["evaluate", "repair", "prune"]:
    if state.get("candidates"):
        return "evaluate"
    return "repair" if state.get("repairs", 0) < _ctx(runtime).repair_budget and state.get("beam") else "prune"


def after_evaluate(state: RealState) -> Literal["prune", "expand", "repair"]:
    decision = state.get("decision", "")
    if decision == "expand":
        return "expand"
    return "repair" if decision == "repair" else "prune"


def after_repair(state: RealState) -> Literal["evaluate", "prune"]:
    return "evaluate" if state.get("candidates") else "prune"


# -- the graph --------------------------------------------------------------------------------------


def build_real_graph() -> StateGraph:
    """The ``real`` ``StateGraph`` (uncompiled); nodes read their resources from the run's context."""
    builder = StateGraph(RealState, context_schema=RealContext, input_schema=RealInput, output_schema=RealOutput)
    builder.add_node("roots", roots)
    builder.add_node("expand", expand)
    builder.add_node("evaluate", evaluate)
    builder.add_node("repair", repair)
    builder.add_node("prune", prune)
    builder.add_node("answer", answer_node)
    builder.add_edge(START, "roots")
    builder.add_edge("roots", "expand")
    builder.add_conditional_edges("expand", after_expand, ["evaluate", "repair", "prune"])
    builder.add_conditional_edges("evaluate", after_evaluate, ["prune", "expand", "repair"])
    builder.add_conditional_edges("repair", after_repair, ["evaluate", "prune"])
    builder.add_edge("prune", "answer")
    builder.add_edge("answer", END)
    return builder


def answer(
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: str = "auto",
    question_date: str | None = None,
    reference_time: str | None = None,
    context: RealContext | None = None,
    **options: Any,
) -> AnswerResult:
    """Answer ``question`` from ``namespace``'s facts with REAL; options override ``RealContext`` fields."""
    ctx = context_for_run(RealContext, context, policy, options)
    ctx, res = with_resources(ctx, resources, namespace=namespace)
    res.store.require_namespace(namespace)
    return invoke_strategy(
        "real", graph,
        {"question": question, "question_date": question_date, "reference_time": reference_time},
        ctx, namespace=namespace, recursion_limit=20 + 4 * (ctx.depth + 1) * (ctx.repair_budget + 1),
        make_result=lambda final, elapsed: _result(question, namespace, final, res, elapsed),
    )


def _result(question: str, namespace: str, final: dict[str, Any], res: Resources, elapsed: float) -> AnswerResult:
    snapshot = res.store.snapshot(namespace)
    index = fact_index(snapshot)
    evidence: list[EvidenceItem] = final.get("evidence", [])
    cost = (final.get("cost") or Cost()).model_copy(update={"wall_time_s": elapsed})
    kept: list[FactPath] = final.get("kept", [])
    return AnswerResult(
        strategy="real",
        namespace=namespace,
        question=question,
        answer=final.get("answer", ""),
        evidence=evidence,
        cost=cost,
        steps=final.get("evaluator_calls", 0),
        fallbacks=final.get("fallbacks", []),
        details={
            "evaluator_calls": final.get("evaluator_calls", 0),
            "paths_visited": final.get("paths_visited", 0),
            "repairs": final.get("repairs", 0),
            "roots": [r.model_dump() for r in final.get("roots", [])],
            "reference_time": final.get("reference"),
            "include_uncertain": final.get("include_uncertain", False),
            "passing": final.get("passing", False),
            "answer_paths": final.get("answer_paths", []),
            "trail": final.get("trail", []),
            "paths": [_serialize_path(p, index) for p in kept],
            "turn_texts": {t: snapshot.turns[t].render() for item in evidence for t in item.turn_ids if t in snapshot.turns},
        },
    )


def _serialize_path(path: FactPath, index: FactIndex) -> dict[str, Any]:
    facts = []
    for fact_id, direction in zip(path.fact_ids, path.directions, strict=True):
        fact = index.facts[fact_id]
        facts.append({
            "id": fact.id, "head": fact.head, "relation": fact.relation, "tail": fact.tail, "direction": direction,
            "valid_from": when_text(fact.valid_from, fact.from_precision),
            "valid_to": when_text(fact.valid_to, fact.to_precision),
            "confidence": fact.confidence, "intent": fact.intent, "turn_ids": list(fact.turn_ids),
        })
    return {
        "id": path.id, "root": path.root, "intent": path.intent, "hypothesis": path.hypothesis,
        "relevance": path.relevance, "coherence": path.coherence, "sufficiency": path.sufficiency,
        "score": path.score, "facts": facts,
    }


builder = build_real_graph()
graph = traced_graph(builder.compile(name="real"))
