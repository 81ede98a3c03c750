"""The ``real`` strategy graph: roots -> beam steps over temporal facts -> stop / expand / repair -> prune -> answer.

Each beam step spends ONE evaluator call on all candidate paths; failed steps get a counterfactual repair
from the rule table within a budget. Studio loads ``graph`` from this module.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
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
from logicmap.graphs.resources import Resources, context_for_run, default_resources, run_context
from logicmap.graphs.result import AnswerResult, EvidenceItem
from logicmap.graphs.tracing import invoke_strategy
from logicmap.memory.fact_paths import FactIndex, FactPath, SearchFilter, path_text, reference_window
from logicmap.memory.facts import entity_key, interval_text, parse_when, when_text
from logicmap.memory.records import Fact
from logicmap.memory.store import NamespaceSnapshot
from logicmap.prompts.real_roots import RootEntity

__all__ = ["RealContext", "RealState", "answer", "build_real_graph", "builder", "graph"]


@dataclass
class RealContext:
    """Per-run settings of the REAL search (paper defaults; shown as a form in Studio)."""

    policy: Literal["llm", "heuristic"] = "llm"
    beam_width: int = 5
    depth: int = 3
    candidates: int = 5
    min_confidence: float = 0.8
    relevance_threshold: float = 0.5
    coherence_threshold: float = 0.5
    sufficiency_threshold: float = 0.7
    repair_budget: int = 2
    top_k: int = 5


class RealState(TypedDict, total=False):
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


_INDEXES: dict[tuple[str, int], tuple[NamespaceSnapshot, FactIndex]] = {}


def _fact_index(snapshot: NamespaceSnapshot) -> FactIndex:
    """The snapshot's fact index, built once per committed generation."""
    key = (snapshot.namespace, snapshot.generation)
    cached = _INDEXES.get(key)
    if cached is not None and cached[0] is snapshot:
        return cached[1]
    if len(_INDEXES) > 16:
        _INDEXES.clear()
    index = FactIndex(snapshot.facts)
    _INDEXES[key] = (snapshot, index)
    return index


def _combined(path: FactPath) -> float:
    return round(0.4 * (path.relevance or 0.0) + 0.2 * (path.coherence or 0.0) + 0.4 * (path.sufficiency or 0.0), 4)


