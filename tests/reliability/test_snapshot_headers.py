"""Snapshot-cache files crafted to pass their checksums: every read ignores them, rebuilds them, and answers.

The cases are generated (hypothesis) from a real snapshot file of an ingested namespace: the header made a
JSON value that is not an object, nested up to 100,000 deep, its generation ``1e400`` or out of range, a
section's offset, length, checksum or shape absurd (a length of 10^13, a 10^6 x 10^6 matrix), a section's
body replaced (ids that are not a list, nested JSON, vectors of another width or not finite). The header's
CRC (and the sections' CRCs and offsets, when a body changed) are recomputed, so only the reader's own
checks stand between the file and the namespace. After each case the namespace reads exactly as before and
the file is written again, sound.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.indexes.snapshot_file import read_snapshot_file
from logicmap.memory.store import _MODELS, MemoryStore
from tests import chroma_internals as chroma
from tests.conftest import make_resources

_DEEP = int(os.environ.get("LOGICMAP_FUZZ_EXAMPLES", "0"))
RUNS = settings(
    max_examples=_DEEP or 60,
    deadline=None,
    derandomize=not _DEEP,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
MAGIC, LENGTH = b"LMSNAP01", struct.Struct("<Q")
COUNTS: Counter[str] = Counter()


# -- the file's parts ----------------------------------------------------------------------------
def parse(data: bytes) -> tuple[dict[str, Any], list[bytes]]:
    (size,) = LENGTH.unpack(data[8:16])
    header = json.loads(data[16 : 16 + size])
    base = 16 + size + LENGTH.size
    bodies = [data[base + m["offset"] : base + m["offset"] + m["length"]] for m in header["sections"]]
    return header, bodies


def assemble(header_bytes: bytes, bodies: list[bytes]) -> bytes:
    """A file with this exact header text (its CRC recomputed) and these bodies."""
    return (
        MAGIC + LENGTH.pack(len(header_bytes)) + header_bytes + LENGTH.pack(zlib.crc32(header_bytes)) + b"".join(bodies)
    )


def relaid(header: dict[str, Any], bodies: list[bytes]) -> bytes:
    """The file with every section's offset, length and CRC made to match its (changed) body."""
    offset = 0
    for meta, body in zip(header["sections"], bodies):
        meta.update(offset=offset, length=len(body), crc=zlib.crc32(body))
        offset += len(body)
    return assemble(json.dumps(header).encode(), bodies)


# -- the generated cases -------------------------------------------------------------------------
HOSTILE_NUMBERS = [
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-1",
    "0",
    str(2**63),
    str(2**64),
    str(10**13),
    "1.5",
    '"5"',
    "true",
    "null",
    "[]",
    "{}",
]


def not_an_object() -> st.SearchStrategy[tuple[str, bytes]]:
    values = st.one_of(
        st.lists(st.integers(), max_size=4), st.text(max_size=20), st.integers(), st.floats(), st.none(), st.booleans()
    )
    return values.map(lambda v: ("not-an-object", json.dumps(v).encode()))


def nested(original: dict[str, Any]) -> st.SearchStrategy[tuple[str, bytes]]:
    def build(depth: int, where: str, brackets: str) -> tuple[str, bytes]:
        opening, closing = ("[", "]") if brackets == "list" else ('{"a":', "}")
        inner = opening * depth + "1" + closing * depth
        if where == "whole":
            return f"nested-whole-{brackets}", inner.encode()
        text = json.dumps({**original, where: "@@"}).replace('"@@"', inner)
        return f"nested-{where}-{brackets}", text.encode()

    return st.builds(
        build,
        st.integers(900, 100_000),
        st.sampled_from(["whole", "manifest", "sections", "generation"]),
        st.sampled_from(["list", "object"]),
    )


def header_number(original: dict[str, Any]) -> st.SearchStrategy[tuple[str, bytes]]:
    def build(field: str, value: str) -> tuple[str, bytes]:
        text = json.dumps({**original, field: "@@"}).replace('"@@"', value)
        return f"header-{field}={value[:12]}", text.encode()

    return st.builds(
        build,
        st.sampled_from(["generation", "format", "link", "manifest", "sections"]),
        st.sampled_from(HOSTILE_NUMBERS),
    )


def section_field(original: dict[str, Any]) -> st.SearchStrategy[tuple[str, bytes]]:
    count = len(original["sections"])

    def build(index: int, field: str, value: str) -> tuple[str, bytes]:
        header = json.loads(json.dumps(original))
        meta = header["sections"][index]
        if field == "shape-huge":  # a 10^6 x 10^6 matrix whose length agrees with its shape
            meta.update(type="matrix", shape=[10**6, 10**6], length=4 * 10**12)
            return "section-matrix-10^6x10^6", json.dumps(header).encode()
        if field == "length-huge":
            meta["length"] = 10**13
            return "section-length-10^13", json.dumps(header).encode()
        meta[field] = "@@"
        return f"section-{field}={value[:12]}", json.dumps(header).replace('"@@"', value).encode()

    values = st.sampled_from(
        HOSTILE_NUMBERS
        + ["[1000000, 1000000]", "[-1, 5]", "[1, 2, 3]", '"matrix"', '"records"', '"ids"', '"turns"', '"nope"']
    )
    return st.builds(
        build,
        st.integers(0, count - 1),
        st.sampled_from(["offset", "length", "crc", "shape", "type", "name", "shape-huge", "length-huge"]),
        values,
    )


