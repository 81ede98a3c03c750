"""The Goal-Mem graph: backward chaining in NL-Logic over any retrieval backbone.

parse_goal -> decompose (breadth loop) -> retrieve (one Send per subgoal) -> unify (one batched call)
-> refine (depth loop) -> retrieve -> unify ... -> generate, or fail ("I don't know"). At most
``call_bound(B, D)`` LLM requests, retries included: the loops stop there (recorded). Studio loads ``graph``.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict, Field, with_config
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome
from logicmap.agents.goalmem_heuristics import MemoryLine
from logicmap.agents.goalmem_policy import RULES, GoalMemPolicy, goalmem_policy
from logicmap.graphs.runtime.pin import pin_run, pinned_store, snapshot_of
from logicmap.graphs.runtime.resources import Resources, resources_of, run_context
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
from logicmap.graphs.runtime.tracing import traced_graph
from logicmap.graphs.strategies.strategy import (
    AnswerOutput,
    StrategyContext,
    StrategyState,
    cited_turn_texts,
    finish_run,
    graph_strategy,
)
from logicmap.memory.records.nl_logic import Atom, Goal, Rule, Substitution, Term
from logicmap.memory.retrieval.backbones import make_backbone
from logicmap.memory.retrieval.retrieval import Backbone
from logicmap.prompts.goalmem_refine import Refinement

__all__ = [
    "FAILURE_ANSWER",
    "GoalMemContext",
    "GoalMemInput",
    "GoalMemOutput",
    "GoalMemState",
    "Retrieval",
    "RetrieveTask",
    "answer",
    "build_goalmem_graph",
    "builder",
    "call_bound",
    "decompose",
    "fail",
    "generate",
    "graph",
    "parse_goal",
    "refine",
    "retrieve",
    "route_after_decompose",
    "route_after_refine",
    "route_after_unify",
    "unify",
]

FAILURE_ANSWER = "I don't know"


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class GoalMemContext(StrategyContext):
    """Per-run settings (a form in Studio). ``retriever`` overrides ``backbone`` with any LangChain
    ``BaseRetriever`` or object with ``search(query, k)`` (Python API only)."""

    max_breadth: int = 3
    """Most decompositions of the goal tried (the breadth loop)."""
    max_depth: int = 5
    """Most antecedent refinements of one decomposition (the depth loop)."""
    max_memories: int = 60
    """Most memories retrieved per question."""
    k_per_subgoal: int = 5
    """Memories retrieved per subgoal search."""
    backbone: str = "bm25"
    """The retrieval backbone: bm25 (turns), dense (turns) or events (the event graph)."""
    keep_pool_across_breadth: bool = False
    """An extension, off in the paper's configuration: unify each new decomposition against the memories the failed
    ones retrieved too (the paper starts every breadth step from an empty pool, Algorithm 1 line 8)."""
    faithful: bool = False
    """The paper's configuration: its prompts (Appendix I: the commonsense-only decomposition with its few-shot
    examples, the unifier's entity-anchor check and conflict rule, the refiner's principles with "Do not invent
    constants", the answer rules with "I dont know") for the LLM roles; the search is the same (already the
    paper's). ``goalmem:faithful`` in the registry's variants."""
    # Hidden from the JSON schema like ``resources``: a form user cannot fill in a retriever object.
    retriever: SkipJsonSchema[Any] = field(
        default=None,
        metadata={
            "description": "A LangChain BaseRetriever, an object with search(query, k) or a backbone name "
            "(Python callers only); overrides backbone when set."
        },
    )


@with_config(ConfigDict(use_attribute_docstrings=True))
class GoalMemInput(TypedDict):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""

    question: str
    """The question to answer from the namespace's memory (Goal-Mem reads no question date)."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class GoalMemOutput(AnswerOutput, total=False):
    """What a Goal-Mem run returns: the answer, its evidence, what it cost."""

    status: str
    """answered, or failed when breadth was exhausted."""
    evidence: list[EvidenceItem]
    """The memories that resolved a subgoal, each with the turns (dia ids) it cites."""
    stop_reason: str
    """Why the search stopped without a proof (when it did), the call budget included."""
    llm_requests: int
    """LLM requests the run made, retries included; never more than 1 + B(2 + 2D)."""


