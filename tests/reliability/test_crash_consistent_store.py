"""A store left by a process killed inside a SQLite transaction opens, with every committed turn readable.

A real subprocess opens the store's ``chroma.sqlite3`` and grows it by tens of MB in one transaction; it is
killed with SIGKILL at a random moment of its commit (seeded). The kill leaves a hot rollback journal and,
often, a header that counts pages the file does not have yet: raw bytes that look truncated. SQLite rolls
the transaction back when it opens the file, so the store must open and read exactly what was committed.
Really damaged files are still refused (``test_store_integrity``).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from logicmap.memory.records.records import SessionInfo, Turn
from logicmap.memory.store import ChangeSet, MemoryStore
from logicmap.settings import LogicMapSettings

SEED = 326
TRIALS = int(os.environ.get("LOGICMAP_CRASH_SQLITE_TRIALS", "10"))  # at least; more until enough hit the moment
MAX_TRIALS, WANTED = 40, 3  # kills that leave the header ahead of the file: the case the old check refused

# Grows the database in one transaction (a big page cache, so the pages reach the file only at COMMIT, page 1
# with the new page count first), says when it commits, and is killed while it writes.
GROWER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA cache_size=-200000")
con.execute("BEGIN IMMEDIATE")
con.execute("CREATE TABLE lm_crash_probe(body BLOB)")
for _ in range(int(sys.argv[2])):
    con.execute("INSERT INTO lm_crash_probe VALUES (randomblob(4000))")
print("committing", flush=True)
con.execute("COMMIT")
print("committed", flush=True)
"""


def _turns(namespace: str, sid: str, count: int) -> ChangeSet:
    turns = [
        Turn(
            namespace=namespace, session_id=sid, dia_id=f"{sid}:{i}", speaker="Ana", text=f"{sid} turn {i}", position=i
        )
        for i in range(count)
    ]
    return ChangeSet(
        namespace=namespace,
        base_generation=0,
        turns=turns,
        turn_vectors=[[1.0, float(i), 0.5] for i in range(count)],
        session=SessionInfo(session_id=sid, content_hash=sid, generation=0, policy="heuristic"),
    )


def _commit(store: MemoryStore, change: ChangeSet) -> None:
    store.commit(change.model_copy(update={"base_generation": store.manifest(change.namespace).generation}))


def _header_state(database: Path) -> dict[str, Any]:
    header = database.read_bytes()[:100] if database.stat().st_size else b""
    page_size = struct.unpack(">H", header[16:18])[0] if len(header) == 100 else 0
    pages = struct.unpack(">I", header[28:32])[0] if len(header) == 100 else 0
    size = database.stat().st_size
    journal = database.with_name(database.name + "-journal")
    return {
        "size": size,
        "counted": page_size * pages,
        "journal": journal.exists() and journal.stat().st_size > 0,
        "looks_truncated": len(header) == 100 and header[92:96] == header[24:28] and size < page_size * pages,
    }


def _kill_inside_commit(database: Path, rng: random.Random, rows: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", GROWER, str(database), str(rows)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "committing", (line, proc.stderr.read() if proc.stderr else "")
        time.sleep(rng.uniform(0.0, 0.04))
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)


@pytest.mark.slow
def test_a_store_killed_inside_a_growing_sqlite_commit_opens_with_every_committed_turn(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    settings = LogicMapSettings(data_dir=reference, embedding_provider="hashing")
    with MemoryStore(settings) as store:
        for sid, count in (("S1", 40), ("S2", 25), ("S3", 30)):
            _commit(store, _turns("mem", sid, count))
        expected = store.snapshot("mem").fingerprint()
    rng = random.Random(SEED)
    tried, looked_truncated, opened, failures = 0, 0, 0, []
    for trial in range(MAX_TRIALS):
        if trial >= TRIALS and looked_truncated >= WANTED:
            break
        directory = tmp_path / f"trial-{trial}"
        shutil.copytree(reference, directory)
        database = directory / "chroma" / "chroma.sqlite3"
        _kill_inside_commit(database, rng, rows=rng.choice([4000, 6000, 8000]))
        state = _header_state(database)
        tried += 1
        looked_truncated += state["looks_truncated"]
        try:
            with MemoryStore(LogicMapSettings(data_dir=directory, embedding_provider="hashing")) as store:
                seen = store.snapshot("mem").fingerprint()
                _commit(store, _turns("mem", "S4", 5))  # and it takes new memory
                after = store.snapshot("mem")
            if seen != expected:
                failures.append(f"trial {trial} {state}: the committed memory reads differently")
            elif sorted(after.manifest.sessions) != ["S1", "S2", "S3", "S4"] or len(after.turns) != 100:
                failures.append(f"trial {trial} {state}: a commit after recovery reads {len(after.turns)} turns")
            else:
                opened += 1
        except Exception as exc:  # a refusal or a raw error is the failure being tested
            failures.append(f"trial {trial} {state}: {type(exc).__name__}: {str(exc)[:300]}")
        shutil.rmtree(directory)
    print(
        f"crash-consistent stores: {tried} kills inside a growing commit, {looked_truncated} left a header counting "
        f"more pages than the file, {opened} opened with every committed turn, {len(failures)} problems"
    )
    assert not failures, "\n".join(failures)
    assert looked_truncated >= WANTED, "the kills must hit the moment the header is ahead of the file"
