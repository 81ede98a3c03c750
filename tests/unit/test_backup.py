"""Backups: ``export_namespace`` / ``import_namespace`` round trip a namespace exactly, and never merge or overwrite."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import answer
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.files.backup import (
    FORMAT,
    BackupError,
    NamespaceNotEmptyError,
    export_namespace,
    import_namespace,
    read_backup,
)
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.store import MemoryStore, NamespaceSnapshot, UnknownNamespaceError
from logicmap.settings import LogicMapSettings
from tests import chroma_internals as chroma

QUESTIONS = ["What is the name of Maya's dog?", "Why did Maya move to Lisbon?", "When is the half marathon?"]
VECTORS = (("turns", "turn_vectors"), ("events", "event_vectors"), ("facts", "fact_vectors"), ("cues", "cue_vectors"))


@pytest.fixture(scope="module")
def backup_file(ingested_sample: Resources, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("backup") / "sample.jsonl"
    export_namespace(ingested_sample.store, "sample", path)
    return path


def renamed(fingerprint: dict, old: str, new: str) -> dict:
    """A fingerprint with every record's namespace ``old`` read as ``new``."""
    text = json.dumps(fingerprint, sort_keys=True)
    return json.loads(text.replace(f'"namespace": "{old}"', f'"namespace": "{new}"'))


def assert_same_vectors(a: NamespaceSnapshot, b: NamespaceSnapshot) -> None:
    for kind, attr in VECTORS:
        got, want = getattr(b, attr), getattr(a, attr)
        assert set(got) == set(want) == set(getattr(a, kind)), kind
        for rid, vector in want.items():
            # Chroma may hand back a cosine vector renormalised in float32 (a last-bit change), never more.
            assert np.allclose(got[rid], vector, rtol=0, atol=1e-6), f"{kind} {rid}: vector changed"


def answers(resources: Resources, namespace: str) -> list[tuple[str, str, list[str]]]:
    out = []
    for strategy in ("dense", "compass", "bm25"):
        for question in QUESTIONS:
            result = answer(strategy, question, namespace, resources=resources, policy="heuristic")
            out.append((strategy, result.answer, [item.id for item in result.evidence]))
    return out


def test_round_trip_restores_the_namespace_exactly(
    ingested_sample: Resources, backup_file: Path, resources: Resources
) -> None:
    before = ingested_sample.store.snapshot("sample")
    report = import_namespace(resources.store, backup_file)
    after = resources.store.snapshot("sample")
    assert report.namespace == "sample" and report.generation == before.generation
    assert after.fingerprint() == before.fingerprint()
    assert after.manifest.model_dump(exclude={"void"}) == before.manifest.model_dump(exclude={"void"})
    assert_same_vectors(before, after)
    assert {k: v.centroid for k, v in after.topics.items()} == {k: v.centroid for k, v in before.topics.items()}
    # Query results come from the restored vectors: every record scores as before (all records are asked
    # for, so ties at the cut cannot reorder the answer).
    probe = resources.embeddings.embed_query("Maya adopted a golden retriever puppy")
    for kind in ("turns", "events", "facts", "cues"):
        k = len(getattr(before, kind))
        want = dict(ingested_sample.store.query("sample", kind, probe, k=k))
        got = dict(resources.store.query("sample", kind, probe, k=k))
        assert set(got) == set(want) and len(got) == k, kind
        assert all(abs(got[r] - want[r]) < 1e-6 for r in want), kind
    assert answers(resources, "sample") == answers(ingested_sample, "sample")


def test_a_restored_namespace_goes_on_as_the_original(
    backup_file: Path, resources: Resources, sample: Conversation
) -> None:
    import_namespace(resources.store, backup_file)
    report = ingest_conversation(sample, "sample", resources=resources, policy="heuristic")
    assert report.sessions and all(s.skipped for s in report.sessions)  # the manifest's sessions came back
    generation = resources.store.manifest("sample").generation
    assert generation == read_backup(backup_file).manifest.generation


