"""The storage backends side by side, in one run (issue 39's ``bench_backends``), on embedded Chroma, the
in-process store, with ``--chroma-server`` a Chroma server started for the run, and with ``--postgres-url``
PostgreSQL (new namespaces there: nothing is touched). No LLM, hashing embedder.

1. One conversation (the bundled sample, or ``--file`` and ``--conversation``), ``--repeat`` times: ingest, a
   ``rerank`` answer to each of its first ``--questions`` questions, a new store's first snapshot and a cached one.
2. ``LogicMapStore`` at ``--store-sizes`` items (one-turn items, built as ``bench_store`` builds them: the first
   ``--store-real`` by ``put``, the rest bulk-committed): ``search(query)`` and ``put`` (new key) p50/p95, and the
   port's vector ``query`` (k = 10; on PostgreSQL the SQL/HNSW search, elsewhere the exact search over the
   snapshot).
3. ``--writers`` writers racing for one namespace (``bench_writers``' writers: threads on embedded Chroma,
   processes on the Chroma server and PostgreSQL, each process warmed by an ingest of its own before the start),
   ``--sessions`` sessions of 4 turns each: sessions/s, lost commits (retries) per writer, and whether every
   session was stored.

Usage: ``python -m logicmap.evals.bench.bench_backends [--postgres-url postgresql://...] [--chroma-server]
[--repeat 2] [--file F --conversation conv-26] [--questions 20] [--store-sizes 1000,10000] [--writers 1,2,4,8]``
(``--repeat 0``, ``--store-sizes ''`` or ``--writers ''`` leave a part out).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from logicmap.evals.common import machine_line, print_table

__all__ = ["main", "measure", "measure_store", "measure_writers"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"


def measure(settings: Any, sample: Any, questions: int) -> list[str]:
    """Ingest seconds, ms per ``rerank`` answer, a new store's first snapshot ms, a cached snapshot ms."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.graphs.strategies.registry import answer

    namespace = f"bench-{random.randrange(16**8):08x}"
    res = Resources(settings=settings)
    res.llm_ = None
    try:
        started = time.perf_counter()
        ingest_conversation(sample, namespace, resources=res, policy="heuristic")
        ingest = time.perf_counter() - started
        started = time.perf_counter()
        asked = sample.qa[:questions]
        for qa in asked:
            answer("rerank", qa.question, namespace, resources=res, policy="heuristic")
        per_answer = (time.perf_counter() - started) / max(1, len(asked))
    finally:
        res.store.close()
    fresh = Resources(settings=settings)
    try:
        started = time.perf_counter()
        fresh.store.snapshot(namespace)
        first = time.perf_counter() - started
        started = time.perf_counter()
        fresh.store.snapshot(namespace)
        cached = time.perf_counter() - started
    finally:
        fresh.store.close()
    return [f"{ingest:.2f}", f"{per_answer * 1000:.1f}", f"{first * 1000:.1f}", f"{cached * 1000:.2f}"]


def measure_store(settings: Any, size: int, *, queries: int, puts: int, real: int) -> list[list[Any]]:
    """``[operation, calls, p50 ms, p95 ms]`` of ``LogicMapStore`` search and put and the port's ``query`` on a new
    namespace of ``size`` items."""
    from langgraph.store.base import PutOp

    from logicmap.evals.bench.bench_store import _bulk_items, _percentiles, _text, _timed
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.graphs.surfaces.basestore import LogicMapStore
    from logicmap.memory.records.items import namespace_of

    namespace = ("bench", f"s{size}-{random.randrange(16**8):08x}")
    res = Resources(settings=settings)
    res.llm_ = None
    store = LogicMapStore(resources=res, policy="heuristic")
    rng = np.random.default_rng(size)
    real = min(real, size)
    try:
        store.batch([PutOp(namespace, f"item-{i}", {"content": _text(rng, i), "n": i}) for i in range(real)])
        _bulk_items(res, real, size, rng, namespace)
        store.put(namespace, "first", {"content": "The first note after the bulk load."})  # clusters every event
        store.search(namespace, query="warm up", limit=10)
        texts = [_text(np.random.default_rng(10_000 + i), (i * 7) % size) for i in range(queries)]
        vectors = res.embeddings.embed_documents(texts)
        rows = []
        for what, times in (
            ("search(query)", _timed(lambda i: store.search(namespace, query=texts[i], limit=10), queries)),
            (
                "put (new key)",
                _timed(lambda i: store.put(namespace, f"new-{i}", {"content": f"A new note {i}."}), puts),
            ),
            (
                "port query (turns, k=10)",
                _timed(lambda i: res.store.query(namespace_of(namespace), "turns", vectors[i], 10), queries),
            ),
        ):
            p50, p95 = _percentiles(times)
            rows.append([what, len(times), f"{p50:.1f}", f"{p95:.1f}"])
        return rows
    finally:
        store.close()  # its consolidator stops before the memory store closes under it
        res.store.close()


