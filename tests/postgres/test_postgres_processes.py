"""Many processes, one memory: two writer processes on one namespace through PostgreSQL lose nothing and make
consecutive generations, and a reader's snapshot cache in a third process sees their commits at its next read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from logicmap.memory.store import open_store
from logicmap.settings import LogicMapSettings
from tests.unit.test_storage_port import _session_change

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("pg_writer.py")
PER_WRITER = 25


def test_two_writer_processes_lose_nothing_and_generations_are_consecutive(postgres_url: str) -> None:
    reader = open_store(LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    try:
        reader.commit(_session_change("shared", 0, "R0", ["the reader's first"]))
        before = reader.snapshot("shared")
        assert reader.snapshot("shared") is before  # cached: the generation row still names it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), *sys.path]))}
        writers = [
            subprocess.Popen(
                [sys.executable, str(WRITER), postgres_url, "shared", name, str(PER_WRITER)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=ROOT,
            )
            for name in ("A", "B")
        ]
        outputs = [w.communicate(timeout=300) for w in writers]
        for writer, (_out, err) in zip(writers, outputs):
            assert writer.returncode == 0, err.decode()[-2000:]
        retries = {json.loads(out)["worker"]: json.loads(out)["retries"] for out, _ in outputs}

        after = reader.snapshot("shared")  # another process committed: this read sees it
        assert after is not before and after.generation == 1 + 2 * PER_WRITER
        assert len(after.manifest.sessions) == 1 + 2 * PER_WRITER
        assert sorted(s.generation for s in after.manifest.sessions.values()) == list(range(1, 2 + 2 * PER_WRITER))
        assert sorted(t.text for t in after.turns.values()) == sorted(
            ["the reader's first"] + [f"{w} says {n}" for w in "AB" for n in range(PER_WRITER)]
        )
        assert set(retries) == {"A", "B"}
    finally:
        reader.close()