def test_import_into_another_namespace(ingested_sample: Resources, backup_file: Path, resources: Resources) -> None:
    report = import_namespace(resources.store, backup_file, "copy-of-sample")
    assert (report.namespace, report.source_namespace) == ("copy-of-sample", "sample")
    before = ingested_sample.store.snapshot("sample")
    after = resources.store.snapshot("copy-of-sample")
    assert after.fingerprint() == renamed(before.fingerprint(), "sample", "copy-of-sample")
    assert all(
        r.namespace == "copy-of-sample" for r in [*after.turns.values(), *after.events.values(), *after.tags.values()]
    )
    assert resources.store.namespaces() == ["copy-of-sample"]
    assert answers(resources, "copy-of-sample") == answers(ingested_sample, "sample")


def test_import_into_an_existing_namespace_is_refused_and_changes_nothing(
    backup_file: Path, resources: Resources
) -> None:
    import_namespace(resources.store, backup_file, "taken")
    before = resources.store.snapshot("taken").fingerprint()
    for target in ("taken", None):
        if target is None:
            import_namespace(resources.store, backup_file)  # "sample" is free: fine once
        with pytest.raises(NamespaceNotEmptyError, match="already holds memory"):
            import_namespace(resources.store, backup_file, target)
    assert resources.store.snapshot("taken").fingerprint() == before
    assert resources.store.namespaces() == ["sample", "taken"]


def test_export_is_deterministic_and_streams(ingested_sample: Resources, backup_file: Path, tmp_path: Path) -> None:
    stream = io.BytesIO()
    report = export_namespace(ingested_sample.store, "sample", stream)
    data = stream.getvalue()
    assert report.bytes == len(data)
    first, again = backup_file.read_bytes().split(b"\n", 1), data.split(b"\n", 1)
    assert first[1] == again[1]  # the records; the header differs only in exported_at
    header = json.loads(first[0])
    assert header["format"] == FORMAT and header["embedder"] == "hashing" and header["generation"] == 5
    assert header["counts"] == report.counts and sum(report.counts.values()) == len(first[1].splitlines())
    assert not list(tmp_path.iterdir())  # no temporary file left beside the backup


