"""Many clients on one memory: answers/s and latency with 1, 2, 4 and 8 client processes over a Chroma server.

The bench starts ``chroma run`` on a free 127.0.0.1 port, ingests one conversation once (no-LLM policy), then
runs each count of client processes at the same time. A client opens the namespace, answers one question to
load its model, reports its memory, waits for the start signal and answers no-LLM questions in a loop for the
given seconds. Usage: ``python -m evals.bench.bench_load [--clients 1,2,4,8] [--seconds 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from logicmap.evals.common import machine_line, print_table

if TYPE_CHECKING:
    from logicmap.memory.indexes.embeddings import CachedEmbeddings

__all__ = ["main", "run_client"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"
NAMESPACE = "bench.load"
READY_TIMEOUT_S = 900.0  # eight clients importing torch on a loaded 2-core machine take minutes


def _status() -> dict[str, float]:
    """VmRSS, VmHWM (MB) and the thread count of this process, from /proc/self/status."""
    found: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
        elif key == "Threads":
            found[key] = int(value)
    return found


def _unique_mb() -> float | None:
    """Memory only this process holds (USS, MB): what one more worker really costs; None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    unique: float = psutil.Process().memory_full_info().uss / 2**20
    return unique


def _questions(path: Path) -> list[str]:
    from logicmap.memory.files.loaders import load_conversations

    questions = [qa.question for conv in load_conversations(path) for qa in conv.qa]
    if not questions:
        raise SystemExit(f"{path}: no questions to ask")
    return questions


