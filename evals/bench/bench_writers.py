"""Writers racing for one namespace: N writers (threads on an embedded store, processes on a Chroma server or on
PostgreSQL) each ingest their own sessions into the same namespace. Prints per N: all finished?, wall time, lost
commits and seconds waited per writer, sessions/s. No-LLM ingest, hashing embedder.

Usage: ``python -m logicmap.evals.bench.bench_writers [--writers 1,2,4,8] [--sessions 3] [--modes embedded,server]``;
mode ``postgres`` needs ``--postgres-url postgresql://...`` (a new namespace per run: nothing there is touched).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["main", "writer_conversation"]

_TOPICS = (
    "adopted a puppy",
    "started a pottery class",
    "moved to a flat by the river",
    "trains for a half marathon",
    "cooked ramen with mushrooms",
    "visited the museum",
    "bought a bike",
    "plans a trip to the island",
)


def writer_conversation(writer: int, sessions: int, first_session: int, turns: int = 4) -> Any:
    """Writer ``writer``'s sessions ``S<first>..``, every turn marked with the writer."""
    from logicmap.memory.files.loaders import Conversation, RawTurn, Session

    rng = random.Random(writer)
    people = [f"Ana{writer}", f"Rui{writer}"]
    out = []
    for s in range(first_session, first_session + sessions):
        stamp = datetime(2023, 3, 4, 14, 15) + timedelta(days=9 * (s - 1))
        raw = [
            RawTurn(
                dia_id=f"D{s}:{t}",
                speaker=people[(t - 1) % 2],
                text=f"writer {writer} note {s}.{t}: my friend {rng.choice(_TOPICS)}.",
            )
            for t in range(1, turns + 1)
        ]
        out.append(
            Session(
                session_id=f"S{s}", timestamp=stamp, timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"), turns=raw
            )
        )
    return Conversation(conversation_id=f"writer-{writer}", speakers=people, sessions=out)


def _jobs(writers: int, sessions: int) -> list[Any]:
    return [writer_conversation(w, sessions, 1 + w * sessions) for w in range(writers)]


def _summary(reports: list[dict[str, Any]], expected: int, stored: int, wall: float) -> dict[str, Any]:
    finished = all(r["ok"] for r in reports) and stored == expected
    conflicts = [sum(c for c, _ in r.get("waits", [])) for r in reports]
    waited = [sum(w for _, w in r.get("waits", [])) for r in reports]
    return {
        "finished": f"{'yes' if finished else 'NO'} ({stored}/{expected} sessions)",
        "wall_s": f"{wall:.2f}",
        "lost_commits_per_writer": f"{sum(conflicts) / len(reports):.1f} (max {max(conflicts)})",
        "waited_s_per_writer": f"{sum(waited) / len(reports):.2f} (max {max(waited):.2f})",
        "sessions_per_s": f"{stored / wall:.2f}",
    }


# -- embedded: threads ------------------------------------------------------------------------------
def _embedded(writers: int, sessions: int, root: Path) -> dict[str, Any]:
    from logicmap.graphs.ingest.ingest import ingest_conversation

    res = fresh_resources(root / f"embedded-{writers}")
    res.store  # noqa: B018 - opened before the threads race for it
    jobs = _jobs(writers, sessions)

    def write(conversation: Any) -> dict[str, Any]:
        try:
            report = ingest_conversation(conversation, "shared", resources=res, policy="heuristic")
        except Exception as exc:  # counted as a writer that did not finish
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, "waits": [(s.conflicts, s.waited_s) for s in report.sessions]}

    started = time.perf_counter()
    with ThreadPoolExecutor(writers) as pool:
        reports = list(pool.map(write, jobs))
    wall = time.perf_counter() - started
    stored = len(res.store.manifest("shared").sessions)
    res.store.close()
    return _summary(reports, writers * sessions, stored, wall)