def call_bound(max_breadth: int, max_depth: int) -> int:
    """Most LLM requests a question can take: 1 parse + B x (decompose + unify + D x (refine + unify))
    = 1 + B(2 + 2D). It is a budget, enforced: retries and ``generate`` count against it, a role gets its retry
    only when the requests its loop still needs remain, and the loops stop (recorded) rather than exceed it.
    (A request re-sent after a transient provider error, 429 or 5xx, is the same request: ``Cost.http_requests``.)"""
    return 1 + max_breadth * (2 + 2 * max_depth)


class Retrieval(BaseModel):
    """What one retrieve branch found for one subgoal at one step."""

    step: int
    subgoal: str
    query: str
    hits: list[EvidenceItem] = Field(default_factory=list)


class GoalMemState(StrategyState, total=False):
    """The proof search; ``namespace`` is the run's, resolved once by ``parse_goal`` (never an input)."""

    goal: Goal | None
    rule: Rule | None
    failed: list[tuple[Rule, str]]
    exhausted: bool
    breadth: int
    depth: int
    step: int
    pool_from: int
    subgoals: dict[str, Atom]
    originals: list[str]
    antecedent_of: dict[str, str]
    frontier: list[str] | None
    substitution: Substitution
    resolved: dict[str, list[str]]
    unresolved: dict[str, str]
    queried: Annotated[dict[str, str], operator.or_]
    last_unified: dict[str, str]
    new_in_step: int
    solved_depth: int | None
    resolved_in_step: int
    llm_requests: int
    stop_reason: str
    status: str
    evidence: list[EvidenceItem]
    retrieved: Annotated[list[Retrieval], operator.add]
    rejected: Annotated[list[str], operator.add]
    trace: Annotated[list[dict[str, Any]], operator.add]


class RetrieveTask(TypedDict):
    """What one ``retrieve`` branch searches: a subgoal's grounded query and its share of the budget."""

    namespace: str
    generation: int | None
    pending: NotRequired[int]
    subgoal: str
    query: str
    k: int
    step: int


# -- helpers -----------------------------------------------------------------------------------------


def _ctx(runtime: Runtime[GoalMemContext] | None) -> GoalMemContext:
    return run_context(runtime, GoalMemContext)


def _goal(state: GoalMemState) -> Goal:
    """The run's goal (``parse_goal`` sets it before any other node runs)."""
    goal = state.get("goal")
    if goal is None:
        raise ValueError("the Goal-Mem state has no goal: parse_goal runs first")
    return goal


def _policy(state: GoalMemState, runtime: Runtime[GoalMemContext] | None) -> GoalMemPolicy:
    """The run's policy (``agents.goalmem_policy``) from its pinned name (``parse_goal`` pins it; a node called
    alone on a hand-made state uses the context's)."""
    res = resources_of(runtime)
    ctx = _ctx(runtime)
    return goalmem_policy(state.get("policy") or ctx.policy, res.llm, method=res.method, paper_prompts=ctx.faithful)


def _backbone(runtime: Runtime[GoalMemContext] | None, task: RetrieveTask) -> Backbone:
    """The run's backbone over its pinned snapshot (``graphs.runtime.pin``)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    spec = ctx.retriever if ctx.retriever is not None else ctx.backbone
    return make_backbone(spec, pinned_store(task, runtime), task["namespace"], embeddings=lambda: res.embeddings)


def _spent(state: GoalMemState, outcome: RoleOutcome[Any]) -> dict[str, Any]:
    """The cost, fallback and LLM requests (attempts) of one role call, as a state update."""
    return {
        "cost": outcome.cost,
        "fallbacks": [outcome.fallback] if outcome.fallback else [],
        "llm_requests": state.get("llm_requests", 0) + outcome.attempts,
    }


def _updated(state: GoalMemState, update: Mapping[str, Any]) -> GoalMemState:
    """The state as the routers will see it after a node's ``update`` (so the node can record why the search
    stops). ``update`` holds only ``GoalMemState`` keys; built as a plain dict, hence the cast."""
    return cast(GoalMemState, {**state, **update})


def _requests_left(state: GoalMemState, ctx: GoalMemContext) -> int:
    return call_bound(ctx.max_breadth, ctx.max_depth) - state.get("llm_requests", 0)


def _attempts(state: GoalMemState, ctx: GoalMemContext, reserve: int) -> int:
    """Attempts a role call may make (2: with its retry) keeping ``reserve`` requests for the steps that must
    follow it (a decomposition or refinement is worthless without the unification after it). Routers enter a
    role only when ``reserve + 1`` requests are left, so this is at least 1 and the bound is never passed."""
    return max(1, min(2, _requests_left(state, ctx) - reserve))


def _budget_spent(state: GoalMemState, ctx: GoalMemContext) -> str:
    return (
        f"call budget spent: {state.get('llm_requests', 0)} of {call_bound(ctx.max_breadth, ctx.max_depth)} "
        f"LLM requests (1 + B(2 + 2D), retries included)"
    )


def _pool(state: Mapping[str, Any], before_step: int | None = None, *, since: int = 0) -> dict[str, EvidenceItem]:
    """Every memory retrieved so far (optionally only from step ``since`` and before ``before_step``), first
    retrieval first."""
    pool: dict[str, EvidenceItem] = {}
    for entry in state.get("retrieved", []) or []:
        if entry.step < since or (before_step is not None and entry.step >= before_step):
            continue
        for hit in entry.hits:
            pool.setdefault(hit.id, hit)
    return pool


def _breadth_pool(state: Mapping[str, Any], before_step: int | None = None) -> dict[str, EvidenceItem]:
    """The retrieved memory M_t^(b,d) the current decomposition is unified, refined and answered against: what its
    own breadth step retrieved. Goal-Mem (Algorithm 1, line 8: M_t^(b,0) <- {} at each breadth step b; Sec. 4.1, Eq. 3:
    the union over psi^(b) only; Sec. 4.3: M_t^(b,d) = M_t^(b,d-1) U retrieved) starts every decomposition from an
    empty pool; with ``keep_pool_across_breadth`` (an extension) ``pool_from`` stays 0 and the failed
    decompositions' memories stay in it."""
    return _pool(state, before_step, since=state.get("pool_from", 0))


