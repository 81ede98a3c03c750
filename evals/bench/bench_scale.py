"""Localization and topic-update latency at 1k, 10k and 100k synthetic events in one namespace, with memory used.

Events get clustered synthetic vectors (no embedder) and are written through ``store.commit`` in batches.
Usage: ``python -m evals.bench.bench_scale [--sizes 1000,10000,100000]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from logicmap.evals.common import fresh_resources, machine_line, peak_rss_mb, print_table, rss_mb
from logicmap.memory.indexes.graph import EventGraph

__all__ = ["SyntheticMemory", "localize", "main"]

DIMENSIONS = 384  # MiniLM's and the hashing embedder's width
EVENTS_PER_SESSION = 10
CENTERS = 50
# Noise that puts an event at cosine ~0.7 to its topic centre, as MiniLM event summaries about one topic are.
NOISE = 0.052
WORDS = (
    "dog walk park coffee hospital shift marathon race pottery class move city sister dinner sushi "
    "train trip beach book movie garden job interview vet appointment birthday party recipe"
).split()


class SyntheticMemory:
    """Grows one namespace with synthetic sessions of events, relations chaining them, and topics."""

    def __init__(self, resources: Any, namespace: str, seed: int = 0) -> None:
        self.resources, self.namespace = resources, namespace
        self.rng = np.random.default_rng(seed)
        centers = self.rng.normal(size=(CENTERS, DIMENSIONS)).astype(np.float32)
        self.centers = centers / np.linalg.norm(centers, axis=1, keepdims=True)
        self.count = 0
        self.last_event: str | None = None

    def vectors(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = self.rng.integers(0, CENTERS, size=n)
        noisy = self.centers[labels] + self.rng.normal(scale=NOISE, size=(n, DIMENSIONS)).astype(np.float32)
        return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32), labels

    def session_records(self, n_events: int) -> tuple[list[Any], np.ndarray, list[Any]]:
        """``n_events`` new events (whole sessions), their vectors and the relations that chain them."""
        from logicmap.memory.records.records import Event, Relation, event_id, relation_id

        vectors, labels = self.vectors(n_events)
        events, relations = [], []
        for i in range(n_events):
            index = self.count + i
            session = f"S{index // EVENTS_PER_SESSION + 1}"
            eid = event_id(session, index % EVENTS_PER_SESSION + 1)
            words = " ".join(self.rng.choice(WORDS, size=6))
            events.append(
                Event(
                    id=eid,
                    namespace=self.namespace,
                    session_id=session,
                    order=index,
                    summary=f"Synthetic event {index} on topic {labels[i]}: {words}.",
                    participants=["Maya", "Leo"],
                    sessions=[session],
                    source="heuristic",
                    time=None,
                    time_phrase=None,
                )
            )
            if self.last_event is not None:
                rid = relation_id(self.last_event, "temporal_before", eid)
                relations.append(
                    Relation(
                        id=rid,
                        namespace=self.namespace,
                        source=self.last_event,
                        target=eid,
                        label="temporal_before",
                        session_id=session,
                    )
                )
            self.last_event = eid
        self.count += n_events
        return events, vectors, relations

    def grow(self, target: int, batch: int) -> tuple[float, int]:
        """Write events until the namespace holds ``target``; returns seconds spent and events written."""
        from logicmap.memory.store import ChangeSet

        store = self.resources.store
        started, written = time.perf_counter(), 0
        while self.count < target:
            n = min(batch, target - self.count)
            events, vectors, relations = self.session_records(n)
            base = store.manifest(self.namespace).generation
            store.commit(
                ChangeSet(
                    namespace=self.namespace,
                    base_generation=base,
                    events=events,
                    event_vectors=vectors.tolist(),
                    relations=relations,
                )
            )
            written += n
        return time.perf_counter() - started, written


def localize(graph: Any, query: np.ndarray, top_k: int = 5, top_p: int = 5) -> list[str]:
    """What compass's localize node computes without an LLM: dense ranking of every event, the top k,
    and the best event of each of the first p topics."""
    sims = graph.similarities(query)
    ranking = graph.ranked(sims)
    top = ranking.head(top_k)
    return list(dict.fromkeys([*top, *graph.topic_leaders(ranking, top_p)]))


def measure(memory: SyntheticMemory, *, repeats: int, compass: Any, recluster: bool) -> dict[str, Any]:
    """Latencies at the namespace's current size."""
    from logicmap.memory.indexes.topics import TopicLayer
    from logicmap.memory.store import ChangeSet

    store, ns = memory.resources.store, memory.namespace
    row: dict[str, Any] = {"events": memory.count}
    # Topics: one full re-clustering (what every T-th ingest step does), committed so localization sees them.
    snapshot = store.snapshot(ns)
    layer = TopicLayer()
    vectors = dict(snapshot.event_vectors)
    if recluster or not snapshot.topics:
        started = time.perf_counter()
        topics = layer.recluster(ns, vectors)
        row["recluster_s"] = time.perf_counter() - started
        retired = [t for t in snapshot.topics if t not in {x.id for x in topics}]
        store.commit(
            ChangeSet(
                namespace=ns,
                base_generation=snapshot.generation,
                topics=topics,
                retire={"topics": retired},
                topic_steps=1,
            )
        )
    del vectors  # the bench's own copy: memory is measured for what the store and its readers hold
    # A query after a write reads the new generation: a delta on the cached snapshot, then the graph build.
    started = time.perf_counter()
    snapshot = store.snapshot(ns)
    row["snapshot_s"] = time.perf_counter() - started
    # What a fresh process pays: the whole namespace read cold.
    store._snapshots.clear()
    started = time.perf_counter()
    snapshot = store.snapshot(ns)
    row["cold_snapshot_s"] = time.perf_counter() - started
    started = time.perf_counter()
    graph = EventGraph.of(snapshot)
    row["graph_s"] = time.perf_counter() - started
    row["topics"] = len(snapshot.topics)
    row["rss_mb"] = rss_mb()
    queries, _ = memory.vectors(repeats)
    times = []
    for q in queries:
        started = time.perf_counter()
        localize(graph, q)
        times.append(time.perf_counter() - started)
    row["localize_ms"] = statistics.median(times) * 1000
    times = []
    for q in queries:
        started = time.perf_counter()
        graph.top_k(q, 5)
        times.append(time.perf_counter() - started)
    row["top_k_ms"] = statistics.median(times) * 1000
    # Topic update for one new session of events (incremental step, no re-clustering), measured without writing.
    new_events, new_vectors, _ = memory.session_records(EVENTS_PER_SESSION)
    memory.count -= EVENTS_PER_SESSION  # not written: the next session reuses the ids
    memory.last_event = graph.ids[-1] if graph.ids else None
    all_vectors = {**snapshot.event_vectors, **{e.id: v for e, v in zip(new_events, new_vectors, strict=True)}}
    times = []
    for _ in range(max(1, repeats // 4)):
        started = time.perf_counter()
        layer.update(ns, snapshot.topics, all_vectors, [e.id for e in new_events], steps=1)
        times.append(time.perf_counter() - started)
    row["topic_update_ms"] = statistics.median(times) * 1000
    if compass is not None:
        times = []
        for i in range(max(1, repeats // 4)):
            started = time.perf_counter()
            compass(
                f"What happened with the {WORDS[i % len(WORDS)]} and the {WORDS[(3 * i + 5) % len(WORDS)]}?",
                ns,
                resources=memory.resources,
                policy="heuristic",
            )
            times.append(time.perf_counter() - started)
        row["compass_ms"] = statistics.median(times) * 1000
    row["peak_rss_mb"] = peak_rss_mb()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--batch", type=int, default=5000, help="events per commit while growing")
    parser.add_argument("--repeats", type=int, default=20, help="queries per latency median")
    parser.add_argument("--no-recluster", action="store_true", help="skip the full re-clustering at each size")
    parser.add_argument("--data-dir", help="keep the memory here (default: a temporary directory, removed)")
    parser.add_argument("--threads", type=int, help="BLAS/OpenMP threads (default: the libraries' own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(machine_line() + (f"; BLAS threads {args.threads}" if args.threads else "; BLAS threads: library default"))
    print(
        f"synthetic events: {DIMENSIONS}-d vectors around {CENTERS} centres, sessions of {EVENTS_PER_SESSION}, "
        "one temporal_before chain; localization = compass's no-LLM localize step\n",
        flush=True,
    )
    try:
        from logicmap.graphs.strategies.registry import strategy_function

        compass = strategy_function("compass")
    except (ImportError, AttributeError) as exc:
        compass = None
        print(f"compass unavailable ({exc}): end-to-end query latency not measured")
    directory = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="logicmap-scale-"))
    resources = fresh_resources(directory, embeddings="hashing")
    memory = SyntheticMemory(resources, "bench.scale")
    rows = []
    try:
        baseline = rss_mb()
        for size in sizes:
            seconds, written = memory.grow(size, args.batch)
            row = measure(memory, repeats=args.repeats, compass=compass, recluster=not args.no_recluster)
            row["write_per_s"] = written / seconds if seconds else 0.0
            rows.append(row)
            print(
                f"  {size} events: wrote {written} in {seconds:.1f}s; localize {row['localize_ms']:.1f} ms; "
                f"RSS {row['rss_mb']:.0f} MB",
                flush=True,
            )
    finally:
        if resources.store_ is not None:
            resources.store_.close()
        if not args.data_dir:
            shutil.rmtree(directory, ignore_errors=True)
    print()
    header = [
        "events",
        "topics",
        "write events/s",
        "re-cluster s",
        "snapshot after a commit s",
        "cold snapshot s",
        "graph build s",
        "localize ms",
        "top-k ms",
        "topic update ms (10 events)",
        "compass query ms (no LLM)",
        "RSS MB",
        "peak RSS MB",
    ]
    print_table(
        header,
        [
            [
                r["events"],
                r["topics"],
                f"{r['write_per_s']:.0f}",
                f"{r.get('recluster_s', 0):.2f}",
                f"{r['snapshot_s']:.2f}",
                f"{r['cold_snapshot_s']:.2f}",
                f"{r['graph_s']:.2f}",
                f"{r['localize_ms']:.2f}",
                f"{r['top_k_ms']:.2f}",
                f"{r['topic_update_ms']:.2f}",
                f"{r['compass_ms']:.1f}" if "compass_ms" in r else "n/a",
                f"{r['rss_mb']:.0f}",
                f"{r['peak_rss_mb']:.0f}",
            ]
            for r in rows
        ],
    )
    print(f"\nRSS before loading memory: {baseline:.0f} MB; medians over {args.repeats} localizations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
