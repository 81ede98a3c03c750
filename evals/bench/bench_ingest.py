"""Benchmark: ``logicmap ingest`` of one public conversation without an LLM: speed, peak memory, where time goes.

Each run is one child process on a fresh data directory that runs the ``logicmap`` command line's own entry
(``logicmap.evals.cli.main(["ingest", FILE, "-n", "bench", "--policy", "heuristic", "--quiet"])``), with light
probes installed first: the wall seconds of each ingest node, the encoder's calls, texts, batches and tokens
(padded: what the encoder computed; real: the texts' own tokens), the model load, and Chroma's upserts. The
parent reads the child's wall time, CPU time (user + sys) and peak RSS from ``wait4``, the CLI's own wall
figure from its output, the load average, and afterwards the namespace's graph fingerprint
(``NamespaceSnapshot.fingerprint``) and its vectors: ``--reference PATH`` saves them on the first use and compares
every later run with them (records equal, largest vector difference per kind).

The conversation (default conv-26 of the development file ``../shared/data/locomo-dev5.json``) is copied into a
temporary directory, never into the repository. Usage:
``python -m logicmap.evals.bench.bench_ingest [--file F] [--conversation conv-26] [--repeat 3] [--reference R]``.
Prints numbers; not a test. The parallel nodes (facts, cues, r2) overlap in time: their seconds add up to more
than the wall time they took together.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["STAGES", "default_file", "main"]

STAGES = ("prepare", "segment", "relate", "fuse", "topics", "facts", "cues", "r2", "commit", "rebase")
NAMESPACE = "bench"
_DEV_FILE = Path("shared") / "data" / "locomo-dev5.json"


def default_file() -> Path | None:
    """The development file ``shared/data/locomo-dev5.json`` in a directory above the repository, if any."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / _DEV_FILE
        if candidate.is_file():
            return candidate
    return None


# -- the child: the CLI's path with probes ----------------------------------------------------------


