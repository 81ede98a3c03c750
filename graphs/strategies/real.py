"""The ``real`` strategy graph: roots -> per-path beam steps over temporal facts -> repair -> select -> answer.

The search follows REAL (Lu et al., 2026, arXiv:2606.10694), Algorithm 1 and Eq. 5-8 of its full text
(``../shared/papers/001_*.txt``):

* Each beam path (a chain from a root entity) is expanded by its admissible outgoing facts (valid at the
  reference time, stable confidence, an intent compatible with the path's *current* intent), the top ``m``
  by similarity of the query to "relation + target" (Alg. 1 l. 15-19). The intent is carried per hop
  (Eq. 5: ``P (+) (u, iota_u)``): a path's intent is the intent label of the last fact it walked, the root's
  intent for a bare root. ONE evaluator call scores the current paths together with their expansions
  (relevance S_QR, coherence S_LC, and the sufficiency S_AS of the sub-question about the path's own root).
* Decision per beam (Eq. 7-8): Stop when the current path's sufficiency is at least that of every
  expansion (the path joins the final set); otherwise Expand, inserting only the expansions whose
  sufficiency exceeds the current path's into the root's candidate pool.
* Counterfactual repair (``NeedCounterfactual``) only when normal expansion is unreliable: no candidate,
  or the best expansion relevance below delta_QR, or the best expansion coherence below delta_LC. Its budget
  is ``max(0, m - |reliable expansions|)`` (reliable: S_QR >= delta_QR and S_LC >= delta_LC); the
  rule-table hypotheses are scored by the evaluator and its top-budget ones (the evaluator's ranking, not
  embedding similarity) join the candidate pool.
* Global beam pruning: the top ``beam_width`` of each root's candidate pool by the evaluator's scores
  form the next beam; the search ends when every pool is empty or at ``depth``. The evidence is the whole
  final set (``AggregateEvidence(P_final)``): no top-k cut.
* With no time named, the temporal filter is the dialogue's current time: when the question is asked
  (``question_date``), else the date of the namespace's latest session.

Where the paper is silent (said again at the code): a bare root holds no fact, so its sufficiency is 0 and
it is not listed to the evaluator; the paper does not say how the score triple ranks paths for TopK, so
paths rank by sufficiency, then relevance, then coherence (the decision's own metric first); open paths
at ``depth`` join the final set (Algorithm 1 ends the loop there without saying); and a root whose beams all
stopped still follows the recovered paths in its pool (Alg. 1 l. 44 read literally would drop them, which
would make repair of a stopped beam a no-op).

Studio loads ``graph`` from this module.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from pydantic import ConfigDict, with_config

from logicmap.agents.base import Cost, FallbackRecord
from logicmap.agents.real import cosine_to, relation_gloss, repair_candidates
from logicmap.agents.real_policy import RealPolicy, real_policy
from logicmap.graphs.runtime.pin import pin_run, snapshot_of
from logicmap.graphs.runtime.resources import Resources, resources_of, run_context
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
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
from logicmap.memory.records.facts import entity_key, interval_text, parse_when, when_text
from logicmap.memory.records.records import Fact
from logicmap.memory.retrieval.fact_paths import (
    INTENT_COMPATIBILITY,
    PAPER_INTENT_COMPATIBILITY,
    FactIndex,
    FactPath,
    SearchFilter,
    path_text,
    reference_window,
)
from logicmap.memory.runtime.deadline import check_deadline
from logicmap.memory.store import NamespaceSnapshot
from logicmap.prompts.real_roots import RootEntity, RootPlan

__all__ = [
    "RealContext",
    "RealInput",
    "RealOutput",
    "RealState",
    "after_evaluate",
    "after_repair",
    "after_select",
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
    "repair_budget",
    "roots",
    "select",
]


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class RealContext(StrategyContext):
    """Per-run settings of the REAL search (paper defaults; shown as a form in Studio)."""

    beam_width: int = 5
    """Paths kept in each root's beam at each step."""
    depth: int = 3
    """Most facts on a path (expansion steps from the root entities)."""
    candidates: int = 5
    """m: outgoing facts considered per path and step (top-m by similarity); also the repair target."""
    min_confidence: float = 0.8
    """Facts below this confidence are followed only when the question asks for uncertain ones."""
    relevance_threshold: float = 0.5
    """delta_QR: repair is triggered when no expansion reaches this relevance; an expansion is reliable at or
    above it (and delta_LC)."""
    coherence_threshold: float = 0.5
    """delta_LC: repair is triggered when no expansion reaches this coherence."""
    repair: bool = True
    """Counterfactual repair when normal expansion is unreliable (the paper's; off for an ablation)."""
    repair_pool: int = 20
    """Most rule-table hypotheses per triggered path sent to the evaluator, in rule-table order (the paper
    ranks recovered paths by the evaluator and does not bound how many are generated; this bounds the call)."""
    top_k: int | None = None
    """An optional cut of the final set (None: every final path is evidence, as the paper's
    AggregateEvidence(P_final)); also how many similar facts stand in when no path was found (None: m)."""
    faithful: bool = False
    """The paper's configuration: a CAUSAL beam follows CAUSAL facts only (III-B2, "for a causal intent, only
    edges labeled CAUSAL are allowed"; ``memory.retrieval.fact_paths.PAPER_INTENT_COMPATIBILITY``), where the project's
    table also admits TEMPORAL and EVOLUTION facts. The paper gives no prompts, so the roles' prompts are the
    same. ``real:faithful`` in the registry's variants."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class RealInput(QuestionInput):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""

    reference_time: NotRequired[str | None]
    """The time the facts must be valid at (YYYY-MM-DD, YYYY-MM, YYYY or "now"); unset = the planner's
    reading, and when the question names no time, the dialogue's current time."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class RealOutput(AnswerOutput, total=False):
    """What a REAL run returns: the answer, its evidence paths, what it cost."""

    evidence: list[EvidenceItem]
    """The kept fact paths, each with its times, confidence and the turns (dia ids) it cites."""
    answer_paths: list[str]
    """The ids of the paths the answer used."""