def _memory_lines(state: GoalMemState, ids: list[str] | None = None) -> list[MemoryLine]:
    """Memories as (id, text, date), the current step's first, so the freshest evidence leads."""
    pool = _breadth_pool(state)
    step = state.get("step", 0)
    current = [h.id for e in state.get("retrieved", []) or [] if e.step == step for h in e.hits]
    order = list(dict.fromkeys([*current, *pool])) if ids is None else [i for i in ids if i in pool]
    return [(mid, _strip_id(pool[mid].text, mid), pool[mid].time) for mid in order]


def _strip_id(text: str, mid: str) -> str:
    prefix = f"[{mid}] "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _types(state: GoalMemState) -> dict[str, Term]:
    found: dict[str, Term] = {}
    goal = state.get("goal")
    atoms = [*(goal.atoms if goal else []), *(state.get("subgoals") or {}).values()]
    for atom in atoms:
        for v in atom.variables():
            found.setdefault(v.name, v)
    return found


def _failed_so_far(state: GoalMemState) -> list[tuple[Rule, str]]:
    """The failed decompositions, with the one just tried (if any) and what it left unproved."""
    failed = list(state.get("failed") or [])
    previous = state.get("rule")
    if previous is not None:
        subgoals = state.get("subgoals") or {}
        missing = "; ".join(
            f"{subgoals[sid].render()}: {why}"
            for sid, why in (state.get("unresolved") or {}).items()
            if sid in subgoals
        )
        failed.append((previous, missing or "not proved"))
    return failed


def _fresh_proof(state: GoalMemState, rule: Rule, *, keep_pool: bool) -> dict[str, Any]:
    """The state of a new proof attempt of ``rule``: its body as subgoals G1..Gn, nothing resolved yet, an empty
    substitution (Algorithm 1 line 12 unifies against theta^(0,0)) and an empty memory pool (line 8), unless
    ``keep_pool`` (the ``keep_pool_across_breadth`` extension)."""
    subgoals = {f"G{i + 1}": atom for i, atom in enumerate(rule.body)}
    step = state.get("step", 0) + 1
    return {
        "rule": rule,
        "exhausted": False,
        "depth": 0,
        "step": step,
        "pool_from": state.get("pool_from", 0) if keep_pool else step,
        "subgoals": subgoals,
        "originals": list(subgoals),
        "antecedent_of": {},
        "substitution": Substitution(),
        "resolved": {},
        "unresolved": {sid: "not tried" for sid in subgoals},
        "frontier": None,
        "last_unified": {},
    }


def _frontier(state: GoalMemState) -> dict[str, str]:
    """The subgoals the next depth step refines, with what each is missing: the previous refinement frontier
    (the antecedents the last depth step added; at the first depth step the unresolved subgoals U(b,0)) that is
    still unresolved. Algorithm 1 (line 21) refines every subgoal of the frontier psi(b,d-1) and Eq. 6 every
    unresolved one U(b,d-1); the paper does not reconcile the two. We refine their intersection: an antecedent
    that was grounded has passed its bindings to the subgoal it refines (re-unified in the same batch), and a
    subgoal refined before is not refined again while its antecedent is still open."""
    unresolved = state.get("unresolved") or {}
    frontier = state.get("frontier")
    ids = list(unresolved) if frontier is None else [sid for sid in frontier if sid in unresolved]
    subgoals = state.get("subgoals") or {}
    return {sid: unresolved[sid] for sid in ids if sid in subgoals}