def measure_writers(mode: str, writers: int, sessions: int, root: Path, settings: Any) -> list[Any]:
    """``bench_writers``' race of ``writers`` writers on one namespace (threads on embedded Chroma, else warmed
    processes: ``_race``): sessions/s, lost commits (retries) per writer, all sessions stored?"""
    from logicmap.evals.bench import bench_writers

    if mode == "chroma (embedded)":
        got = bench_writers._embedded(writers, sessions, root)
    else:
        got = _race(writers, sessions, root / f"{mode.replace(' ', '-')}-{writers}", settings)
    return [got["sessions_per_s"], got["lost_commits_per_writer"], got["finished"], got["wall_s"]]


def _race(writers: int, sessions: int, work: Path, settings: Any) -> dict[str, Any]:
    """``writers`` processes on the store ``settings`` names, each warmed by an ingest of its own (a process's
    first ingest pays seconds of first-use costs, which would otherwise be most of what is timed), then started
    together on one new namespace and timed to the last writer's end (``bench_writers._processes`` times the first
    ingest and the processes' exits too)."""
    import json
    import os
    import subprocess

    from logicmap.evals.bench.bench_writers import _jobs, _summary
    from logicmap.memory.store import open_store

    namespace = f"shared-{writers}-{random.randrange(16**8):08x}"
    work.mkdir()
    go = work / "go"
    env = {
        **os.environ,
        "LOGICMAP_STORE_URL": settings.store_url or "",
        "LOGICMAP_CHROMA_HOST": settings.chroma_host or "",
        "LOGICMAP_CHROMA_PORT": str(settings.chroma_port),
        "LOGICMAP_EMBEDDING_PROVIDER": "hashing",
        "LOGICMAP_CHAT_MODEL": "",
    }
    env = {k: v for k, v in env.items() if v != ""}
    procs, outs = [], []
    for w, conversation in enumerate(_jobs(writers, sessions)):
        file, out = work / f"w{w}.json", work / f"w{w}.out"
        file.write_text(conversation.model_dump_json())
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "logicmap.evals.bench.bench_backends",
                    "--writer",
                    str(file),
                    namespace,
                    str(go),
                    str(out),
                ],
                env=env,
            )
        )
        outs.append(out)
    while not all(Path(str(o) + ".ready").exists() or p.poll() is not None for o, p in zip(outs, procs)):
        time.sleep(0.05)
    started = time.time()
    go.touch()
    for p in procs:
        p.wait()
    reports: list[dict[str, Any]] = [
        json.loads(o.read_text()) if o.exists() else {"ok": False, "error": "crashed"} for o in outs
    ]
    wall = max(float(r.get("finished", time.time())) for r in reports) - started  # the last commit, not the exits
    store = open_store(settings)
    try:
        stored = len(store.manifest(namespace).sessions)
    finally:
        store.close()
    return _summary(reports, writers * sessions, stored, wall)


