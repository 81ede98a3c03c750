"""Bounded work per run: questions and chat messages above their size limits are refused in one line at every
entry, and every strategy honours the run deadline in its no-LLM work (it finishes, or stops with the deadline
error; never a long run). Outcomes are asserted, never times.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from logicmap.agents.provider import DeadlineExceeded, RunScope
from logicmap.graphs.chat.chatbot import ChatContext, build_chatbot_graph
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.runtime.result import AnswerResult
from logicmap.graphs.strategies.registry import STRATEGIES, answer, strategy_function
from logicmap.graphs.surfaces.cli import main as cli_main
from logicmap.memory.retrieval.retrieval import BM25Index
from logicmap.memory.runtime.deadline import RunDeadlineExceeded, check_deadline, deadline_scope
from logicmap.memory.runtime.input_limits import InputTooLargeError

STRATEGY_NAMES = ("compass", "rerank", "goalmem", "real", "reconstruct", "r2", "dense", "bm25")
GRAPHS = {
    "compass": "logicmap.graphs.strategies.compass",
    "rerank": "logicmap.graphs.strategies.rerank",
    "goalmem": "logicmap.graphs.strategies.goalmem",
    "real": "logicmap.graphs.strategies.real",
    "reconstruct": "logicmap.graphs.strategies.reconstruct",
    "r2": "logicmap.graphs.strategies.r2",
}
WORDS = (
    "when did Caroline go to the support group and what did Melanie paint last summer near the lake "
    'Sweden adoption pottery camping 2023 May 7 friends kids? & => ( ) " : \\'
).split()
QUESTIONS_PER_STRATEGY = 4
DEADLINES = (1e-6, 0.001, 0.01, 0.05)


def _question(rng: random.Random, length: int) -> str:
    words: list[str] = []
    size = 0
    while size <= length:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:length]


@pytest.fixture
def bounded(sample_memory: Resources) -> Resources:
    """The sample memory with its settings restored after each test (the tests change limits and deadline)."""
    saved = sample_memory.settings.model_copy()
    yield sample_memory
    for name in ("run_deadline_s", "max_question_chars", "max_message_chars"):
        setattr(sample_memory.settings, name, getattr(saved, name))


def test_the_eight_strategies_are_registered() -> None:
    assert set(STRATEGY_NAMES) <= set(STRATEGIES)


@pytest.mark.slow
def test_generated_questions_at_the_size_limit_with_tiny_deadlines_finish_or_stop_with_the_deadline_error(
    bounded: Resources,
) -> None:
    limit = bounded.settings.max_question_chars
    tried = passed = stopped = 0
    for strategy in STRATEGY_NAMES:
        rng = random.Random(f"bounds-{strategy}")
        for i in range(QUESTIONS_PER_STRATEGY):
            length = limit if i == 0 else rng.randint(limit - 400, limit)
            question = _question(rng, length)
            bounded.settings.run_deadline_s = DEADLINES[i % len(DEADLINES)]
            tried += 1
            try:
                result = answer(strategy, question, "sample", resources=bounded, policy="heuristic")
            except DeadlineExceeded as exc:
                message = str(exc)
                assert "\n" not in message and "deadline" in message and "LOGICMAP_RUN_DEADLINE_S" in message
                assert exc.kind == "deadline"  # the same error as a model call past the deadline
                stopped += 1
            else:
                assert isinstance(result, AnswerResult) and result.strategy in (strategy, "dense", "bm25")
            passed += 1
    print(
        f"size-limit questions with tiny deadlines: tried {tried}, passed {passed}, stopped by the deadline {stopped}"
    )
    assert tried == passed == len(STRATEGY_NAMES) * QUESTIONS_PER_STRATEGY
    assert stopped >= len(GRAPHS)  # a deadline already passed stops at least every graph strategy


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_question_over_the_limit_is_refused_in_one_line_by_answer_and_by_the_strategy_itself(
    bounded: Resources, strategy: str
) -> None:
    limit = bounded.settings.max_question_chars
    rng = random.Random(strategy)
    for length in (limit + 1, 2 * limit, 1_000_000):
        question = _question(rng, length)
        for call in (
            lambda q: answer(strategy, q, "sample", resources=bounded, policy="heuristic"),
            lambda q: strategy_function(strategy)(q, "sample", resources=bounded, policy="heuristic"),
        ):
            with pytest.raises(InputTooLargeError) as caught:
                call(question)
            message = str(caught.value)
            assert "\n" not in message and f"{length:,}" in message and "LOGICMAP_MAX_QUESTION_CHARS" in message
            assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("strategy", sorted(GRAPHS))
def test_each_strategy_graphs_input_is_bounded(bounded: Resources, strategy: str) -> None:
    """Studio and the API server invoke the compiled graph directly: the graph refuses the question itself."""
    import importlib

    module = importlib.import_module(GRAPHS[strategy])
    context = {"resources": bounded, "policy": "heuristic", "namespace": "sample"}
    big = "why " * (bounded.settings.max_question_chars // 4 + 1)
    with pytest.raises(InputTooLargeError, match=f"the {strategy} graph's input"):
        module.graph.invoke({"question": big}, context=context)


def test_the_limit_is_a_setting(bounded: Resources) -> None:
    bounded.settings.max_question_chars = 40
    with pytest.raises(InputTooLargeError, match="41 characters"):
        answer("bm25", "x" * 41, "sample", resources=bounded)
    assert isinstance(
        answer("bm25", "what did Melanie paint?", "sample", resources=bounded, policy="heuristic"), AnswerResult
    )


def test_cli_ask_with_a_question_over_the_limit_exits_2_with_one_line(bounded: Resources, capsys) -> None:
    data_dir = Path(bounded.settings.data_dir)
    code = cli_main(
        [
            "--data-dir",
            str(data_dir),
            "--embeddings",
            "hashing",
            "ask",
            "w" * 8001,
            "-n",
            "sample",
            "--strategy",
            "goalmem",
            "--policy",
            "heuristic",
        ]
    )
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "LOGICMAP_MAX_QUESTION_CHARS" in err[0], err


def test_the_chatbot_refuses_an_oversized_message_and_recalls_with_the_end_of_a_long_one(bounded: Resources) -> None:
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = ChatContext(namespace="sample", strategy="goalmem", policy="heuristic", ingest=False, resources=bounded)
    config = {"configurable": {"thread_id": "t"}}
    huge = "tell me " * (bounded.settings.max_message_chars // 8 + 1)
    with pytest.raises(InputTooLargeError, match="LOGICMAP_MAX_MESSAGE_CHARS"):
        bot.invoke({"messages": [HumanMessage(content=huge)]}, config, context=ctx)
    long = "filler words " * 1000 + "What did Melanie paint?"  # over the question limit, under the message limit
    out = bot.invoke(
        {"messages": [HumanMessage(content=long)]},
        {"configurable": {"thread_id": "u"}},
        context=replace(ctx, ingest=False),
    )
    assert out["recall"]["strategy"] == "goalmem" and out["messages"][-1].content


def test_no_llm_loops_check_the_deadline() -> None:
    """A long loop with its run's deadline passed stops inside the loop, with the run's deadline error."""
    scope = RunScope(deadline_s=0.5)
    scope.deadline = 0.0  # passed long ago (monotonic time)
    with deadline_scope(scope):
        with pytest.raises(DeadlineExceeded, match="while indexing turns for BM25"):
            BM25Index([f"turn {i} about pottery" for i in range(1000)])
        with pytest.raises(RunDeadlineExceeded):
            check_deadline("while testing")
    check_deadline("outside any run")  # no scope: no deadline
    BM25Index(["no deadline here"])


@pytest.mark.parametrize("strategy", sorted(GRAPHS))
def test_a_strategy_graph_invoked_directly_runs_within_the_deadline_and_leaves_no_scope_behind(
    bounded: Resources, strategy: str
) -> None:
    """Studio and the API server invoke the graph without ``answer()``: it takes the settings' deadline itself."""
    import importlib

    from logicmap.memory.runtime.deadline import current_deadline

    module = importlib.import_module(GRAPHS[strategy])
    context = {"resources": bounded, "policy": "heuristic", "namespace": "sample"}
    bounded.settings.run_deadline_s = 1e-6
    with pytest.raises(DeadlineExceeded):
        module.graph.invoke({"question": "what did Melanie paint?"}, context=context)
    assert current_deadline() is None
    bounded.settings.run_deadline_s = 0  # no limit: it answers
    assert module.graph.invoke({"question": "what did Melanie paint?"}, context=context)
    assert current_deadline() is None