# -- nodes -------------------------------------------------------------------------------------------


def parse_goal(state: GoalMemState, runtime: Runtime[GoalMemContext]) -> dict[str, Any]:
    """The run pinned (namespace, policy, snapshot generation: ``graphs.runtime.pin``); the question as an NL-Logic goal;
    resets the breadth loop."""
    pin = pin_run(runtime, _ctx(runtime).namespace, _ctx(runtime).policy)
    state = {**state, "llm_requests": 0, "policy": pin["policy"]}
    outcome = _policy(state, runtime).parse(state["question"], max_attempts=_attempts(state, _ctx(runtime), reserve=2))
    return {
        **pin,
        "goal": outcome.output,
        "breadth": 0,
        "step": 0,
        "failed": [],
        "substitution": Substitution(),
        **_spent(state, outcome),
        "trace": [{"node": "parse_goal", "goal": outcome.output.render()}],
    }


def decompose(state: GoalMemState, runtime: Runtime[GoalMemContext]) -> dict[str, Any]:
    """One breadth step: a rule ``subgoals => goal`` unlike the failed ones, or ``exhausted`` if none is left."""
    failed = _failed_so_far(state)
    outcome = _policy(state, runtime).decompose(
        state["question"], _goal(state), failed, max_attempts=_attempts(state, _ctx(runtime), reserve=1)
    )
    rule = outcome.output
    breadth = state.get("breadth", 0) + 1
    update: dict[str, Any] = {"breadth": breadth, "failed": failed, **_spent(state, outcome)}
    if any(rule.body_key() == old.body_key() for old, _ in failed):
        # Nothing untried is left: another round would repeat a failed proof.
        return {
            **update,
            "exhausted": True,
            "stop_reason": "no new decomposition",
            "trace": [{"node": "decompose", "breadth": breadth, "repeated": rule.render()}],
        }
    return {
        **update,
        **_fresh_proof(state, rule, keep_pool=_ctx(runtime).keep_pool_across_breadth),
        "trace": [{"node": "decompose", "breadth": breadth, "rule": rule.render()}],
    }


def retrieve(state: RetrieveTask, runtime: Runtime[GoalMemContext]) -> dict[str, Any]:
    """One subgoal's search on the backbone (a ``Send`` branch; ``state`` is the branch's task)."""
    task = state
    hits = _backbone(runtime, task).search(task["query"], task["k"])
    items = [
        EvidenceItem(kind=h.kind, id=h.id, text=h.text, turn_ids=list(h.turn_ids), time=h.time, score=h.score)
        for h in hits[: task["k"]]
    ]
    return {
        "retrieved": [Retrieval(step=task["step"], subgoal=task["subgoal"], query=task["query"], hits=items)],
        "queried": {task["subgoal"]: task["query"]},
    }


def unify(state: GoalMemState, runtime: Runtime[GoalMemContext]) -> dict[str, Any]:
    """One batched unification of the open subgoals against every memory retrieved so far."""
    ctx = _ctx(runtime)
    step = state.get("step", 0)
    # "No new memory retrieved" (Algorithm 1 line 35) is relative to M_t^(b,d-1), this decomposition's pool.
    before = _breadth_pool(state, before_step=step)
    new_ids = [mid for mid in _breadth_pool(state) if mid not in before]
    subgoals = state.get("subgoals") or {}
    active = {sid: subgoals[sid] for sid in subgoals if sid not in (state.get("resolved") or {})}
    substitution = state.get("substitution") or Substitution()
    result, outcome = _policy(state, runtime).unify(
        state["question"], active, _memory_lines(state), substitution, max_attempts=_attempts(state, ctx, reserve=0)
    )
    resolved = {**(state.get("resolved") or {}), **result.resolved}
    unresolved = {sid: why for sid, why in result.unresolved.items() if sid not in resolved}
    # Success is every accumulated subgoal grounded, the antecedents the depth loop added included (Goal-Mem,
    # Algorithm 1: U(b,d) = {} over Psi(b,<=d)), with every answer variable bound (Sec. 4.4).
    solved = all(sid in resolved for sid in subgoals) and all(a in result.substitution for a in _goal(state).answer)
    update: dict[str, Any] = {
        "substitution": result.substitution,
        "resolved": resolved,
        "unresolved": unresolved,
        "new_in_step": len(new_ids),
        "resolved_in_step": len(result.resolved),
        "last_unified": {sid: atom.apply(substitution).render() for sid, atom in active.items()},
        "solved_depth": state.get("depth", 0) if solved else None,
        "rejected": result.rejected,
        **_spent(state, outcome),
    }
    _, stop = _after_unify(_updated(state, update), ctx)
    entry = {
        "node": "unify",
        "breadth": state.get("breadth", 0),
        "depth": state.get("depth", 0),
        "new_memories": len(new_ids),
        "resolved": sorted(result.resolved),
        "unresolved": sorted(unresolved),
        "substitution": result.substitution.render(),
        "rejected": result.rejected,
        "judged": result.judged,
        "llm_requests": update["llm_requests"],
    }
    return {**update, **({"stop_reason": stop} if stop else {}), "trace": [entry]}