class RealState(StrategyState, total=False):
    """The beam search; ``namespace`` is the run's, resolved once by ``roots`` (never an input)."""

    reference_time: str | None  # input override: YYYY-MM-DD, YYYY-MM, YYYY or "now"
    roots: list[RootEntity]
    reference: str | None  # the time the question names (input or planner), None when it names none
    current_time: str | None  # the dialogue's current time (ISO): the filter's time when none is named
    include_uncertain: bool
    beam: list[FactPath]  # the open paths, scored (a root path with no fact scores 0)
    candidates: list[FactPath]  # children waiting for the evaluator (expansions, then repairs)
    phase: Literal["expand", "repair"]
    children: list[FactPath]  # this step's scored normal expansions (P')
    recovered: list[FactPath]  # this step's scored counterfactual paths (P_cf), before each beam's top-B cut
    budgets: dict[str, int]  # repair budget per triggered beam path id: max(0, m - |reliable expansions|)
    tried: list[str]
    scored: Annotated[list[FactPath], operator.add]
    final: list[FactPath]  # closed paths: the final set the evidence comes from
    depth: int
    repairs: int
    evaluator_calls: int
    paths_visited: int
    kept: list[FactPath]
    passing: bool
    answer_paths: list[str]
    evidence: list[EvidenceItem]
    trail: Annotated[list[dict[str, Any]], operator.add]


def _ctx(runtime: Runtime[RealContext] | None) -> RealContext:
    return run_context(runtime, RealContext)


# -- helpers ----------------------------------------------------------------------------------------


def _build_fact_index(snapshot: NamespaceSnapshot) -> FactIndex:
    return FactIndex(snapshot.facts)


def fact_index(snapshot: NamespaceSnapshot) -> FactIndex:
    """The snapshot's fact index, built once per snapshot (a committed generation)."""
    return snapshot.derived(_build_fact_index)