def build_real_graph(resources: Resources | None = None) -> StateGraph:
    """The ``real`` ``StateGraph`` (uncompiled). Resources default to the process-wide settings."""

    def res() -> Resources:
        return resources or default_resources()

    def llm_for(ctx: RealContext) -> Any:
        return None if ctx.policy == "heuristic" else res().llm

    def trace(state: RealState, ctx: RealContext) -> dict[str, Any]:
        return {"tags": ["strategy:real", f"policy:{ctx.policy}"], "metadata": {"namespace": state["namespace"]}}

    def load(state: RealState) -> tuple[NamespaceSnapshot, FactIndex]:
        snapshot = res().store.snapshot(state["namespace"])
        return snapshot, _fact_index(snapshot)

    def query_vector(state: RealState) -> np.ndarray:
        return np.asarray(res().embeddings.embed_query(state["question"]), dtype=np.float32)

    def search_filter(state: RealState, ctx: RealContext, index: FactIndex) -> SearchFilter:
        latest = parse_when(state.get("question_date")) or index.latest_time()
        return SearchFilter(
            window=reference_window(state.get("reference"), latest),
            min_confidence=ctx.min_confidence,
            include_uncertain=bool(state.get("include_uncertain")),
        )

    def rank(state: RealState, paths: list[FactPath], limit: int) -> list[FactPath]:
        """Top ``limit`` paths by similarity of the query to their last relation + target."""
        if not paths:
            return []
        _, index = load(state)
        texts = []
        for path in paths:
            fact = index.facts[path.fact_ids[-1]]
            texts.append(f"{relation_gloss(fact.relation)} {path.end}")
        sims = cosine_to(query_vector(state), np.asarray(res().embeddings.embed_documents(texts), dtype=np.float32))
        ranked = [p.model_copy(update={"similarity": round(float(s), 4)}) for p, s in zip(paths, sims, strict=True)]
        ranked.sort(key=lambda p: (-p.similarity, p.id))
        return ranked[:limit]

    def roots(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
        """Root entities with an exploration intent each (LLM planner; named entities or similarity without one)."""
        ctx = _ctx(runtime)
        snapshot, index = load(state)
        question = state["question"]
        fallbacks: list[FallbackRecord] = []
        cost = Cost()
        similar: list[str] = []
        ids = [f for f in index.facts if f in snapshot.fact_vectors]
        if ids:
            sims = cosine_to(query_vector(state), np.vstack([snapshot.fact_vectors[f] for f in ids]))
            similar = [ids[i] for i in np.argsort(-sims, kind="stable")[:10]]
        llm = llm_for(ctx)
        if ctx.policy == "llm" and llm is None:
            fallbacks.append(FallbackRecord(role="real", reason="no chat model configured: heuristic policy used"))
        if not len(index):
            plan = heuristic_roots(question, index)
        elif llm is None:
            plan = heuristic_roots(question, index, similar)
        else:
            outcome = plan_roots(llm, question, index, similar_fact_ids=similar, method=res().method, **trace(state, ctx))
            plan, cost = outcome.output, outcome.cost
            if outcome.fallback:
                fallbacks.append(outcome.fallback)
            if not plan.roots:  # every root the model named was unknown
                plan = plan.model_copy(update={"roots": heuristic_roots(question, index, similar).roots})
        reference = state.get("reference_time") or plan.reference_time
        beam = [FactPath.start(r.entity, r.intent) for r in plan.roots]
        return {
            "roots": plan.roots,
            "reference": reference,
            "include_uncertain": plan.include_uncertain,
            "beam": beam,
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
        ctx = _ctx(runtime)
        _, index = load(state)
        flt = search_filter(state, ctx, index)
        tried = set(state.get("tried", []))
        candidates: list[FactPath] = []
        keys: list[str] = []
        step = state.get("evaluator_calls", 0) + 1
        for parent in state.get("beam", []):
            if parent.depth >= ctx.depth:
                continue
            nodes = {entity_key(n) for n in parent.nodes}
            own = [
                parent.extend(f, "out", step=step)
                for f in index.outgoing(parent.end)
                if f.id not in parent.fact_ids and entity_key(f.tail) not in nodes
                and f"{parent.id}|{f.id}" not in tried and flt.admits(f, parent.intent)
            ]
            chosen = rank(state, own, ctx.candidates)
            candidates.extend(chosen)
            keys.extend(f"{parent.id}|{c.fact_ids[-1]}" for c in chosen)
        return {
            "candidates": candidates,
            "tried": [*state.get("tried", []), *keys],
            "trail": [{"node": "expand", "depth": max((p.depth for p in state.get("beam", [])), default=0),
                       "candidates": len(candidates)}],
        }

    def evaluate(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
        """ONE evaluator call scores every candidate; then stop, expand, repair or prune."""
        ctx = _ctx(runtime)
        _, index = load(state)
        candidates = state.get("candidates", [])
        llm = llm_for(ctx)
        labels = [f"P{i + 1}" for i in range(len(candidates))]
        similarities = [p.similarity for p in candidates]
        cost = Cost()
        fallbacks: list[FallbackRecord] = []
        if llm is None:
            scores = heuristic_scores(state["question"], candidates, labels, index, similarities)
        else:
            outcome = evaluate_paths(llm, state["question"], candidates, index, similarities=similarities,
                                     reference_time=state.get("reference"), method=res().method, **trace(state, ctx))
            scores, cost = outcome.output, outcome.cost
            if outcome.fallback:
                fallbacks.append(outcome.fallback)
        by_label = {s.path_id: s for s in scores.scores}
        scored = []
        for label, path in zip(labels, candidates, strict=True):
            s = by_label[label]
            path = path.model_copy(update={"relevance": s.relevance, "coherence": s.coherence, "sufficiency": s.sufficiency})
            scored.append(path.model_copy(update={"score": _combined(path)}))
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
            beam: list[FactPath] = []
            for root in dict.fromkeys(p.root for p in passing):
                mine = sorted((p for p in passing if p.root == root), key=lambda p: (-(p.score or 0), p.id))
                beam.extend(mine[: ctx.beam_width])
            update["beam"] = beam
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
        ctx = _ctx(runtime)
        _, index = load(state)
        flt = search_filter(state, ctx, index)
        tried = state.get("tried", [])
        failed: list[Fact] = [index.facts[f] for f in state.get("failed", []) if f in index.facts]
        step = state.get("evaluator_calls", 0) + 1
        candidates: list[FactPath] = []
        keys: list[str] = []
        for parent in state.get("beam", []):
            if parent.depth >= ctx.depth:
                continue
            exclude = {key.split("|", 1)[1] for key in tried if key.split("|", 1)[0] == parent.id}
            own = [
                parent.extend(c.fact, c.direction, hypothesis=c.hypothesis, step=step)
                for c in repair_candidates(index, parent, failed, flt, exclude=exclude)
            ]
            chosen = rank(state, own, ctx.candidates)
            candidates.extend(chosen)
            keys.extend(f"{parent.id}|{c.fact_ids[-1]}" for c in chosen)
        return {
            "candidates": candidates,
            "repairs": state.get("repairs", 0) + 1,
            "tried": [*tried, *keys],
            "trail": [{"node": "repair", "round": state.get("repairs", 0) + 1, "candidates": len(candidates),
                       "hypotheses": sorted({(c.hypothesis or "").split(":")[0] for c in candidates})}],
        }

    def prune(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
        """Global top-k over every scored path: passing paths first, best combined score first."""
        ctx = _ctx(runtime)
        snapshot, index = load(state)
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
            ids = [f for f in index.facts if f in snapshot.fact_vectors]
            if ids:
                sims = cosine_to(query_vector(state), np.vstack([snapshot.fact_vectors[f] for f in ids]))
                for i in np.argsort(-sims, kind="stable")[: ctx.top_k]:
                    fact = index.facts[ids[i]]
                    kept.append(FactPath.start(fact.head, "FACT").extend(fact, "out").model_copy(
                        update={"similarity": round(float(sims[i]), 4)}))
                fallbacks.append(FallbackRecord(role="real", reason="no path from the roots: most similar facts used"))
        return {"kept": kept, "passing": bool(passing), "fallbacks": fallbacks,
                "trail": [{"node": "prune", "scored": len(best), "passing": len(passing), "kept": len(kept)}]}

    def answer_node(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
        """The answer from the kept paths only, with the paths serialized as evidence."""
        ctx = _ctx(runtime)
        _, index = load(state)
        kept = state.get("kept", [])
        llm = llm_for(ctx)
        cost = Cost()
        fallbacks: list[FallbackRecord] = []
        if llm is None:
            result = heuristic_answer(state["question"], kept, index, passing=bool(state.get("passing")))
        else:
            outcome = answer_from_paths(llm, state["question"], kept, index, reference_time=state.get("reference"),
                                        passing=bool(state.get("passing")), method=res().method, **trace(state, ctx))
            result, cost = outcome.output, outcome.cost
            if outcome.fallback:
                fallbacks.append(outcome.fallback)
        evidence = []
        for path in kept:
            facts = [index.facts[f] for f in path.fact_ids]
            last = facts[-1]
            evidence.append(EvidenceItem(
                kind="path",
                id=path.id,
                text=path_text(path, index),
                turn_ids=list(dict.fromkeys(t for f in facts for t in f.turn_ids)),
                time=interval_text(last).strip("[)"),
                score=path.score if path.score is not None else path.similarity,
            ))
        return {"answer": result.answer, "answer_paths": result.path_ids, "evidence": evidence, "cost": cost,
                "fallbacks": fallbacks}

    def after_expand(state: RealState, runtime: Runtime[RealContext]) -> str:
        if state.get("candidates"):
            return "evaluate"
        return "repair" if state.get("repairs", 0) < _ctx(runtime).repair_budget and state.get("beam") else "prune"

    def after_evaluate(state: RealState) -> str:
        return {"stop": "prune", "expand": "expand", "repair": "repair"}.get(state.get("decision", ""), "prune")

    def after_repair(state: RealState) -> str:
        return "evaluate" if state.get("candidates") else "prune"

    builder = StateGraph(RealState, context_schema=RealContext)
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
    policy: str = "llm",
    question_date: str | None = None,
    reference_time: str | None = None,
    context: RealContext | None = None,
    **options: Any,
) -> AnswerResult:
    """Answer ``question`` from ``namespace``'s facts with REAL; options override ``RealContext`` fields."""
    res = resources or default_resources()
    res.store.require_namespace(namespace)
    ctx = context_for_run(RealContext, context, policy, options)
    return invoke_strategy(
        "real", res.compiled("real", build_real_graph),
        {"namespace": namespace, "question": question, "question_date": question_date, "reference_time": reference_time},
        ctx, namespace=namespace, recursion_limit=20 + 4 * (ctx.depth + 1) * (ctx.repair_budget + 1),
        make_result=lambda final, elapsed: _result(question, namespace, final, res, elapsed),
    )


def _result(question: str, namespace: str, final: dict[str, Any], res: Resources, elapsed: float) -> AnswerResult:
    snapshot = res.store.snapshot(namespace)
    index = _fact_index(snapshot)
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
graph = builder.compile()