def refine(state: GoalMemState, runtime: Runtime[GoalMemContext]) -> dict[str, Any]:
    """One depth step: antecedents for unresolved subgoals join as new subgoals (``antecedent_of`` links them)."""
    ctx = _ctx(runtime)
    subgoals = dict(state.get("subgoals") or {})
    substitution = state.get("substitution") or Substitution()
    unresolved = {sid: (subgoals[sid], why) for sid, why in _frontier(state).items()}
    existing = {atom.key() for atom in subgoals.values()} | {
        atom.apply(substitution).key() for atom in subgoals.values()
    }
    if unresolved:
        picked, outcome = _policy(state, runtime).refine(
            state["question"],
            _goal(state),
            substitution,
            unresolved,
            _memory_lines(state),
            _types(state),
            existing,
            max_attempts=_attempts(state, ctx, reserve=1),
        )
    else:  # every frontier subgoal is grounded: nothing to refine, no request
        picked, outcome = [], RoleOutcome(output=Refinement(antecedents=[]), cost=Cost())
    antecedent_of = dict(state.get("antecedent_of") or {})
    unresolved_now = dict(state.get("unresolved") or {})
    added = []
    for target, atom in picked:
        sid = f"G{len(subgoals) + 1}"
        subgoals[sid] = atom
        antecedent_of[sid] = target
        unresolved_now[sid] = "not tried"
        added.append(f"{sid} for {target}: {atom.render()}")
    update: dict[str, Any] = {
        "subgoals": subgoals,
        "antecedent_of": antecedent_of,
        "unresolved": unresolved_now,
        "frontier": [f"G{len(state.get('subgoals') or {}) + 1 + i}" for i in range(len(picked))],
        "depth": state.get("depth", 0) + 1,
        "step": state.get("step", 0) + 1,
        **_spent(state, outcome),
    }
    _, stop = _after_refine(_updated(state, update), ctx)
    entry = {
        "node": "refine",
        "depth": update["depth"],
        "refined": sorted(unresolved),
        "antecedents": added,
        "llm_requests": update["llm_requests"],
    }
    return {**update, **({"stop_reason": stop} if stop else {}), "trace": [entry]}


def generate(state: GoalMemState, runtime: Runtime[GoalMemContext]) -> dict[str, Any]:
    """The answer from the grounded goal and the memories that resolved a subgoal."""
    ctx = _ctx(runtime)
    supporting = list(dict.fromkeys(mid for ids in (state.get("resolved") or {}).values() for mid in ids))
    # The rules make no request, so only a model's proof can spend the budget (``call_bound`` >= 1).
    spent = _requests_left(state, ctx) <= 0
    policy = RULES if spent else _policy(state, runtime)
    outcome = policy.generate(
        state["question"],
        _goal(state),
        state["substitution"],
        _memory_lines(state, supporting),
        max_attempts=_attempts(state, ctx, reserve=0),
    )
    if spent:
        # The proof used the whole budget: the answer is the answer variables' values, without a request.
        outcome.fallback = FallbackRecord(role="goalmem_generate", reason=_budget_spent(state, ctx))
    pool = _breadth_pool(state)
    return {
        "answer": outcome.output.answer.strip(),
        "status": "answered",
        "evidence": [pool[mid] for mid in supporting if mid in pool],
        **_spent(state, outcome),
        "trace": [
            {
                "node": "generate",
                "answer": outcome.output.answer.strip(),
                "llm_requests": state.get("llm_requests", 0) + outcome.attempts,
                "budget_spent": spent,
            }
        ],
    }


