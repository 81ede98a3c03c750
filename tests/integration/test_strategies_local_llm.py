"""Every strategy end to end on the real local model over HTTP: ingest two sample sessions, one question each.

A 135M model fails often; what is checked is the contract: typed results, recorded fallbacks, no crash.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logicmap.agents.base import FallbackRecord
from logicmap.agents.local_llm import LocalLLMServer
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
from logicmap.graphs.strategies.registry import STRATEGIES, strategy_function
from logicmap.memory.files.loaders import Conversation

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAMESPACE = "sample"
SESSIONS = 2  # the model does ~35 tokens/s: two sessions keep ingestion within a few minutes
QUESTIONS = {
    "compass": "What is the name of Maya's dog?",
    "goalmem": "What food does Leo say is his favourite?",
    "real": "When did Maya adopt Biscuit?",
    "reconstruct": "Where did Maya work before moving?",
    "dense": "What drink did Maya have at the cafe she visited in March 2023?",
    "bm25": "What is the name of Maya's dog?",
}
# Small budgets: one question per strategy, bounded time (names a strategy does not know are dropped).
BUDGETS = {
    "compass": {"max_steps": 1, "max_refinements": 0, "explorers": 2},
    "goalmem": {"max_breadth": 1, "max_depth": 1},
    "real": {"beam_width": 2, "depth": 1},
    "reconstruct": {"max_turns": 2, "max_tool_calls_per_turn": 2},
    "dense": {"k": 5},
    "bm25": {"k": 5},
}
DIA_ID = re.compile(r"^D\d+:\d+$")


def _module_exists(strategy: str) -> bool:
    return strategy in STRATEGIES


def _budgets(strategy: str) -> dict[str, object]:
    wanted = BUDGETS.get(strategy, {})
    graph = STRATEGIES[strategy].graph
    schema = getattr(getattr(graph, "builder", None), "context_schema", None)
    if schema is not None and dataclasses.is_dataclass(schema):
        names = {f.name for f in dataclasses.fields(schema)}
        return {k: v for k, v in wanted.items() if k in names}
    return {k: v for k, v in wanted.items() if k == "k"}


@pytest.fixture(scope="module")
def llm_memory(
    local_llm: LocalLLMServer, sample: Conversation, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Resources, object]]:
    """The first two sample sessions ingested with the ``llm`` policy through the local server, MiniLM embeddings."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    settings = local_llm.settings(data_dir=Path(tmp_path_factory.mktemp("llm-memory")), embedding_provider="minilm")
    resources = Resources(settings=settings)
    resources.llm_ = local_llm.chat_model(max_tokens=256)
    conversation = sample.model_copy(update={"sessions": sample.sessions[:SESSIONS]})
    started = time.perf_counter()
    report = ingest_conversation(conversation, NAMESPACE, resources=resources, policy="llm")
    report_time = time.perf_counter() - started
    yield resources, (report, report_time)
    if resources.store_ is not None:
        resources.store_.close()


def test_ingest_through_the_local_model_commits_every_session(
    llm_memory: tuple[Resources, object], sample: Conversation
) -> None:
    resources, (report, _) = llm_memory
    assert [s.session_id for s in report.sessions] == ["S1", "S2"]
    assert all(not s.skipped and s.policy == "llm" and s.events >= 1 for s in report.sessions)
    # Real HTTP calls with the server's own token counts.
    assert report.cost.llm_calls >= 2 * SESSIONS and not report.cost.tokens_estimated
    for fallback in report.fallbacks:
        assert isinstance(fallback, FallbackRecord) and fallback.role and fallback.reason
    snapshot = resources.store.snapshot(NAMESPACE)
    expected = {t.dia_id for session in sample.sessions[:SESSIONS] for t in session.turns}
    assert set(snapshot.turns) == expected
    # No turn is lost, even where a role fell back: every turn is cited by some event.
    assert {t for e in snapshot.events.values() for t in e.turn_ids} == expected


@pytest.mark.parametrize("strategy", sorted(QUESTIONS))
def test_one_question_per_strategy_over_http(llm_memory: tuple[Resources, object], strategy: str) -> None:
    if strategy not in STRATEGIES or not _module_exists(strategy):
        pytest.skip(f"strategy {strategy!r} has no module yet")
    resources, _ = llm_memory
    function = strategy_function(strategy)
    question = QUESTIONS[strategy]
    result = function(question, NAMESPACE, resources=resources, policy="llm", **_budgets(strategy))
    assert isinstance(result, AnswerResult)
    assert result.strategy == strategy and result.namespace == NAMESPACE and result.question == question
    assert isinstance(result.answer, str)
    known_turns = set(resources.store.snapshot(NAMESPACE).turns)
    for item in result.evidence:
        assert isinstance(item, EvidenceItem)
        assert set(item.turn_ids) <= known_turns, (strategy, item)
    assert all(DIA_ID.match(t) for t in result.cited_turns())
    for fallback in result.fallbacks:
        assert isinstance(fallback, FallbackRecord) and fallback.role and fallback.reason
        if fallback.reason.startswith("invalid model output"):
            assert fallback.errors  # what the model got wrong is kept
    # The LLM was really asked (or its absence recorded): calls carry the server's token counts.
    if result.cost.llm_calls:
        assert result.cost.prompt_tokens > 0 and not result.cost.tokens_estimated
    else:
        assert strategy in ("dense", "bm25") or result.fallbacks, f"{strategy} neither called the model nor fell back"