def _latest_session_time(snapshot: NamespaceSnapshot) -> datetime | None:
    times = [t.session_time.replace(tzinfo=None) for t in snapshot.turns.values() if t.session_time is not None]
    return max(times) if times else None


def _current_time(state: RealState, snapshot: NamespaceSnapshot, index: FactIndex) -> datetime | None:
    """The dialogue's current time: when the question is asked, else the latest session's date (a namespace
    of bare facts, without turns: the latest time a fact states)."""
    asked = state.get("question_date")
    if asked and asked.strip().lower() != "now" and (when := parse_when(asked)) is not None:
        return when
    return snapshot.derived(_latest_session_time) or index.latest_time()


def _sufficiency(path: FactPath) -> float:
    """S_AS of a path. A bare root holds no fact, so it answers nothing about its entity: 0 (the paper lists
    the current path to the evaluator at every step; for a bare root that score is known)."""
    return float(path.sufficiency or 0.0) if path.depth else 0.0


def _rank_key(path: FactPath) -> tuple[float, float, float, str]:
    """The evaluator's ranking of paths (TopK of the global beam pruning, top-B of the repairs): the paper
    ranks by "S(P|q)", the score triple, without saying how the three combine; the decision's own metric
    (sufficiency) comes first, then relevance, then coherence."""
    return (-_sufficiency(path), -(path.relevance or 0.0), -(path.coherence or 0.0), path.id)


def _relevant(path: FactPath, ctx: RealContext) -> bool:
    """Reliable (the paper's N_rel): S_QR >= delta_QR and S_LC >= delta_LC."""
    return path.passes(ctx.relevance_threshold, ctx.coherence_threshold)


def repair_budget(relevant: int, m: int) -> int:
    """B_cf = max(0, m - |N_rel|): how many recovered paths a triggered beam keeps."""
    return max(0, m - relevant)


def needs_counterfactual(expansions: list[FactPath], ctx: RealContext) -> bool:
    """NeedCounterfactual: no candidate, or the best expansion relevance below delta_QR, or the best
    expansion coherence below delta_LC (normal expansion is unreliable)."""
    if not expansions:
        return True
    return (
        max(p.relevance or 0.0 for p in expansions) < ctx.relevance_threshold
        or max(p.coherence or 0.0 for p in expansions) < ctx.coherence_threshold
    )


def _policy(state: RealState, ctx: RealContext, res: Resources) -> RealPolicy:
    """The run's policy (``agents.real_policy``) from its pinned name (``roots`` pins it; a node called alone on
    a hand-made state uses the context's), its role calls tagged with the run's tracing."""
    return real_policy(state.get("policy") or ctx.policy, res.llm, method=res.method, **_trace(state, ctx))


def _trace(state: RealState, ctx: RealContext) -> dict[str, Any]:
    return {"tags": ["strategy:real", f"policy:{ctx.policy}"], "metadata": {"namespace": state["namespace"]}}


def _load(state: RealState, res: Resources) -> tuple[NamespaceSnapshot, FactIndex]:
    """The run's pinned snapshot (``graphs.runtime.pin``) and its fact index."""
    snapshot = snapshot_of(res.store, state)
    return snapshot, fact_index(snapshot)


def _query_vector(state: RealState, res: Resources) -> np.ndarray:
    return np.asarray(res.embeddings.embed_query(state["question"]), dtype=np.float32)


def _similar_facts(
    state: RealState, res: Resources, snapshot: NamespaceSnapshot, index: FactIndex
) -> list[tuple[str, float]]:
    """Every fact with a vector, most similar to the question first, with its similarity."""
    ids = [f for f in index.facts if f in snapshot.fact_vectors]
    if not ids:
        return []
    sims = cosine_to(_query_vector(state, res), np.vstack([snapshot.fact_vectors[f] for f in ids]))
    return [(ids[i], float(sims[i])) for i in np.argsort(-sims, kind="stable")]