def fail(state: GoalMemState) -> dict[str, Any]:
    """No proof within the breadth and depth limits: "I don't know"."""
    reason = state.get("stop_reason") or "breadth exhausted"
    return {
        "answer": FAILURE_ANSWER,
        "status": "failed",
        "stop_reason": reason,
        "evidence": [],
        "trace": [{"node": "fail", "reason": reason, "llm_requests": state.get("llm_requests", 0)}],
    }


# -- routers -----------------------------------------------------------------------------------------


def _searches(state: GoalMemState, ctx: GoalMemContext, sids: list[str]) -> list[tuple[str, str, int]]:
    """``(subgoal, query, k)`` for each subgoal whose query is new, sharing what is left of the memory budget."""
    substitution = state.get("substitution") or Substitution()
    queried = state.get("queried") or {}
    since = state.get("pool_from", 0)
    if since:
        # Each decomposition retrieves for every subgoal of its own (Algorithm 1 lines 9-10): only the queries its
        # pool was built from count as done, not those of failed decompositions whose subgoals had the same ids.
        current = {(e.subgoal, e.query) for e in state.get("retrieved") or [] if e.step >= since}
        queried = {sid: query for sid, query in queried.items() if (sid, query) in current}
    subgoals = state.get("subgoals") or {}
    tasks = []
    for sid in sids:
        query = subgoals[sid].apply(substitution).text()
        if queried.get(sid) != query:
            tasks.append((sid, query))
    # The memory budget is per question across every breadth step (the paper's k = 60 "distributed across
    # iterations", Sec. 5), so it counts every memory retrieved, not only the current pool.
    remaining = max(0, ctx.max_memories - len(_pool(state)))
    if not tasks or remaining == 0:
        return []
    share, extra = divmod(remaining, len(tasks))
    found = [
        (sid, query, min(ctx.k_per_subgoal, share + (1 if i < extra else 0))) for i, (sid, query) in enumerate(tasks)
    ]
    return [task for task in found if task[2] > 0]


def _dispatch(state: GoalMemState, ctx: GoalMemContext, sids: list[str]) -> list[Send]:
    """One retrieve branch (``Send``) per subgoal whose query is new."""
    return [
        Send(
            "retrieve",
            RetrieveTask(
                namespace=state["namespace"],
                generation=state.get("generation"),
                pending=state.get("pending", 0),
                subgoal=sid,
                query=query,
                k=k,
                step=state.get("step", 0),
            ),
        )
        for sid, query, k in _searches(state, ctx, sids)
    ]


def _pending(state: GoalMemState) -> list[str]:
    return [sid for sid in state.get("subgoals") or {} if sid not in (state.get("resolved") or {})]


def _next_breadth(state: GoalMemState, ctx: GoalMemContext) -> tuple[Literal["decompose", "fail"], str | None]:
    """The next decomposition when breadth and the call budget (decompose + unify) allow it."""
    if state.get("breadth", 0) >= ctx.max_breadth:
        return "fail", "breadth exhausted"
    if _requests_left(state, ctx) < 2:
        return "fail", _budget_spent(state, ctx)
    return "decompose", None


def _after_unify(
    state: GoalMemState, ctx: GoalMemContext
) -> tuple[Literal["generate", "refine", "decompose", "fail"], str | None]:
    """Where the search goes after a unification, and why it stops (when it does)."""
    if state.get("solved_depth") is not None:
        return "generate", None
    depth = state.get("depth", 0)
    # Algorithm 1, line 35: a depth step that retrieved no new memory ends the decomposition (it is infeasible
    # for this memory and backbone), whether or not the re-unification grounded something.
    stalled = depth >= 1 and state.get("new_in_step", 0) == 0
    if depth >= ctx.max_depth or stalled or not state.get("unresolved"):
        return _next_breadth(state, ctx)
    if _requests_left(state, ctx) < 2:
        return "fail", _budget_spent(state, ctx)
    return "refine", None


def _after_refine(
    state: GoalMemState, ctx: GoalMemContext
) -> tuple[Literal["retrieve", "unify", "decompose", "fail"], str | None]:
    """Retrieve for new or re-grounded subgoals, unify again on new bindings, else the next decomposition."""
    pending = _pending(state)
    if _searches(state, ctx, pending):
        return "retrieve", None
    substitution = state.get("substitution") or Substitution()
    last = state.get("last_unified") or {}
    subgoals = state.get("subgoals") or {}
    if state.get("frontier"):
        # New antecedents whose queries were searched before: Algorithm 1 still re-unifies (line 30).
        return "unify", None
    if any(last.get(sid) != subgoals[sid].apply(substitution).render() for sid in pending):
        # New bindings re-ground pending subgoals: worth one more look at the memories we have.
        return "unify", None
    return _next_breadth(state, ctx)


