"""Forward-reasoning baselines over the Goal-Mem backbones: query reformulation, self-reflection, ReAct.

Each answers from the same retrieval backbones and memory budget as Goal-Mem and returns an ``AnswerResult``.
"""

from __future__ import annotations

import time
from typing import Any, TypeVar

from pydantic import BaseModel

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome
from logicmap.agents.forward_policy import ForwardPolicy, forward_policy
from logicmap.agents.goalmem_heuristics import MemoryLine
from logicmap.graphs.runtime.resources import Resources, default_resources, resolve_policy
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
from logicmap.graphs.runtime.tracing import check_question_once, traced_strategy
from logicmap.graphs.strategies.strategy import Strategy
from logicmap.memory.retrieval.backbones import make_backbone
from logicmap.memory.retrieval.retrieval import Backbone, reciprocal_rank_fusion
from logicmap.memory.store import PinnedStore

__all__ = ["FORWARD_STRATEGIES", "answer_react", "answer_reflect", "answer_reformulate"]

T = TypeVar("T", bound=BaseModel)


class _Run:
    """What a baseline run shares: the backbone, the memory pool under its budget, cost and fallbacks."""

    def __init__(
        self, question: str, namespace: str, resources: Resources | None, policy: str, backbone: Any, max_memories: int
    ) -> None:
        self.resources = resources or default_resources()
        check_question_once(question, self.resources.settings, where="a forward-reasoning baseline")
        self.resources.store.require_namespace(namespace)  # the store refuses an invalid name before any read
        self.namespace = namespace
        # Chosen once per run from the resolved policy name (``agents.forward_policy``).
        self.policy_name = resolve_policy(policy, self.resources)
        self.policy: ForwardPolicy = forward_policy(self.policy_name, self.resources.llm, method=self.resources.method)
        # Pinned: every search of the run reads the generation it started on (``memory.store.PinnedStore``).
        pinned = PinnedStore(self.resources.store, namespace, self.resources.store.snapshot(namespace).generation)
        self.backbone: Backbone = make_backbone(
            backbone, pinned, namespace, embeddings=lambda: self.resources.embeddings
        )
        self.backbone_name = backbone if isinstance(backbone, str) else getattr(self.backbone, "name", "custom")
        self.max_memories = max_memories
        self.pool: dict[str, EvidenceItem] = {}
        self.cost = Cost()
        self.fallbacks: list[FallbackRecord] = []
        self.started = time.perf_counter()

    def record(self, outcome: RoleOutcome[T]) -> T:
        self.cost = self.cost + outcome.cost
        if outcome.fallback is not None:
            self.fallbacks.append(outcome.fallback)
        return outcome.output

    def search(self, query: str, k: int) -> list[EvidenceItem]:
        """Hits for a query, within what is left of the memory budget; new hits join the pool."""
        k = min(k, self.max_memories - len(self.pool))
        if k <= 0:
            return []
        items = []
        for h in self.backbone.search(query, k)[:k]:
            item = EvidenceItem(
                kind=h.kind, id=h.id, text=h.text, turn_ids=list(h.turn_ids), time=h.time, score=h.score
            )
            self.pool.setdefault(item.id, item)
            items.append(self.pool[item.id])
        return items

    def lines(self, ids: list[str] | None = None) -> list[MemoryLine]:
        order = ids if ids is not None else list(self.pool)
        out = []
        for mid in order:
            item = self.pool[mid]
            prefix = f"[{mid}] "
            text = item.text[len(prefix) :] if item.text.startswith(prefix) else item.text
            out.append((mid, text, item.time))
        return out

    def result(
        self, strategy: str, question: str, answer: str, cited: list[str], details: dict[str, Any]
    ) -> AnswerResult:
        cited = [c for c in dict.fromkeys(cited) if c in self.pool]
        evidence = [self.pool[c] for c in cited] or list(self.pool.values())
        self.cost.wall_time_s = time.perf_counter() - self.started
        return AnswerResult(
            strategy=strategy,
            namespace=self.namespace,
            question=question,
            answer=answer.strip() or "I don't know",
            evidence=evidence,
            cost=self.cost,
            steps=details.get("steps", 0),
            fallbacks=self.fallbacks,
            details={
                **details,
                "backbone": self.backbone_name,
                "memories_retrieved": len(self.pool),
                "policy": self.policy_name,
            },
        )


