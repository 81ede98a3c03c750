"""The CLI on PostgreSQL (``--store-url``): ingest, ask, export and import, forget with a purge, on one database,
with no data directory written."""

from __future__ import annotations

from pathlib import Path

import pytest

from logicmap.data import sample_path
from logicmap.graphs.surfaces.cli import main

pytestmark = pytest.mark.postgres


def test_the_cli_runs_on_postgres_with_store_url(postgres_url: str, tmp_path: Path, capsys) -> None:
    base = ["--store-url", postgres_url, "--data-dir", str(tmp_path / "unused"), "--embeddings", "hashing"]
    assert main([*base, "ingest", str(sample_path()), "-n", "maya", "--policy", "heuristic"]) == 0
    assert main([*base, "ask", "Where does Maya live now?", "-n", "maya", "-s", "rerank", "--policy", "heuristic"]) == 0
    asked = capsys.readouterr().out
    assert "river" in asked and "0 LLM calls" in asked  # the answer, from the sample on Postgres
    backup = tmp_path / "maya.jsonl"
    assert main([*base, "export", str(backup), "-n", "maya", "--quiet"]) == 0
    assert main([*base, "import", str(backup), "-n", "maya-copy"]) == 0
    assert main([*base, "forget", "-n", "maya-copy", "--session", "S1", "--purge", "--yes"]) == 0
    capsys.readouterr()
    assert main([*base, "namespaces"]) == 0
    listed = capsys.readouterr().out
    assert "maya" in listed and "maya-copy" in listed
    assert not (tmp_path / "unused").exists() or not any((tmp_path / "unused").iterdir())