def route_after_decompose(
    state: GoalMemState, runtime: Runtime[GoalMemContext]
) -> list[Send] | Literal["unify", "fail"]:
    """Retrieve for each subgoal of the new rule (``Send``), or unify at once when nothing is left to retrieve."""
    if state.get("exhausted"):
        return "fail"
    sends = _dispatch(state, _ctx(runtime), list(state.get("subgoals") or {}))
    return sends or "unify"


def route_after_unify(
    state: GoalMemState, runtime: Runtime[GoalMemContext]
) -> Literal["generate", "refine", "decompose", "fail"]:
    """Answer when proved; refine while depth, progress and budget remain; else the next decomposition."""
    return _after_unify(state, _ctx(runtime))[0]


def route_after_refine(
    state: GoalMemState, runtime: Runtime[GoalMemContext]
) -> list[Send] | Literal["unify", "decompose", "fail"]:
    """Retrieve for the new or re-grounded subgoals, unify again on new bindings, else the next decomposition."""
    ctx = _ctx(runtime)
    target, _ = _after_refine(state, ctx)
    return _dispatch(state, ctx, _pending(state)) if target == "retrieve" else target


# -- the graph ---------------------------------------------------------------------------------------


def build_goalmem_graph() -> StateGraph[GoalMemState, GoalMemContext, GoalMemInput, GoalMemOutput]:
    """The Goal-Mem ``StateGraph`` (uncompiled); nodes find their resources in the run's context."""
    builder = StateGraph(
        GoalMemState, context_schema=GoalMemContext, input_schema=GoalMemInput, output_schema=GoalMemOutput
    )
    builder.add_node("parse_goal", parse_goal)
    builder.add_node("decompose", decompose)
    builder.add_node("retrieve", retrieve)
    builder.add_node("unify", unify)
    builder.add_node("refine", refine)
    builder.add_node("generate", generate)
    builder.add_node("fail", fail)
    builder.add_node("finish", finish)
    builder.add_edge(START, "parse_goal")
    builder.add_edge("parse_goal", "decompose")
    builder.add_conditional_edges("decompose", route_after_decompose, ["retrieve", "unify", "fail"])
    builder.add_edge("retrieve", "unify")
    builder.add_conditional_edges("unify", route_after_unify, ["generate", "refine", "decompose", "fail"])
    builder.add_conditional_edges("refine", route_after_refine, ["retrieve", "unify", "decompose", "fail"])
    builder.add_edge("generate", "finish")
    builder.add_edge("fail", "finish")
    builder.add_edge("finish", END)
    return builder


# -- the Python entry point --------------------------------------------------------------------------


def _answer_context(context: GoalMemContext | None, policy: str, options: dict[str, Any]) -> GoalMemContext:
    """The run's context: ``context`` (else the defaults) with the options and the ``backbone`` option (default
    ``bm25``) applied (``run_graph`` refused any option that is no context field, ``k`` or ``backbone``)."""
    updates = dict(options)
    backbone = updates.pop("backbone", "bm25")
    if "k" in updates:
        updates.setdefault("k_per_subgoal", updates.pop("k"))
    if isinstance(backbone, str):
        # A context's own backbone wins over the default name (answer's ``backbone`` defaults to "bm25").
        if context is None or backbone != GoalMemContext.backbone:
            updates["backbone"] = backbone
    else:
        updates["retriever"] = backbone
        updates["backbone"] = getattr(backbone, "name", None) or type(backbone).__name__
    if context is not None:
        return dataclasses.replace(context, **updates)
    updates.setdefault("policy", policy)
    return GoalMemContext(**updates)


def _turn_texts(
    resources: Resources, namespace: str, final: dict[str, Any], evidence: list[EvidenceItem]
) -> dict[str, str]:
    """The turns behind non-turn evidence (events, facts), so a reader sees what they cite (the run's pinned memory)."""
    snapshot = snapshot_of(resources.store, {**final, "namespace": namespace})
    return cited_turn_texts(snapshot, [item for item in evidence if item.kind != "turn"])


