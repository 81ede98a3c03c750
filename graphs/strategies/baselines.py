"""Plain retrieval baselines: top-k turns by dense similarity or BM25, then the responder.

They are what the graph strategies are measured against.
"""

from __future__ import annotations

import time
from typing import Literal

from logicmap.agents.responder import EvidenceText
from logicmap.agents.responder_policy import responder_policy
from logicmap.graphs.runtime.resources import Resources, default_resources, resolve_policy
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
from logicmap.graphs.runtime.tracing import question_run, traced_strategy
from logicmap.graphs.strategies.strategy import Strategy
from logicmap.memory.retrieval.retrieval import MemoryRetriever
from logicmap.memory.store.live import LiveView

__all__ = ["BM25", "DENSE", "answer_bm25", "answer_dense", "answer_top_k"]


def answer_top_k(
    question: str,
    namespace: str,
    *,
    method: Literal["dense", "bm25"],
    resources: Resources | None = None,
    policy: str = "auto",
    k: int = 10,
) -> AnswerResult:
    """Retrieve the top ``k`` turns with ``method`` and answer from them (within the run's deadline)."""
    started = time.perf_counter()
    res = resources or default_resources()
    with question_run(question, res.settings, where=f"the {method} strategy"):
        res.store.require_namespace(namespace)
        policy = resolve_policy(policy, res)
        # The latest memory with its pending writes (``memory.store.live``): a fresh write is retrieved at once.
        retriever = MemoryRetriever(
            LiveView(res.store), namespace, method=method, unit="turns", embeddings=res.embeddings
        )
        hits = retriever.search(question, k)
        evidence = [EvidenceText(h.id, h.text, h.time) for h in hits]
        answering = responder_policy(policy, res.llm)
        outcome = answering.respond(
            question,
            evidence,
            method=res.method,
            tags=[f"strategy:{method}", f"policy:{policy}"],
            metadata={"namespace": namespace, "k": k},
        )
    cost = outcome.cost.model_copy(update={"wall_time_s": time.perf_counter() - started})
    fallbacks = answering.recorded(outcome.fallback)
    return AnswerResult(
        strategy=method,
        namespace=namespace,
        question=question,
        answer=outcome.output.answer,
        evidence=[
            EvidenceItem(kind="turn", id=h.id, text=h.text, turn_ids=h.turn_ids, time=h.time, score=h.score)
            for h in hits
        ],
        cost=cost,
        steps=1,
        fallbacks=fallbacks,
        details={"k": k, "cited_ids": outcome.output.cited_ids},
    )


def answer_dense(
    question: str, namespace: str, *, resources: Resources | None = None, policy: str = "auto", k: int = 10
) -> AnswerResult:
    """Plain dense RAG: top-k turns by embedding similarity."""
    return answer_top_k(question, namespace, method="dense", resources=resources, policy=policy, k=k)


def answer_bm25(
    question: str, namespace: str, *, resources: Resources | None = None, policy: str = "auto", k: int = 10
) -> AnswerResult:
    """Plain BM25: top-k turns by BM25."""
    return answer_top_k(question, namespace, method="bm25", resources=resources, policy=policy, k=k)


# Each a root run of its own when traced (name, strategy/policy tags, namespace, cost), as a graph strategy is.
DENSE = Strategy("dense", traced_strategy("dense", answer_dense))
BM25 = Strategy("bm25", traced_strategy("bm25", answer_bm25))