def _warm(root: Path) -> None:
    """One ingest before the figures, so imports and first-use caches are not in the first row's time."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    res = fresh_resources(root / "warm")
    ingest_conversation(writer_conversation(99, 1, 1), "warm", resources=res, policy="heuristic")
    res.store.close()


# -- server mode: processes -------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_chroma(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    chroma = Path(sys.executable).with_name("chroma")
    if not chroma.exists():
        chroma = Path(shutil.which("chroma") or "chroma")
    port = _free_port()
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(root / "chroma"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=root,
    )
    import chromadb

    deadline = time.monotonic() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            return proc, port
        except Exception:  # not up yet
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Chroma server did not start") from None
            time.sleep(0.2)


def _worker(file: str, namespace: str, go: str, out: str) -> int:
    """One writer process: wait for the start signal, ingest the file's conversation, write its report."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.memory.files.loaders import Conversation

    res = Resources()
    res.llm_ = None
    conversation = Conversation.model_validate_json(Path(file).read_text())
    res.store.manifest(namespace)  # connected before the start
    Path(out + ".ready").touch()
    while not Path(go).exists():
        time.sleep(0.005)
    try:
        report = ingest_conversation(conversation, namespace, resources=res, policy="heuristic")
        result = {"ok": True, "waits": [(s.conflicts, s.waited_s) for s in report.sessions]}
    except Exception as exc:  # the parent counts it
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    Path(out).write_text(json.dumps(result))
    return 0


def _server(writers: int, sessions: int, root: Path, port: int) -> dict[str, Any]:
    from logicmap.settings import LogicMapSettings

    env = {"LOGICMAP_CHROMA_HOST": "127.0.0.1", "LOGICMAP_CHROMA_PORT": str(port)}
    settings = LogicMapSettings(chroma_host="127.0.0.1", chroma_port=port, embedding_provider="hashing")
    return _processes(writers, sessions, root / f"server-{writers}", env, settings)


def _postgres(writers: int, sessions: int, root: Path, url: str) -> dict[str, Any]:
    from logicmap.settings import LogicMapSettings

    settings = LogicMapSettings(store_url=url, embedding_provider="hashing")
    return _processes(writers, sessions, root / f"postgres-{writers}", {"LOGICMAP_STORE_URL": url}, settings)


def _processes(writers: int, sessions: int, work: Path, store_env: dict[str, str], settings: Any) -> dict[str, Any]:
    """``writers`` processes on the store ``store_env`` names, started together on one new namespace."""
    from logicmap.memory.store import open_store

    namespace = f"shared-{writers}-{random.randrange(16**8):08x}"
    work.mkdir()
    go = work / "go"
    env = {**__import__("os").environ, **store_env, "LOGICMAP_EMBEDDING_PROVIDER": "hashing", "LOGICMAP_CHAT_MODEL": ""}
    procs, outs = [], []
    for w, conversation in enumerate(_jobs(writers, sessions)):
        file, out = work / f"w{w}.json", work / f"w{w}.out"
        file.write_text(conversation.model_dump_json())
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "logicmap.evals.bench.bench_writers",
                    "--worker",
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
    started = time.perf_counter()
    go.touch()
    for p in procs:
        p.wait()
    wall = time.perf_counter() - started
    reports = [json.loads(o.read_text()) if o.exists() else {"ok": False, "error": "crashed"} for o in outs]
    store = open_store(settings)
    try:
        stored = len(store.manifest(namespace).sessions)
    finally:
        store.close()
    return _summary(reports, writers * sessions, stored, wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writers", default="1,2,4,8")
    parser.add_argument("--sessions", type=int, default=3, help="sessions per writer")
    parser.add_argument("--modes", default="embedded,server")
    parser.add_argument("--postgres-url", help="mode postgres: the PostgreSQL database to write in")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(*args.worker)
    counts = [int(n) for n in args.writers.split(",")]
    modes = args.modes.split(",")
    if "postgres" in modes and not args.postgres_url:
        parser.error("mode postgres needs --postgres-url postgresql://...")
    print(machine_line())
    print(f"{args.sessions} sessions of 4 turns per writer, one namespace, no LLM, hashing embedder")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-writers-") as tmp:
        root = Path(tmp)
        chroma = None
        try:
            if "server" in modes:
                chroma, port = _start_chroma(root)
            _warm(root)
            for mode in modes:
                for n in counts:
                    if mode == "embedded":
                        got = _embedded(n, args.sessions, root)
                    elif mode == "postgres":
                        got = _postgres(n, args.sessions, root, args.postgres_url)
                    else:
                        got = _server(n, args.sessions, root, port)
                    rows.append([mode, n, *got.values()])
                    print(f"  {mode} x{n}: {got}", flush=True)
        finally:
            if chroma is not None:
                chroma.terminate()
                chroma.wait(timeout=30)
    print_table(
        ["mode", "writers", "all finished", "wall s", "lost commits / writer", "waited s / writer", "sessions/s"], rows
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
