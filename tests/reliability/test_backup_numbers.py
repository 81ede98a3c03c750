"""Backups whose numbers and shapes are out of the store's range: refused cleanly, or restored into memory that
still takes new sessions and answers.

The cases are generated (hypothesis) from a real export of the sample conversation: any number of the header,
the manifest or a record set to a hostile value (2^31 - 1, 2^31, 2^53 + 1, 2^63, 2^64, -1, 10^13, 1e400 ...),
the generation moved (header and manifest together), every vector and centroid made another width (3 instead
of 384) with the header's dimension to match, a vector's values huge or not finite, a count absurd. Each file
is sealed (checksums and counts recomputed), so only the import's own checks stand in the way. Either the
import refuses it in one line naming file, line and field and nothing is registered or written, or the
namespace it restored takes a new session (ingest) and answers a question (ask) with it.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import answer
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.files.backup import (
    MAX_RESTORED_GENERATION,
    BackupError,
    BackupFormatError,
    export_namespace,
    import_namespace,
)
from logicmap.memory.files.loaders import RawTurn, Session, load_conversations
from tests import chroma_internals as chroma
from tests.reliability.support import SAMPLE, uncommitted_versions

_DEEP = int(os.environ.get("LOGICMAP_FUZZ_EXAMPLES", "0"))
RUNS = settings(
    max_examples=_DEEP or 40,
    deadline=None,
    derandomize=not _DEEP,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
COUNTS: Counter[str] = Counter()
_targets = itertools.count()
LAST_TARGET: list[str] = []

HOSTILE = [
    2**31 - 1,
    2**31,
    2**30,
    2**30 + 1,
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    -1,
    0,
    1,
    7,
    10**13,
    1.5,
    -0.0,
    "1e400",
    "-1e400",
    "1e308",
]
INFINITE = {"1e400", "-1e400"}  # written as JSON text: Python has no such float to dump


# -- sealing a file ------------------------------------------------------------------------------
def _dump(value: Any) -> str:
    """JSON with the hostile literals spelled as written (a placeholder string replaced by the literal)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for literal in INFINITE:
        text = text.replace(json.dumps(f"@@{literal}"), literal)
    return text


def seal(header: dict[str, Any], lines: list[str]) -> bytes:
    body = "".join(line + "\n" for line in lines).encode()
    counts = Counter(json.loads(line.replace("1e400", "0"))["kind"] for line in lines)
    header = {**header, "counts": {kind: counts.get(kind, 0) for kind in header["counts"]}}
    header["body_sha256"] = hashlib.sha256(body).hexdigest()
    header.pop("header_sha256", None)
    header["header_sha256"] = hashlib.sha256(_dump(header).encode()).hexdigest()
    return _dump(header).encode() + b"\n" + body


def _value(value: Any) -> Any:
    return f"@@{value}" if value in INFINITE else value