def answer_reformulate(
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: str = "auto",
    backbone: Any = "bm25",
    k: int = 5,
    max_queries: int = 3,
    max_memories: int = 60,
) -> AnswerResult:
    """Query reformulation: the LLM rewrites the question into queries; their hits are fused (RRF); one answer."""
    run = _Run(question, namespace, resources, policy, backbone, max_memories)
    reformulation = run.record(run.policy.reformulate(question, max_queries=max_queries))
    queries = [q for q in reformulation.queries if q.strip()][:max_queries] or [question]
    rankings = [[h.id for h in run.search(q, k)] for q in queries]
    fused = [mid for mid, _ in reciprocal_rank_fusion(rankings)][: max(k, 2 * k)]
    answered = run.record(run.policy.answer(question, run.lines(fused)))
    return run.result(
        "forward_reformulate",
        question,
        answered.answer,
        answered.cited or fused[:k],
        {"queries": queries, "steps": 2 + len(queries)},
    )


def answer_reflect(
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: str = "auto",
    backbone: Any = "bm25",
    k: int = 5,
    max_rounds: int = 2,
    max_memories: int = 60,
) -> AnswerResult:
    """Self-reflection: retrieve, draft, reflect; while the reflection finds a gap (at most ``max_rounds``),
    search its follow-up query and draft again."""
    run = _Run(question, namespace, resources, policy, backbone, max_memories)
    run.search(question, k)
    draft = run.record(run.policy.answer(question, run.lines()))
    rounds: list[dict[str, Any]] = []
    for _ in range(max_rounds):
        reflection = run.record(run.policy.reflect(question, draft.answer, run.lines()))
        rounds.append({"draft": draft.answer, "sufficient": reflection.sufficient, "query": reflection.query})
        if reflection.sufficient or not reflection.query:
            break
        if not [h for h in run.search(reflection.query, k)]:
            break
        draft = run.record(run.policy.answer(question, run.lines()))
    return run.result(
        "forward_reflect", question, draft.answer, draft.cited, {"rounds": rounds, "steps": 1 + 2 * len(rounds)}
    )


def answer_react(
    question: str,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: str = "auto",
    backbone: Any = "bm25",
    k: int = 5,
    max_steps: int = 4,
    max_memories: int = 60,
) -> AnswerResult:
    """ReAct: the LLM alternates thoughts and memory searches until it answers (at most ``max_steps``
    steps; the last step must answer). Each step is a typed role call, so a malformed step falls back."""
    run = _Run(question, namespace, resources, policy, backbone, max_memories)
    transcript: list[str] = []
    searched = False
    final = None
    for step in range(max_steps):
        searches_left = max_steps - step - 1
        action = run.record(run.policy.react(question, transcript, run.lines(), searches_left, searched=searched))
        if action.action == "answer":
            final = action
            break
        if searches_left <= 0:
            break
        hits = run.search(action.query or question, k)
        searched = True
        transcript.append(f"Thought: {action.thought}\nAction: search[{action.query}]")
        transcript.append(
            "Observation:\n" + ("\n".join(f"{h.id}: ({h.time or 'undated'}) {h.text}" for h in hits) or "(nothing new)")
        )
    if final is None:
        # Out of steps while still searching: answer from what was observed.
        answered = run.record(run.policy.answer(question, run.lines()))
        answer_text, cited = answered.answer, answered.cited
    else:
        answer_text, cited = final.answer or "I don't know", final.cited
    return run.result(
        "forward_react", question, answer_text, cited, {"transcript": transcript, "steps": len(transcript)}
    )


FORWARD_STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("forward_reformulate", traced_strategy("forward_reformulate", answer_reformulate)),
        Strategy("forward_reflect", traced_strategy("forward_reflect", answer_reflect)),
        Strategy("forward_react", traced_strategy("forward_react", answer_react)),
    )
}
"""The forward-reasoning baselines (no graph), as registered in ``graphs.strategies.registry.STRATEGIES``."""
