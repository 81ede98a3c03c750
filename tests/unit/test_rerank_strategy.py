"""The rerank strategy: the graph-feature reranker's best turns with their events, answered, no search."""

from __future__ import annotations

import numpy as np
import pytest

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.strategies.rerank import RerankContext, answer, graph
from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.language.text import query_readings
from logicmap.memory.records.records import Event, Turn
from logicmap.memory.retrieval.ranking import default_ranker
from logicmap.memory.store import ChangeSet

QUESTION = "What drink did Maya have at the Blue Finch cafe?"
RESPONDER = "You answer a question about a long conversation"


def reranker_order(resources, namespace: str, question: str) -> list[str]:
    """Every turn best first by the shipped reranker, computed here from ``memory.retrieval.ranking`` alone."""
    snapshot = resources.store.snapshot(namespace)
    readings = normalize(np.asarray(resources.embeddings.embed_documents(query_readings(question)), dtype=np.float32))
    scores = default_ranker().scores(snapshot, question, readings)
    return sorted(scores, key=lambda t: -scores[t])


def test_rerank_cites_exactly_the_rerankers_top_ten_with_their_events(ingested_sample) -> None:
    top = reranker_order(ingested_sample, "sample", QUESTION)[:10]
    result = answer(QUESTION, "sample", resources=ingested_sample, policy="heuristic")
    assert result.strategy == "rerank" and result.cost.llm_calls == 0 and not result.fallbacks
    assert result.cited_turns(10) == top
    # The evidence is the events of those ten turns, nothing else, in the order of their best turn.
    owner = EventGraph.of(ingested_sample.store.snapshot("sample")).event_of_turn
    wanted = list(dict.fromkeys(owner[t] for t in top))
    assert [item.id for item in result.evidence] == wanted
    assert all(item.kind == "event" and item.turn_ids for item in result.evidence)
    assert result.answer  # extractive, from that evidence


def test_context_turns_sets_how_many_turns_join_the_evidence(ingested_sample) -> None:
    top = reranker_order(ingested_sample, "sample", QUESTION)
    result = answer(QUESTION, "sample", resources=ingested_sample, policy="heuristic", context_turns=3)
    assert result.cited_turns(3) == top[:3]
    owner = EventGraph.of(ingested_sample.store.snapshot("sample")).event_of_turn
    assert {item.id for item in result.evidence} == {owner[t] for t in top[:3]}
    # Beyond the budget, the evidence's other turns follow in the reranker's order.
    held = {t for item in result.evidence for t in item.turn_ids}
    assert result.cited_turns() == [t for t in top if t in held]


def test_the_graph_runs_rank_then_respond_and_nothing_else(ingested_sample) -> None:
    ctx = RerankContext(policy="heuristic", namespace="sample", resources=ingested_sample)
    nodes = [next(iter(update)) for update in graph.stream({"question": QUESTION}, context=ctx, stream_mode="updates")]
    assert nodes == ["rank", "respond", "finish"]  # finish: the AnswerResult
    out = graph.invoke({"question": QUESTION}, context=ctx)
    assert set(out) <= {"answer", "evidence", "turn_ranking", "cited_ids", "cost", "fallbacks", "result"}
    assert out["result"].answer == out["answer"] and out["result"].turn_ranking == out["turn_ranking"]
    assert out["turn_ranking"][:10] == reranker_order(ingested_sample, "sample", QUESTION)[:10]


def test_the_llm_policy_answers_from_the_reranked_evidence(ingested_sample) -> None:
    import dataclasses

    top_event = EventGraph.of(ingested_sample.store.snapshot("sample")).event_of_turn[
        reranker_order(ingested_sample, "sample", QUESTION)[0]
    ]
    model = ScriptedChatModel(routes={RESPONDER: [{"answer": "an iced matcha latte", "cited_ids": [top_event]}]})
    res = dataclasses.replace(ingested_sample, llm_=model)
    result = answer(QUESTION, "sample", resources=res, policy="llm")
    assert result.answer == "an iced matcha latte" and result.details["cited_ids"] == [top_event]
    assert result.cost.llm_calls == 1 and not result.fallbacks
    assert len(model.calls) == 1 and f"[{top_event}]" in model.calls[0][-1].content


def test_a_turn_no_event_cites_is_evidence_on_its_own(resources) -> None:
    texts = ["I adopted a beagle named Biscuit.", "Biscuit loves the beach.", "My sister plays the cello."]
    turns = [
        Turn(namespace="lone", session_id="S1", dia_id=f"D1:{i + 1}", speaker="Ann", text=t, position=i)
        for i, t in enumerate(texts)
    ]
    event = Event(
        id="E1",
        namespace="lone",
        session_id="S1",
        summary="Ann adopted Biscuit, a beagle",
        order=0,
        participants=["Ann"],
        turn_ids=["D1:1", "D1:2"],
    )
    resources.store.commit(
        ChangeSet(
            namespace="lone",
            base_generation=0,
            turns=turns,
            turn_vectors=resources.embeddings.embed_documents(texts),
            events=[event],
            event_vectors=resources.embeddings.embed_documents([event.summary]),
        )
    )
    result = answer("Who plays the cello?", "lone", resources=resources, policy="heuristic", context_turns=3)
    by_id = {item.id: item for item in result.evidence}
    assert set(by_id) == {"E1", "D1:3"}
    assert by_id["D1:3"].kind == "turn" and by_id["D1:3"].turn_ids == ["D1:3"]
    assert sorted(result.cited_turns()) == ["D1:1", "D1:2", "D1:3"]


def test_rerank_is_a_registered_strategy_everywhere(ingested_sample) -> None:
    import json
    from pathlib import Path
    from typing import get_args

    from logicmap import answer as top_level_answer
    from logicmap.evals.bench.bench_recall import GRAPH_STRATEGIES
    from logicmap.evals.specs import resolve_strategies
    from logicmap.graphs.chat.chatbot import StrategyName

    result = top_level_answer("rerank", QUESTION, "sample", resources=ingested_sample, policy="heuristic")
    assert result.strategy == "rerank"
    ((spec, fn),) = resolve_strategies(["rerank"])[0]
    assert spec.name == "rerank" and fn is answer
    assert "rerank" in GRAPH_STRATEGIES and "rerank" in get_args(StrategyName)
    studio = json.loads((Path(__file__).resolve().parents[2] / "studio" / "langgraph.json").read_text())
    assert studio["graphs"]["rerank"]["path"] == "logicmap.graphs.strategies.rerank:graph"


def test_an_unknown_namespace_is_refused_before_any_ranking(resources) -> None:
    from logicmap.memory.store import UnknownNamespaceError

    with pytest.raises(UnknownNamespaceError):
        answer(QUESTION, "nobody", resources=resources, policy="heuristic")


def test_compiled_graph_diagram_matches_the_snapshot() -> None:
    from pathlib import Path

    from logicmap.graphs.strategies.rerank import build_rerank_graph

    diagram = build_rerank_graph().compile().get_graph().draw_mermaid()
    path = Path(__file__).parent / "snapshots" / "rerank.mmd"
    assert diagram == path.read_text(encoding="utf-8"), "the rerank topology changed: update the snapshot if intended"
