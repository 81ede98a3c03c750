"""The async API never blocks the event loop and never adds a thread per call.

An asyncio ticker counts 5 ms ticks while ``aanswer``, ``aingest_conversation``, ``aforget`` and the toolkit's async
tool bodies run concurrently on the real store: a blocked loop would count almost none. The threads alive during
many concurrent calls are the shared executor's few workers (``memory.runtime.blocking``), however many calls there are.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from logicmap.graphs.ingest.ingest import aingest_conversation, build_ingest_graph, ingest_conversation
from logicmap.graphs.strategies.registry import aanswer
from logicmap.graphs.writes.forget import aforget, alist_memories
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.memory.runtime.blocking import THREAD_PREFIX, blocking_executor
from logicmap.tools import create_memory_toolkit

TICK_S = 0.005
# Of the ticks a free loop would count. A loop blocked by the calls counts none or one tick in the whole call; a free
# loop on a busy 2-core machine (load 10, a worker thread holding the GIL between switches) counts 10-30%.
MIN_TICK_SHARE = 0.05


class Ticker:
    """Counts loop ticks and samples the live threads, until stopped.

    Besides the number of live threads, it keeps the peak number of threads started after it was made (the threads
    of the calls it measures, not those earlier tests left running): the shared executor's workers and the others.
    """

    def __init__(self) -> None:
        self.ticks = 0
        self.peak_threads = threading.active_count()
        self.peak_new_workers = self.peak_new_others = 0
        self._before = set(threading.enumerate())  # the Thread objects themselves: an ident can be reused
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(TICK_S)
            self.ticks += 1
            self._sample()

    def _sample(self) -> None:
        alive = threading.enumerate()
        self.peak_threads = max(self.peak_threads, len(alive))
        new = [t for t in alive if t not in self._before]
        workers = sum(t.name.startswith(THREAD_PREFIX) for t in new)
        self.peak_new_workers = max(self.peak_new_workers, workers)
        self.peak_new_others = max(self.peak_new_others, len(new) - workers)

    def stop(self) -> None:
        self._stop.set()


async def _measured(calls: list[Callable[[], Awaitable[Any]]]) -> tuple[list[Any], Ticker, float]:
    ticker = Ticker()
    task = asyncio.create_task(ticker.run())
    await asyncio.sleep(0)
    started = time.perf_counter()
    results = await asyncio.gather(*(call() for call in calls))
    elapsed = time.perf_counter() - started
    ticker.stop()
    await task
    return results, ticker, elapsed


def _assert_loop_ran(ticker: Ticker, elapsed: float) -> None:
    possible = elapsed / TICK_S
    assert ticker.ticks >= MIN_TICK_SHARE * possible, (
        f"the event loop ticked {ticker.ticks} times in {elapsed:.2f}s (a free loop: about {possible:.0f})"
    )


def _conversation(n_sessions: int) -> Conversation:
    sessions = [
        Session(
            session_id=f"S{i}",
            timestamp=f"2024-0{1 + i % 9}-01T10:00:00",
            timestamp_text="",
            turns=[
                RawTurn(dia_id=f"D{i}:1", speaker="Ana", text=f"I planted {i} olive trees in Evora."),
                RawTurn(dia_id=f"D{i}:2", speaker="Rui", text=f"Trees number {i} need water."),
            ],
        )
        for i in range(1, n_sessions + 1)
    ]
    return Conversation(conversation_id="async", speakers=["Ana", "Rui"], sessions=sessions)


def test_aanswer_keeps_the_loop_running_and_threads_bounded(ingested_sample: Any) -> None:
    res = ingested_sample
    workers = blocking_executor()._max_workers
    question = "What is the name of Maya's dog?"

    async def scenario() -> None:
        await aanswer("rerank", question, "sample", resources=res, policy="heuristic")  # warm: caches, executor
        baseline = threading.active_count()
        few, few_ticker, few_s = await _measured(
            [lambda: aanswer("rerank", question, "sample", resources=res, policy="heuristic")] * 2
        )
        many, many_ticker, many_s = await _measured(
            [lambda: aanswer("rerank", question, "sample", resources=res, policy="heuristic")] * 16
        )
        assert len({r.answer for r in few + many}) == 1  # every call answered, the same answer
        _assert_loop_ran(few_ticker, few_s)
        _assert_loop_ran(many_ticker, many_s)
        assert many_ticker.peak_threads <= baseline + workers, (baseline, many_ticker.peak_threads, workers)
        assert few_ticker.peak_threads <= baseline + workers
        names = {t.name for t in threading.enumerate()}
        assert sum(n.startswith(THREAD_PREFIX) for n in names) <= workers

    asyncio.run(scenario())


def test_aingest_aforget_and_async_tools_keep_the_loop_running(resources: Any) -> None:
    res = resources
    ingest_conversation(_conversation(2), "base", resources=res, policy="heuristic")
    toolkit = create_memory_toolkit("base", store=res.store, embeddings=res.embeddings)
    search = next(t for t in toolkit if t.name == "search_events")
    workers = blocking_executor()._max_workers
    branches = max(Counter(start for start, _ in build_ingest_graph().edges).values())  # facts, cues, r2

    async def scenario() -> None:
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: aingest_conversation(_conversation(6), "grower", resources=res, policy="heuristic"),
            *[lambda: search.ainvoke({"query": "olive trees"}) for _ in range(12)],
        ]
        results, ticker, elapsed = await _measured(calls)
        assert results[0].namespace == "grower" and len(results[0].sessions) == 6
        assert all("olive" in str(r).lower() for r in results[1:])
        _assert_loop_ran(ticker, elapsed)
        # Thirteen concurrent calls start at most the executor's workers, and besides them only the threads of
        # the one ingest run's parallel branches (LangGraph runs a superstep's nodes on a pool of its own).
        assert ticker.peak_new_workers <= workers, (ticker.peak_new_workers, workers)
        assert ticker.peak_new_others <= branches, (ticker.peak_new_others, branches)
        report, ticker, elapsed = await _measured(
            [lambda: aforget("grower", session_ids=["S1"], resources=res, purge=True)]
        )
        assert report[0].removed.get("turns") == 2
        page = await alist_memories("grower", resources=res, limit=100)
        assert {i["session_id"] for i in page.items} == {f"S{i}" for i in range(2, 7)}
        _assert_loop_ran(ticker, elapsed)

    asyncio.run(scenario())


def test_async_errors_arrive_as_the_sync_ones_do(ingested_sample: Any) -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        asyncio.run(aanswer("nope", "q", "sample", resources=ingested_sample))
    with pytest.raises(ValueError):
        asyncio.run(aingest_conversation(_conversation(1), "bad namespace!", resources=ingested_sample))
