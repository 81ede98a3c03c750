"""Benchmark: offline embedder throughput (sentences per second), model load time and cache speed-up.

Usage: ``python -m evals.bench.bench_embeddings [--sentences 2000]``. Prints numbers; not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from logicmap.memory.files.loaders import load_conversations
from logicmap.memory.indexes.embeddings import CachedEmbeddings, MiniLMEmbeddings, limit_threads
from logicmap.memory.records.records import Turn

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--runtime", default="numpy", choices=["numpy", "torch"], help="LOGICMAP_EMBEDDING_RUNTIME")
    parser.add_argument("--threads", type=int, help="cap BLAS/OpenMP/torch threads (default: the libraries' choice)")
    args = parser.parse_args(argv)
    if args.threads:
        limit_threads(args.threads)
    conv = load_conversations(os.path.join(os.path.dirname(__file__), "..", "..", "data", "sample_conversation.json"))[
        0
    ]
    base = [
        Turn(
            namespace="b",
            session_id=s.session_id,
            dia_id=t.dia_id,
            speaker=t.speaker,
            text=t.text,
            position=0,
            source_dia_id=None,
            item=None,
        ).render()
        for s in conv.sessions
        for t in s.turns
    ]
    texts = [f"{base[i % len(base)]} (variant {i})" for i in range(args.sentences)]
    model = MiniLMEmbeddings(batch_size=args.batch_size, runtime=args.runtime, threads=args.threads)
    started = time.perf_counter()
    model.embed_documents(["warm up"])
    load = time.perf_counter() - started
    started = time.perf_counter()
    model.embed_documents(texts)
    elapsed = time.perf_counter() - started
    cached = CachedEmbeddings(model)
    cached.embed_documents(texts[:500])
    started = time.perf_counter()
    cached.embed_documents(texts[:500])
    hit = time.perf_counter() - started
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}")
    print(f"runtime: {args.runtime}; threads: {args.threads or 'library default'}; model load: {load:.2f} s")
    print(
        f"MiniLM throughput: {len(texts) / elapsed:.0f} sentences/s ({len(texts)} sentences, batch {args.batch_size})"
    )
    print(f"cache hits: {500 / hit:.0f} sentences/s")


if __name__ == "__main__":
    main()
