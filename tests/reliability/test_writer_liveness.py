"""Liveness of writers racing for one namespace: every writer finishes (waiting with backoff for the namespace),
every session of every writer is stored exactly once, and a writer that gives up at its deadline says so in one
line. Threads share an embedded store (a second process on it is refused, see test_concurrency); processes share
a Chroma server.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from logicmap.graphs.chat.chatbot import ingest_session
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.memory.files.backup import export_namespace, import_namespace
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.runtime.contention import NamespaceBusyError, commit_with_backoff, wait_for_namespace
from logicmap.memory.runtime.deadline import RunDeadline, deadline_scope
from logicmap.memory.store import GenerationConflict, MemoryStore
from logicmap.settings import LogicMapSettings
from logicmap.tools.remember import create_remember_tool
from tests import chroma_internals as chroma
from tests.conftest import make_resources
from tests.reliability import test_concurrency
from tests.reliability.support import (
    ROOT,
    locomo_document,
    marked_conversation,
    memory_problems,
    subprocess_env,
    uncommitted_versions,
    visible_duplicates,
)
from tests.reliability.test_concurrency import _run_writers

chroma_server = test_concurrency.chroma_server  # the fixture: a Chroma server on 127.0.0.1

THREAD_CASES = 6


def _expected(conversations: list[Conversation]) -> dict[str, list[str]]:
    return {s.session_id: [t.dia_id for t in s.turns] for c in conversations for s in c.sessions}


def _assert_each_session_once(store: MemoryStore, namespace: str, expected: dict[str, list[str]]) -> None:
    snap = store.snapshot(namespace)
    assert sorted(snap.manifest.sessions) == sorted(expected), f"{namespace}: sessions lost or invented"
    assert sorted(snap.turns) == sorted(t for turns in expected.values() for t in turns), f"{namespace}: turns"
    problems = memory_problems(snap, expected)
    assert not problems, "\n".join(problems)
    assert not visible_duplicates(store, namespace), f"{namespace}: duplicated records"
    assert not uncommitted_versions(store, namespace), f"{namespace}: uncommitted versions left behind"


SHARED = "conv-shared"  # one namespace holds one conversation: the writers send parts of it (with append=True)


def _writer_jobs(rng: random.Random, writers: int) -> list[Conversation]:
    """Writers with distinct sessions (1-4 each, 2-5 turns) of one conversation, a part each."""
    jobs, first = [], 1
    for w in range(writers):
        sessions = rng.randint(1, 4)
        jobs.append(
            marked_conversation(
                f"wr{w}x",
                sessions=sessions,
                turns_per_session=rng.randint(2, 5),
                seed=rng.randrange(1000),
                first_session=first,
                conversation_id=SHARED,
            )
        )
        first += sessions
    return jobs


@pytest.mark.slow
def test_generated_thread_writers_on_one_namespace_all_finish_and_store_every_session_once(tmp_path: Path) -> None:
    """Seeded cases: 2-6 threads, each with 1-4 sessions, through ingest (every other case through the chatbot's
    remember path, session by session: a namespace is fed by one source): none raises, and the namespace holds
    each session exactly once."""
    tried = passed = 0
    for case in range(THREAD_CASES):
        rng = random.Random(case)
        writers = [2, 4, 6, 3, 5, 4][case]
        jobs = _writer_jobs(rng, writers)
        resources = make_resources(tmp_path / f"memory-{case}")
        resources.store  # noqa: B018 - open the store before the threads race for it
        barrier = threading.Barrier(writers)

        def write(job: tuple[int, Conversation], barrier=barrier, resources=resources, chat=case % 2 == 1) -> list:
            _, conversation = job
            barrier.wait()
            if chat:  # the chatbot's remember path: one session per call
                return [
                    r
                    for s in conversation.sessions
                    for r in ingest_session(s, "shared", resources=resources, policy="heuristic").sessions
                ]
            return ingest_conversation(
                conversation, "shared", resources=resources, policy="heuristic", append=True
            ).sessions

        tried += 1
        with ThreadPoolExecutor(writers) as pool:
            reports = [r for rs in pool.map(write, enumerate(jobs)) for r in rs]
        assert not any(r.skipped for r in reports)
        assert sorted(r.session_id for r in reports) == sorted(_expected(jobs)), f"case {case}: a writer stopped"
        _assert_each_session_once(resources.store, "shared", _expected(jobs))
        resources.store.close()
        passed += 1
    print(f"thread writer cases: tried {tried}, passed {passed}")
    assert tried == passed == THREAD_CASES


@pytest.mark.slow
def test_remember_tools_racing_on_one_namespace_all_store_their_statement(tmp_path: Path) -> None:
    """The remember tool (a write path of tools) from eight threads at once: every statement is stored."""
    resources = make_resources(tmp_path / "memory")
    resources.store  # noqa: B018
    tool = create_remember_tool(
        "shared", ingest=lambda s, ns: ingest_session(s, ns, resources=resources, policy="heuristic")
    )
    barrier = threading.Barrier(8)

    def remember(i: int) -> str:
        barrier.wait()
        return tool.invoke({"text": f"statement {i}: I keep bees number {i} on the roof", "speaker": "user"})

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(remember, range(8)))
    assert all(r.startswith("Remembered as turn") for r in replies), replies
    snap = resources.store.snapshot("shared")
    texts = sorted(t.text for t in snap.turns.values())
    assert texts == sorted(f"statement {i}: I keep bees number {i} on the roof" for i in range(8))
    assert len(snap.manifest.sessions) == 8
    resources.store.close()


def test_a_wait_past_the_run_deadline_gives_up_in_one_line_naming_the_namespace() -> None:
    scope = RunDeadline(deadline_s=0.2)
    scope.restart()
    since = time.monotonic()
    with deadline_scope(scope), pytest.raises(NamespaceBusyError) as caught:
        for conflicts in range(1, 10_000):
            wait_for_namespace("team-a", conflicts, since)
    message = str(caught.value)
    assert "\n" not in message and "'team-a'" in message and "gave up after waiting" in message
    assert 0.0 <= caught.value.waited_s <= 0.2 + 2.0  # the last wait is refused, never slept past the deadline
    assert isinstance(caught.value, GenerationConflict)  # callers that handle lost races still recognise it


def test_commit_with_backoff_retries_lost_races_until_it_wins() -> None:
    outcomes = iter([GenerationConflict("lost"), GenerationConflict("lost"), "won"])

    def attempt() -> str:
        item = next(outcomes)
        if isinstance(item, Exception):
            raise item
        return item

    assert commit_with_backoff("ns", attempt, bound_s=30) == "won"
    with pytest.raises(NamespaceBusyError, match="'ns'"):
        commit_with_backoff("ns", lambda: (_ for _ in ()).throw(GenerationConflict("always")), bound_s=0.3)


# -- processes through a Chroma server --------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.slow
def test_four_server_mode_processes_writing_one_namespace_all_finish(tmp_path, chroma_server) -> None:
    """The issue's case (2 of 4 gave up before): four processes, one namespace, every session once."""
    jobs = [
        marked_conversation(f"srv{i}x", sessions=3, first_session=1 + 3 * i, conversation_id=SHARED) for i in range(4)
    ]
    results = _run_writers(tmp_path, chroma_server, [("shared", c) for c in jobs])
    errors = [r.get("error", "").strip().splitlines()[-1:] for r in results if not r["ok"]]
    assert not errors, errors
    store = MemoryStore(LogicMapSettings(chroma_host="127.0.0.1", chroma_port=chroma_server))
    _assert_each_session_once(store, "shared", _expected(jobs))
    committed = sorted(s for r in results for s, skipped, _ in r["sessions"] if not skipped)
    assert committed == sorted(_expected(jobs))


