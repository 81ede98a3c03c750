"""Concurrency: threads ingesting and querying one store; a second process on an embedded store; two
processes writing through a Chroma server.

No session may be lost or duplicated, and no reader may ever see part of a session.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.store import MemoryStore, StoreLockedError
from logicmap.settings import LogicMapSettings
from tests import chroma_internals as chroma
from tests.conftest import make_resources
from tests.reliability.support import (
    ROOT,
    locomo_document,
    marked_conversation,
    memory_problems,
    subprocess_env,
    uncommitted_versions,
    visible_duplicates,
)


def _session_turns(*conversations: Conversation) -> dict[str, list[str]]:
    return {s.session_id: [t.dia_id for t in s.turns] for c in conversations for s in c.sessions}


def _expect_complete(store: MemoryStore, namespace: str, *conversations: Conversation) -> None:
    expected = _session_turns(*conversations)
    snap = store.snapshot(namespace)
    assert sorted(snap.manifest.sessions) == sorted(expected), f"{namespace}: sessions lost or invented"
    assert sorted(snap.turns) == sorted(t for turns in expected.values() for t in turns), f"{namespace}: turns lost"
    problems = memory_problems(snap, expected)
    assert not problems, f"{namespace}:\n" + "\n".join(problems)
    assert not visible_duplicates(store, namespace), f"{namespace}: duplicated records"
    assert not uncommitted_versions(store, namespace), f"{namespace}: uncommitted versions left behind"


# -- threads in one process ------------------------------------------------------------------------
class Readers:
    """Threads that read while writers write: every snapshot must hold whole sessions only."""

    def __init__(self, resources: Resources, expected: dict[str, dict[str, list[str]]]) -> None:
        self.resources, self.expected = resources, expected
        self.stop = threading.Event()
        self.problems: list[str] = []
        self.reads = 0
        self.queries = 0

    def read_loop(self, namespace: str) -> None:
        store = self.resources.store
        while not self.stop.is_set():
            snap = store.snapshot(namespace)
            self.reads += 1
            if snap.generation == 0:
                if snap.turns or snap.events:
                    self.problems.append(f"{namespace}: records visible before any commit")
                continue
            self.problems += [
                f"{namespace} at generation {snap.generation}: {p}"
                for p in memory_problems(snap, self.expected[namespace])
            ]

    def query_loop(self, namespace: str, strategies: tuple[str, ...]) -> None:
        from logicmap.graphs.strategies.registry import answer

        i = 0
        while not self.stop.is_set():
            if not self.resources.store.has_namespace(namespace):
                time.sleep(0.01)
                continue
            strategy = strategies[i % len(strategies)]
            i += 1
            try:
                result = answer(
                    strategy,
                    "what did they say about the market?",
                    namespace,
                    resources=self.resources,
                    policy="heuristic",
                )
            except Exception as exc:  # collected and reported
                self.problems.append(f"{strategy} on {namespace} raised {type(exc).__name__}: {exc}")
                continue
            self.queries += 1
            known = {t for turns in self.expected[namespace].values() for t in turns}
            for item in result.evidence:
                stray = [t for t in item.turn_ids if t not in known]
                if stray:
                    self.problems.append(f"{strategy} on {namespace} cited turns {stray} of no session of it")


@pytest.mark.slow
def test_threads_ingesting_and_querying_lose_nothing_and_never_see_half_a_session(tmp_path: Path) -> None:
    resources = make_resources(tmp_path / "memory")
    # Two writers share namespace "shared" with distinct sessions; two more write their own namespaces.
    # One conversation's two halves (different conversations may not share a namespace), sent with append=True.
    shared_a = marked_conversation("alpha", sessions=3, first_session=1, conversation_id="shared")
    shared_b = marked_conversation("bravo", sessions=3, first_session=4, conversation_id="shared")
    solo_c = marked_conversation("charlie", sessions=3)
    solo_d = marked_conversation("delta", sessions=3)
    jobs = [("shared", shared_a), ("shared", shared_b), ("solo-c", solo_c), ("solo-d", solo_d)]
    expected = {
        "shared": _session_turns(shared_a, shared_b),
        "solo-c": _session_turns(solo_c),
        "solo-d": _session_turns(solo_d),
    }
    readers = Readers(resources, expected)
    resources.store  # noqa: B018 - open the store before the threads race for it
    background = [threading.Thread(target=readers.read_loop, args=(ns,), daemon=True) for ns in expected]
    background.append(
        threading.Thread(target=readers.query_loop, args=("shared", ("bm25", "dense", "compass")), daemon=True)
    )
    for thread in background:
        thread.start()
    try:
        with ThreadPoolExecutor(len(jobs)) as pool:
            reports = list(
                pool.map(
                    lambda job: ingest_conversation(
                        job[1], job[0], resources=resources, policy="heuristic", append=True
                    ),
                    jobs,
                )
            )
    finally:
        readers.stop.set()
        for thread in background:
            thread.join(timeout=60)
    try:
        assert all(not s.skipped for r in reports for s in r.sessions)
        _expect_complete(resources.store, "shared", shared_a, shared_b)
        _expect_complete(resources.store, "solo-c", solo_c)
        _expect_complete(resources.store, "solo-d", solo_d)
        assert readers.reads > 10 and readers.queries > 0, (readers.reads, readers.queries)
        assert not readers.problems, "\n".join(dict.fromkeys(readers.problems))
    finally:
        resources.store.close()


@pytest.mark.slow
def test_the_same_conversation_ingested_twice_at_once_is_stored_once(tmp_path: Path) -> None:
    """A retried upload racing the first one: each session committed once, as a single run would."""
    conversation = marked_conversation("echo", sessions=3)
    single = make_resources(tmp_path / "single")
    ingest_conversation(conversation, "echo", resources=single, policy="heuristic")
    reference = single.store.snapshot("echo").fingerprint()
    single.store.close()

    resources = make_resources(tmp_path / "memory")
    resources.store  # noqa: B018
    with ThreadPoolExecutor(2) as pool:
        reports = list(
            pool.map(
                lambda _: ingest_conversation(conversation, "echo", resources=resources, policy="heuristic"), range(2)
            )
        )
    try:
        _expect_complete(resources.store, "echo", conversation)
        committed = [s.session_id for r in reports for s in r.sessions if not s.skipped]
        assert sorted(committed) == sorted(s.session_id for s in conversation.sessions), (
            f"sessions committed more than once: {committed}"
        )
        assert resources.store.snapshot("echo").fingerprint() == reference
    finally:
        resources.store.close()


# -- a second process on one embedded store ---------------------------------------------------------
LOCK_PROBE = """
import sys
from logicmap.graphs.surfaces.cli import main
first = main(["namespaces"])
print("first", first, flush=True)
sys.stdin.readline()
second = main(["namespaces"])
print("second", second, flush=True)
"""


@pytest.mark.slow
def test_a_second_process_on_an_embedded_store_is_refused_with_a_pointer_to_server_mode(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    store = MemoryStore(LogicMapSettings(data_dir=data_dir, embedding_provider="hashing"))
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_PROBE],
        cwd=ROOT,
        env=subprocess_env(data_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = proc.stdout.readline()
        store.close()  # the holder goes away: the other process may now open the store
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        store.close()
    assert first.strip() == "first 2", (first, err)
    assert out.strip() == "second 0", (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "in use by another process" in lines[0] and "LOGICMAP_CHROMA_HOST" in lines[0] and "chroma run" in lines[0]
    # In-process the same store can be opened twice (the lock is shared), and a foreign lock is typed.
    with (
        MemoryStore(LogicMapSettings(data_dir=data_dir)) as one,
        MemoryStore(LogicMapSettings(data_dir=data_dir)) as two,
    ):
        assert one.namespaces() == two.namespaces() == []
    assert issubclass(StoreLockedError, RuntimeError)


# -- two processes through a Chroma server ---------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path: Path):
    chroma = Path(sys.executable).with_name("chroma")
    if not chroma.exists():
        chroma = Path(shutil.which("chroma") or "")
    if not chroma or not chroma.exists():
        pytest.skip("the chroma CLI is not installed")
    port = _free_port()
    log = (tmp_path / "chroma.log").open("w")
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(tmp_path / "chroma-server"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    try:
        import chromadb

        deadline = time.monotonic() + 60
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
                break
            except Exception:  # not up yet
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma server did not start: {(tmp_path / 'chroma.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _run_writers(tmp_path: Path, port: int, jobs: list[tuple[str, Conversation]]) -> list[dict]:
    """Start one writer process per job, release them at once, and collect their reports."""
    env = subprocess_env(tmp_path / "unused", LOGICMAP_CHROMA_HOST="127.0.0.1", LOGICMAP_CHROMA_PORT=str(port))
    go = tmp_path / "go"
    procs, outs, readies = [], [], []
    for i, (namespace, conversation) in enumerate(jobs):
        file = tmp_path / f"writer-{i}.json"
        file.write_text(json.dumps(locomo_document(conversation)), encoding="utf-8")
        ready, out = tmp_path / f"ready-{i}", tmp_path / f"out-{i}.json"
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).with_name("server_writer.py")),
                    str(file),
                    namespace,
                    str(ready),
                    str(go),
                    str(out),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        outs.append(out)
        readies.append(ready)
    try:
        deadline = time.monotonic() + 180
        while not all(r.exists() or o.exists() for r, o in zip(readies, outs)):
            assert time.monotonic() < deadline, "writers did not start"
            time.sleep(0.05)
        go.touch()
        for proc in procs:
            proc.wait(timeout=300)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    results = []
    for proc, out in zip(procs, outs):
        assert out.exists(), f"writer crashed: {proc.stderr.read() if proc.stderr else ''}"
        results.append(json.loads(out.read_text()))
    return results


def _server_store(port: int) -> MemoryStore:
    return MemoryStore(LogicMapSettings(chroma_host="127.0.0.1", chroma_port=port))


@pytest.mark.integration
@pytest.mark.slow
def test_two_processes_on_a_chroma_server_writing_different_namespaces_lose_nothing(tmp_path, chroma_server) -> None:
    first, second = marked_conversation("foxtrot", sessions=4), marked_conversation("golf", sessions=4)
    results = _run_writers(tmp_path, chroma_server, [("ns-f", first), ("ns-g", second)])
    assert all(r["ok"] for r in results), "\n".join(r.get("error", "") for r in results)
    store = _server_store(chroma_server)
    _expect_complete(store, "ns-f", first)
    _expect_complete(store, "ns-g", second)
    # The server's memory is exactly what one process writes into an embedded store.
    for namespace, conversation in (("ns-f", first), ("ns-g", second)):
        local = make_resources(tmp_path / f"local-{namespace}")
        ingest_conversation(conversation, namespace, resources=local, policy="heuristic")
        assert store.snapshot(namespace).fingerprint() == local.store.snapshot(namespace).fingerprint()
        local.store.close()
    assert set(store.namespaces()) == {"ns-f", "ns-g"}


@pytest.mark.integration
@pytest.mark.slow
def test_two_processes_on_a_chroma_server_writing_one_namespace_lose_nothing(tmp_path, chroma_server) -> None:
    """The per-namespace commit lock is in-process only: this is the cross-process race on the manifest."""
    first = marked_conversation("hotel", sessions=5, first_session=1, conversation_id="shared")
    second = marked_conversation("india", sessions=5, first_session=6, conversation_id="shared")
    results = _run_writers(tmp_path, chroma_server, [("shared", first), ("shared", second)])
    errors = [r.get("error", "") for r in results if not r["ok"]]
    store = _server_store(chroma_server)
    snap = store.snapshot("shared")
    report = {
        "writer errors": [e.strip().splitlines()[-1] for e in errors],
        "committed sessions": sorted(snap.manifest.sessions),
        "generation": snap.generation,
        "memory problems": memory_problems(snap, _session_turns(first, second))[:8],
        "uncommitted versions": uncommitted_versions(store, "shared"),
    }
    assert not errors and not report["memory problems"], json.dumps(report, indent=1)
    _expect_complete(store, "shared", first, second)


def test_threads_committing_first_to_a_new_store_all_mark_it(tmp_path: Path) -> None:
    """The first commits of several threads to a fresh store each write the memory marker: none may fail
    because another thread moved a shared temporary file away (a race seen once in CI)."""
    for trial in range(10):
        resources = make_resources(tmp_path / f"memory-{trial}")
        store = resources.store
        barrier = threading.Barrier(6)
        with ThreadPoolExecutor(6) as pool:
            for future in [pool.submit(_mark_after, barrier, store) for _ in range(6)]:
                future.result()  # raises the thread's StoreAccessError, if any
        assert (tmp_path / f"memory-{trial}" / ".logicmap-memory").exists()
        assert not list((tmp_path / f"memory-{trial}").glob(".logicmap-memory.*.tmp"))
        store.close()


def _mark_after(barrier: threading.Barrier, store: object) -> None:
    barrier.wait()
    chroma.mark_memory(store)  # the store's private hook, the race under test