def test_the_async_path_of_a_strategy_graph_honours_the_deadline_too(bounded: Resources) -> None:
    import asyncio

    from logicmap.graphs.strategies.compass import graph
    from logicmap.memory.runtime.deadline import current_deadline

    context = {"resources": bounded, "policy": "heuristic", "namespace": "sample"}
    bounded.settings.run_deadline_s = 1e-6
    with pytest.raises(DeadlineExceeded):
        asyncio.run(graph.ainvoke({"question": "what did Melanie paint?"}, context=context))
    with pytest.raises(InputTooLargeError):
        asyncio.run(graph.ainvoke({"question": "x" * 9000}, context=context))
    assert current_deadline() is None


@pytest.mark.parametrize("strategy", ["compass", "dense", "forward_reflect"])
def test_answer_checks_the_question_and_opens_the_run_scope_once(
    bounded: Resources, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One question, one run: ``answer()`` checks the question and opens the run's scope (retry policy, deadline);
    the strategy's run and its graph, inside that run, neither check it again nor open a scope of their own."""
    from logicmap.memory.runtime import input_limits

    checks: list[str] = []
    scopes: list[RunScope] = []
    limit, restart = input_limits._limit, RunScope.restart

    def counted_limit(settings: object, name: str) -> int:
        checks.append(name)
        return limit(settings, name)

    def counted_restart(scope: RunScope) -> None:
        scopes.append(scope)
        restart(scope)

    monkeypatch.setattr(input_limits, "_limit", counted_limit)
    monkeypatch.setattr(RunScope, "restart", counted_restart)
    result = answer(strategy, "what did Melanie paint?", "sample", resources=bounded, policy="heuristic")
    assert result.answer
    assert (checks.count("max_question_chars"), len(scopes)) == (1, 1)