@pytest.mark.integration
@pytest.mark.slow
def test_generated_server_mode_process_writers_all_finish(tmp_path, chroma_server) -> None:
    """Seeded cases of 2-5 processes with 1-3 sessions each on one namespace of a Chroma server."""
    tried = passed = 0
    for case, writers in enumerate((2, 5, 3)):
        rng = random.Random(100 + case)
        jobs, first = [], 1
        for w in range(writers):
            sessions = rng.randint(1, 3)
            jobs.append(
                marked_conversation(f"g{case}w{w}x", sessions=sessions, first_session=first, conversation_id=SHARED)
            )
            first += sessions
        namespace = f"shared-{case}"
        case_dir = tmp_path / f"case-{case}"
        case_dir.mkdir()
        tried += 1
        results = _run_writers(case_dir, chroma_server, [(namespace, c) for c in jobs])
        assert all(r["ok"] for r in results), [r.get("error", "")[-300:] for r in results if not r["ok"]]
        store = MemoryStore(LogicMapSettings(chroma_host="127.0.0.1", chroma_port=chroma_server))
        _assert_each_session_once(store, namespace, _expected(jobs))
        passed += 1
    print(f"server process writer cases: tried {tried}, passed {passed}")
    assert tried == passed == 3


def _hold_commit_lock(port: int, namespace: str, seconds: float) -> None:
    """Another writer's commit lease on ``namespace`` for ``seconds`` (as a live writer's lock record)."""
    store = MemoryStore(LogicMapSettings(chroma_host="127.0.0.1", chroma_port=port))
    chroma.hold_lease(store, namespace, "other-writer", seconds)  # plays the other writer


