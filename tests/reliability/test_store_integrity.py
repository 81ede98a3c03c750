"""Store integrity: fenced commits on a Chroma server, damaged and unusable stores, the process lock and
fork, and the embedder a namespace was built with.

Cases are generated from seeds (stall points, damage kinds and offsets, lock tampering, embedder pairs);
each test prints how many cases it ran, and ``LOGICMAP_RELIABILITY_REPORT`` collects the summaries.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pytest

from logicmap.memory.records.records import Relation, SessionInfo, Turn
from logicmap.memory.store import (
    MEMORY_MARKER,
    ChangeSet,
    CommitLeaseLost,
    EmbedderMismatchError,
    GenerationConflict,
    Manifest,
    MemoryStore,
    StoreAccessError,
    StoreDamagedError,
    StoreError,
    StoreForkedError,
    StoreLockedError,
)
from logicmap.settings import LogicMapSettings
from tests import chroma_internals as chroma
from tests.reliability.support import ROOT, memory_problems, subprocess_env, uncommitted_versions, visible_duplicates
from tests.reliability.test_concurrency import chroma_server  # noqa: F401 - the fixture, reused

SEED = 20240923
FENCE_TRIALS = int(os.environ.get("LOGICMAP_FENCE_TRIALS", "14"))
LEASE_S = 0.4
STALL_S = 1.3  # well past the lease: another writer takes over meanwhile


def _report(line: str) -> None:
    print(line)
    if os.environ.get("LOGICMAP_RELIABILITY_REPORT"):
        with open(os.environ["LOGICMAP_RELIABILITY_REPORT"], "a", encoding="utf-8") as handle:
            handle.write(f"store-integrity: {line}\n")


def _session(namespace: str, sid: str, turns: int, rng: random.Random) -> ChangeSet:
    """A session's change: its turns, a relation every writer rewrites, and one retirement."""
    records = [
        Turn(
            namespace=namespace,
            session_id=sid,
            dia_id=f"{sid}:{i}",
            speaker=rng.choice(["Ana", "Rui"]),
            text=f"{sid} turn {i} {rng.random():.6f}",
        )
        for i in range(1, turns + 1)
    ]
    shared = Relation(id="shared", namespace=namespace, source="a", target="b", label=f"written by {sid}")
    own = Relation(id=f"rel-{sid}", namespace=namespace, source="a", target="b", label=sid)
    return ChangeSet(
        namespace=namespace,
        base_generation=0,
        turns=records,
        turn_vectors=[[1.0, rng.random(), rng.random()] for _ in records],
        relations=[shared, own],
        session=SessionInfo(session_id=sid, content_hash=sid, generation=0, policy="heuristic", events=0, relations=2),
    )


def _commit_on_head(store: MemoryStore, change: ChangeSet) -> Manifest:
    return store.commit(change.model_copy(update={"base_generation": store.manifest(change.namespace).generation}))


def _session_turns(_store: MemoryStore, _namespace: str, changes: dict[str, ChangeSet]) -> dict[str, list[str]]:
    return {sid: [t.dia_id for t in change.turns] for sid, change in changes.items()}


def _consistent(store: MemoryStore, namespace: str, changes: dict[str, ChangeSet]) -> list[str]:
    """The snapshot holds exactly the records of the sessions its manifest names (synthetic sessions:
    turns and relations, no events)."""
    snap = store.snapshot(namespace)
    problems = [
        p
        for p in memory_problems(snap, _session_turns(store, namespace, changes))
        if not p.startswith(("relation ", "turn positions"))
    ]
    expected = sorted(t.dia_id for sid in snap.manifest.sessions for t in changes[sid].turns)
    if sorted(snap.turns) != expected:
        problems.append(f"visible turns {sorted(snap.turns)} differ from the manifest's sessions' {expected}")
    problems += [f"duplicated {d}" for d in visible_duplicates(store, namespace)]
    writers = {f"rel-{sid}" for sid in snap.manifest.sessions}
    if set(snap.relations) - {"shared"} != writers:
        problems.append(f"relations {sorted(snap.relations)} do not match sessions {sorted(snap.manifest.sessions)}")
    return problems