def test_export_of_an_unknown_namespace_or_to_a_bad_path_fails_in_one_line(
    ingested_sample: Resources, tmp_path: Path
) -> None:
    with pytest.raises(UnknownNamespaceError):
        export_namespace(ingested_sample.store, "nobody", tmp_path / "x.jsonl")
    with pytest.raises(BackupError, match="cannot be written"):
        export_namespace(ingested_sample.store, "sample", tmp_path / "no-such-dir" / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


def test_restore_on_a_server_claims_every_generation_below_it(backup_file: Path) -> None:
    """Server mode: the numbers under the restored generation are claimed; those another writer holds are void."""
    import chromadb

    client = chromadb.EphemeralClient()
    store = MemoryStore(LogicMapSettings(chroma_host="127.0.0.1", embedding_provider="hashing"), client=client)
    meta = chroma.collection(store, "served", "meta")  # a writer that claimed generation 2 and stalled
    meta.add(
        ids=["claim@2"], embeddings=[[1.0]], documents=["stalled"], metadatas=[{"kind": "claim", "owner": "stalled"}]
    )
    report = import_namespace(store, backup_file, "served")
    manifest = store.manifest("served")
    assert report.generation == manifest.generation == 5 and manifest.void == [2]
    owners = meta.get(ids=[f"claim@{n}" for n in range(1, 6)], include=["metadatas"])
    assert sorted(m["owner"] == "stalled" for m in owners["metadatas"]) == [False, False, False, False, True]
    # What the stalled writer lands late, in its void generation, stays invisible.
    turns = chroma.collection(store, "served", "turns")
    turns.add(
        ids=["D9:9@2"],
        embeddings=[[0.1] * 384],
        documents=['{"namespace":"served","session_id":"S1","dia_id":"D9:9","speaker":"x","text":"late"}'],
        metadatas=[{"rid": "D9:9", "born": 2, "died": 2**31}],
    )
    chroma.forget_snapshots(store)
    assert "D9:9" not in store.snapshot("served").turns
    assert len(store.snapshot("served").turns) == read_backup(backup_file).header["counts"]["turn"]


def test_cli_export_and_import(ingested_sample: Resources, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(ingested_sample.settings.data_dir)
    target = str(tmp_path / "restored")
    file = tmp_path / "sample.jsonl"
    assert main(["--data-dir", source, "--embeddings", "hashing", "export", "-n", "sample", str(file)]) == 0
    out = capsys.readouterr()
    assert f"exported sample (generation 5) to {file}" in out.out and "38 turns" in out.out
    assert "export sample" in out.err  # the progress bar
    assert main(["--data-dir", target, "--embeddings", "hashing", "import", str(file), "-n", "kept", "--quiet"]) == 0
    assert "into kept (exported as sample) (generation 5)" in capsys.readouterr().out
    assert main(["--data-dir", target, "--embeddings", "hashing", "import", str(file), "-n", "kept", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds memory" in err[0]
    assert main(["--data-dir", target, "--embeddings", "minilm", "import", str(file), "-n", "other", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{file}: line 1: embedder" in err[0]
    with MemoryStore(LogicMapSettings(data_dir=Path(target), embedding_provider="hashing")) as store:
        assert store.namespaces() == ["kept"]
    assert main(["--data-dir", target, "--embeddings", "hashing", "export", "-n", "nobody", str(file)]) == 2
    assert "unknown namespace 'nobody'" in capsys.readouterr().err


def test_a_crashed_import_leaves_nothing_and_a_re_run_restores_it(
    ingested_sample: Resources, backup_file: Path, resources: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.reliability.support import uncommitted_versions, visible_duplicates

    store = resources.store
    real_write = chroma.version_writer()

    def crash_at_facts(self: MemoryStore, namespace: str, kind: str, *args: object, **kwargs: object) -> None:
        if kind == "facts":  # turns, events, relations and topics are written by then
            raise RuntimeError("simulated crash in the middle of the restore")
        real_write(self, namespace, kind, *args, **kwargs)

    chroma.replace_version_writer(monkeypatch, crash_at_facts)
    with pytest.raises(RuntimeError, match="simulated crash"):
        import_namespace(store, backup_file)
    assert store.namespaces() == [] and not store.has_namespace("sample")
    assert uncommitted_versions(store, "sample") > 0  # written, but invisible
    chroma.replace_version_writer(monkeypatch, real_write)
    import_namespace(store, backup_file)
    assert store.snapshot("sample").fingerprint() == ingested_sample.store.snapshot("sample").fingerprint()
    assert visible_duplicates(store, "sample") == [] and uncommitted_versions(store, "sample") == 0


LEGACY = Path(__file__).resolve().parent.parent / "fixtures" / "backup-v1-all-kinds.jsonl"


def test_a_backup_written_before_the_kind_registry_imports_and_exports_the_same(
    resources: Resources, tmp_path: Path
) -> None:
    """``backup-v1-all-kinds.jsonl`` was exported by the code before ``memory.records.kinds`` existed (two sessions of the sample,
    two turns each, no-LLM ingest with the r2 memory manager, hashing embedder): every kind, r2 facts included.
    Its ``.fingerprint.json`` is that namespace's ``NamespaceSnapshot.fingerprint()`` as the old code read it."""
    header = json.loads(LEGACY.read_bytes().split(b"\n", 1)[0])
    assert all(header["counts"][kind] > 0 for kind in header["counts"]) and len(header["counts"]) == 8
    report = import_namespace(resources.store, LEGACY)
    restored = resources.store.snapshot(report.namespace)
    want = json.loads(LEGACY.with_suffix(".fingerprint.json").read_text())
    assert json.loads(json.dumps(restored.fingerprint(), default=str)) == want
    again = tmp_path / "again.jsonl"
    export_namespace(resources.store, report.namespace, again)
    for old, new in zip(LEGACY.read_bytes().splitlines()[1:], again.read_bytes().splitlines()[1:], strict=True):
        old_line, new_line = json.loads(old), json.loads(new)
        assert (new_line["kind"], new_line["record"]) == (old_line["kind"], old_line["record"])
        if "vector" in old_line:  # Chroma may renormalise a cosine vector in float32 (a last-bit change), never more
            decoded = [np.frombuffer(base64.b64decode(line["vector"]), dtype="<f4") for line in (old_line, new_line)]
            assert np.allclose(*decoded, rtol=0, atol=1e-6)
    assert json.loads(again.read_bytes().split(b"\n", 1)[0])["counts"] == header["counts"]