def _time_of(state: RealState) -> str | None:
    """The time facts must be valid at: the one the question names, else the dialogue's current time."""
    current = state.get("current_time")
    return state.get("reference") or (current[:10] if current else None)


def _search_filter(state: RealState, ctx: RealContext) -> SearchFilter:
    current = state.get("current_time")
    now = datetime.fromisoformat(current) if current else None
    return SearchFilter(
        window=reference_window(state.get("reference") or "now", now),
        min_confidence=ctx.min_confidence,
        include_uncertain=bool(state.get("include_uncertain")),
        compatibility=PAPER_INTENT_COMPATIBILITY if ctx.faithful else INTENT_COMPATIBILITY,
    )


def _rank(state: RealState, res: Resources, index: FactIndex, paths: list[FactPath], limit: int) -> list[FactPath]:
    """Top ``limit`` paths by similarity of the query to their last relation + target."""
    if not paths or limit <= 0:
        return []
    texts = []
    for path in paths:
        check_deadline("while REAL ranked fact paths")
        fact = index.facts[path.fact_ids[-1]]
        texts.append(f"{relation_gloss(fact.relation)} {path.end}")
    sims = cosine_to(_query_vector(state, res), np.asarray(res.embeddings.embed_documents(texts), dtype=np.float32))
    ranked = [p.model_copy(update={"similarity": round(float(s), 4)}) for p, s in zip(paths, sims, strict=True)]
    ranked.sort(key=lambda p: (-p.similarity, p.id))
    return ranked[:limit]


def _outgoing(parent: FactPath, index: FactIndex, flt: SearchFilter, tried: set[str], step: int) -> list[FactPath]:
    """``parent`` extended by each admissible outgoing fact not on the path and not tried from it (admissible
    for the path's current intent: its last hop's)."""
    nodes = {entity_key(n) for n in parent.nodes}
    return [
        _hop(parent.extend(f, "out", step=step), f)
        for f in index.outgoing(parent.end)
        if f.id not in parent.fact_ids
        and entity_key(f.tail) not in nodes
        and f"{parent.id}|{f.id}" not in tried
        and flt.admits(f, parent.intent)
    ]


def _hypotheses(
    parent: FactPath, index: FactIndex, failed: list[Fact], flt: SearchFilter, tried: list[str], step: int
) -> list[FactPath]:
    """``parent`` extended by the rule table's counterfactual candidates (facts not tried from it)."""
    exclude = {key.split("|", 1)[1] for key in tried if key.split("|", 1)[0] == parent.id}
    return [
        _hop(parent.extend(c.fact, c.direction, hypothesis=c.hypothesis, step=step), c.fact)
        for c in repair_candidates(index, parent, failed, flt, exclude=exclude)
    ]


def _hop(path: FactPath, fact: Fact) -> FactPath:
    """The path after visiting ``fact``'s node carries that fact's intent label (Eq. 5: ``P (+) (u, iota_u)``):
    the next hop's IntentCompatible test is against it."""
    return path.model_copy(update={"intent": fact.intent})


def _top_children(
    state: RealState, res: Resources, index: FactIndex, children: list[tuple[FactPath, list[FactPath], int]]
) -> tuple[list[FactPath], list[str]]:
    """The top ``limit`` children of each parent and their ``parent|fact`` tried keys."""
    candidates: list[FactPath] = []
    keys: list[str] = []
    for parent, own, limit in children:
        chosen = _rank(state, res, index, own, limit)
        candidates.extend(chosen)
        keys.extend(f"{parent.id}|{c.fact_ids[-1]}" for c in chosen)
    return candidates, keys


def _plan(
    state: RealState, ctx: RealContext, res: Resources, index: FactIndex, similar: list[str]
) -> tuple[RootPlan, Cost, list[FallbackRecord]]:
    """The root plan: the LLM planner, or named entities / similarity without a model."""
    outcome = _policy(state, ctx, res).roots(state["question"], index, similar)
    return outcome.output, outcome.cost, [outcome.fallback] if outcome.fallback else []