@pytest.mark.integration
@pytest.mark.slow
def test_a_cli_ingest_that_waits_past_its_deadline_exits_3_with_one_line(tmp_path, chroma_server) -> None:
    conversation = marked_conversation("busy", sessions=1)
    file = tmp_path / "busy.json"
    file.write_text(json.dumps(locomo_document(conversation)), encoding="utf-8")
    _hold_commit_lock(chroma_server, "held", 600)
    env = subprocess_env(
        tmp_path / "unused",
        LOGICMAP_CHROMA_HOST="127.0.0.1",
        LOGICMAP_CHROMA_PORT=str(chroma_server),
        LOGICMAP_RUN_DEADLINE_S="3",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "logicmap", "ingest", str(file), "--namespace", "held", "--quiet"],
        cwd=ROOT.parent,
        env={**env, "PYTHONPATH": str(ROOT.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Besides notes and the store's "waiting for its commit lease" progress lines: one error line.
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "'held'" in lines[0] and "gave up after waiting" in lines[0], lines[0]
    store = MemoryStore(LogicMapSettings(chroma_host="127.0.0.1", chroma_port=chroma_server))
    assert store.manifest("held").generation == 0  # nothing half-written


@pytest.mark.integration
@pytest.mark.slow
def test_an_import_waits_for_a_busy_namespace_then_restores_it(tmp_path, chroma_server) -> None:
    """Backup import goes through the same helper: it waits out another writer's lease, bounded by the deadline."""
    source = make_resources(tmp_path / "source")
    ingest_conversation(marked_conversation("imp", sessions=2), "orig", resources=source, policy="heuristic")
    export_namespace(source.store, "orig", tmp_path / "orig.jsonl")
    orig = source.store.snapshot("orig")
    reference = (sorted(orig.manifest.sessions), sorted(orig.turns), orig.generation)
    source.store.close()
    store = MemoryStore(
        LogicMapSettings(
            chroma_host="127.0.0.1", chroma_port=chroma_server, embedding_provider="hashing", run_deadline_s=2
        )
    )
    _hold_commit_lock(chroma_server, "restored", 600)
    with pytest.raises(NamespaceBusyError, match="'restored'"):
        import_namespace(store, tmp_path / "orig.jsonl", namespace="restored")
    assert store.manifest("restored").generation == 0
    patient = MemoryStore(
        LogicMapSettings(
            chroma_host="127.0.0.1", chroma_port=chroma_server, embedding_provider="hashing", run_deadline_s=60
        )
    )
    _hold_commit_lock(chroma_server, "later", 3)  # a lease that ends: the import gets its turn
    import_namespace(patient, tmp_path / "orig.jsonl", namespace="later")
    later = patient.snapshot("later")
    assert (sorted(later.manifest.sessions), sorted(later.turns), later.generation) == reference


@pytest.mark.slow
def test_redo_fallbacks_racing_with_writers_on_its_namespace_finishes(tmp_path: Path) -> None:
    """``--redo-fallbacks`` shares the wait: it rebuilds its session once while three writers append theirs."""
    from logicmap.graphs.ingest.ingest import IngestContext
    from tests.unit.session_models import SessionModel, long_conversation

    resources = make_resources(tmp_path / "memory")
    broken = long_conversation(9, sessions=3)
    resources.llm_ = SessionModel(garbage={"segmenter"}, garbage_when="[D2:1]")
    ingest_conversation(
        broken, "ns", resources=resources, context=IngestContext(policy="llm", combined_extraction=False)
    )
    assert resources.store.snapshot("ns").manifest.sessions["S2"].fallbacks
    resources.llm_ = SessionModel(chunk=3)
    writers = [
        marked_conversation(f"rd{i}x", sessions=2, first_session=4 + 2 * i, conversation_id=broken.conversation_id)
        for i in range(3)
    ]
    barrier = threading.Barrier(4)

    def redo() -> list:
        barrier.wait()
        return ingest_conversation(
            broken,
            "ns",
            resources=resources,
            redo_fallbacks=True,
            context=IngestContext(policy="llm", context_tokens=32768),
        ).sessions

    def append(conversation: Conversation) -> list:
        barrier.wait()
        return ingest_conversation(conversation, "ns", resources=resources, policy="heuristic", append=True).sessions

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(redo), *(pool.submit(append, c) for c in writers)]
        reports = [f.result() for f in futures]
    rebuilt = [s.session_id for s in reports[0] if not s.skipped]
    assert rebuilt == ["S2"], reports[0]
    snap = resources.store.snapshot("ns")
    assert not snap.manifest.sessions["S2"].fallbacks
    expected = {**_expected([broken]), **_expected(writers)}
    _assert_each_session_once(resources.store, "ns", expected)
    resources.store.close()
