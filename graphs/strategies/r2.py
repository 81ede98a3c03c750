"""The ``r2`` strategy graph (Memory-R2's answer agent): retrieve memories -> distill them -> answer from the kept ones.

It reads the namespace's R2 fact memory, which only an ingest with the Memory-R2 manager writes
(``logicmap ingest FILE -n NS --memory-manager r2``). Studio loads ``graph`` from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import ConfigDict, with_config

from logicmap.agents.base import Cost
from logicmap.agents.r2_policy import R2Policy, r2_policy
from logicmap.agents.responder import EvidenceText
from logicmap.graphs.runtime.pin import pin_run, pinned_snapshot, snapshot_of
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
from logicmap.memory.indexes.embeddings import cosine_matrix
from logicmap.memory.records.r2 import FactRecord
from logicmap.memory.store import NamespaceSnapshot

__all__ = [
    "NoR2MemoryError",
    "R2Context",
    "R2Input",
    "R2Output",
    "R2State",
    "answer",
    "answer_node",
    "build_r2_graph",
    "builder",
    "distill",
    "graph",
    "has_r2_memory",
    "require_r2_memory",
    "retrieve",
]


class NoR2MemoryError(ValueError):
    """The namespace holds no Memory-R2 fact memory: it was not ingested with the Memory-R2 manager."""


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class R2Context(StrategyContext):
    """Per-run settings of Memory-R2's answer agent (paper defaults; shown as a form in Studio)."""

    candidates: int = 60
    """Memories retrieved for the distillation (most similar to the question). 60: the Memory-R2 text we have states no
    number; Goal-Mem's experiments cap retrieved memories at k = 60, and we follow that."""
    keep: int = 10
    """Memories the no-LLM distillation (and the distiller's fallback) keeps: the most similar ones."""
    faithful: bool = False
    """The paper's configuration: the answer prompt of Fig. 8 (the most recent memory on a contradiction, step by
    step, general world knowledge when memories are insufficient, memories grouped per speaker, the answer parsed
    from its ``<answer>`` span) instead of the project's responder. ``r2:faithful`` in the registry's variants."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class R2Input(QuestionInput):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class R2Output(AnswerOutput, total=False):
    """What an r2 run returns: the answer, the distilled memories it rests on, what it cost."""

    evidence: list[EvidenceItem]
    """The distilled memories, each with the turns (dia ids) it cites."""
    retrieved: list[str]
    """The ids of the memories retrieved for the distillation, most similar first."""


class R2State(StrategyState, total=False):
    """The answer agent's run; ``namespace`` is the run's, resolved once by ``retrieve`` (never an input)."""

    retrieved: list[str]
    similarities: dict[str, float]
    distilled: list[str]
    cited_ids: list[str]
    evidence: list[EvidenceItem]


def _ctx(runtime: Runtime[R2Context] | None) -> R2Context:
    return run_context(runtime, R2Context)


# -- helpers ----------------------------------------------------------------------------------------


def has_r2_memory(snapshot: NamespaceSnapshot) -> bool:
    """Whether a session of the namespace was ingested with the Memory-R2 manager (or R2 records exist)."""
    return bool(snapshot.r2_facts) or any(s.memory_manager == "r2" for s in snapshot.manifest.sessions.values())


def require_r2_memory(snapshot: NamespaceSnapshot) -> None:
    """Raise ``NoR2MemoryError`` (a one-line user error) when the namespace has no R2 fact memory."""
    if not has_r2_memory(snapshot):
        raise NoR2MemoryError(
            f"namespace {snapshot.namespace!r} has no Memory-R2 fact memory: it was not ingested with the Memory-R2 "
            "manager; ingest the conversation into a new namespace with `logicmap ingest FILE -n NS --memory-manager "
            "r2` (Python: ingest_conversation(..., memory_manager='r2'))"
        )


def _policy(state: Mapping[str, Any], runtime: Runtime[R2Context] | None) -> R2Policy:
    """The run's policy object (``agents.r2_policy``) from its pinned policy name; a node called alone on a
    hand-made state without a pin uses its context's (resolved) policy."""
    return r2_policy(state.get("policy") or _ctx(runtime).policy, resources_of(runtime).llm)


def _trace(state: R2State, ctx: R2Context) -> dict[str, Any]:
    return {"tags": ["strategy:r2", f"policy:{ctx.policy}"], "metadata": {"namespace": state["namespace"]}}


def _live(snapshot: NamespaceSnapshot) -> dict[str, FactRecord]:
    return {rid: r for rid, r in snapshot.r2_facts.items() if not r.deleted}


def _session_date(record: FactRecord, snapshot: NamespaceSnapshot) -> str | None:
    """The date of the session the memory's first cited turn was said in (anchors relative times)."""
    for tid in record.turn_ids:
        turn = snapshot.turns.get(tid)
        if turn is not None and turn.session_time is not None:
            return turn.session_time.date().isoformat()
    return None


# -- nodes ------------------------------------------------------------------------------------------