def run_client(args: argparse.Namespace) -> int:
    """One client process: load, report, wait for ``go`` on stdin, answer for ``args.seconds``, report."""
    started = time.perf_counter()
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.graphs.strategies.registry import strategy_function
    from logicmap.settings import LogicMapSettings

    settings = LogicMapSettings()  # LOGICMAP_* from the parent: the Chroma server, the embedder, the threads
    resources = Resources(settings=settings, llm_=None)
    answer = strategy_function(args.strategy)
    questions = _questions(Path(args.file))
    answer(questions[0], args.namespace, resources=resources, policy="heuristic")
    loaded = {"load_s": time.perf_counter() - started, **_status(), "uss_mb": _unique_mb()}
    print(json.dumps({"ready": loaded}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    latencies, errors, i = [], 0, args.index
    cpu = time.process_time()
    began = time.perf_counter()
    deadline = began + args.seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        if not args.cache_questions:
            # Many users ask many different questions: each answer embeds its texts afresh (an answer still
            # reuses what it embedded itself, as it would for a question never asked before).
            cast("CachedEmbeddings", resources.embeddings).clear()  # Resources wraps every embedder in the cache
        try:
            answer(questions[i % len(questions)], args.namespace, resources=resources, policy="heuristic")
        except Exception:  # counted and printed; a load test keeps going
            errors += 1
        latencies.append(time.perf_counter() - t0)
        i += 1
    elapsed = time.perf_counter() - began
    cpu = time.process_time() - cpu
    print(
        json.dumps(
            {
                "done": {
                    "answers": len(latencies) - errors,
                    "errors": errors,
                    "seconds": elapsed,
                    "cpu_s": cpu,
                    "latencies": latencies,
                    "threads_after": _status()["Threads"],
                }
            }
        ),
        flush=True,
    )
    return 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_chroma(directory: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    chroma = Path(sys.executable).with_name("chroma")
    command = [
        str(chroma) if chroma.exists() else "chroma",
        "run",
        "--path",
        str(directory / "chroma"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"chroma run exited with {server.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2):
                return server
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"chroma run did not answer on 127.0.0.1:{port} within 120 s; see {log}")


def _ingest(path: Path, env: dict[str, str]) -> float:
    """Ingest once, in a process of its own, so the parent never loads a model."""
    code = (
        "import sys, time; from logicmap.graphs.ingest.ingest import ingest_conversation; "
        "from logicmap.memory.files.loaders import load_conversations; t = time.perf_counter(); "
        "[ingest_conversation(c, sys.argv[2], policy='heuristic') for c in load_conversations(sys.argv[1])]; "
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), NAMESPACE], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def _client_command(args: argparse.Namespace, index: int) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "logicmap.evals.bench.bench_load",
        "--client",
        "--index",
        str(index),
        "--namespace",
        NAMESPACE,
        "--file",
        args.file,
        "--strategy",
        args.strategy,
        "--seconds",
        str(args.seconds),
    ]
    return command + (["--cache-questions"] if args.cache_questions else [])


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (from /proc), 0.0 when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _read_json(proc: subprocess.Popen[str], key: str) -> dict[str, Any]:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{"):
            message = json.loads(line)
            if key in message:
                report: dict[str, Any] = message[key]
                return report
    raise RuntimeError(f"a client exited (code {proc.wait()}) before reporting {key!r}")


def run_clients(args: argparse.Namespace, count: int, env: dict[str, str], server_pid: int) -> dict[str, Any]:
    """``count`` clients loaded, started together, measured over the same seconds."""
    procs = [
        subprocess.Popen(_client_command(args, i), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for i in range(count)
    ]
    watchdogs = [threading.Timer(READY_TIMEOUT_S, p.kill) for p in procs]  # a stuck client ends the bench
    for watchdog in watchdogs:
        watchdog.start()
    try:
        ready = [_read_json(p, "ready") for p in procs]
        for watchdog in watchdogs:
            watchdog.cancel()
        server_cpu = _cpu_seconds(server_pid)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        done = [_read_json(p, "done") for p in procs]
        server_cpu = _cpu_seconds(server_pid) - server_cpu
    finally:
        for watchdog in watchdogs:
            watchdog.cancel()
        for p in procs:
            if p.poll() is None:
                try:
                    p.wait(timeout=args.seconds + 120)
                except subprocess.TimeoutExpired:
                    p.kill()
    latencies = sorted(x for d in done for x in d["latencies"])
    return {
        "clients": count,
        "answers_per_s": sum(d["answers"] / d["seconds"] for d in done),
        "answers": sum(d["answers"] for d in done),
        "errors": sum(d["errors"] for d in done),
        # CPU per answer hardly depends on how busy the machine is; answers/s does.
        "cpu_ms": 1000 * sum(d["cpu_s"] for d in done) / max(1, sum(d["answers"] for d in done)),
        "cpu_share": sum(d["cpu_s"] for d in done) / max(d["seconds"] for d in done),
        "server_cpu_s": server_cpu,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p95_ms": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] if latencies else float("nan"),
        "rss_mb": max(r["VmRSS"] for r in ready),
        "hwm_mb": max(r["VmHWM"] for r in ready),
        "uss_mb": max(r["uss_mb"] for r in ready) if all(r["uss_mb"] is not None for r in ready) else None,
        "threads": max(r["Threads"] for r in ready),
        "load_s": max(r["load_s"] for r in ready),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", default="1,2,4,8", help="counts of concurrent client processes")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each count answers")
    parser.add_argument("--file", default=str(SAMPLE), help="the conversation ingested and asked about")
    parser.add_argument("--strategy", default="compass", help="answering strategy (no-LLM policy)")
    parser.add_argument("--embeddings", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--threads", help="LOGICMAP_THREADS for the clients (default: the setting's own default)")
    parser.add_argument(
        "--cache-questions",
        action="store_true",
        help="let a client reuse a question's embedding (default: every answer embeds afresh)",
    )
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default=NAMESPACE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        return run_client(args)
    counts = [int(c) for c in args.clients.split(",") if c]
    directory = Path(tempfile.mkdtemp(prefix="logicmap-load-"))
    port = _free_port()
    env = {
        **os.environ,
        "LOGICMAP_CHROMA_HOST": "127.0.0.1",
        "LOGICMAP_CHROMA_PORT": str(port),
        "LOGICMAP_DATA_DIR": str(directory / "data"),
        "LOGICMAP_EMBEDDING_PROVIDER": args.embeddings,
        "ANONYMIZED_TELEMETRY": "False",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    env.pop("LOGICMAP_CHAT_MODEL", None)
    if args.threads:
        env["LOGICMAP_THREADS"] = args.threads
    print(machine_line())
    print(
        f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; embedder {args.embeddings}; "
        f"strategy {args.strategy} (no-LLM); LOGICMAP_THREADS={env.get('LOGICMAP_THREADS', 'unset (default)')}; "
        f"questions {'cached' if args.cache_questions else 'embedded afresh each answer'}",
        flush=True,
    )
    server = _start_chroma(directory, port, directory / "chroma.log")
    rows = []
    try:
        print(f"chroma server on 127.0.0.1:{port}; ingesting {Path(args.file).name} ...", flush=True)
        print(f"  ingested in {_ingest(Path(args.file), env):.1f}s", flush=True)
        for count in counts:
            row = run_clients(args, count, env, server.pid)
            rows.append(row)
            print(
                f"  {count} client(s): {row['answers_per_s']:.1f} answers/s, p50 {row['p50_ms']:.0f} ms, "
                f"p95 {row['p95_ms']:.0f} ms, RSS {row['rss_mb']:.0f} MB; load avg {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(directory, ignore_errors=True)
    print()
    one = rows[0]["answers_per_s"] if rows and rows[0]["clients"] == 1 else None
    print_table(
        [
            "client processes",
            "answers/s (total)",
            "vs 1 client",
            "p50 ms",
            "p95 ms",
            "errors",
            "client CPU ms per answer",
            "cores used by clients",
            "Chroma server CPU s",
            "RSS MB after loading (max)",
            "peak RSS MB",
            "USS MB",
            "threads per process",
            "load s",
        ],
        [
            [
                r["clients"],
                f"{r['answers_per_s']:.1f}",
                f"{r['answers_per_s'] / one:.2f}x" if one else "n/a",
                f"{r['p50_ms']:.0f}",
                f"{r['p95_ms']:.0f}",
                r["errors"],
                f"{r['cpu_ms']:.0f}",
                f"{r['cpu_share']:.2f}",
                f"{r['server_cpu_s']:.1f}",
                f"{r['rss_mb']:.0f}",
                f"{r['hwm_mb']:.0f}",
                f"{r['uss_mb']:.0f}" if r["uss_mb"] is not None else "n/a",
                r["threads"],
                f"{r['load_s']:.1f}",
            ]
            for r in rows
        ],
    )
    print(
        f"\n{args.seconds:.0f} s per count; latency over every answer of every client; load average after: "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