def _details(final: dict[str, Any], ctx: GoalMemContext, pool: dict[str, EvidenceItem]) -> dict[str, Any]:
    """The proof as the result's ``details``: goal, substitution, rule, subgoals, loops, limits and trace."""
    goal: Goal | None = final.get("goal")
    substitution: Substitution = final.get("substitution") or Substitution()
    subgoals: dict[str, Atom] = final.get("subgoals") or {}
    rule: Rule | None = final.get("rule")
    return {
        "status": final.get("status", "failed"),
        "goal": goal.render() if goal else None,
        "grounded_goal": goal.apply(substitution).render() if goal else None,
        "substitution": substitution.as_dict(),
        "substitution_text": substitution.render(),
        "rule": rule.render() if rule else None,
        "subgoals": {sid: atom.render() for sid, atom in subgoals.items()},
        "antecedent_of": final.get("antecedent_of") or {},
        "supporting": {sid: ids for sid, ids in (final.get("resolved") or {}).items()},
        "unresolved": final.get("unresolved") or {},
        "failed_decompositions": [rule.render() for rule, _ in final.get("failed") or []],
        "breadth": final.get("breadth", 0),
        "depth": final.get("solved_depth") if final.get("solved_depth") is not None else final.get("depth", 0),
        "solved_depth": final.get("solved_depth"),
        "stop_reason": final.get("stop_reason"),
        "memories_retrieved": len(pool),
        "rejected": final.get("rejected") or [],
        "backbone": ctx.backbone,
        "policy": ctx.policy,
        "limits": {
            "max_breadth": ctx.max_breadth,
            "max_depth": ctx.max_depth,
            "max_memories": ctx.max_memories,
            "k_per_subgoal": ctx.k_per_subgoal,
        },
        "call_bound": call_bound(ctx.max_breadth, ctx.max_depth),
        "llm_requests": final.get("llm_requests", 0),
        "trace": final.get("trace") or [],
    }


def _result(
    question: str, namespace: str, final: dict[str, Any], ctx: GoalMemContext, resources: Resources, elapsed: float
) -> AnswerResult:
    cost = (final.get("cost") or Cost()).model_copy(update={"wall_time_s": elapsed})
    resolved: dict[str, list[str]] = final.get("resolved") or {}
    pool = _pool(final)
    supporting = list(dict.fromkeys(mid for ids in resolved.values() for mid in ids if mid in pool))
    evidence = [pool[mid] for mid in supporting]
    details = {**_details(final, ctx, pool), "turn_texts": _turn_texts(resources, namespace, final, evidence)}
    return AnswerResult(
        strategy="goalmem",
        namespace=namespace,
        question=question,
        answer=final.get("answer") or FAILURE_ANSWER,
        evidence=evidence,
        cost=cost,
        steps=len(details["trace"]),
        fallbacks=final.get("fallbacks") or [],
        details=details,
    )


def finish(state: GoalMemState, runtime: Runtime[GoalMemContext]) -> dict[str, Any]:
    """The run's ``AnswerResult`` (the graph's ``result`` output, exactly what ``answer()`` returns), built from the
    final state and the run's pinned memory."""
    return finish_run(state, runtime, GoalMemContext, _result)


builder = build_goalmem_graph()
# Held as CompiledStateGraph[Any, ...]: ``traced_graph`` takes a compiled graph of any state and context.
_compiled: CompiledStateGraph[Any, Any, Any, Any] = builder.compile(name="goalmem")
graph = traced_graph(_compiled)


def _check_backbone(ctx: GoalMemContext, resources: Resources, namespace: str) -> None:
    """A named backbone is built once before the run, so an unknown name fails before any work."""
    if ctx.retriever is None:
        make_backbone(ctx.backbone, resources.store, namespace, embeddings=lambda: resources.embeddings)


STRATEGY = graph_strategy(
    "goalmem",
    graph,
    GoalMemContext,
    variants=("bm25", "dense", "events", "faithful"),
    make_context=_answer_context,
    check=_check_backbone,
    tags=lambda ctx: [f"backbone:{ctx.backbone}", *(["faithful"] if ctx.faithful else [])],
    extra_options=("k",),
    recursion_limit=lambda ctx: 25 + ctx.max_breadth * (4 + 4 * ctx.max_depth),
)
answer = STRATEGY.run
"""Answer by backward chaining. ``backbone``: ``bm25`` (turns), ``dense`` (turns), ``events`` (event graph), a
LangChain ``BaseRetriever`` or an object with ``search(query, k)``. Options are ``GoalMemContext`` fields
(``max_breadth``, ``max_depth``, ...; ``k`` is ``k_per_subgoal``)."""
