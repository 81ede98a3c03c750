"""The graph-feature reranker as a strategy: rank every turn of the namespace, answer from the best ones.

``rank -> respond``: the reranker (``memory.retrieval.ranking``, the learned turn ranker over event-graph features) scores
every turn; its best ``context_turns`` turns join the evidence with their events; the responder answers from them.
No planner, no explorers. Studio loads ``graph`` from this module. A namespace that holds only store items
(``LogicMapStore``) is ranked as the store's ``search`` ranks it (``agents.item_ranking``): items are facts, not
turns of a conversation, and the same memory ranks the same way through the store, this strategy, the chatbot's
recall and the MCP ``answer`` tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import ConfigDict, with_config

from logicmap.agents.base import Cost
from logicmap.agents.item_ranking import item_scores, turn_scores_of
from logicmap.agents.responder import EvidenceText
from logicmap.agents.responder_policy import responder_policy
from logicmap.graphs.runtime.pin import pin_run, pinned_snapshot
from logicmap.graphs.runtime.resources import Resources, resources_of, run_context
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
from logicmap.graphs.runtime.tracing import traced_graph
from logicmap.graphs.strategies.strategy import (
    AnswerOutput,
    QuestionInput,
    StrategyContext,
    StrategyState,
    finish_run,
    graph_strategy,
)
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.records.items import item_index
from logicmap.memory.retrieval.query import QueryEncoder, learned_turn_scores
from logicmap.memory.store import NamespaceSnapshot

__all__ = [
    "RerankContext",
    "RerankInput",
    "RerankOutput",
    "RerankState",
    "answer",
    "build_rerank_graph",
    "builder",
    "graph",
    "rank",
    "respond",
]


@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class RerankContext(StrategyContext):
    """Per-run settings of the rerank graph (shown as a form in Studio)."""

    context_turns: int = 10
    """The responder's context budget in turns: the reranker's best this many turns join the evidence."""
    name_free_readings: bool = True
    """Match the question also without its names (memory.text.query_readings), as the reranker was fitted."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class RerankInput(QuestionInput):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class RerankOutput(AnswerOutput, total=False):
    """What a rerank run returns: the answer, its evidence, the reranker's turn order, what it cost."""

    evidence: list[EvidenceItem]
    """The events (or lone turns) of the reranker's best turns, each with the turns (dia ids) it cites."""
    turn_ranking: list[str]
    """The evidence's turns in the reranker's order, its best context_turns first."""
    cited_ids: list[str]
    """The evidence ids the responder cited."""


class RerankState(StrategyState, total=False):
    """The question, the reranked evidence and the answer. ``namespace`` is the run's, resolved by ``rank``."""

    evidence: list[EvidenceItem]
    turn_ranking: list[str]
    cited_ids: list[str]


def _evidence(graph: EventGraph, best: list[str], scores: dict[str, float]) -> list[EvidenceItem]:
    """The events of ``best`` (turn ids, best first), in the order of their best turn; a turn no event cites
    is evidence on its own."""
    owner, items, seen = graph.event_of_turn, [], set()
    for tid in best:
        eid = owner.get(tid)
        key = eid or tid
        if key in seen:
            continue
        seen.add(key)
        if eid is None:
            turn = graph.turns[tid]
            items.append(EvidenceItem(kind="turn", id=tid, text=turn.render(), turn_ids=[tid], score=scores[tid]))
            continue
        event = graph.events[eid]
        items.append(
            EvidenceItem(
                kind="event",
                id=eid,
                text=event.render(),
                turn_ids=list(event.turn_ids),
                time=event.time,
                score=scores[tid],
            )
        )
    return items


def _turn_scores(snapshot: NamespaceSnapshot, question: str, encoder: QueryEncoder) -> dict[str, float]:
    """Every turn's score: in a namespace whose turns are all store items' (``LogicMapStore``), each item's score
    as the store's ``search`` ranks it (``agents.item_ranking``: one ranking of items everywhere); in any other
    namespace, the graph-feature reranker's (fitted on conversations)."""
    index = item_index(snapshot)
    if index.items and len(index.flat_turns) == len(snapshot.turns):
        return dict(turn_scores_of(snapshot, item_scores(snapshot, question, encoder.embeddings), encoder.embeddings))
    return learned_turn_scores(snapshot, question, encoder)