def _numbers(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every number (not a bool) inside ``value``."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _numbers(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _numbers(v, (*path, i))]
    return [path] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _set(value: Any, path: tuple, new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


# -- the generated cases -------------------------------------------------------------------------
def parts(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    head, *lines = data.decode().splitlines()
    return json.loads(head), [json.loads(line) for line in lines]


def some_number(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    header, records = parts(data)
    places = [("header", p) for p in _numbers(header) if p[0] not in ("counts",)]
    places += [(i, ("record", *p)) for i, line in enumerate(records) for p in _numbers(line["record"])]

    def build(place: tuple, new: Any) -> tuple[str, bytes]:
        h, lines = json.loads(json.dumps(header)), json.loads(json.dumps(records))
        where, path = place
        _set(h if where == "header" else lines[where], path, _value(new))
        return f"number {'.'.join(map(str, path[:2]))}={new}", seal(h, [_dump(line) for line in lines])

    return st.builds(build, st.sampled_from(places), st.one_of(st.sampled_from(HOSTILE), st.integers(-(2**70), 2**70)))


def generation(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    header, records = parts(data)

    def build(new: Any) -> tuple[str, bytes]:
        h = json.loads(json.dumps(header))
        h["generation"] = h["manifest"]["generation"] = _value(new)
        return f"generation={new}", seal(h, [_dump(line) for line in records])

    return st.builds(build, st.one_of(st.sampled_from(HOSTILE), st.integers(1, 2**64)))


def _resized(vector: str, width: int) -> str:
    values = np.frombuffer(base64.b64decode(vector), dtype="<f4")
    out = np.zeros(width, dtype="<f4")
    out[: min(width, len(values))] = values[:width]
    return base64.b64encode(out.tobytes()).decode()


def dimension(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    header, records = parts(data)

    def build(width: int) -> tuple[str, bytes]:
        lines = json.loads(json.dumps(records))
        for line in lines:
            if "vector" in line:
                line["vector"] = _resized(line["vector"], width)
            if line["kind"] == "topic":
                line["record"]["centroid"] = (line["record"]["centroid"] + [0.0] * width)[:width]
        return f"dimension={width}", seal({**header, "dimension": width}, [_dump(line) for line in lines])

    return st.builds(build, st.sampled_from([1, 2, 3, 128, 383, 385, 768, 1536]))


def vector_values(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    header, records = parts(data)
    with_vectors = [i for i, line in enumerate(records) if "vector" in line or line["kind"] == "topic"]

    def build(index: int, value: float) -> tuple[str, bytes]:
        lines = json.loads(json.dumps(records))
        line = lines[index]
        if "vector" in line:
            values = np.frombuffer(base64.b64decode(line["vector"]), dtype="<f4").copy()
            with np.errstate(over="ignore"):
                values[: max(1, len(values) // 2)] = value
            line["vector"] = base64.b64encode(values.astype("<f4").tobytes()).decode()
        else:
            line["record"]["centroid"][0] = value if np.isfinite(value) else "@@1e400"
        return f"vector values {value:g}", seal(header, [_dump(line) for line in lines])

    return st.builds(
        build,
        st.sampled_from(with_vectors),
        st.sampled_from([1e30, -1e30, 3.0e38, 1e19, 1e300, float("inf"), float("nan"), 1e-45, 0.0, 5.0]),
    )


def counts(data: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    header, records = parts(data)
    body = [_dump(line) for line in records]
    sealed = json.loads(seal(header, body).split(b"\n", 1)[0])

    def build(kind: str, new: Any) -> tuple[str, bytes]:
        h = json.loads(json.dumps(sealed))
        h["counts"][kind] = _value(new)
        h.pop("header_sha256")
        h["header_sha256"] = hashlib.sha256(_dump(h).encode()).hexdigest()
        return f"counts.{kind}={new}", _dump(h).encode() + b"\n" + "".join(line + "\n" for line in body).encode()

    return st.builds(build, st.sampled_from(sorted(header["counts"])), st.sampled_from(HOSTILE))


# -- the memory and the check ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def exported(sample_memory: Resources, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("backup-numbers") / "sample.jsonl"
    export_namespace(sample_memory.store, "sample", path)
    yield path.read_bytes()
    print(f"backups with out-of-range numbers: {dict(COUNTS)}")


def _next_session() -> Any:
    conversation = load_conversations(SAMPLE)[0]
    last = conversation.sessions[-1]
    n = len(conversation.sessions) + 1
    turns = [
        RawTurn(dia_id=f"D{n}:1", speaker=conversation.speakers[0], text="Quilt update: the zebra quilt is done."),
        RawTurn(dia_id=f"D{n}:2", speaker=conversation.speakers[-1], text="A zebra quilt! Send me a photo."),
    ]
    session = Session(session_id=f"S{n}", timestamp=last.timestamp, timestamp_text=last.timestamp_text, turns=turns)
    return conversation.model_copy(update={"sessions": [*conversation.sessions, session]})


def tried(res: Resources, tmp: Path, name: str, data: bytes) -> str:
    """Import one case; a refusal must be clean, an import must leave memory that ingests and answers."""
    store = res.store
    target = f"bk-{next(_targets)}"
    LAST_TARGET[:] = [target]
    path = tmp / f"{target}.jsonl"
    path.write_bytes(data)
    before = store.namespaces()
    COUNTS["tried"] += 1
    try:
        report = import_namespace(store, path, target, embeddings=res.embeddings)
    except BackupError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"{path}: "), (name, message)
        if isinstance(exc, BackupFormatError):
            assert exc.line >= 1 and exc.field and f": line {exc.line}: {exc.field}: " in message, (name, message)
        assert store.namespaces() == before, name
        assert store.manifest(target).generation == 0 and uncommitted_versions(store, target) == 0, name
        assert not chroma.registered(store, target), f"{name}: {target} was registered"
        COUNTS["refused"] += 1
        COUNTS["passed"] += 1
        return "refused"
    imported = store.snapshot(target)
    assert imported.generation == report.generation, name
    conversation = _next_session()
    ingest_conversation(conversation, target, resources=res, policy="heuristic")
    after = store.snapshot(target)
    new = conversation.sessions[-1].session_id
    assert after.generation == imported.generation + 1, name
    assert sorted(t for t, turn in after.turns.items() if turn.session_id == new) == [f"D{new[1:]}:1", f"D{new[1:]}:2"]
    assert len(after.turns) == len(imported.turns) + 2, name
    result = answer("dense", "What did they say about the zebra quilt?", target, resources=res, policy="heuristic")
    assert result.evidence and any(
        tid.startswith(f"D{new[1:]}:") for item in result.evidence for tid in item.turn_ids
    ), f"{name}: the new session is not found by ask"
    COUNTS["imported"] += 1
    COUNTS["passed"] += 1
    return "imported"


@RUNS
@given(data=st.data())
def test_out_of_range_numbers_are_refused_cleanly_or_imported_into_working_memory(
    sample_memory: Resources, exported: bytes, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    name, crafted = data.draw(st.one_of(some_number(exported), generation(exported), counts(exported)))
    outcome = tried(sample_memory, tmp_path_factory.mktemp("case"), name, crafted)
    event(f"{name.split('=')[0].split(' ')[0]}: {outcome}")


@RUNS
@given(data=st.data())
def test_vectors_of_another_width_or_out_of_range_values_are_refused_cleanly(
    sample_memory: Resources, exported: bytes, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    name, crafted = data.draw(st.one_of(dimension(exported), vector_values(exported)))
    outcome = tried(sample_memory, tmp_path_factory.mktemp("case"), name, crafted)
    event(f"{name.split('=')[0]}: {outcome}")
    if name.startswith("dimension="):
        assert outcome == "refused", f"{name}: vectors of another width than the embedder's were imported"


@pytest.mark.parametrize("new", [2**31 - 1, 2**31, 2**63, "dimension-3"])
def test_the_issues_cases_exit_2_with_one_line_and_create_nothing(
    new: Any, sample_memory: Resources, exported: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, records = parts(exported)
    if new == "dimension-3":
        lines = json.loads(json.dumps(records))
        for line in lines:
            if "vector" in line:
                line["vector"] = _resized(line["vector"], 3)
            if line["kind"] == "topic":
                line["record"]["centroid"] = line["record"]["centroid"][:3]
        data = seal({**header, "dimension": 3}, [_dump(line) for line in lines])
        field = "dimension"
    else:
        h = json.loads(json.dumps(header))
        h["generation"] = h["manifest"]["generation"] = new
        data, field = seal(h, [_dump(line) for line in records]), "generation"
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(data)
    before = sample_memory.store.namespaces()
    code = main(
        [
            "--data-dir",
            str(sample_memory.settings.data_dir),
            "--embeddings",
            "hashing",
            "import",
            str(path),
            "-n",
            "hostile",
            "--quiet",
        ]
    )
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: {path}: line 1: {field}: "), err
    assert sample_memory.store.namespaces() == before and sample_memory.store.manifest("hostile").generation == 0


def test_the_highest_generation_a_backup_may_have_still_ingests_and_answers(
    sample_memory: Resources, exported: bytes, tmp_path: Path
) -> None:
    header, records = parts(exported)
    h = json.loads(json.dumps(header))
    h["generation"] = h["manifest"]["generation"] = MAX_RESTORED_GENERATION
    assert tried(sample_memory, tmp_path, "generation=max", seal(h, [_dump(line) for line in records])) == "imported"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("new", [10**6, MAX_RESTORED_GENERATION])
def test_a_chroma_server_restores_a_high_generation_and_then_ingests_and_answers(
    new: int, sample_memory: Resources, exported: bytes, tmp_path: Path
) -> None:
    """A server claims the generation numbers a restore skips over: only the few a writer could hold, so a
    backup at generation 2^30 restores in a few batches, and the namespace takes commits after it."""
    from logicmap.settings import LogicMapSettings
    from tests.reliability.test_server_failures import ChromaServer

    server = ChromaServer(tmp_path / "chroma-server", tmp_path / "chroma.log")
    server.start()
    try:
        header, records = parts(exported)
        h = json.loads(json.dumps(header))
        h["generation"] = h["manifest"]["generation"] = new
        res = Resources(
            settings=LogicMapSettings(chroma_host="127.0.0.1", chroma_port=server.port, embedding_provider="hashing")
        )
        res.llm_ = None
        assert (
            tried(res, tmp_path, f"server generation={new}", seal(h, [_dump(line) for line in records])) == "imported"
        )
        claims = chroma.claims(res.store, LAST_TARGET[0])
        assert len(claims["ids"]) <= 10_002
    finally:
        server.kill()
