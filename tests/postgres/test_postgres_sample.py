"""The bundled sample on PostgreSQL answers as on the other backends: ingested on each, every no-LLM answer of
``rerank`` and ``compass`` to the sample's questions is byte for byte the in-process store's (both keep the
embedder's vectors as float32 exactly), and Chroma's but for the last digits of scores (Chroma stores a vector one
float32 step away from it at times: measured 3e-8 at most, score differences below 1e-6). A namespace exported from
Chroma, imported into Postgres, exported again and imported into a fresh Chroma keeps its fingerprint, and answers
as on the first Chroma to the same score digits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import answer
from logicmap.memory.files.backup import export_namespace, import_namespace
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.store.inmemory import clear_in_process_memory
from logicmap.settings import LogicMapSettings
from tests.conftest import make_resources

pytestmark = pytest.mark.postgres

STRATEGIES = ("rerank", "compass")


def _answers(res: Resources, namespace: str, questions: list[str]) -> list[str]:
    return [
        answer(s, q, namespace, resources=res, policy="heuristic").model_dump_json(exclude={"cost", "timings", "trace"})
        for s in STRATEGIES
        for q in questions
    ]


def _flat(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{path}/{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{path}[{i}]").items()}
    return {path: value}


def _same_but_score_digits(got: list[str], want: list[str]) -> None:
    assert len(got) == len(want)
    for one, other in zip(got, want):
        a, b = _flat(json.loads(one)), _flat(json.loads(other))
        assert a.keys() == b.keys()
        for key in a:
            if key.endswith("/score"):
                # float32 sums over the snapshot's matrices, whose rows each backend orders its own way: the
                # ranker's per-question context term (issue 41) makes the logits larger, so the last digits differ
                # at a few parts in a million; every id, text and order must still be equal
                assert a[key] == pytest.approx(b[key], rel=2e-5, abs=1e-9), key
            else:
                assert a[key] == b[key], key


def test_the_sample_answers_on_postgres_as_on_chroma_and_moves_between_them(
    postgres_url: str, sample: Conversation, tmp_path: Path
) -> None:
    questions = [qa.question for qa in sample.qa]
    assert questions
    chroma = make_resources(tmp_path / "chroma")
    postgres = Resources(settings=LogicMapSettings(store_url=postgres_url, embedding_provider="hashing"))
    in_process = Resources(
        settings=LogicMapSettings(store_url=f"memory://{tmp_path.name}", embedding_provider="hashing")
    )
    back = make_resources(tmp_path / "chroma-again")
    try:
        for res in (chroma, postgres, in_process):
            ingest_conversation(sample, "sample", resources=res, policy="heuristic")
        want = _answers(chroma, "sample", questions)
        on_postgres = _answers(postgres, "sample", questions)
        assert on_postgres == _answers(in_process, "sample", questions)
        _same_but_score_digits(on_postgres, want)
        assert postgres.store.snapshot("sample").fingerprint() == chroma.store.snapshot("sample").fingerprint()

        postgres.store.drop_namespace("sample")
        export_namespace(chroma.store, "sample", tmp_path / "from-chroma.jsonl")
        import_namespace(postgres.store, tmp_path / "from-chroma.jsonl")
        export_namespace(postgres.store, "sample", tmp_path / "from-postgres.jsonl")
        import_namespace(back.store, tmp_path / "from-postgres.jsonl")
        chroma_print = chroma.store.snapshot("sample").fingerprint()
        for res in (postgres, back):
            assert res.store.snapshot("sample").fingerprint() == chroma_print
            _same_but_score_digits(_answers(res, "sample", questions), want)
    finally:
        clear_in_process_memory(tmp_path.name)
        for res in (chroma, postgres, back):
            if res.store_ is not None:
                res.store_.close()
