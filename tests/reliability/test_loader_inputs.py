"""Generated damage to LoCoMo and LongMemEval files: a clean load or one ``DataFormatError`` naming file and record.

Each example takes a valid document of three conversations and damages one of them: a field of the wrong
type or removed, an id copied from another record or one that cleans to the same namespace, an odd session
key, 200,000 levels of nesting, a lone surrogate, bytes that are not UTF-8, a key named twice, a huge
integer. The loader must load the file cleanly or raise ``DataFormatError`` naming the file and that
record; the CLI must write nothing for a rejected file, not even the conversations before the damaged one.
CI runs a fixed, derandomized sample; ``LOGICMAP_FUZZ_EXAMPLES=N`` explores N random examples per test.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from logicmap.graphs.surfaces.cli import main
from logicmap.memory.files.loaders import DataFormatError, conversation_namespace, conversation_slug, load_conversations
from logicmap.memory.store import MemoryStore
from logicmap.settings import LogicMapSettings
from tests.reliability.support import json_paths

_DEEP = int(os.environ.get("LOGICMAP_FUZZ_EXAMPLES", "0"))
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
LOADER_RUNS = settings(max_examples=_DEEP or 150, deadline=None, derandomize=not _DEEP, suppress_health_check=_HEALTH)
CLI_RUNS = settings(LOADER_RUNS, max_examples=_DEEP or 25)
_files = itertools.count()


# -- valid documents -----------------------------------------------------------------------------
def locomo_document() -> list[dict[str, Any]]:
    samples = []
    for n in range(3):
        body: dict[str, Any] = {"speaker_a": "Maya", "speaker_b": "Leo"}
        for s in (1, 2):
            body[f"session_{s}_date_time"] = f"1:56 pm on {s + 7} May, 2023"
            body[f"session_{s}"] = [
                {
                    "speaker": "Maya",
                    "dia_id": f"D{s}:1",
                    "text": f"Conversation {n}: my dog Biscuit, day {s}.",
                    "img_url": ["http://example.invalid/a.jpg"],
                    "blip_caption": "a dog on a sofa",
                },
                {"speaker": "Leo", "dia_id": f"D{s}:2", "text": "What a lovely name!"},
            ]
        samples.append(
            {
                "sample_id": f"conv-{n}",
                "conversation": body,
                "qa": [
                    {"question": "What is the dog called?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 1},
                    {
                        "question": "What is the cat called?",
                        "adversarial_answer": "Biscuit",
                        "evidence": [],
                        "category": 5,
                    },
                ],
                "event_summary": {"events_session_1": ["Maya talks about Biscuit"]},
            }
        )
    return samples


def longmemeval_document() -> list[dict[str, Any]]:
    return [
        {
            "question_id": f"q{n}",
            "question_type": "single-session-user",
            "question": "What is my dog called?",
            "answer": "Biscuit",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": [f"s{n}-a", f"s{n}-b"],
            "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/08 (Mon) 09:00"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": f"Question {n}: I adopted a dog called Biscuit."},
                    {"role": "assistant", "content": "Lovely name!"},
                ],
                [{"role": "user", "content": "Biscuit chewed my shoes.", "has_answer": True}],
            ],
            "answer_session_ids": [f"s{n}-b"],
        }
        for n in range(3)
    ]


FORMATS = {"locomo": (locomo_document, "sample_id"), "longmemeval": (longmemeval_document, "question_id")}


# -- damage --------------------------------------------------------------------------------------


def _set(doc: Any, path: tuple, value: Any) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value


SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.text(st.characters(max_codepoint=0x1F), max_size=4),
    st.just(""),
    st.just("x" * 300),
    st.lists(st.integers(), max_size=2),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=4), st.none(), max_size=2),
)
ODD_SUFFIXES = [
    "01",
    "\u00b2",
    "1_",
    "x",
    "-1",
    "\u0663",
    "1 ",
    "",
    "1_date",
    "01_date_time",
    "1e3",
    "\uff11",
    "9999999",
]
BAD_BYTES = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc", b"\xe9t\xe9", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]
KINDS = [
    "retype",
    "delete",
    "duplicate_id",
    "colliding_id",
    "odd_session_key",
    "deep",
    "surrogate",
    "non_utf8",
    "duplicate_key",
    "huge_int",
    "many",
]


@st.composite
def damaged(draw: st.DrawFn, fmt: str, kinds: list[str] = KINDS, *, last: bool = False) -> tuple[bytes, list, int, str]:
    """Bytes of a damaged file, the document before byte-level damage, the damaged record and the kind."""
    make, id_key = FORMATS[fmt]
    doc = make()
    k = len(doc) - 1 if last else draw(st.integers(0, len(doc) - 1), label="record")
    kind = draw(st.sampled_from(kinds), label="kind")
    inside = [p for p in json_paths(doc[k]) if p]
    placeholder: tuple[str, bytes] | None = None
    for _ in range(draw(st.integers(1, 3), label="damages") if kind == "many" else 1):
        step = draw(st.sampled_from(["retype", "delete"]), label="step") if kind == "many" else kind
        if step == "retype":
            path = draw(st.sampled_from(inside), label="where")
            try:
                _set(doc[k], path, draw(JUNK, label="value"))
            except (KeyError, IndexError, TypeError):
                pass  # an earlier damage removed this path
        elif step == "delete":
            path = draw(st.sampled_from(inside), label="where")
            try:
                parent = doc[k]
                for key in path[:-1]:
                    parent = parent[key]
                if isinstance(parent, dict):
                    parent.pop(path[-1], None)
                else:
                    del parent[path[-1]]
            except (KeyError, IndexError, TypeError):
                pass
    if kind == "duplicate_id":
        other = draw(st.sampled_from([j for j in range(len(doc)) if j != k]), label="other")
        doc[k][id_key] = doc[other][id_key]
    elif kind == "colliding_id":
        other = draw(st.sampled_from([j for j in range(len(doc)) if j != k]), label="other")
        twin = draw(st.sampled_from([" ", "/", "  ", " / ", "#"]), label="separator")
        doc[k][id_key] = (
            doc[other][id_key].replace("-", twin) if "-" in doc[other][id_key] else f"-{doc[other][id_key]}-"
        )
    elif kind == "odd_session_key":
        if fmt == "locomo":
            suffix = draw(st.one_of(st.sampled_from(ODD_SUFFIXES), st.text(max_size=4)), label="suffix")
            doc[k]["conversation"][f"session_{suffix}"] = [{"speaker": "Maya", "dia_id": "D9:1", "text": "hidden"}]
        else:
            field = draw(
                st.sampled_from(["haystack_dates", "haystack_session_ids", "haystack_sessions", "answer_session_ids"])
            )
            doc[k][field] = draw(
                st.one_of(st.integers(), st.text(max_size=3), st.dictionaries(st.text(max_size=2), st.none()))
            )
    elif kind in ("deep", "non_utf8", "huge_int"):
        _set(doc[k], draw(st.sampled_from(inside), label="where"), "__PLACEHOLDER__")
        if kind == "deep":
            depth = draw(st.sampled_from([150, 2_000, 200_000]), label="depth")
            placeholder = ('"__PLACEHOLDER__"', b"[" * depth + b"]" * depth)
        elif kind == "non_utf8":
            placeholder = ("__PLACEHOLDER__", draw(st.sampled_from(BAD_BYTES), label="bytes"))
        else:
            placeholder = ('"__PLACEHOLDER__"', b"-" * draw(st.booleans()) + b"7" * 5_000)
    elif kind == "surrogate":
        text = (
            draw(st.text(max_size=3), label="before") + draw(SURROGATES, label="surrogate") + draw(st.text(max_size=3))
        )
        strings = [p for p in inside if isinstance(_get(doc[k], p), str)]
        _set(doc[k], draw(st.sampled_from(strings), label="where"), text)
    elif kind == "duplicate_key":
        objects = [p for p in [(), *inside] if isinstance(_get(doc[k], p), dict) and _get(doc[k], p)]
        target = _get(doc[k], draw(st.sampled_from(objects), label="object"))
        key = draw(st.sampled_from(sorted(target)), label="key")
        target["__DUPLICATE__"] = draw(JUNK, label="value")
        placeholder = ('"__DUPLICATE__"', json.dumps(key).encode())
    raw = json.dumps(doc).encode()  # ensure_ascii: a lone surrogate is written as a \\udXXX escape
    if placeholder:
        raw = raw.replace(placeholder[0].encode(), placeholder[1], 1)
    return raw, doc, k, kind


def _get(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


# -- checks --------------------------------------------------------------------------------------
def record_names(doc: list, k: int, id_key: str) -> list[str]:
    """Ways an error may name record ``k``: by position, or by the id it has (or defaults to)."""
    names = [rf"\b(sample|question|record) {k}\b"]
    ids = [f"conv-{k}", str(k)]
    if (
        isinstance(doc[k], dict)
        and isinstance(doc[k].get(id_key), (str, int))
        and not isinstance(doc[k].get(id_key), bool)
    ):
        ids.append(str(doc[k][id_key]))
    return names + [re.escape(f"{unit} {cid!r}") for cid in ids for unit in ("sample", "question", "conversation")]


def write(tmp: Path, raw: bytes) -> Path:
    path = tmp / f"damaged-{next(_files)}.json"
    path.write_bytes(raw)
    return path


def check_file(path: Path, doc: list, k: int, id_key: str) -> str:
    """Load the file: a clean load must be fully usable, a rejection must name the file and record ``k``."""
    try:
        conversations = load_conversations(path)
    except DataFormatError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: "), message
        assert "\n" not in message, message
        assert any(re.search(name, message) for name in record_names(doc, k, id_key)), (
            f"record {k} not named: {message}"
        )
        return f"rejected: {exc.problem.split(':')[0][:40]}"
    ids = [c.conversation_id for c in conversations]
    assert len(set(ids)) == len(ids) == len({conversation_slug(i) for i in ids})
    namespaces = {conversation_namespace("base", i) for i in ids}
    assert len(namespaces) == len(ids)
    for conversation in conversations:
        conversation.model_dump_json().encode("utf-8")  # every string is encodable text
        assert conversation.turn_count and all(
            t.dia_id and " " not in t.dia_id for s in conversation.sessions for t in s.turns
        )
    return "loaded"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("loader-inputs")


@LOADER_RUNS
@given(case=damaged("locomo"))
def test_damaged_locomo_files_load_cleanly_or_name_file_and_record(case, files) -> None:
    raw, doc, k, kind = case
    outcome = check_file(write(files, raw), doc, k, "sample_id")
    event(f"{kind}: {outcome}")


@LOADER_RUNS
@given(case=damaged("longmemeval"))
def test_damaged_longmemeval_files_load_cleanly_or_name_file_and_record(case, files) -> None:
    raw, doc, k, kind = case
    outcome = check_file(write(files, raw), doc, k, "question_id")
    event(f"{kind}: {outcome}")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_undamaged_documents_load(fmt, files) -> None:
    make, id_key = FORMATS[fmt]
    conversations = load_conversations(write(files, json.dumps(make()).encode()))
    assert [c.conversation_id for c in conversations] == [r[id_key] for r in make()]


# -- the CLI writes nothing for a rejected file ----------------------------------------------------
def ingest(path: Path, data_dir: Path, namespace: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(
        [
            "--data-dir",
            str(data_dir),
            "--embeddings",
            "hashing",
            "ingest",
            str(path),
            "-n",
            namespace,
            "--policy",
            "heuristic",
            "--quiet",
        ]
    )
    return code, capsys.readouterr().err


def open_store(data_dir: Path) -> MemoryStore:
    return MemoryStore(LogicMapSettings(data_dir=data_dir, embedding_provider="hashing"))


def one_session_document(n: int = 2) -> list[dict[str, Any]]:
    doc = locomo_document()[:n]
    for sample in doc:
        del sample["conversation"]["session_2"], sample["conversation"]["session_2_date_time"]
    return doc


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory, files: Path) -> tuple[Path, dict]:
    """A data dir whose namespace "keep" holds a committed conversation, and its fingerprint."""
    data_dir = tmp_path_factory.mktemp("loader-cli") / "memory"
    path = write(files, json.dumps(one_session_document(1)).encode())
    assert (
        main(
            [
                "--data-dir",
                str(data_dir),
                "--embeddings",
                "hashing",
                "ingest",
                str(path),
                "-n",
                "keep",
                "--policy",
                "heuristic",
                "--quiet",
            ]
        )
        == 0
    )
    with open_store(data_dir) as store:
        return data_dir, store.snapshot("keep").fingerprint()


ALWAYS_INVALID = {
    "locomo": ["duplicate_id", "colliding_id", "deep", "non_utf8", "duplicate_key", "huge_int"],
    "longmemeval": ["duplicate_id", "colliding_id", "odd_session_key", "deep", "non_utf8", "huge_int"],
}


@CLI_RUNS
@given(
    fmt_case=st.sampled_from(sorted(FORMATS)).flatmap(
        lambda fmt: st.tuples(st.just(fmt), damaged(fmt, ALWAYS_INVALID[fmt], last=True))
    )
)
def test_a_file_damaged_in_its_last_conversation_writes_nothing(fmt_case, files, kept, capsys) -> None:
    """The conversations before the damaged one are valid: the CLI must still reject the file before writing."""
    fmt, (raw, doc, k, kind) = fmt_case
    data_dir, fingerprint = kept
    path = write(files, raw)
    try:
        load_conversations(path)
    except DataFormatError:
        pass
    else:
        assume(False)  # damage in a field no loader reads (an extra key, depth 150 there) loads cleanly
    namespace = f"cli-{next(_files)}"
    code, err = ingest(path, data_dir, namespace, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {path}: "), err
    assert any(re.search(name, lines[0]) for name in record_names(doc, k, FORMATS[fmt][1])), lines[0]
    with open_store(data_dir) as store:
        assert not [ns for ns in store.namespaces() if ns.startswith(namespace)]
        assert store.snapshot("keep").fingerprint() == fingerprint
    event(f"{fmt} {kind}: rejected, nothing written")


def test_a_valid_many_conversation_file_is_ingested_one_namespace_each(files, kept, capsys) -> None:
    data_dir, _ = kept
    doc = one_session_document(2)
    doc[1]["sample_id"] = "conv 1/b"
    code, err = ingest(write(files, json.dumps(doc).encode()), data_dir, "many", capsys)
    assert code == 0, err
    with open_store(data_dir) as store:
        assert sorted(ns for ns in store.namespaces() if ns.startswith("many")) == ["many.conv-0", "many.conv-1-b"]