def retrieve(state: R2State, runtime: Runtime[R2Context]) -> dict[str, Any]:
    """The live memories most similar to the question (at most ``candidates``), most similar first."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    pin = pin_run(runtime, ctx.namespace, ctx.policy)  # namespace, policy, snapshot generation: once per run
    snapshot = pinned_snapshot(pin, runtime)
    require_r2_memory(snapshot)
    live = [rid for rid in _live(snapshot) if rid in snapshot.r2_fact_vectors]
    if not live or ctx.candidates <= 0:
        return {**pin, "retrieved": [], "similarities": {}}
    query = res.embeddings.embed_query(state["question"] or " ")
    sims = cosine_matrix([query], np.vstack([snapshot.r2_fact_vectors[rid] for rid in live]))[0]
    order = np.argsort(-sims, kind="stable")[: ctx.candidates]
    return {
        **pin,
        "retrieved": [live[i] for i in order],
        "similarities": {live[i]: round(float(sims[i]), 4) for i in order},
    }


def distill(state: R2State, runtime: Runtime[R2Context]) -> dict[str, Any]:
    """Memory distillation: the retrieved memories that bear on the question (the model's choice, or the most similar)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    live = _live(pinned_snapshot(state, runtime))
    memories = [live[rid] for rid in state.get("retrieved", []) if rid in live]
    if not memories:
        return {"distilled": []}
    policy = _policy(state, runtime)
    outcome = policy.distill(state["question"], memories, keep=ctx.keep, method=res.method, **_trace(state, ctx))
    return {"distilled": outcome.output.selected, "cost": outcome.cost, "fallbacks": policy.recorded(outcome.fallback)}


def _by_speaker(kept: list[FactRecord], snapshot: NamespaceSnapshot) -> list[tuple[str, list[str]]]:
    """Each user with the ids of the memories that came from their turns (the first cited turn's speaker), users in
    the order they first speak; the paper's answer prompt shows "Memories for user <speaker>" blocks."""
    order = [t.speaker for t in sorted(snapshot.turns.values(), key=lambda t: t.position)]
    groups: dict[str, list[str]] = {who: [] for who in dict.fromkeys(order)}
    for record in kept:
        turn = next((snapshot.turns[t] for t in record.turn_ids if t in snapshot.turns), None)
        groups.setdefault(turn.speaker if turn else "unknown", []).append(record.id)
    return [(who, ids) for who, ids in groups.items() if ids]


def answer_node(state: R2State, runtime: Runtime[R2Context]) -> dict[str, Any]:
    """The answer from the distilled memories only (the responder role), with them as the evidence."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    snapshot = pinned_snapshot(state, runtime)
    live = _live(snapshot)
    kept = [live[rid] for rid in state.get("distilled", []) if rid in live]
    shown = [EvidenceText(r.id, r.text, _session_date(r, snapshot)) for r in kept]
    policy = _policy(state, runtime)
    if ctx.faithful:
        outcome = policy.respond_paper(
            state["question"], shown, _by_speaker(kept, snapshot), method=res.method, **_trace(state, ctx)
        )
    else:
        outcome = policy.respond(
            state["question"],
            shown,
            question_date=state.get("question_date"),
            method=res.method,
            **_trace(state, ctx),
        )
    sims = state.get("similarities", {})
    evidence = [
        EvidenceItem(kind="fact", id=r.id, text=r.text, turn_ids=list(r.turn_ids), time=e.time, score=sims.get(r.id))
        for r, e in zip(kept, shown)
    ]
    return {
        "answer": outcome.output.answer,
        "cited_ids": outcome.output.cited_ids,
        "evidence": evidence,
        "cost": outcome.cost,
        "fallbacks": policy.recorded(outcome.fallback),
    }


# -- the graph --------------------------------------------------------------------------------------


def build_r2_graph() -> StateGraph[R2State, R2Context, R2Input, R2Output]:
    """The ``r2`` ``StateGraph`` (uncompiled); nodes read their resources from the run's context."""
    builder = StateGraph(R2State, context_schema=R2Context, input_schema=R2Input, output_schema=R2Output)
    builder.add_node("retrieve", retrieve)
    builder.add_node("distill", distill)
    builder.add_node("answer", answer_node)
    builder.add_node("finish", finish)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "distill")
    builder.add_edge("distill", "answer")
    builder.add_edge("answer", "finish")
    builder.add_edge("finish", END)
    return builder


def _result(
    question: str, namespace: str, final: dict[str, Any], ctx: R2Context, res: Resources, elapsed: float
) -> AnswerResult:
    snapshot = snapshot_of(res.store, {**final, "namespace": namespace})  # the run's pinned memory
    evidence: list[EvidenceItem] = final.get("evidence", [])
    cost = (final.get("cost") or Cost()).model_copy(update={"wall_time_s": elapsed})
    return AnswerResult(
        strategy="r2",
        namespace=namespace,
        question=question,
        answer=final.get("answer", ""),
        evidence=evidence,
        cost=cost,
        steps=2,
        fallbacks=final.get("fallbacks", []),
        details={
            "retrieved": final.get("retrieved", []),
            "distilled": final.get("distilled", []),
            "cited_ids": final.get("cited_ids", []),
            "turn_texts": cited_turn_texts(snapshot, evidence),
        },
    )


def finish(state: R2State, runtime: Runtime[R2Context]) -> dict[str, Any]:
    """The run's ``AnswerResult`` (the graph's ``result`` output, exactly what ``answer()`` returns), built from the
    final state and the run's pinned memory."""
    return finish_run(state, runtime, R2Context, _result)


builder = build_r2_graph()
graph = traced_graph(builder.compile(name="r2"))
STRATEGY = graph_strategy(
    "r2",
    graph,
    R2Context,
    recursion_limit=lambda ctx: 10,
    variants=("faithful",),
    tags=lambda ctx: ["faithful"] if ctx.faithful else [],
    check=lambda ctx, res, namespace: require_r2_memory(res.store.snapshot(namespace)),
)
answer = STRATEGY.run
"""Answer from the namespace's R2 fact memory; ``NoR2MemoryError`` when it was not ingested with the Memory-R2
manager."""