# -- 2. fenced commits on a Chroma server ------------------------------------------------------------
class StallPlan:
    """Counts a store's Chroma calls during one commit and stalls before the chosen one."""

    def __init__(self, stall_at: int | None = None, stall_s: float = STALL_S, predicate: Any = None) -> None:
        self.stall_at, self.stall_s, self.predicate = stall_at, stall_s, predicate
        self.calls: list[str] = []
        self.stalled: str | None = None
        self.active = False

    def before(self, name: str, kwargs: dict[str, Any]) -> None:
        if not self.active or threading.current_thread().name != "writer-a":
            return
        # Retirement updates are left out: a stall inside one, between its fence check and its landing,
        # is the one window the fence cannot close (documented in memory/store/generations.py, _Fence).
        if name == "update":
            return
        ids = kwargs.get("ids") or []
        label = f"{name}({ids[0] if ids else ''})"
        index = len(self.calls)
        self.calls.append(label)
        hit = self.predicate(name, ids) if self.predicate else index == self.stall_at
        if hit and self.stalled is None:
            self.stalled = f"#{index} {label}"
            time.sleep(self.stall_s)


class StallingCollection:
    def __init__(self, inner: Any, plan: StallPlan) -> None:
        self._inner, self._plan = inner, plan

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in ("add", "get", "upsert", "update", "delete", "query"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._plan.before(name, kwargs)
            return attr(*args, **kwargs)

        return call


def _server_store(port: int) -> MemoryStore:
    store = MemoryStore(LogicMapSettings(chroma_host="127.0.0.1", chroma_port=port, embedding_provider="hashing"))
    store.commit_lease_s = LEASE_S
    return store


def _stalling(store: MemoryStore, namespace: str, plan: StallPlan) -> MemoryStore:
    kinds = ("meta", "turns", "events", "relations", "topics", "facts", "cues", "tags")
    chroma.wrap_collections(store, namespace, lambda col: StallingCollection(col, plan), kinds)
    return store


def _race(port: int, namespace: str, plan: StallPlan, rng: random.Random) -> dict[str, Any]:
    """Writer A stalls inside its commit past the lease while writer B commits on the same base."""
    setup = _server_store(port)
    changes = {sid: _session(namespace, sid, rng.randint(1, 3), rng) for sid in ("S0", "SA", "SB")}
    _commit_on_head(setup, changes["S0"])
    base = setup.manifest(namespace).generation
    writer_a = _stalling(_server_store(port), namespace, plan)
    writer_b = _server_store(port)
    outcome: dict[str, Any] = {}

    def run_a() -> None:
        plan.active = True
        try:
            outcome["a"] = writer_a.commit(changes["SA"].model_copy(update={"base_generation": base}))
        except Exception as exc:  # judged below
            outcome["a"] = exc
        finally:
            plan.active = False

    thread = threading.Thread(target=run_a, name="writer-a")
    thread.start()
    time.sleep(rng.uniform(0.02, 0.15))
    try:
        outcome["b"] = writer_b.commit(changes["SB"].model_copy(update={"base_generation": base}))
    except Exception as exc:
        outcome["b"] = exc
    thread.join(timeout=120)
    outcome.update(changes=changes, setup=setup)
    return outcome


def _judge(port: int, namespace: str, outcome: dict[str, Any], plan: StallPlan) -> list[str]:
    label = f"{namespace} (stall at {plan.stalled or 'none'})"
    store, changes = outcome["setup"], outcome["changes"]
    problems = []
    won = [w for w in ("a", "b") if isinstance(outcome[w], Manifest)]
    for w in ("a", "b"):
        if not isinstance(outcome[w], Manifest | GenerationConflict):
            problems.append(f"{label}: writer {w} raised {type(outcome[w]).__name__}: {outcome[w]}")
        elif isinstance(outcome[w], CommitLeaseLost):
            message = str(outcome[w])
            if "\n" in message or "lease" not in message or "re-run" not in message:
                problems.append(f"{label}: unclear lost-lease error {message!r}")
    if len(won) != 1:
        problems.append(f"{label}: {len(won)} writers committed on one base ({outcome['a']!r}, {outcome['b']!r})")
    snap = store.snapshot(namespace)
    expected_sessions = sorted(["S0", *[f"S{w.upper()}" for w in won]])
    if sorted(snap.manifest.sessions) != expected_sessions:
        problems.append(f"{label}: manifest names {sorted(snap.manifest.sessions)}, committed were {expected_sessions}")
    problems += [f"{label}: {p}" for p in _consistent(store, namespace, changes)]
    if won and snap.relations.get("shared") and snap.relations["shared"].label != f"written by S{won[0].upper()}":
        problems.append(f"{label}: the shared relation reads {snap.relations['shared'].label!r}")
    # The loser re-runs on the new head: both sessions, nothing left behind.
    for w in ("a", "b"):
        if not isinstance(outcome[w], Manifest):
            _commit_on_head(_server_store(port), changes[f"S{w.upper()}"])
    final = store.snapshot(namespace)
    if sorted(final.manifest.sessions) != ["S0", "SA", "SB"]:
        problems.append(f"{label}: after the re-run the manifest names {sorted(final.manifest.sessions)}")
    problems += [f"{label} after the re-run: {p}" for p in _consistent(store, namespace, changes)]
    leftovers = uncommitted_versions(store, namespace)
    if leftovers:
        problems.append(f"{label}: {leftovers} uncommitted versions after the re-run")
    return problems


@pytest.mark.integration
@pytest.mark.slow
def test_a_writer_stalled_past_its_lease_cannot_commit_over_the_writer_that_took_over(chroma_server) -> None:  # noqa: F811
    port = chroma_server
    rng = random.Random(SEED)
    # Calibrate: how many Chroma calls one commit makes, so stall points cover all of it.
    calibration = StallPlan(stall_at=None)
    probe = _stalling(_server_store(port), "fence-calibrate", calibration)
    thread = threading.Thread(
        target=lambda: (
            setattr(calibration, "active", True),
            _commit_on_head(probe, _session("fence-calibrate", "S0", 2, rng)),
        ),
        name="writer-a",
    )
    thread.start()
    thread.join()
    calls = len(calibration.calls)
    plans = [
        StallPlan(predicate=lambda name, ids: name == "add" and bool(ids) and ids[0].startswith("next@")),
        StallPlan(predicate=lambda name, ids: name == "add" and bool(ids) and ids[0].startswith("manifest@")),
        StallPlan(predicate=lambda name, ids: name == "upsert" and bool(ids) and ids[0] == "manifest"),
        *[StallPlan(stall_at=rng.randrange(calls + 2)) for _ in range(FENCE_TRIALS)],
    ]
    failures, lost, stalled = [], 0, 0
    for i, plan in enumerate(plans):
        namespace = f"fence-{i}"
        outcome = _race(port, namespace, plan, rng)
        failures += _judge(port, namespace, outcome, plan)
        lost += isinstance(outcome["a"], CommitLeaseLost) or isinstance(outcome["b"], CommitLeaseLost)
        stalled += plan.stalled is not None
    _report(
        f"fencing: {len(plans)} races ({len(plans) - 3} at random points of {calls} Chroma calls), "
        f"{stalled} writers stalled {STALL_S}s past a {LEASE_S}s lease, {lost} aborted with CommitLeaseLost, "
        f"{len(failures)} problems"
    )
    assert not failures, "\n".join(failures)
    assert stalled >= len(plans) // 2 and lost >= 2, "the stalls must actually race the other writer"


# -- 8. damaged, missing and unusable stores ---------------------------------------------------------
def _make_memory(directory: Path) -> dict[str, Any]:
    rng = random.Random(7)
    with MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing")) as store:
        for sid in ("S1", "S2"):
            _commit_on_head(store, _session("mem", sid, 3, rng))
        return store.snapshot("mem").fingerprint()


def _digest(path: Path) -> str | None:
    if path.is_dir():
        return "dir:" + ",".join(sorted(p.name for p in path.iterdir()))
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def _damage(directory: Path, kind: str, rng: random.Random) -> str:
    database = directory / "chroma" / "chroma.sqlite3"
    size = database.stat().st_size
    if kind == "truncate":
        cut = rng.randrange(0, size)
        os.truncate(database, cut)
        return f"truncated to {cut} of {size} bytes"
    if kind == "overwrite":
        offset = rng.choice([0, rng.randrange(0, size - 1)])
        length = rng.choice([16, 100, 4096, size])
        with database.open("r+b") as handle:
            handle.seek(offset)
            handle.write(rng.randbytes(min(length, size - offset)))
        return f"{min(length, size - offset)} random bytes at {offset}"
    if kind == "zeros":
        database.write_bytes(b"\0" * size)
        return "zero-filled"
    if kind == "empty":
        database.write_bytes(b"")
        return "emptied"
    if kind == "delete":
        database.unlink()
        return "deleted"
    if kind == "delete_dir":
        shutil.rmtree(directory / "chroma")
        return "chroma directory deleted"
    if kind == "directory":
        database.unlink()
        database.mkdir()
        return "replaced by a directory"
    raise ValueError(kind)


DAMAGE_KINDS = ("truncate", "overwrite", "zeros", "empty", "delete", "delete_dir", "directory")


@pytest.mark.slow
def test_a_damaged_or_missing_store_is_reported_in_one_line_and_never_written_over(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    fingerprint = _make_memory(reference)
    assert (reference / MEMORY_MARKER).exists()
    rng = random.Random(SEED)
    cases = [
        kind
        for kind in DAMAGE_KINDS
        for _ in range(1 if kind in ("zeros", "empty", "delete", "delete_dir", "directory") else 6)
    ]
    failures, detected, harmless, late = [], 0, 0, {}
    for i, kind in enumerate(cases):
        directory = tmp_path / f"case-{i}"
        shutil.copytree(reference, directory)
        how = _damage(directory, kind, rng)
        database = directory / "chroma" / "chroma.sqlite3"
        before = _digest(database)
        phase = "open"
        try:
            with MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing")) as store:
                phase = "read"
                seen = store.snapshot("mem").fingerprint()
                phase = "commit"
                _commit_on_head(store, _session("mem", "S3", 1, rng))
            if seen != fingerprint:
                failures.append(f"{how}: read without an error but the memory differs")
            harmless += 1
        except StoreDamagedError as exc:
            detected += 1
            message = str(exc)
            if (
                "\n" in message
                or str(directory) not in message
                or ("restore" not in message and "delete" not in message)
            ):
                failures.append(f"{how}: unclear message {message!r}")
            late[phase] = late.get(phase, 0) + 1
            # Found when opening: nothing touched it. Found later (bytes inside a record): Chroma's own log
            # compaction may have run before the failure; LogicMap writes nothing after it.
            if phase == "open" and _digest(database) != before:
                failures.append(f"{how}: the damaged store was written over")
        except Exception as exc:  # a raw error is the failure being tested
            failures.append(f"{how}: raw {type(exc).__name__}: {str(exc)[:200]}")
    _report(
        f"damaged stores: {len(cases)} cases, {detected} refused with StoreDamagedError (found at: {late}), "
        f"{harmless} damage in unused bytes read back intact, {len(failures)} problems"
    )
    assert not failures, "\n".join(failures)
    assert detected >= len(cases) - 6


CLI_PROBE = """
import io, json, sys
from contextlib import redirect_stderr
from logicmap.graphs.surfaces.cli import main
out = []
for data_dir in sys.argv[1:]:
    err = io.StringIO()
    with redirect_stderr(err):
        try:
            code = main(["--data-dir", data_dir, "namespaces"])
        except SystemExit as exc:
            code = exc.code
    out.append({"dir": data_dir, "code": code, "stderr": err.getvalue()})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_cli_reports_unusable_stores_in_one_line_and_exits_2(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    _make_memory(reference)
    rng = random.Random(SEED)
    dirs = []
    for kind in ("truncate", "overwrite", "empty", "delete"):
        directory = tmp_path / kind
        shutil.copytree(reference, directory)
        _damage(directory, kind, rng)
        if kind == "overwrite":  # the header itself
            with (directory / "chroma" / "chroma.sqlite3").open("r+b") as handle:
                handle.write(b"garbage" * 20)
        dirs.append(directory)
    (tmp_path / "a-file").write_text("not a directory")
    dirs.append(tmp_path / "a-file")
    locked_dir = tmp_path / "lock-is-dir"
    (locked_dir / ".logicmap.lock").mkdir(parents=True)
    dirs.append(locked_dir)
    proc = subprocess.run(
        [sys.executable, "-c", CLI_PROBE, *map(str, dirs)],
        cwd=ROOT,
        env=subprocess_env(tmp_path / "x"),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for result in results:
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert result["code"] == 2 and len(lines) == 1, result
        assert lines[0].startswith("error: ") and result["dir"] in lines[0], result
    for directory in dirs[:4]:
        assert not (directory / "chroma" / "chroma.sqlite3").exists() or _digest(
            directory / "chroma" / "chroma.sqlite3"
        )
    assert not (tmp_path / "delete" / "chroma" / "chroma.sqlite3").exists(), "a missing store was recreated"
    assert (tmp_path / "empty" / "chroma" / "chroma.sqlite3").stat().st_size == 0, "an emptied store was written"


def test_a_data_dir_that_is_a_file_and_a_lock_path_that_is_a_directory_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    cases = {"data dir is a file": tmp_path / "file", "under a file": tmp_path / "file" / "below"}
    (tmp_path / "lockdir" / ".logicmap.lock").mkdir(parents=True)
    cases["lock path is a directory"] = tmp_path / "lockdir"
    for what, directory in cases.items():
        with pytest.raises(StoreAccessError) as info:
            MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing"))
        assert "\n" not in str(info.value) and str(directory.parent if what == "under a file" else directory) in str(
            info.value
        ), what
    # After the fix the store opens.
    (tmp_path / "lockdir" / ".logicmap.lock").rmdir()
    with MemoryStore(LogicMapSettings(data_dir=tmp_path / "lockdir", embedding_provider="hashing")) as store:
        assert store.namespaces() == []


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.slow
def test_a_full_disk_is_a_one_line_error_and_memory_stays_whole(small_disk: Path) -> None:
    rng = random.Random(SEED)
    directory = small_disk / "memory"
    changes: dict[str, ChangeSet] = {}
    store = MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing"))
    try:
        for sid in ("S1", "S2"):
            changes[sid] = _session("mem", sid, 3, rng)
            _commit_on_head(store, changes[sid])
        filler = small_disk / "filler"  # room to free afterwards; sessions fill the rest
        filler.write_bytes(b"\0" * (3 * 1024 * 1024))
        errors = []
        for i in range(3, 40):
            sid = f"S{i}"
            changes[sid] = _session("mem", sid, 20, rng)
            changes[sid].turns[:] = [
                t.model_copy(update={"text": t.text + " " + "x" * 2000}) for t in changes[sid].turns
            ]
            try:
                _commit_on_head(store, changes[sid])
            except StoreAccessError as exc:
                errors.append(str(exc))
                break
        assert errors, "the disk never filled up"
        assert "\n" not in errors[0] and "full" in errors[0] and str(directory) in errors[0], errors[0]
        with pytest.raises(StoreAccessError):  # the same error again, not a hang in Chroma
            store.snapshot("mem")
        store.close()
        filler.unlink()
        # Re-run as a user would (a new process): memory is whole and the same session commits.
        recover = RECOVER.format(directory=str(directory), change=changes[sid].model_dump_json())
        done = subprocess.run(
            [sys.executable, "-c", recover],
            cwd=ROOT,
            env=subprocess_env(directory),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        before, after = json.loads(done.stdout.strip().splitlines()[-1])
        committed = sorted(s for s in changes if s != sid)[: len(before["sessions"])]
        assert sorted(before["sessions"]) == sorted(committed) and before["turns"] == sum(
            len(changes[s].turns) for s in before["sessions"]
        )
        assert sid in after["sessions"] and after["turns"] == before["turns"] + len(changes[sid].turns)
        _report(f"full disk: refused after {i - 3} sessions with {errors[0][:60]!r}...; re-run committed it")
    finally:
        store.close()


RECOVER = """
import json
from logicmap.settings import LogicMapSettings
from logicmap.memory.store import ChangeSet, MemoryStore
store = MemoryStore(LogicMapSettings(data_dir={directory!r}, embedding_provider="hashing"))
snap = store.snapshot("mem")
before = {{"sessions": sorted(snap.manifest.sessions), "turns": len(snap.turns)}}
change = ChangeSet.model_validate_json({change!r})
store.commit(change.model_copy(update={{"base_generation": snap.generation}}))
snap = store.snapshot("mem")
print(json.dumps([before, {{"sessions": sorted(snap.manifest.sessions), "turns": len(snap.turns)}}]))
"""


# -- 9. the process lock and fork ---------------------------------------------------------------------
LOCK_PROBE = """
import sys
from logicmap.settings import LogicMapSettings
from logicmap.memory.store import MemoryStore, StoreError
for line in sys.stdin:
    try:
        store = MemoryStore(LogicMapSettings(data_dir=line.strip(), embedding_provider="hashing"))
        store.namespaces()
        store.close()
        print("OPENED", flush=True)
    except StoreError as exc:
        print(type(exc).__name__, str(exc).replace(chr(10), " "), flush=True)
"""


def _tamper(lock: Path, kind: str, rng: random.Random) -> None:
    if kind == "delete":
        lock.unlink()
    elif kind == "recreate":
        lock.unlink()
        lock.write_text(str(rng.randrange(2, 99999)))
    elif kind == "replace":
        tmp = lock.with_name("other")
        tmp.write_text("")
        os.replace(tmp, lock)
    elif kind == "directory":
        lock.unlink()
        lock.mkdir()
    elif kind == "nothing":
        pass
    else:
        raise ValueError(kind)


@pytest.mark.slow
def test_tampering_with_the_lock_file_admits_no_second_process(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    kinds = ["delete", "recreate", "replace", "directory", "nothing"]
    trials = [rng.choice(kinds) for _ in range(20)]
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_PROBE],
        cwd=ROOT,
        env=subprocess_env(tmp_path / "x"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    failures = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for i, kind in enumerate(trials):
            directory = tmp_path / f"trial-{i}"
            with MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing")) as store:
                _commit_on_head(store, _session("mem", "S1", 1, rng))
                _tamper(directory / ".logicmap.lock", kind, rng)
                proc.stdin.write(f"{directory}\n")
                proc.stdin.flush()
                answer = proc.stdout.readline().strip()
                if not answer.startswith("StoreLockedError"):
                    failures.append(f"trial {i} ({kind}): a second process got {answer!r}")
                _commit_on_head(store, _session("mem", "S2", 1, rng))  # the holder goes on writing
            if kind == "directory":
                (directory / ".logicmap.lock").rmdir()
            proc.stdin.write(f"{directory}\n")  # released: the other process may open it now
            proc.stdin.flush()
            answer = proc.stdout.readline().strip()
            if answer != "OPENED":
                failures.append(f"trial {i} ({kind}): after release the other process got {answer!r}")
    finally:
        proc.kill()
        proc.wait()
    _report(
        f"lock tampering: {len(trials)} trials ({', '.join(f'{k}={trials.count(k)}' for k in kinds)}), "
        f"{len(failures)} admitted a second process"
    )
    assert not failures, "\n".join(failures)


FORK_CALLS = ("manifest", "namespaces", "snapshot", "query", "commit", "has_namespace", "reopen")


def _in_child(store: MemoryStore, directory: Path, call: str) -> str:
    try:
        if call == "manifest":
            store.manifest("mem")
        elif call == "namespaces":
            store.namespaces()
        elif call == "snapshot":
            store.snapshot("mem")
        elif call == "query":
            store.query("mem", "turns", [1.0, 0.0, 0.0], 3)
        elif call == "commit":
            _commit_on_head(store, _session("mem", "S9", 1, random.Random(1)))
        elif call == "has_namespace":
            store.has_namespace("mem")
        elif call == "reopen":
            store.close()  # must not release the parent's lock
            MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing"))
        return "no error"
    except StoreForkedError as exc:
        return "forked" if "\n" not in str(exc) and "fork" in str(exc) else f"unclear: {exc}"
    except StoreLockedError:
        return "locked"
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.slow
def test_a_forked_child_gets_a_clear_error_instead_of_hanging(tmp_path: Path) -> None:
    directory = tmp_path / "memory"
    store = MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing"))
    changes = {"S1": _session("mem", "S1", 2, random.Random(2))}
    _commit_on_head(store, changes["S1"])
    results = {}
    try:
        for call in FORK_CALLS:
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report and leave without running the parent's cleanup
                os.close(read)
                os.write(write, _in_child(store, directory, call).encode()[:4000])
                os._exit(0)
            os.close(write)
            deadline = time.monotonic() + 60
            while os.waitpid(pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    results[call] = "hung"
                    break
                time.sleep(0.01)
            with os.fdopen(read) as handle:
                results.setdefault(call, handle.read())
        # The parent still holds its store: it reads, writes, and another process is still refused.
        changes["S2"] = _session("mem", "S2", 2, random.Random(3))
        _commit_on_head(store, changes["S2"])
        assert not _consistent(store, "mem", changes)
        probe = subprocess.run(
            [sys.executable, "-c", LOCK_PROBE],
            input=f"{directory}\n",
            cwd=ROOT,
            text=True,
            env=subprocess_env(tmp_path / "x"),
            capture_output=True,
            timeout=120,
        )
        assert probe.stdout.startswith("StoreLockedError"), probe.stdout + probe.stderr
    finally:
        store.close()
    expected = {call: ("locked" if call == "reopen" else "forked") for call in FORK_CALLS}
    _report(f"fork: {len(FORK_CALLS)} store calls in forked children: {results}")
    assert results == expected


# -- 11. the embedder a namespace was built with ----------------------------------------------------
EMBEDDERS = [
    ("hashing", "x"),
    ("minilm", "all-MiniLM-L6-v2"),
    ("openai", "text-embedding-3-small"),
    ("openai", "text-embedding-3-large"),
]


def test_a_namespace_refuses_vectors_of_another_embedder(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    store = MemoryStore(LogicMapSettings(data_dir=tmp_path / "memory", embedding_provider="hashing"))
    cases = refused = 0
    try:
        for i in range(24):
            namespace = f"emb-{i}"
            first = rng.choice(EMBEDDERS)
            writer = MemoryStore(
                LogicMapSettings(data_dir=tmp_path / "memory", embedding_provider=first[0], embedding_model=first[1])
            )
            change = _session(namespace, "S1", 1, rng)
            _commit_on_head(writer, change)
            recorded = store.manifest(namespace).embedder
            assert recorded == writer.embedder
            second = rng.choice(EMBEDDERS)
            other = MemoryStore(
                LogicMapSettings(data_dir=tmp_path / "memory", embedding_provider=second[0], embedding_model=second[1])
            )
            before = store.snapshot(namespace).fingerprint()
            try:
                _commit_on_head(other, _session(namespace, "S2", 1, rng))
                ok = True
            except EmbedderMismatchError as exc:
                ok = False
                assert "\n" not in str(exc) and recorded in str(exc) and namespace in str(exc)
                assert store.snapshot(namespace).fingerprint() == before
            assert ok == (other.embedder == recorded), (first, second)
            cases += 1
            refused += not ok
            # An explicit identity on the change set wins over the settings.
            if not ok:
                _commit_on_head(other, _session(namespace, "S2", 1, rng).model_copy(update={"embedder": recorded}))
            writer.close()
            other.close()
    finally:
        store.close()
    _report(
        f"embedders: {cases} namespaces continued with a random embedder, {refused} refused, "
        f"{cases - refused} same embedder accepted"
    )
    assert 0 < refused < cases


def test_a_manifest_written_before_embedders_were_recorded_stays_readable_and_adopts_one(tmp_path: Path) -> None:
    store = MemoryStore(LogicMapSettings(data_dir=tmp_path / "memory", embedding_provider="hashing"))
    try:
        _commit_on_head(store, _session("old", "S1", 1, random.Random(1)))
        meta = chroma.collection(store, "old", "meta")  # rewrite the manifest as an older version wrote it
        legacy = {
            k: v for k, v in store.manifest("old").model_dump(mode="json").items() if k not in ("void", "embedder")
        }
        meta.delete(where={"kind": {"$in": ["manifest", "next"]}})
        meta.upsert(
            ids=["manifest"],
            embeddings=[[1.0]],
            documents=[json.dumps(legacy)],
            metadatas=[{"generation": legacy["generation"]}],
        )
        chroma.forget_snapshots(store)
        assert store.manifest("old").embedder is None and store.snapshot("old").generation == 1
        _commit_on_head(store, _session("old", "S2", 1, random.Random(2)))
        assert store.manifest("old").embedder == "hashing"
        assert sorted(store.snapshot("old").manifest.sessions) == ["S1", "S2"]
    finally:
        store.close()


def test_store_errors_are_typed_one_line_and_caught_by_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    from logicmap.graphs.surfaces import cli

    for error in (StoreDamagedError, StoreAccessError, StoreForkedError, StoreLockedError, EmbedderMismatchError):
        assert issubclass(error, StoreError)

        def boom(_args: object, error: type[Exception] = error) -> int:
            raise error("what, where, what to do")

        monkeypatch.setattr(cli, "cmd_namespaces", boom)
        err = io.StringIO()
        with redirect_stderr(err):
            code = cli.main(["namespaces"])
        assert code == 2 and err.getvalue() == "error: what, where, what to do\n", error