def _score(
    state: RealState, ctx: RealContext, res: Resources, index: FactIndex, candidates: list[FactPath]
) -> tuple[list[FactPath], Cost, list[FallbackRecord]]:
    """ONE evaluator call (or the similarity rules) scores every listed path."""
    labels = [f"P{i + 1}" for i in range(len(candidates))]
    outcome = _policy(state, ctx, res).evaluate(
        state["question"],
        candidates,
        index,
        similarities=[p.similarity for p in candidates],
        window=_search_filter(state, ctx).window,
        reference_time=_time_of(state),
    )
    scores, cost = outcome.output, outcome.cost
    fallbacks = [outcome.fallback] if outcome.fallback else []
    by_label = {s.path_id: s for s in scores.scores}
    scored = []
    for label, path in zip(labels, candidates, strict=True):
        s = by_label[label]
        # ``score`` is the path's sufficiency (the decision's metric), shown with the evidence.
        scored.append(
            path.model_copy(
                update={
                    "relevance": s.relevance,
                    "coherence": s.coherence,
                    "sufficiency": s.sufficiency,
                    "score": s.sufficiency,
                }
            )
        )
    return scored, cost, fallbacks


def _next_beam(pool: list[FactPath], beam_width: int) -> list[FactPath]:
    """Global beam pruning: the top ``beam_width`` of each root's candidate pool by the evaluator's scores,
    roots in first-seen order."""
    beam: list[FactPath] = []
    for root in dict.fromkeys(p.root for p in pool):
        mine = sorted({p.id: p for p in pool if p.root == root}.values(), key=_rank_key)
        beam.extend(mine[:beam_width])
    return beam


def _budgets(beam: list[FactPath], children: list[FactPath], ctx: RealContext) -> dict[str, int]:
    """The repair budget of each path NeedCounterfactual triggers for, ``max(0, m - |reliable expansions|)``
    (when it triggers, no expansion passes both thresholds, so the budget is m; the formula is the paper's)."""
    budgets: dict[str, int] = {}
    for path in beam:
        own = [c for c in children if c.parent == path.id]
        if not needs_counterfactual(own, ctx):
            continue
        reliable = sum(1 for c in own if _relevant(c, ctx))
        if (budget := repair_budget(reliable, ctx.candidates)) > 0:
            budgets[path.id] = budget
    return budgets


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
    pin = pin_run(runtime, ctx.namespace, ctx.policy)  # namespace, policy, snapshot generation: once per run
    state = {**state, **pin}
    snapshot, index = _load(state, res)
    similar = [f for f, _ in _similar_facts(state, res, snapshot, index)[:10]]
    plan, cost, fallbacks = _plan(state, ctx, res, index, similar)
    reference = state.get("reference_time") or plan.reference_time
    now = _current_time(state, snapshot, index)
    return {
        **pin,
        "roots": plan.roots,
        "reference": reference,
        "current_time": now.isoformat() if now else None,
        "include_uncertain": plan.include_uncertain,
        "beam": [FactPath.start(r.entity, r.intent).model_copy(update={"score": 0.0}) for r in plan.roots],
        "candidates": [],
        "children": [],
        "recovered": [],
        "budgets": {},
        "final": [],
        "tried": [],
        "depth": 0,
        "repairs": 0,
        "evaluator_calls": 0,
        "paths_visited": 0,
        "cost": cost,
        "fallbacks": fallbacks,
        "trail": [
            {
                "node": "roots",
                "roots": [f"{r.entity} ({r.intent})" for r in plan.roots],
                "reference_time": reference,
                "current_time": now.date().isoformat() if now else None,
                "include_uncertain": plan.include_uncertain,
            }
        ],
    }