def section_body(original: dict[str, Any], bodies: list[bytes]) -> st.SearchStrategy[tuple[str, bytes]]:
    ids_at = [i for i, m in enumerate(original["sections"]) if m["type"] == "ids"]
    records_at = [i for i, m in enumerate(original["sections"]) if m["type"] == "records"]
    matrix_at = [i for i, m in enumerate(original["sections"]) if m["type"] == "matrix" and m["shape"][0]]

    def build(how: str, pick: int, depth: int) -> tuple[str, bytes]:
        header, new = json.loads(json.dumps(original)), list(bodies)
        if how in ("ids-not-list", "ids-nested", "ids-numbers"):
            i = ids_at[pick % len(ids_at)]
            new[i] = {
                "ids-not-list": b'{"D1:1": 1}',
                "ids-nested": b"[" * depth + b"]" * depth,
                "ids-numbers": json.dumps(list(range(len(json.loads(bodies[i]))))).encode(),
            }[how]
        elif how == "records-nested":
            i = records_at[pick % len(records_at)]
            new[i] = b"[" * depth + b"]" * depth
        else:  # a matrix of another width, or holding NaN
            i = matrix_at[pick % len(matrix_at)]
            rows, width = header["sections"][i]["shape"]
            if how == "matrix-width":
                width = 3 if width != 3 else 5
                matrix = np.ones((rows, width), dtype="<f4")
                header["sections"][i]["shape"] = [rows, width]
            else:
                matrix = np.frombuffer(bodies[i], dtype="<f4").reshape(rows, width).copy()
                matrix[0, 0] = np.nan if how == "matrix-nan" else np.inf
            new[i] = matrix.tobytes()
        return f"body-{how}", relaid(header, new)

    return st.builds(
        build,
        st.sampled_from(
            ["ids-not-list", "ids-nested", "ids-numbers", "records-nested", "matrix-width", "matrix-nan", "matrix-inf"]
        ),
        st.integers(0, 50),
        st.integers(900, 100_000),
    )


# -- the memory they are tried on ----------------------------------------------------------------
@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, sample) -> Any:
    res = make_resources(tmp_path_factory.mktemp("snapshot-headers") / "m")
    short = sample.model_copy(deep=True)
    short.sessions = short.sessions[:2]
    ingest_conversation(short, "alice", resources=res, policy="heuristic")
    store = res.store
    path = chroma.snapshot_file(store, "alice")
    assert path is not None and path.exists()
    path.unlink()  # saved again at the namespace's generation, so a rebuilt file is recognisable
    chroma.forget_snapshots(store)
    store.snapshot("alice")
    assert read_snapshot_file(path, "alice", _MODELS).generation == store.manifest("alice").generation
    original = path.read_bytes()
    yield res, path, original, store.snapshot("alice").fingerprint()
    store.close()
    print(f"crafted snapshot files: {dict(COUNTS)}")


def reads_through(memory: Any, name: str, data: bytes) -> None:
    res, path, original, fingerprint = memory
    store: MemoryStore = res.store
    COUNTS["tried"] += 1
    event(name.split("=")[0])
    path.write_bytes(data)
    chroma.forget_snapshots(store)  # the next read opens the namespace from its file again
    assert store.snapshot("alice").fingerprint() == fingerprint, name
    saved = read_snapshot_file(path, "alice", _MODELS)  # rebuilt, and sound
    assert saved.generation == store.manifest("alice").generation, name
    path.write_bytes(original)
    COUNTS["passed"] += 1


@RUNS
@given(data=st.data())
def test_a_crafted_header_is_ignored_and_rebuilt(memory: Any, data: st.DataObject) -> None:
    _, _, original, _ = memory
    header, bodies = parse(original)
    name, header_bytes = data.draw(
        st.one_of(not_an_object(), nested(header), header_number(header), section_field(header))
    )
    reads_through(memory, name, assemble(header_bytes, bodies))


@RUNS
@given(data=st.data())
def test_a_crafted_section_body_is_ignored_and_rebuilt(memory: Any, data: st.DataObject) -> None:
    _, _, original, _ = memory
    header, bodies = parse(original)
    name, crafted = data.draw(section_body(header, bodies))
    assume(crafted != original)  # ids of an empty section written again as they were
    reads_through(memory, name, crafted)


@pytest.mark.parametrize("craft", ["1e400", "deep", "10^6x10^6"])
def test_the_cli_answers_from_a_namespace_whose_cache_file_was_crafted(
    memory: Any, craft: str, capsys: pytest.CaptureFixture[str]
) -> None:
    res, path, original, _ = memory
    header, bodies = parse(original)
    if craft == "1e400":
        header_bytes = json.dumps({**header, "generation": "@@"}).replace('"@@"', "1e400").encode()
    elif craft == "deep":
        header_bytes = b"[" * 100_000 + b"]" * 100_000
    else:
        header["sections"][-1].update(type="matrix", shape=[10**6, 10**6], length=4 * 10**12)
        header_bytes = json.dumps(header).encode()
    path.write_bytes(assemble(header_bytes, bodies))
    code = main(
        [
            "--data-dir",
            str(res.settings.data_dir),
            "--embeddings",
            "hashing",
            "ask",
            "What did Maya adopt?",
            "-n",
            "alice",
            "--strategy",
            "dense",
            "--policy",
            "heuristic",
        ]
    )
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err and out.out.startswith("Q: "), out
    assert read_snapshot_file(path, "alice", _MODELS).generation >= 1
