"""``LogicMapStore`` latency: ``search`` p50/p95 (query, query + filter, listing) and ``get``/``put`` at 1k and 10k items.

Each namespace holds N items of one turn each (so N items = N turns). The first ``--real`` items are written through
``LogicMapStore.batch`` (the ingest graph, no LLM); the rest are bulk-committed as the records such a put makes
(the item's turn with its ``Turn.item``, one event citing it, their vectors), in commits of 500, so building 10,000
items takes minutes instead of 10,000 ingest runs. Then, in a warm process: ``--queries`` searches with a query
(the graph-feature reranker over every turn), the same with a value filter, listings by recency, gets, and a few
single puts (ingest + commit) and replacing puts (forget + ingest).

Usage: ``python -m logicmap.evals.bench.bench_store [--sizes 1000,10000] [--queries 60] [--embeddings hashing]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from logicmap.evals.common import fresh_resources, machine_line, print_table, rss_mb

__all__ = ["main"]

NAMESPACE = ("bench", "user")
WORDS = (
    "dog walk park coffee hospital shift marathon race pottery class move city sister dinner sushi train trip "
    "beach book movie garden job interview vet appointment birthday party recipe violin tennis"
).split()


def _text(rng: np.random.Generator, i: int) -> str:
    words = " ".join(rng.choice(WORDS, size=7))
    return f"Memory {i}: I talked about {words} with token{i}."


def _bulk_items(
    res: Any, start: int, stop: int, rng: np.random.Generator, namespace: tuple[str, ...] = NAMESPACE
) -> None:
    """Commit items ``start..stop`` of ``namespace`` as the records a heuristic put of a one-turn value makes."""
    from logicmap.memory.records.items import item_session_id, namespace_of
    from logicmap.memory.records.records import Event, Turn, event_id
    from logicmap.memory.store import ChangeSet

    name, store = namespace_of(namespace), res.store
    for lo in range(start, stop, 500):
        hi = min(lo + 500, stop)
        now = datetime.now(UTC)
        turns, events = [], []
        for i in range(lo, hi):
            key, text = f"item-{i}", _text(rng, i)
            sid = item_session_id(key)
            item = {
                "key": key,
                "value": {"content": text, "n": i},
                "created_at": now.isoformat(),
                "updated_at": now.isoformat(),
                "indexed": True,
            }
            turns.append(
                Turn(
                    namespace=name,
                    session_id=sid,
                    dia_id=f"{sid}:1",
                    speaker="user",
                    text=text,
                    item=item,
                    session_time=now,
                    position=i,
                    source_dia_id=None,
                )
            )
            events.append(
                Event(
                    id=event_id(sid, 1),
                    namespace=name,
                    session_id=sid,
                    summary=text,
                    session_time=now,
                    order=i,
                    participants=["user"],
                    turn_ids=[f"{sid}:1"],
                    sessions=[sid],
                    source="heuristic",
                    time=None,
                    time_phrase=None,
                )
            )
        vectors = res.embeddings.embed_documents([t.text for t in turns])
        store.commit(
            ChangeSet(
                namespace=name,
                base_generation=store.manifest(name).generation,
                turns=turns,
                turn_vectors=vectors,
                events=events,
                event_vectors=vectors,
            )
        )


def _percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered) * 1000, p95 * 1000


def _timed(call: Any, n: int) -> list[float]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - started)
    return times


def measure(size: int, *, queries: int, real: int, embeddings: str, workdir: Path) -> list[list[Any]]:
    from langgraph.store.base import PutOp

    from logicmap.graphs.surfaces.basestore import LogicMapStore

    res = fresh_resources(workdir / f"n{size}", embeddings=embeddings)
    store = LogicMapStore(resources=res, policy="heuristic")
    rng = np.random.default_rng(size)
    real = min(real, size)
    started = time.perf_counter()
    store.batch([PutOp(NAMESPACE, f"item-{i}", {"content": _text(rng, i), "n": i}) for i in range(real)])
    put_build = time.perf_counter() - started
    started = time.perf_counter()
    _bulk_items(res, real, size, rng)
    bulk_build = time.perf_counter() - started
    store.search(NAMESPACE, query="warm up", limit=10)  # the snapshot and its derived arrays, once

    # Distinct questions for every timed row (a repeated question would meet warm per-question caches).
    def questions(row: int) -> list[str]:
        return [_text(np.random.default_rng(10_000 * (row + 1) + i), (i * 7 + row) % size) for i in range(queries)]

    texts, filtered, after = questions(0), questions(1), questions(2)
    rows = []

    def row(what: str, times: list[float]) -> None:
        p50, p95 = _percentiles(times)
        rows.append([size, what, len(times), f"{p50:.1f}", f"{p95:.1f}"])

    row("search(query)", _timed(lambda i: store.search(NAMESPACE, query=texts[i], limit=10), queries))
    row(
        "search(query, filter)",
        _timed(
            lambda i: store.search(NAMESPACE, query=filtered[i], filter={"n": {"$gte": size // 2}}, limit=10), queries
        ),
    )
    row("search() by recency", _timed(lambda i: store.search(NAMESPACE, limit=10, offset=i), queries))
    row("get", _timed(lambda i: store.get(NAMESPACE, f"item-{(i * 7919) % size}"), queries))
    # The bulk load commits no topics: the first put's ingest clusters every event (a real namespace has topics).
    row(
        "first put after the bulk load (clusters every event)",
        _timed(lambda i: store.put(NAMESPACE, "first", {"content": "The first note after the bulk load."}), 1),
    )
    row("put (new key)", _timed(lambda i: store.put(NAMESPACE, f"new-{i}", {"content": f"A new note {i}."}), 5))
    row("put (replace key)", _timed(lambda i: store.put(NAMESPACE, f"item-{i}", {"content": f"Replaced {i}."}), 5))
    row("search(query) after writes", _timed(lambda i: store.search(NAMESPACE, query=after[i], limit=10), queries))
    print(
        f"n={size}: built {real} items by put in {put_build:.1f}s, {size - real} by bulk commit in "
        f"{bulk_build:.1f}s; rss {rss_mb():.0f} MB",
        flush=True,
    )
    store.close()  # its consolidator stops before the memory store closes under it
    if res.store_ is not None:
        res.store_.close()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--real", type=int, default=100, help="items written through put before the bulk load")
    parser.add_argument("--embeddings", default="hashing", choices=["hashing", "minilm"])
    args = parser.parse_args(argv)
    print(machine_line())
    workdir = Path(tempfile.mkdtemp(prefix="bench-store-"))
    rows: list[list[Any]] = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            rows += measure(size, queries=args.queries, real=args.real, embeddings=args.embeddings, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(["items (= turns)", "operation", "calls", "p50 ms", "p95 ms"], rows)


if __name__ == "__main__":
    main()