def expand(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """Each beam path's admissible outgoing facts (time, confidence, intent), top-m by similarity."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    flt = _search_filter(state, ctx)
    tried = set(state.get("tried", []))
    step = state.get("depth", 0) + 1
    beam = state.get("beam", [])
    children = [(p, _outgoing(p, index, flt, tried, step), ctx.candidates) for p in beam]
    candidates, keys = _top_children(state, res, index, children)
    return {
        "candidates": candidates,
        "children": [],
        "budgets": {},
        "phase": "expand",
        "tried": [*state.get("tried", []), *keys],
        "trail": [{"node": "expand", "step": step, "beam": [p.id for p in beam], "candidates": len(candidates)}],
    }


def evaluate(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """ONE evaluator call: after an expansion, the current paths together with their expansions; after a
    repair, the recovered paths. After an expansion, the repair budget of each path NeedCounterfactual
    triggers for."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    candidates = state.get("candidates", [])
    phase = state.get("phase", "expand")
    current = [p for p in state.get("beam", []) if p.depth] if phase == "expand" and candidates else []
    listed = [*current, *candidates]
    scored, cost, fallbacks = _score(state, ctx, res, index, listed) if listed else ([], Cost(), [])
    rescored = {p.id: p for p in scored[: len(current)]}
    beam = [rescored.get(p.id, p) for p in state.get("beam", [])]
    new = scored[len(current) :]
    update: dict[str, Any] = {
        "beam": beam,
        "candidates": [],
        "scored": scored,
        "evaluator_calls": state.get("evaluator_calls", 0) + (1 if listed else 0),
        "paths_visited": state.get("paths_visited", 0) + len(candidates),
        "cost": cost,
        "fallbacks": fallbacks,
    }
    if phase == "expand":
        update["children"] = new
        update["recovered"] = []
        update["budgets"] = _budgets(beam, new, ctx) if ctx.repair else {}
    else:
        update["recovered"] = [*state.get("recovered", []), *new]
    update["trail"] = [
        {
            "node": "evaluate",
            "phase": phase,
            "listed": [p.id for p in listed],
            "relevant": [p.id for p in new if _relevant(p, ctx)],
            **({"budgets": update["budgets"]} if phase == "expand" else {}),
        }
    ]
    return update


def repair(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """CounterfactualInfer + ConstrainedTraverse: each triggered path's rule-table hypotheses (up to
    ``repair_pool``, in rule-table order), all sent to the evaluator; ``select`` keeps each path's top
    ``max(0, m - |reliable|)`` of them by the evaluator's scores."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    flt = _search_filter(state, ctx)
    tried = state.get("tried", [])
    budgets = state.get("budgets", {})
    step = state.get("depth", 0) + 1
    candidates: list[FactPath] = []
    for path in state.get("beam", []):
        if budgets.get(path.id, 0) > 0:
            failed = [
                index.facts[c.fact_ids[-1]]
                for c in state.get("children", [])
                if c.parent == path.id and not _relevant(c, ctx)
            ]
            candidates.extend(_hypotheses(path, index, failed, flt, tried, step)[: ctx.repair_pool])
    keys = [f"{c.parent}|{c.fact_ids[-1]}" for c in candidates]
    return {
        "candidates": candidates,
        "phase": "repair",
        "tried": [*tried, *keys],
        "trail": [
            {
                "node": "repair",
                "budgets": dict(budgets),
                "hypotheses": [c.id for c in candidates],
                "rules": sorted({(c.hypothesis or "").split(":")[0] for c in candidates}),
            }
        ],
    }


def _recovered_kept(path: FactPath, recovered: list[FactPath], budget: int) -> list[FactPath]:
    """The top ``budget`` recovered paths of ``path``, ranked by the evaluator."""
    return sorted((c for c in recovered if c.parent == path.id), key=_rank_key)[:budget]


def select(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """The decision per beam (Eq. 7-8) and the global beam pruning: Stop when the current path's sufficiency
    is at least every expansion's (it joins the final set), else insert the expansions whose sufficiency
    exceeds it; a triggered path's top-budget recovered paths join the pool either way; each root's pool's
    top ``beam_width`` is the next beam; paths at ``depth`` join the final set."""
    ctx = _ctx(runtime)
    children = state.get("children", [])
    recovered = state.get("recovered", [])
    budgets = state.get("budgets", {})
    stopped: list[FactPath] = []
    pool: list[FactPath] = []
    decisions: dict[str, str] = {}
    kept_repairs: list[str] = []
    for path in state.get("beam", []):
        own = [c for c in children if c.parent == path.id]
        mine = _sufficiency(path)
        if not own or mine >= max(_sufficiency(c) for c in own):
            decisions[path.id] = "Stop"
            if path.depth:  # a bare root holds no fact: nothing to add to the final set
                stopped.append(path)
        else:
            decisions[path.id] = "Expand"
            pool.extend(c for c in own if _sufficiency(c) > mine)
        repairs = _recovered_kept(path, recovered, budgets.get(path.id, 0))
        kept_repairs.extend(c.id for c in repairs)
        pool.extend(repairs)
    grown = _next_beam(pool, ctx.beam_width)
    step = state.get("depth", 0) + 1
    # Algorithm 1 ends at D_max without saying what becomes of the open beams: they join the final set
    # (the best paths the search found are not dropped).
    closed = [*stopped, *(p for p in grown if p.depth >= ctx.depth)]
    beam = [p for p in grown if p.depth < ctx.depth]
    return {
        "beam": beam,
        "final": [*state.get("final", []), *closed],
        "children": [],
        "recovered": [],
        "repairs": state.get("repairs", 0) + len(kept_repairs),
        "depth": step,
        "trail": [
            {
                "node": "select",
                "step": step,
                "decisions": decisions,
                "closed": [p.id for p in closed],
                "recovered": kept_repairs,
                "beam": [p.id for p in beam],
            }
        ],
    }


def prune(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """AggregateEvidence(P_final): every final path is evidence (ranked by the evaluator; ``top_k`` cuts it
    only when set). With no path at all, the most similar facts stand in (recorded)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    snapshot, index = _load(state, res)
    final = list({p.id: p for p in state.get("final", [])}.values())
    passing = [p for p in final if _relevant(p, ctx)]
    kept = sorted(final, key=_rank_key)[: ctx.top_k]
    fallbacks: list[FallbackRecord] = []
    if not kept and index.facts:
        # Nothing was reachable from the roots: the most similar facts, unscored, as evidence.
        similar = _similar_facts(state, res, snapshot, index)
        for fact_id, sim in similar[: ctx.top_k or ctx.candidates]:
            fact = index.facts[fact_id]
            kept.append(
                FactPath.start(fact.head, "FACT").extend(fact, "out").model_copy(update={"similarity": round(sim, 4)})
            )
        if similar:
            fallbacks.append(FallbackRecord(role="real", reason="no path from the roots: most similar facts used"))
    return {
        "kept": kept,
        "passing": bool(passing),
        "fallbacks": fallbacks,
        "trail": [{"node": "prune", "final": len(final), "passing": len(passing), "kept": len(kept)}],
    }


def answer_node(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """The answer from the kept paths only, with the paths serialized as evidence."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    _, index = _load(state, res)
    kept = state.get("kept", [])
    outcome = _policy(state, ctx, res).answer(
        state["question"], kept, index, reference_time=_time_of(state), passing=bool(state.get("passing"))
    )
    result, cost = outcome.output, outcome.cost
    fallbacks = [outcome.fallback] if outcome.fallback else []
    return {
        "answer": result.answer,
        "answer_paths": result.path_ids,
        "evidence": [_path_evidence(p, index) for p in kept],
        "cost": cost,
        "fallbacks": fallbacks,
    }


# -- routers ----------------------------------------------------------------------------------------


def after_evaluate(state: RealState) -> Literal["repair", "select"]:
    """After an expansion's scores, repair the paths NeedCounterfactual triggers for; else decide."""
    return "repair" if state.get("phase", "expand") == "expand" and state.get("budgets") else "select"


def after_repair(state: RealState) -> Literal["evaluate", "select"]:
    return "evaluate" if state.get("candidates") else "select"


def after_select(state: RealState) -> Literal["expand", "prune"]:
    """The search goes on while any root's candidate pool gave a beam (Alg. 1 l. 39-45)."""
    return "expand" if state.get("beam") else "prune"


# -- the graph --------------------------------------------------------------------------------------


def build_real_graph() -> StateGraph[RealState, RealContext, RealInput, RealOutput]:
    """The ``real`` ``StateGraph`` (uncompiled); nodes read their resources from the run's context."""
    builder = StateGraph(RealState, context_schema=RealContext, input_schema=RealInput, output_schema=RealOutput)
    builder.add_node("roots", roots)
    builder.add_node("expand", expand)
    builder.add_node("evaluate", evaluate)
    builder.add_node("repair", repair)
    builder.add_node("select", select)
    builder.add_node("prune", prune)
    builder.add_node("answer", answer_node)
    builder.add_node("finish", finish)
    builder.add_edge(START, "roots")
    builder.add_edge("roots", "expand")
    builder.add_edge("expand", "evaluate")
    builder.add_conditional_edges("evaluate", after_evaluate, ["repair", "select"])
    builder.add_conditional_edges("repair", after_repair, ["evaluate", "select"])
    builder.add_conditional_edges("select", after_select, ["expand", "prune"])
    builder.add_edge("prune", "answer")
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    return builder


def _result(
    question: str, namespace: str, final: dict[str, Any], ctx: RealContext, res: Resources, elapsed: float
) -> AnswerResult:
    snapshot = snapshot_of(res.store, {**final, "namespace": namespace})  # the run's pinned memory
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
            "current_time": (final.get("current_time") or "")[:10] or None,
            "final_paths": [p.id for p in final.get("final", [])],
            "include_uncertain": final.get("include_uncertain", False),
            "passing": final.get("passing", False),
            "answer_paths": final.get("answer_paths", []),
            "trail": final.get("trail", []),
            "paths": [_serialize_path(p, index) for p in kept],
            "turn_texts": cited_turn_texts(snapshot, evidence),
        },
    )


def _serialize_path(path: FactPath, index: FactIndex) -> dict[str, Any]:
    facts = []
    for fact_id, direction in zip(path.fact_ids, path.directions, strict=True):
        fact = index.facts[fact_id]
        facts.append(
            {
                "id": fact.id,
                "head": fact.head,
                "relation": fact.relation,
                "tail": fact.tail,
                "direction": direction,
                "valid_from": when_text(fact.valid_from, fact.from_precision),
                "valid_to": when_text(fact.valid_to, fact.to_precision),
                "confidence": fact.confidence,
                "intent": fact.intent,
                "turn_ids": list(fact.turn_ids),
            }
        )
    return {
        "id": path.id,
        "root": path.root,
        "intent": path.intent,
        "parent": path.parent,
        "hypothesis": path.hypothesis,
        "relevance": path.relevance,
        "coherence": path.coherence,
        "sufficiency": path.sufficiency,
        "score": path.score,
        "facts": facts,
    }


def finish(state: RealState, runtime: Runtime[RealContext]) -> dict[str, Any]:
    """The run's ``AnswerResult`` (the graph's ``result`` output, exactly what ``answer()`` returns), built from the
    final state and the run's pinned memory."""
    return finish_run(state, runtime, RealContext, _result)


builder = build_real_graph()
# Held as CompiledStateGraph[Any, ...]: ``traced_graph`` takes a compiled graph of any state and context.
_compiled: CompiledStateGraph[Any, Any, Any, Any] = builder.compile(name="real")
graph = traced_graph(_compiled)
STRATEGY = graph_strategy(
    "real",
    graph,
    RealContext,
    variants=("faithful",),
    tags=lambda ctx: ["faithful"] if ctx.faithful else [],
    recursion_limit=lambda ctx: 20 + 6 * (ctx.depth + 1),
)
answer = STRATEGY.run