class _Probes:
    """Counters the child fills in and writes as JSON at exit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = time.time()
        self.stages: dict[str, list[float]] = {}
        self.encode = {
            "embed_calls": 0,
            "texts": 0,
            "batches": 0,
            "batch_texts": 0,
            "tokens": 0,
            "padded_tokens": 0,
            "encode_s": 0.0,
            "encode_cpu_s": 0.0,
            "load_s": 0.0,
        }
        self.upserts = {"calls": 0, "rows": 0, "seconds": 0.0}
        self.upserts_by_kind: dict[str, list[float]] = {}
        self.ingest_started = 0.0

    def add_stage(self, name: str, seconds: float, cpu: float) -> None:
        with self.lock:
            entry = self.stages.setdefault(name, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += seconds
            entry[2] += cpu

    def add(self, table: dict[str, Any], **amounts: float) -> None:
        with self.lock:
            for key, amount in amounts.items():
                table[key] += amount


def _timed_node(probes: _Probes, name: str, node: Callable[..., Any]) -> Callable[..., Any]:
    import functools

    @functools.wraps(node)  # LangGraph reads the node's signature (runtime) through __wrapped__
    def timed(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return node(*args, **kwargs)
        finally:
            probes.add_stage(name, time.perf_counter() - started, time.thread_time() - cpu)

    return timed


def _install_probes(probes: _Probes) -> None:
    """Wrap the ingest nodes (before the ingest graph is built from them), the encoder and Chroma's upsert."""
    from chromadb.api.models.Collection import Collection

    from logicmap.graphs.ingest import nodes as ingest_nodes
    from logicmap.memory.indexes import embeddings

    for name in STAGES:
        setattr(ingest_nodes, name, _timed_node(probes, name, getattr(ingest_nodes, name)))

    embed_documents = embeddings.MiniLMEmbeddings.embed_documents

    def counted_embed(self: Any, texts: list[str]) -> list[list[float]]:
        probes.add(probes.encode, embed_calls=1, texts=len(texts))
        return embed_documents(self, texts)

    embeddings.MiniLMEmbeddings.embed_documents = counted_embed  # type: ignore[method-assign]  # a counting probe

    load = embeddings.MiniLMEmbeddings._load

    def timed_load(self: Any) -> Any:
        fresh = self._model is None
        started = time.perf_counter()
        model = load(self)
        if fresh:
            probes.add(probes.encode, load_s=time.perf_counter() - started)
        return model

    embeddings.MiniLMEmbeddings._load = timed_load  # type: ignore[method-assign]  # a timing probe

    # One forward pass of the numpy encoder: ``forward(rows)`` (token ids), or ``encode(texts)`` before it existed.
    batch_method = "forward" if hasattr(embeddings._NumpyBert, "forward") else "encode"
    batch = getattr(embeddings._NumpyBert, batch_method)

    def counted_batch(self: Any, items: list[Any]) -> Any:
        if batch_method == "forward":
            lengths = [len(row) for row in items]
        else:
            lengths = [len(e.ids) for e in self.tokenizer.encode_batch(items)]
        started, cpu = time.perf_counter(), time.thread_time()
        out = batch(self, items)
        probes.add(
            probes.encode,
            batches=1,
            batch_texts=len(items),
            tokens=sum(lengths),
            padded_tokens=len(items) * max(lengths, default=0),
            encode_s=time.perf_counter() - started,
            encode_cpu_s=time.thread_time() - cpu,
        )
        return out

    setattr(embeddings._NumpyBert, batch_method, counted_batch)

    upsert = Collection.upsert

    def counted_upsert(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return upsert(self, *args, **kwargs)
        finally:
            rows, seconds = len(kwargs.get("ids") or (args[0] if args else [])), time.perf_counter() - started
            probes.add(probes.upserts, calls=1, rows=rows, seconds=seconds)
            with probes.lock:
                entry = probes.upserts_by_kind.setdefault(self.name.rsplit("-", 1)[-1], [0, 0, 0.0])
                entry[0], entry[1], entry[2] = entry[0] + 1, entry[1] + rows, entry[2] + seconds

    Collection.upsert = counted_upsert  # type: ignore[method-assign]  # a counting probe

    from logicmap.graphs.ingest import ingest

    ingest_conversation = ingest.ingest_conversation

    def marked(*args: Any, **kwargs: Any) -> Any:
        probes.ingest_started = time.time()
        return ingest_conversation(*args, **kwargs)

    ingest.ingest_conversation = marked


def _child(stats_path: str, cli_args: list[str]) -> int:
    probes = _Probes()
    _install_probes(probes)
    from logicmap.evals.cli import main as logicmap_main

    code = logicmap_main(cli_args)
    Path(stats_path).write_text(
        json.dumps(
            {
                "started": probes.started,
                "ingest_started": probes.ingest_started,
                "ended": time.time(),
                "stages": probes.stages,
                "encode": probes.encode,
                "upserts": probes.upserts,
                "upserts_by_kind": probes.upserts_by_kind,
            }
        )
    )
    return code


# -- the parent: runs, fingerprints, tables ---------------------------------------------------------


def _conversation_file(source: Path, sample_id: str, directory: Path) -> tuple[Path, int, int]:
    """One LoCoMo sample of ``source`` written alone to ``directory``: (path, sessions, turns)."""
    samples = json.loads(source.read_text())
    chosen = [s for s in samples if s.get("sample_id") == sample_id]
    if not chosen:
        raise SystemExit(f"{source}: no sample {sample_id!r} (have {[s.get('sample_id') for s in samples]})")
    conversation = chosen[0]["conversation"]
    sessions = [k for k, v in conversation.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v]
    turns = sum(len(conversation[k]) for k in sessions)
    path = directory / f"{sample_id}.json"
    path.write_text(json.dumps(chosen))
    return path, len(sessions), turns


def _spawn_and_wait(file: Path, data_dir: Path, stats: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ingest in a child process, reaped by ``wait4`` for its own rusage (CPU time, peak RSS)."""
    command = [
        sys.executable,
        "-m",
        "logicmap.evals.bench.bench_ingest",
        "--child",
        str(stats),
        "--",
        "ingest",
        str(file),
        "-n",
        NAMESPACE,
        "--policy",
        "heuristic",
        "--quiet",
    ]
    child_env = {**env, "LOGICMAP_DATA_DIR": str(data_dir)}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        spawned = time.time()
        child = subprocess.Popen(command, env=child_env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"ingest failed ({child.returncode}): {stderr.strip()[-800:]}")
    match = re.search(r"wall ([0-9.]+)s", stdout)
    probe = json.loads(stats.read_text())
    return {
        "wall_s": wall,
        "cli_wall_s": float(match.group(1)) if match else float("nan"),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "startup_s": probe["ingest_started"] - spawned,
        "probe": probe,
        "summary": stdout.strip().splitlines()[-1:],
    }


def _memory(data_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The namespace's fingerprint and its vectors per kind (id -> float32 vector)."""
    import numpy as np

    from logicmap.memory.store import MemoryStore
    from logicmap.settings import LogicMapSettings

    store = MemoryStore(LogicMapSettings(data_dir=data_dir))
    try:
        snapshot = store.snapshot(NAMESPACE)
        vectors = {
            kind: {k: np.asarray(v, dtype=np.float32) for k, v in getattr(snapshot, kind).items()}
            for kind in ("turn_vectors", "event_vectors", "fact_vectors", "cue_vectors")
        }
        return snapshot.fingerprint(), vectors
    finally:
        store.close()


def _digest(fingerprint: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]


def _compare(fingerprint: dict[str, Any], vectors: dict[str, dict[str, Any]], reference: Path) -> list[str]:
    """Lines saying how this memory differs from the reference's (saved by the first run that names it)."""
    import numpy as np

    records, arrays = reference.with_suffix(".json"), reference.with_suffix(".npz")
    if not records.exists():
        records.write_text(json.dumps(fingerprint, sort_keys=True))
        np.savez_compressed(arrays, **{f"{kind}|{k}": v for kind, table in vectors.items() for k, v in table.items()})
        return [f"reference saved: {records} and {arrays}"]
    expected = json.loads(records.read_text())
    lines: list[str] = []
    for key in sorted(set(expected) | set(fingerprint)):
        a, b = expected.get(key), fingerprint.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            changed = sum(1 for k in set(a) & set(b) if a[k] != b[k])
            lines.append(f"  {key}: {len(set(b) - set(a))} added, {len(set(a) - set(b))} missing, {changed} changed")
        else:
            lines.append(f"  {key}: {a!r} -> {b!r}")
    head = "records equal to the reference's" if not lines else "records DIFFER from the reference's:"
    stored = np.load(arrays)
    for kind, table in vectors.items():
        diffs = [float(np.abs(stored[f"{kind}|{k}"] - v).max()) for k, v in table.items() if f"{kind}|{k}" in stored]
        lines.append(f"  {kind}: {len(diffs)} shared ids, largest difference {max(diffs, default=0.0):.2e}")
    return [head, *lines]


def _median(runs: list[dict[str, Any]], key: str) -> float:
    median: float = statistics.median(r[key] for r in runs)
    return median


def _report(runs: list[dict[str, Any]], sessions: int, turns: int) -> None:
    print(
        "| run | CLI wall s | s/session | sessions/s | turns/s | process wall s | CPU s (user+sys) | peak RSS MB | "
        "load avg before/after |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(runs, 1):
        w = r["cli_wall_s"]
        print(
            f"| {i} | {w:.2f} | {w / sessions:.2f} | {sessions / w:.2f} | {turns / w:.1f} | {r['wall_s']:.2f} | "
            f"{r['cpu_s']:.1f} ({r['user_s']:.1f}+{r['sys_s']:.1f}) | {r['peak_mb']:.0f} | "
            f"{r['load_before']:.1f} / {r['load_after']:.1f} |"
        )
    w = _median(runs, "cli_wall_s")
    print(
        f"| median | {w:.2f} | {w / sessions:.2f} | {sessions / w:.2f} | {turns / w:.1f} | "
        f"{_median(runs, 'wall_s'):.2f} | {_median(runs, 'cpu_s'):.1f} | {_median(runs, 'peak_mb'):.0f} | "
        f"{statistics.median(r['load_before'] for r in runs):.1f} |"
    )
    print()
    print(
        "Seconds per stage (median over runs): wall seconds inside each node (the parallel nodes facts, cues and r2 "
        "overlap), and the CPU seconds of the thread that ran it (the encoder's worker threads and BLAS's not "
        "counted: see the encoder line)"
    )
    print("| stage | calls | wall s | thread CPU s |\n|---|---|---|---|")
    print(f"| startup (process start to ingest) | 1 | {_median(runs, 'startup_s'):.2f} | |")
    print(f"| model load (in segment) | 1 | {statistics.median(r['probe']['encode']['load_s'] for r in runs):.2f} | |")
    for name in STAGES:
        if not any(name in r["probe"]["stages"] for r in runs):
            continue
        entries = [r["probe"]["stages"].get(name, [0, 0.0, 0.0]) for r in runs]
        print(
            f"| {name} | {entries[0][0]} | {statistics.median(e[1] for e in entries):.2f} | "
            f"{statistics.median(e[2] for e in entries):.2f} |"
        )
    enc, ups = runs[0]["probe"]["encode"], runs[0]["probe"]["upserts"]
    print()
    encode_s = statistics.median(r["probe"]["encode"]["encode_s"] for r in runs)
    encode_cpu = statistics.median(r["probe"]["encode"].get("encode_cpu_s", 0.0) for r in runs)
    print(
        f"encoder: {enc['embed_calls']} embed_documents calls with {enc['texts']} texts; {enc['batches']} forward "
        f"passes over {enc['batch_texts']} texts, {enc['tokens']} tokens ({enc['padded_tokens']} padded); the passes "
        f"took {encode_s:.2f} s of wall time summed over threads and {encode_cpu:.2f} s of CPU in the threads that "
        "ran them (median; BLAS's own threads not counted)"
    )
    print(
        f"Chroma upserts: {ups['calls']} calls, {ups['rows']} rows, "
        f"{statistics.median(r['probe']['upserts']['seconds'] for r in runs):.2f} s (median); by collection: "
        + ", ".join(
            f"{kind} {calls}/{rows}/{seconds:.2f}s"
            for kind, (calls, rows, seconds) in runs[0]["probe"]["upserts_by_kind"].items()
        )
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return _child(argv[1], argv[3:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--file", type=Path, default=None, help="LoCoMo file (default: ../shared/data/locomo-dev5.json)"
    )
    parser.add_argument("--conversation", default="conv-26", help="the sample_id to ingest")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="save (first use) or compare the memory's fingerprint and vectors (PATH.json, PATH.npz)",
    )
    args = parser.parse_args(argv)
    source = args.file or default_file()
    if source is None or not source.is_file():
        print("bench_ingest: no development file (../shared/data/locomo-dev5.json); pass --file", file=sys.stderr)
        return 2
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    env.pop("LOGICMAP_CHAT_MODEL", None)
    from logicmap.evals.common import machine_line

    print(
        machine_line() + f"; nice {os.getpriority(os.PRIO_PROCESS, 0)}; "
        f"runtime {env.get('LOGICMAP_EMBEDDING_RUNTIME', 'numpy (default)')}; "
        f"threads {env.get('LOGICMAP_THREADS', 'auto (default)')}"
    )
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        file, sessions, turns = _conversation_file(source, args.conversation, Path(tmp))
        print(f"{args.conversation} of {source.name}: {sessions} sessions, {turns} turns; no LLM (--policy heuristic)")
        for i in range(args.repeat):
            data_dir = Path(tmp) / f"memory-{i}"
            run = _spawn_and_wait(file, data_dir, Path(tmp) / f"stats-{i}.json", env)
            fingerprint, vectors = _memory(data_dir)
            run["fingerprint"] = _digest(fingerprint)
            print(
                f"run {i + 1}: {run['summary'][0] if run['summary'] else ''}; fingerprint {run['fingerprint']}",
                flush=True,
            )
            if args.reference is not None:
                print("\n".join(_compare(fingerprint, vectors, args.reference)))
            runs.append(run)
    print()
    _report(runs, sessions, turns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