def rank(state: RerankState, runtime: Runtime[RerankContext]) -> dict[str, Any]:
    """Pin the run (namespace, policy, snapshot generation: ``graphs.runtime.pin``), score every turn with the reranker,
    keep the best ``context_turns``."""
    ctx, res = run_context(runtime, RerankContext), resources_of(runtime)
    pin = pin_run(runtime, ctx.namespace, ctx.policy)
    snapshot = pinned_snapshot(pin, runtime)
    graph = EventGraph.of(snapshot)
    encoder = QueryEncoder(res.embeddings, name_free_readings=ctx.name_free_readings)
    scores = _turn_scores(snapshot, state["question"], encoder)
    ranking = sorted(scores, key=lambda t: -scores[t])  # stable: conversation order breaks ties
    evidence = _evidence(graph, ranking[: max(ctx.context_turns, 0)], scores)
    held = {t for item in evidence for t in item.turn_ids}
    return {**pin, "evidence": evidence, "turn_ranking": [t for t in ranking if t in held]}


def _render(graph: EventGraph, item: EvidenceItem) -> EvidenceText:
    turns = "\n".join(
        f"    {t.render()} ({t.session_time.date().isoformat() if t.session_time else 'undated'})"
        for t in (graph.turns[tid] for tid in item.turn_ids if tid in graph.turns)
    )
    text = turns if item.kind == "turn" else f"{item.text}\n{turns}"
    return EvidenceText(item.id, text, item.time)


def respond(state: RerankState, runtime: Runtime[RerankContext]) -> dict[str, Any]:
    """Answer from the reranked evidence only (extractively without an LLM)."""
    ctx, res = run_context(runtime, RerankContext), resources_of(runtime)
    graph = EventGraph.of(pinned_snapshot(state, runtime))
    policy = responder_policy(state.get("policy") or ctx.policy, res.llm)  # the pinned policy (alone: the context's)
    outcome = policy.respond(
        state["question"],
        [_render(graph, item) for item in state.get("evidence", [])],
        question_date=state.get("question_date"),
        method=res.method,
        tags=["strategy:rerank", f"policy:{ctx.policy}"],
        metadata={"namespace": state["namespace"], "context_turns": ctx.context_turns},
    )
    return {
        "answer": outcome.output.answer,
        "cited_ids": outcome.output.cited_ids,
        "cost": outcome.cost,
        "fallbacks": policy.recorded(outcome.fallback),
    }


def build_rerank_graph() -> StateGraph[RerankState, RerankContext, RerankInput, RerankOutput]:
    """The rerank ``StateGraph`` (uncompiled); nodes find their resources in the run's context."""
    builder = StateGraph(
        RerankState, context_schema=RerankContext, input_schema=RerankInput, output_schema=RerankOutput
    )
    builder.add_node("rank", rank)
    builder.add_node("respond", respond)
    builder.add_node("finish", finish)
    builder.add_edge(START, "rank")
    builder.add_edge("rank", "respond")
    builder.add_edge("respond", "finish")
    builder.add_edge("finish", END)
    return builder


def _result(
    question: str, namespace: str, final: dict[str, Any], ctx: RerankContext, res: Resources, elapsed: float
) -> AnswerResult:
    cost = (final.get("cost") or Cost()).model_copy(update={"wall_time_s": elapsed})
    return AnswerResult(
        strategy="rerank",
        namespace=namespace,
        question=question,
        answer=final.get("answer", ""),
        evidence=final.get("evidence", []),
        cost=cost,
        steps=1,
        fallbacks=final.get("fallbacks", []),
        turn_ranking=final.get("turn_ranking", []),
        details={"cited_ids": final.get("cited_ids", [])},
    )


def finish(state: RerankState, runtime: Runtime[RerankContext]) -> dict[str, Any]:
    """The run's ``AnswerResult`` (the graph's ``result`` output, exactly what ``answer()`` returns), built from the
    final state and the run's pinned memory."""
    return finish_run(state, runtime, RerankContext, _result)


builder = build_rerank_graph()
graph = traced_graph(builder.compile(name="rerank"))
STRATEGY = graph_strategy("rerank", graph, RerankContext, recursion_limit=lambda ctx: 10)
answer = STRATEGY.run
