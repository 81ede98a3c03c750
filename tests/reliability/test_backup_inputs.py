"""Damaged backup files: ``import_namespace`` rejects each with one line naming file, line and field, and writes nothing.

The cases are generated (seeded) from a real export of the sample conversation: the file truncated at a
random byte, one byte flipped, a line dropped or repeated, a record's kind wrong, a reference left
dangling, a bad header, a record's field or vector damaged, another embedder. Edits that a checksum
alone would catch are "sealed" (checksums recomputed), so each check is shown to work on its own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.files.backup import BackupFormatError, export_namespace, import_namespace
from logicmap.memory.store import EmbedderMismatchError
from tests.reliability.support import uncommitted_versions

SEED = 17
TARGET = "restored"


@dataclass
class Case:
    name: str
    data: bytes
    line: int | None = None  # the line the error must name (None: any)
    field: str | None = None  # text the error's field must start with
    error: type[Exception] = BackupFormatError


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def split(data: bytes) -> tuple[dict[str, Any], list[bytes]]:
    head, body = data.split(b"\n", 1)
    return json.loads(head), body.splitlines(keepends=True)


def seal(header: dict[str, Any], lines: list[bytes], *, recount: bool = True) -> bytes:
    """The file with its checksums (and counts) made to match its content again."""
    header = dict(header)
    if recount:
        counts = Counter(json.loads(line)["kind"] for line in lines)
        header["counts"] = {kind: counts.get(kind, 0) for kind in header["counts"]}
    header["body_sha256"] = hashlib.sha256(b"".join(lines)).hexdigest()
    header.pop("header_sha256", None)
    header["header_sha256"] = hashlib.sha256(_canonical(header)).hexdigest()
    return _canonical(header) + b"\n" + b"".join(lines)


def edit_line(
    data: bytes,
    rng: random.Random,
    change: Callable[[dict[str, Any]], str | None],
    kinds: tuple[str, ...] | None = None,
) -> tuple[bytes, int, str]:
    """Apply ``change`` to a random body line (of ``kinds``) and seal; ``(file, its line number, field)``."""
    header, lines = split(data)
    candidates = [i for i, line in enumerate(lines) if kinds is None or json.loads(line)["kind"] in kinds]
    while True:
        index = rng.choice(candidates)
        line = json.loads(lines[index])
        field = change(line)
        if field is not None:
            break
    try:
        lines[index] = json.dumps(line, ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: written as a JSON escape
        lines[index] = json.dumps(line).encode() + b"\n"
    return seal(header, lines), index + 2, field


# -- the generated cases ----------------------------------------------------------------------------
def truncated(data: bytes, rng: random.Random, n: int) -> list[Case]:
    cuts = sorted(rng.sample(range(len(data)), n - 1)) + [0]
    return [Case(f"truncated-at-{cut}", data[:cut]) for cut in cuts]


def flipped(data: bytes, rng: random.Random, n: int) -> list[Case]:
    head = data.index(b"\n")
    cases = []
    for i in range(n):
        at = rng.randrange(head + 1) if i < n // 4 else rng.randrange(len(data))  # a quarter in the header
        damaged = bytearray(data)
        damaged[at] ^= rng.randrange(1, 256)
        cases.append(Case(f"flip-byte-{at}", bytes(damaged)))
    return cases


def dropped(data: bytes, rng: random.Random, n: int) -> list[Case]:
    header, lines = split(data)
    cases = []
    for index in rng.sample(range(len(lines)), n):
        kind = json.loads(lines[index])["kind"]
        rest = lines[:index] + lines[index + 1 :]
        cases.append(Case(f"drop-line-{index + 2}", _canonical(header) + b"\n" + b"".join(rest), 1, f"counts.{kind}"))
    return cases


def duplicated(data: bytes, rng: random.Random, n: int) -> list[Case]:
    header, lines = split(data)
    cases = []
    for index in rng.sample(range(len(lines)), n):
        copy = lines[: index + 1] + [lines[index]] + lines[index + 1 :]
        cases.append(Case(f"repeat-line-{index + 2}", seal(header, copy), index + 3, "record."))
    return cases


def wrong_kind(data: bytes, rng: random.Random, n: int) -> list[Case]:
    kinds = ["turn", "event", "relation", "topic", "fact", "cue", "tag"]
    bogus = ["turns", "Event", "", "node", "session", "manifest", None, 3, ["turn"], "tag "]
    cases = []
    for i in range(n):
        if i % 2:
            # Another real kind: the record does not fit it.
            def change(line: dict[str, Any]) -> str:
                line["kind"] = rng.choice([k for k in kinds if k != line["kind"]])
                return "record"

            field = None
        else:
            value = bogus[(i // 2) % len(bogus)]

            def change(line: dict[str, Any], value: Any = value) -> str:
                line["kind"] = value
                return "kind"

        damaged, line, field = edit_line(data, rng, change)
        cases.append(Case(f"wrong-kind-{i}", damaged, line, None if field == "record" else field))
    return cases


_REFERENCES = {  # kind -> (field, how to break it)
    "event": "turn_ids",
    "relation": ("source", "target", "turn_ids"),
    "topic": "members",
    "fact": "turn_ids",
    "tag": ("cue_id", "target_id"),
    "r2_fact": "turn_ids",
}


def dangling(data: bytes, rng: random.Random, n: int) -> list[Case]:
    cases: list[Case] = []
    for i in range(n):
        kind = list(_REFERENCES)[i % len(_REFERENCES)]
        fields = _REFERENCES[kind] if isinstance(_REFERENCES[kind], tuple) else (_REFERENCES[kind],)

        def change(line: dict[str, Any], fields: tuple[str, ...] = fields) -> str | None:
            record = line["record"]
            field = rng.choice(fields)
            if field == "target_id" and record["target_kind"] != "event":
                return None
            missing = rng.choice(["D99:1", "S9-E9", "cue:nobody", "E1", "d1:1", "D1:1 "])
            if isinstance(record[field], list):
                if not record[field]:
                    return None
                record[field][rng.randrange(len(record[field]))] = missing
            else:
                record[field] = missing
            return f"record.{field}"

        damaged, line, field = edit_line(data, rng, change, kinds=(kind,))
        for _ in range(20):  # the same line broken the same way again is no new case: draw another
            if all(c.data != damaged for c in cases):
                break
            damaged, line, field = edit_line(data, rng, change, kinds=(kind,))
        cases.append(Case(f"dangling-{kind}-{i}", damaged, line, field))
    return cases


def _header_edits() -> list[tuple[str, Callable[[dict[str, Any]], None], str]]:
    def put(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda h: h.__setitem__(key, value)

    def manifest(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda h: h["manifest"].__setitem__(key, value)

    return [
        ("format", put("format", "logicmap-events"), "format"),
        ("format-missing", lambda h: h.pop("format"), "format"),
        ("version-2", put("version", 2), "version"),
        ("version-string", put("version", "1"), "version"),
        ("version-0", put("version", 0), "version"),
        ("unknown-field", put("extra", 1), "extra"),
        ("missing-counts", lambda h: h.pop("counts"), "counts"),
        ("namespace-path", put("namespace", "../etc"), "namespace"),
        ("namespace-empty", put("namespace", ""), "namespace"),
        ("generation-0", put("generation", 0), "generation"),
        ("generation-string", put("generation", "5"), "generation"),
        ("dimension-wrong", put("dimension", 128), "vector"),
        ("dimension-negative", put("dimension", -384), "dimension"),
        ("counts-negative", lambda h: h["counts"].__setitem__("turn", -1), "counts.turn"),
        ("counts-kind-missing", lambda h: h["counts"].pop("tag"), "counts"),
        ("manifest-not-object", put("manifest", []), "manifest"),
        ("manifest-namespace", manifest("namespace", "other"), "manifest.namespace"),
        ("manifest-generation", manifest("generation", 4), "manifest.generation"),
        ("manifest-sessions-type", manifest("sessions", {"S1": 3}), "manifest.sessions"),
        (
            "manifest-session-later",
            lambda h: h["manifest"]["sessions"]["S2"].__setitem__("generation", 9),
            "manifest.sessions.S2",
        ),
        (
            "manifest-session-renamed",
            lambda h: h["manifest"]["sessions"]["S2"].__setitem__("session_id", "S7"),
            "manifest.sessions.S2",
        ),
        ("embedder-empty", put("embedder", ""), "embedder"),
        ("embedder-number", put("embedder", 7), "embedder"),
    ]


def bad_header(data: bytes, rng: random.Random, n: int) -> list[Case]:
    header, lines = split(data)
    cases = []
    for name, edit, field in _header_edits():
        h = json.loads(json.dumps(header))
        edit(h)
        line = 2 if field == "vector" else 1
        cases.append(Case(f"header-{name}", seal(h, lines, recount=False), line, field))
    raw = [
        (b"not json\n", "json"),
        (b"[1, 2]\n", "json"),
        (b"\n", "json"),
        (b'{"format": "logicmap-namespace"', "json"),
        (b'{"format": "logicmap-namespace", "version": 1}\n', "logicmap"),
    ]
    for i, (head, field) in enumerate(raw):
        cases.append(Case(f"header-raw-{i}", head + b"".join(lines), 1, field))
    cases.append(
        Case(
            "header-only-sealed-edit",
            _canonical({**header, "generation": 6}) + b"\n" + b"".join(lines),
            1,
            "header_sha256",
        )
    )
    rng.shuffle(cases)
    return cases[:n]


def wrong_embedder(data: bytes, rng: random.Random, n: int) -> list[Case]:
    header, lines = split(data)
    names = ["minilm:all-MiniLM-L6-v2", "openai:text-embedding-3-small", "hashing-v2", "Hashing", "openai:"]
    return [
        Case(
            f"embedder-{name}",
            seal({**header, "embedder": name}, lines, recount=False),
            1,
            "embedder",
            EmbedderMismatchError,
        )
        for name in names[:n]
    ]


def _record_edits(
    rng: random.Random,
) -> list[tuple[str, tuple[str, ...] | None, Callable[[dict[str, Any]], str | None]]]:
    def field(kind_field: str, value: Any) -> Callable[[dict[str, Any]], str]:
        def change(line: dict[str, Any]) -> str:
            line["record"][kind_field] = value
            return f"record.{kind_field}"

        return change

    def vector(value: Any) -> Callable[[dict[str, Any]], str]:
        def change(line: dict[str, Any]) -> str:
            line["vector"] = value(line["vector"]) if callable(value) else value
            return "vector"

        return change

    def drop_vector(line: dict[str, Any]) -> str:
        del line["vector"]
        return "vector"

    def add_vector(line: dict[str, Any]) -> str:
        line["vector"] = "AAAA"
        return "vector"

    def unknown(line: dict[str, Any]) -> str:
        line["record"]["secret"] = "x"
        return "record.secret"

    def no_record(line: dict[str, Any]) -> str:
        line["record"] = "turn"
        return "record"

    nan = base64.b64encode(b"\x00\x00\xc0\x7f" * 384).decode()
    short = base64.b64encode(b"\x00\x00\x80\x3f" * 383).decode()
    return [
        ("id-empty", ("event", "fact", "cue", "tag", "topic", "relation"), field("id", "")),
        ("id-control", ("event", "cue", "tag"), field("id", "S1-E1\x00")),
        ("id-long", ("fact", "tag"), field("id", "x" * 600)),
        ("id-spaces", ("cue",), field("id", " cue:leo")),
        ("id-number", ("event",), field("id", 5)),
        ("dia-id-control", ("turn",), field("dia_id", "D1:\n1")),
        ("namespace-other", None, field("namespace", "someone-else")),
        ("namespace-missing", ("turn",), field("namespace", None)),
        ("position-text", ("turn",), field("position", "first")),
        ("time-bad", ("turn",), field("session_time", "yesterday-ish")),
        ("confidence-text", ("fact",), field("confidence", "high")),
        ("intent-bad", ("fact",), field("intent", "RUMOUR")),
        ("session-unknown", ("turn", "event"), field("session_id", "S42")),
        ("unknown-field", None, unknown),
        ("record-not-object", None, no_record),
        ("vector-nan", ("turn", "event"), vector(nan)),
        ("vector-short", ("fact", "cue"), vector(short)),
        ("vector-not-base64", ("turn",), vector("%%%")),
        ("vector-odd-bytes", ("event",), vector(base64.b64encode(b"\x00" * 1535).decode())),
        ("vector-number", ("cue",), vector(1.0)),
        ("vector-missing", ("turn", "fact"), drop_vector),
        ("vector-on-relation", ("relation", "tag"), add_vector),
        ("text-lone-surrogate", ("turn",), field("text", "Biscuit \ud83d")),
        ("centroid-short", ("topic",), field("centroid", [0.1] * 10)),
        ("centroid-text", ("topic",), field("centroid", ["x"] * 384)),
    ]


def bad_records(data: bytes, rng: random.Random, n: int) -> list[Case]:
    cases = []
    edits = _record_edits(rng)
    for i in range(n):
        name, kinds, change = edits[i % len(edits)]
        damaged, line, field = edit_line(data, rng, change, kinds)
        if name == "unknown-field":
            field = "record.secret"
        if name == "text-lone-surrogate":
            field = "json"
        cases.append(Case(f"record-{name}-{i}", damaged, line, field))
    return cases


CLASSES: dict[str, tuple[Callable[[bytes, random.Random, int], list[Case]], int]] = {
    "truncated": (truncated, 25),
    "flipped": (flipped, 40),
    "dropped": (dropped, 15),
    "duplicated": (duplicated, 15),
    "wrong_kind": (wrong_kind, 16),
    "dangling": (dangling, 20),
    "bad_header": (bad_header, 29),
    "wrong_embedder": (wrong_embedder, 5),
    "bad_record": (bad_records, 32),
}


@pytest.fixture(scope="module")
def exported(sample_memory: Resources, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("backup") / "sample.jsonl"
    export_namespace(sample_memory.store, "sample", path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def cases(exported: bytes) -> dict[str, list[Case]]:
    rng = random.Random(SEED)
    return {name: make(exported, rng, n) for name, (make, n) in CLASSES.items()}


def test_the_undamaged_file_imports(sample_memory: Resources, exported: bytes, tmp_path: Path) -> None:
    path = tmp_path / "good.jsonl"
    path.write_bytes(exported)
    import_namespace(sample_memory.store, path, "control")
    assert sample_memory.store.snapshot("control").generation == sample_memory.store.snapshot("sample").generation


@pytest.mark.parametrize("kind", list(CLASSES))
def test_every_damaged_file_is_rejected_in_one_line_and_nothing_is_written(
    kind: str, cases: dict[str, list[Case]], exported: bytes, sample_memory: Resources, tmp_path: Path
) -> None:
    store = sample_memory.store
    namespaces = store.namespaces()
    generated = cases[kind]
    assert len(generated) == CLASSES[kind][1], f"{kind}: {len(generated)} cases generated"
    for case in generated:
        assert case.data != exported, case.name
        path = tmp_path / f"{case.name[:60]}.jsonl"
        path.write_bytes(case.data)
        with pytest.raises(Exception) as caught:  # the type is checked below, per case
            import_namespace(store, path, TARGET)
        message = str(caught.value)
        assert isinstance(caught.value, case.error), f"{case.name}: {type(caught.value).__name__}: {message}"
        assert "\n" not in message and message.startswith(f"{path}: "), f"{case.name}: {message!r}"
        if isinstance(caught.value, BackupFormatError):
            error = caught.value
            assert error.line >= 1 and error.field and error.problem, f"{case.name}: {message}"
            assert f": line {error.line}: {error.field}: " in message
            if case.line is not None:
                assert error.line == case.line, f"{case.name}: {message}"
            if case.field is not None:
                assert error.field.startswith(case.field), (
                    f"{case.name}: field {error.field!r}, not {case.field!r}: {message}"
                )
        else:
            assert f": line 1: {case.field}: " in message, f"{case.name}: {message}"
        assert store.namespaces() == namespaces, case.name
        assert store.manifest(TARGET).generation == 0 and uncommitted_versions(store, TARGET) == 0, case.name


def test_case_counts(cases: dict[str, list[Case]]) -> None:
    counts = {kind: len(found) for kind, found in cases.items()}
    assert sum(counts.values()) >= 100, counts
    assert len({c.data for found in cases.values() for c in found}) == sum(counts.values())  # all distinct


@pytest.mark.parametrize("kind", ["flipped", "dangling", "bad_header", "wrong_embedder"])
def test_the_cli_exits_2_with_the_one_line(
    kind: str,
    cases: dict[str, list[Case]],
    sample_memory: Resources,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = cases[kind][0]
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(case.data)
    data_dir = str(sample_memory.settings.data_dir)
    code = main(["--data-dir", data_dir, "--embeddings", "hashing", "import", str(path), "-n", TARGET, "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: {path}: line "), err
