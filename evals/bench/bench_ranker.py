"""Cost of the graph-feature reranker (``memory.retrieval.ranking``) at 10k and 100k synthetic turns in one namespace.

Turns (ten per event, each event in a topic) get clustered synthetic vectors (no embedder) and are written
through ``store.commit``. Printed: the per-snapshot arrays the reranker builds once (a new generation pays
them again: feature layout and the BM25 turn index) and the median time to score every turn for one question.
Usage: ``python -m logicmap.evals.bench.bench_ranker [--sizes 10000,100000]``.
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

from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["main", "measure"]

DIMENSIONS = 384
TURNS_PER_EVENT = 10
TOPICS = 50
WORDS = (
    "dog walk park coffee hospital shift marathon race pottery class move city sister dinner sushi "
    "train trip beach book movie garden job interview vet appointment birthday party recipe"
).split()


def _unit(x: np.ndarray) -> np.ndarray:
    unit: np.ndarray = (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
    return unit


def write_namespace(resources: Any, namespace: str, n_turns: int, batch: int = 5000, seed: int = 0) -> None:
    """``n_turns`` synthetic turns in events of ten, events in ``TOPICS`` topics, committed in batches."""
    from logicmap.memory.records.records import Event, Topic, Turn
    from logicmap.memory.store import ChangeSet

    rng = np.random.default_rng(seed)
    centres = _unit(rng.normal(size=(TOPICS, DIMENSIONS)))
    members: dict[int, list[str]] = {}
    for start in range(0, n_turns, batch):
        turns, turn_vectors, events, event_vectors = [], [], [], []
        for first in range(start, min(start + batch, n_turns), TURNS_PER_EVENT):
            topic = int(rng.integers(TOPICS))
            event_vector = _unit(centres[topic] + rng.normal(scale=0.05, size=DIMENSIONS))
            session = f"S{first // 100 + 1}"
            ids = [f"D{first // 100 + 1}:{i % 100 + 1}" for i in range(first, min(first + TURNS_PER_EVENT, n_turns))]
            for i, tid in enumerate(ids):
                turns.append(
                    Turn(
                        namespace=namespace,
                        session_id=session,
                        dia_id=tid,
                        speaker=("Maya", "Leo")[i % 2],
                        text=" ".join(rng.choice(WORDS, size=8)) + ".",
                        position=first + i,
                        source_dia_id=None,
                        item=None,
                    )
                )
                turn_vectors.append(_unit(event_vector + rng.normal(scale=0.05, size=DIMENSIONS)).tolist())
            eid = f"{session}-E{(first % 100) // TURNS_PER_EVENT + 1}"
            events.append(
                Event(
                    id=eid,
                    namespace=namespace,
                    session_id=session,
                    order=first // TURNS_PER_EVENT,
                    summary=" ".join(t.text for t in turns[-len(ids) :])[:200],
                    participants=["Maya", "Leo"],
                    turn_ids=ids,
                    time=None,
                    time_phrase=None,
                    source="llm",
                )
            )
            event_vectors.append(event_vector.tolist())
            members.setdefault(topic, []).append(eid)
        topics = [
            Topic(id=f"T{t}", namespace=namespace, centroid=centres[t].tolist(), members=list(m))
            for t, m in members.items()
        ]
        base = resources.store.manifest(namespace).generation
        resources.store.commit(
            ChangeSet(
                namespace=namespace,
                base_generation=base,
                turns=turns,
                turn_vectors=turn_vectors,
                events=events,
                event_vectors=event_vectors,
                topics=topics,
            )
        )


def measure(resources: Any, namespace: str, repeats: int) -> dict[str, float]:
    """Seconds to build the reranker's per-snapshot arrays, and the median ms to score every turn for a question."""
    from logicmap.memory.retrieval.ranking import default_ranker

    resources.store._snapshots.clear()  # a fresh snapshot: nothing derived from it yet
    snapshot = resources.store.snapshot(namespace)
    rng = np.random.default_rng(1)
    questions = [
        (f"When did Maya go to the {WORDS[i % len(WORDS)]}?", _unit(rng.normal(size=(2, DIMENSIONS))))
        for i in range(repeats + 1)
    ]
    ranker = default_ranker()
    started = time.perf_counter()
    ranker.scores(snapshot, *questions[0])
    first = time.perf_counter() - started
    times = []
    for question, readings in questions[1:]:
        started = time.perf_counter()
        ranker.scores(snapshot, question, readings)
        times.append(time.perf_counter() - started)
    per_question = statistics.median(times)
    return {"turns": len(snapshot.turns), "arrays_s": first - per_question, "question_ms": 1000 * per_question}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="turns per namespace, comma-separated")
    parser.add_argument("--repeats", type=int, default=20, help="questions per median")
    parser.add_argument("--data-dir", help="keep the memory here (default: a temporary directory, removed)")
    args = parser.parse_args(argv)
    print(machine_line())
    directory = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="logicmap-ranker-"))
    resources = fresh_resources(directory, embeddings="hashing")
    rows = []
    try:
        for size in sorted(int(s) for s in args.sizes.split(",")):
            started = time.perf_counter()
            write_namespace(resources, f"bench.ranker.{size}", size)
            print(f"  {size} turns written in {time.perf_counter() - started:.1f}s", flush=True)
            rows.append(measure(resources, f"bench.ranker.{size}", args.repeats))
    finally:
        if resources.store_ is not None:
            resources.store_.close()
        if not args.data_dir:
            shutil.rmtree(directory, ignore_errors=True)
    print()
    print_table(
        ["turns", "per-snapshot arrays s (once per generation)", "score every turn, ms per question"],
        [[r["turns"], f"{r['arrays_s']:.2f}", f"{r['question_ms']:.1f}"] for r in rows],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