def _writer(file: str, namespace: str, go: str, out: str) -> int:
    """One writer process of ``_race``: an ingest into a namespace of its own, then, at the start signal, the
    file's conversation into ``namespace``; its report (with the time it finished, so a process's exit is not
    timed) in ``out``."""
    import json
    import os

    from logicmap.evals.bench.bench_writers import writer_conversation
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.memory.files.loaders import Conversation

    res = Resources()
    res.llm_ = None
    ingest_conversation(writer_conversation(99, 1, 1), f"warm-{os.getpid()}", resources=res, policy="heuristic")
    conversation = Conversation.model_validate_json(Path(file).read_text())
    res.store.manifest(namespace)
    Path(out + ".ready").touch()
    while not Path(go).exists():
        time.sleep(0.005)
    try:
        report = ingest_conversation(conversation, namespace, resources=res, policy="heuristic")
        result = {"ok": True, "waits": [(s.conflicts, s.waited_s) for s in report.sessions]}
    except Exception as exc:  # the parent counts it
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    result["finished"] = time.time()
    Path(out).write_text(json.dumps(result))
    res.store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    from logicmap.settings import LogicMapSettings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--postgres-url", help="also measure PostgreSQL, in this database")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--file", type=Path, default=SAMPLE, help="a conversation file (default: the sample)")
    parser.add_argument("--conversation", help="the conversation's id in the file (default: its first)")
    parser.add_argument("--questions", type=int, default=20, help="questions answered (its first N)")
    parser.add_argument("--chroma-server", action="store_true", help="also measure a Chroma server (started here)")
    parser.add_argument("--store-sizes", default="1000", help="LogicMapStore items per namespace ('': none)")
    parser.add_argument("--store-queries", type=int, default=30, help="searches and port queries timed per size")
    parser.add_argument("--store-puts", type=int, default=10, help="puts timed per size")
    parser.add_argument("--store-real", type=int, default=20, help="items written through put before the bulk load")
    parser.add_argument("--writers", default="1,2,4,8", help="writer counts ('': none)")
    parser.add_argument("--sessions", type=int, default=3, help="sessions of 4 turns per writer")
    parser.add_argument("--writer", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        return _writer(*args.writer)
    sizes = [int(n) for n in args.store_sizes.split(",") if n.strip()]
    counts = [int(n) for n in args.writers.split(",") if n.strip()]
    from logicmap.memory.files.loaders import load_conversations

    conversations = load_conversations(args.file)
    chosen = [c for c in conversations if args.conversation in (None, c.conversation_id)]
    if not chosen:
        parser.error(f"no conversation {args.conversation!r} in {args.file}")
    sample = chosen[0]
    print(machine_line())
    turns = sum(len(s.turns) for s in sample.sessions)
    print(f"{sample.conversation_id}: {len(sample.sessions)} sessions, {turns} turns; no LLM, hashing embedder")
    rows: list[list[Any]] = []
    store_rows: list[list[Any]] = []
    writer_rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        chroma: Any = None
        port = 0
        try:
            if args.chroma_server:
                from logicmap.evals.bench.bench_writers import _start_chroma

                chroma, port = _start_chroma(Path(tmp))
            server = (
                LogicMapSettings(
                    chroma_host="127.0.0.1", chroma_port=port, store_url=None, embedding_provider="hashing"
                )
                if chroma is not None
                else None
            )
            _sample_part(args, sample, Path(tmp), rows, server)
            stores: list[tuple[str, Any]] = [
                (
                    "chroma (embedded)",
                    LogicMapSettings(data_dir=Path(tmp) / "store-chroma", store_url=None, embedding_provider="hashing"),
                ),
                ("in process", LogicMapSettings(store_url="memory://bench-store", embedding_provider="hashing")),
            ]
            if server is not None:
                stores.append(("chroma server", server))
            if args.postgres_url:
                stores.append(
                    ("postgresql", LogicMapSettings(store_url=args.postgres_url, embedding_provider="hashing"))
                )
            for size in sizes:
                for name, settings in stores:
                    for got in measure_store(
                        settings, size, queries=args.store_queries, puts=args.store_puts, real=args.store_real
                    ):
                        store_rows.append([name, size, *got])
                        print(f"  {store_rows[-1]}", flush=True)
            modes = [(name, settings) for name, settings in stores if name != "in process"]
            if counts:
                from logicmap.evals.bench.bench_writers import _warm

                _warm(Path(tmp))
            for mode, settings in modes:
                for n in counts:
                    writer_rows.append([mode, n, *measure_writers(mode, n, args.sessions, Path(tmp), settings)])
                    print(f"  {writer_rows[-1]}", flush=True)
        finally:
            if chroma is not None:
                chroma.terminate()
                chroma.wait(timeout=30)
    if rows:
        print_table(
            ["backend", "run", "ingest s", "rerank ms / question", "first snapshot ms", "cached snapshot ms"], rows
        )
    if store_rows:
        print_table(["backend", "items", "operation", "calls", "p50 ms", "p95 ms"], store_rows)
    if writer_rows:
        print(f"writers: {args.sessions} sessions of 4 turns each, one namespace")
        print_table(
            ["backend", "writers", "sessions/s", "lost commits (retries) / writer", "all stored", "wall s"], writer_rows
        )
    return 0


def _sample_part(args: Any, sample: Any, tmp: Path, rows: list[list[Any]], server: Any) -> None:
    """Part 1: the conversation on each backend, ``--repeat`` times."""
    from logicmap.settings import LogicMapSettings

    for run in range(args.repeat):
        backends: list[tuple[str, Any]] = [
            (
                "chroma (embedded)",
                LogicMapSettings(data_dir=tmp / f"chroma-{run}", store_url=None, embedding_provider="hashing"),
            ),
            ("in process", LogicMapSettings(store_url=f"memory://bench-{run}", embedding_provider="hashing")),
        ]
        if server is not None:
            backends.append(("chroma server", server))
        if args.postgres_url:
            backends.append(("postgresql", LogicMapSettings(store_url=args.postgres_url, embedding_provider="hashing")))
        for name, settings in backends:
            rows.append([name, run + 1, *measure(settings, sample, args.questions)])
            print(f"  {rows[-1]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
