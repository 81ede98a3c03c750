"""Bad input files: ``logicmap ingest`` exits 2 with one line naming file, record and field, and writes nothing.

Sessions out of time order are the one documented repair: reordered by timestamp and reported.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logicmap.graphs.surfaces.cli import main
from logicmap.memory.store import MemoryStore, UnknownNamespaceError
from logicmap.settings import LogicMapSettings
from tests.reliability.support import ROOT, SAMPLE, json_paths, memory_problems, subprocess_env

BASE: list[dict[str, Any]] = json.loads(SAMPLE.read_text(encoding="utf-8"))


def small_sample(sessions: int = 2) -> list[dict[str, Any]]:
    """The sample with only its first sessions (fast to ingest)."""
    data = copy.deepcopy(BASE)
    conv = data[0]["conversation"]
    for key in [k for k in conv if k.startswith("session_")]:
        number = int(key.split("_")[1])
        if number > sessions:
            del conv[key]
    data[0]["qa"] = data[0]["qa"][:2]
    return data


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def ingest(path: Path, data_dir: Path, namespace: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(
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
        ],
        capsys,
    )


def open_store(data_dir: Path) -> MemoryStore:
    return MemoryStore(LogicMapSettings(data_dir=data_dir, embedding_provider="hashing"))


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _turn(data: list[dict], session: int, index: int) -> dict:
    return data[0]["conversation"][f"session_{session}"][index]


def _bad_locomo(kind: str) -> tuple[Any, str, str]:
    """A broken LoCoMo document, and the record and field its error must name."""
    data = small_sample()
    conv = data[0]["conversation"]
    if kind == "missing_text":
        del _turn(data, 2, 3)["text"]
        return data, "session_2 turn 3", "text"
    if kind == "missing_dia_id":
        del _turn(data, 1, 0)["dia_id"]
        return data, "session_1 turn 0", "dia_id"
    if kind == "speaker_wrong_type":
        _turn(data, 1, 2)["speaker"] = 5
        return data, "session_1 turn 2", "speaker"
    if kind == "text_null":
        _turn(data, 2, 0)["text"] = None
        return data, "session_2 turn 0", "text"
    if kind == "session_not_list":
        conv["session_2"] = {"speaker": "Maya"}
        return data, "maya-leo", "session_2"
    if kind == "turn_not_object":
        conv["session_1"][1] = "Maya: hi"
        return data, "session_1 turn 1", "speaker"
    if kind == "missing_conversation":
        del data[0]["conversation"]
        return data, "maya-leo", "conversation"
    if kind == "duplicate_dia_id":
        _turn(data, 2, 1)["dia_id"] = "D1:2"
        return data, "S2", "dia_id"
    if kind == "bad_timestamp":
        conv["session_2_date_time"] = "the day after the party"
        return data, "maya-leo", "session_2_date_time"
    if kind == "timestamp_wrong_type":
        conv["session_1_date_time"] = 1683554160
        return data, "maya-leo", "session_1_date_time"
    if kind == "caption_wrong_type":
        _turn(data, 1, 0)["blip_caption"] = ["a", "dog"]
        return data, "session_1 turn 0", "blip_caption"
    if kind == "empty_sessions":
        for key in [k for k in conv if k.startswith("session_")]:
            conv[key] = [] if not key.endswith("date_time") else conv[key]
        return data, "maya-leo", "sessions"
    if kind == "no_sessions":
        data[0]["conversation"] = {"speaker_a": "Maya", "speaker_b": "Leo"}
        return data, "maya-leo", "sessions"
    if kind == "qa_missing_question":
        del data[0]["qa"][1]["question"]
        return data, "qa 1", "question"
    if kind == "qa_missing_answer":
        data[0]["qa"][0].pop("answer", None)
        return data, "qa 0", "answer"
    if kind == "qa_evidence_not_list":
        data[0]["qa"][0]["evidence"] = "D1:1"
        return data, "qa 0", "evidence"
    if kind == "qa_not_list":
        data[0]["qa"] = 7
        return data, "maya-leo", "qa"
    if kind == "qa_item_not_object":
        data[0]["qa"][0] = "what is the dog's name?"
        return data, "qa 0", "question"
    if kind == "qa_category_wrong_type":
        data[0]["qa"][0]["category"] = [1, 2]
        return data, "qa 0", "category"
    if kind == "empty_list":
        return [], "top level", "-"
    if kind == "top_level_string":
        return "hello", "top level", "-"
    raise ValueError(kind)


LOCOMO_CASES = [
    "missing_text",
    "missing_dia_id",
    "speaker_wrong_type",
    "text_null",
    "session_not_list",
    "turn_not_object",
    "missing_conversation",
    "duplicate_dia_id",
    "bad_timestamp",
    "timestamp_wrong_type",
    "caption_wrong_type",
    "empty_sessions",
    "no_sessions",
    "qa_missing_question",
    "qa_missing_answer",
    "qa_evidence_not_list",
    "qa_not_list",
    "qa_item_not_object",
    "qa_category_wrong_type",
    "empty_list",
    "top_level_string",
]


@pytest.fixture(scope="module")
def kept_memory(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A data dir whose namespace "keep" holds a committed conversation, and its fingerprint."""
    data_dir = tmp_path_factory.mktemp("bad-files") / "memory"
    good = write_json(data_dir.parent / "good.json", small_sample(1))
    assert (
        main(
            [
                "--data-dir",
                str(data_dir),
                "--embeddings",
                "hashing",
                "ingest",
                str(good),
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


def assert_rejected(code: int, out: str, err: str, path: Path, *names: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, f"exit {code}; stderr: {err}"
    assert len(lines) == 1, f"expected one error line, got {len(lines)}:\n{err}"
    line = lines[0]
    assert line.startswith("error: ") and str(path) in line, line
    for name in names:
        assert name in line, f"{name!r} not named in: {line}"
    assert "Traceback" not in err and not out.strip()


def assert_nothing_written(data_dir: Path, kept: dict, fresh: str) -> None:
    with open_store(data_dir) as store:
        with pytest.raises(UnknownNamespaceError):
            store.require_namespace(fresh)
        assert not [ns for ns in store.namespaces() if ns.startswith(fresh)]
        assert store.snapshot("keep").fingerprint() == kept


@pytest.mark.parametrize("kind", LOCOMO_CASES)
def test_malformed_locomo_file_is_rejected_with_one_line_and_nothing_written(
    kind, kept_memory, tmp_path, capsys
) -> None:
    data_dir, kept = kept_memory
    data, record, field = _bad_locomo(kind)
    path = write_json(tmp_path / f"{kind}.json", data)
    for namespace in (f"fresh-{kind}", "keep"):
        code, out, err = ingest(path, data_dir, namespace, capsys)
        assert_rejected(code, out, err, path, record, field)
    assert_nothing_written(data_dir, kept, f"fresh-{kind}")


RAW_CASES = {
    "truncated_json": (lambda: json.dumps(small_sample())[:-40].encode(), ["malformed JSON", "line 1 column"]),
    "empty_file": (lambda: b"", ["malformed JSON"]),
    "non_utf8": (
        lambda: json.dumps(small_sample()).encode().replace(b"Biscuit", b"Bisc\xff\xfeit", 1),
        ["not UTF-8", "byte"],
    ),
    "latin1": (
        lambda: json.dumps(small_sample(), ensure_ascii=False).replace("Biscuit", "Bisc\u00fcit").encode("latin-1"),
        ["not UTF-8"],
    ),
    "utf16": (lambda: json.dumps(small_sample()).encode("utf-16"), ["not UTF-8"]),
    "trailing_garbage": (lambda: (json.dumps(small_sample()) + "\n}{").encode(), ["malformed JSON", "line 2"]),
    "nan_literal": (
        lambda: re.sub(r'"category": \d+', '"category": NaN', json.dumps(small_sample()), count=1).encode(),
        ["qa 0", "category"],
    ),
}


@pytest.mark.parametrize("kind", sorted(RAW_CASES))
def test_unreadable_bytes_are_rejected_with_one_line_and_nothing_written(kind, kept_memory, tmp_path, capsys) -> None:
    data_dir, kept = kept_memory
    make, names = RAW_CASES[kind]
    path = tmp_path / f"{kind}.json"
    path.write_bytes(make())
    for namespace in (f"fresh-{kind}", "keep"):
        code, out, err = ingest(path, data_dir, namespace, capsys)
        assert_rejected(code, out, err, path, *names)
    assert_nothing_written(data_dir, kept, f"fresh-{kind}")


def _longmemeval(**changes: Any) -> list[dict]:
    item = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What is my dog called?",
        "answer": "Biscuit",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["a", "b"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/08 (Mon) 09:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I adopted a dog called Biscuit."},
                {"role": "assistant", "content": "Lovely name!"},
            ],
            [{"role": "user", "content": "Biscuit chewed my shoes.", "has_answer": True}],
        ],
        "answer_session_ids": ["a"],
    }
    item.update(changes)
    return [item]


OTHER_CASES = {
    "lme_missing_content": (
        "json",
        lambda: _longmemeval(haystack_sessions=[[{"role": "user"}], [{"role": "user", "content": "x"}]]),
        ["question 'q1' session a turn 0", "content"],
    ),
    "lme_lengths_differ": (
        "json",
        lambda: _longmemeval(haystack_session_ids=["a"]),
        ["question 'q1'", "haystack_session_ids"],
    ),
    "lme_bad_date": (
        "json",
        lambda: _longmemeval(haystack_dates=["someday", "2023/05/08 (Mon) 09:00"]),
        ["haystack_dates"],
    ),
    "lme_date_wrong_type": ("json", lambda: _longmemeval(haystack_dates=[20230501, 20230508]), ["haystack_dates"]),
    "lme_question_date_wrong_type": ("json", lambda: _longmemeval(question_date=["2023"]), ["question_date"]),
    "lme_missing_question": (
        "json",
        lambda: [{k: v for k, v in _longmemeval()[0].items() if k != "question"}],
        ["question 'q1'", "question"],
    ),
    "lme_empty_haystack": ("json", lambda: _longmemeval(haystack_sessions=[[], []]), ["sessions"]),
    "jsonl_bad_line": ("jsonl", lambda: '{"speaker": "Maya", "text": "hi"}\n{"speaker": "Leo", "text": \n', ["line 2"]),
    "jsonl_missing_speaker": (
        "jsonl",
        lambda: '{"speaker": "Maya", "text": "hi"}\n{"text": "hello"}\n',
        ["line 2", "speaker"],
    ),
    "jsonl_text_wrong_type": ("jsonl", lambda: '{"speaker": "Maya", "text": ["hi"]}\n', ["line 1", "text"]),
    "jsonl_not_object": ("jsonl", lambda: '["Maya", "hi"]\n', ["line 1"]),
    "jsonl_empty": ("jsonl", lambda: "\n\n", ["sessions"]),
    "jsonl_duplicate_dia_id": (
        "jsonl",
        lambda: '{"speaker": "A", "text": "x", "dia_id": "D1:1"}\n{"speaker": "B", "text": "y", "dia_id": "D1:1"}\n',
        ["dia_id", "D1:1"],
    ),
    "jsonl_bad_timestamp": ("jsonl", lambda: '{"speaker": "A", "text": "x", "timestamp": "soon"}\n', ["timestamp"]),
    "jsonl_timestamp_wrong_type": (
        "jsonl",
        lambda: '{"speaker": "A", "text": "x", "timestamp": 1683554160}\n',
        ["timestamp"],
    ),
}


@pytest.mark.parametrize("kind", sorted(OTHER_CASES))
def test_malformed_longmemeval_and_jsonl_files_are_rejected(kind, kept_memory, tmp_path, capsys) -> None:
    data_dir, kept = kept_memory
    suffix, make, names = OTHER_CASES[kind]
    content = make()
    path = tmp_path / f"{kind}.{suffix}"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    code, out, err = ingest(path, data_dir, f"fresh-{kind}", capsys)
    assert_rejected(code, out, err, path, *names)
    assert_nothing_written(data_dir, kept, f"fresh-{kind}")


def test_missing_file_and_directory_are_rejected(kept_memory, tmp_path, capsys) -> None:
    data_dir, kept = kept_memory
    for path in (tmp_path / "nope.json", tmp_path):
        code, out, err = ingest(path, data_dir, "fresh-missing", capsys)
        assert_rejected(code, out, err, path)
    assert_nothing_written(data_dir, kept, "fresh-missing")


def test_duplicate_sample_ids_in_one_file_write_nothing(kept_memory, tmp_path, capsys) -> None:
    """Two different conversations with one sample_id would land in one namespace: reject the file up front."""
    data_dir, kept = kept_memory
    first, second = small_sample(1)[0], small_sample(2)[0]
    second["conversation"]["session_1"][0]["text"] += " (a different conversation)"
    path = write_json(tmp_path / "twins.json", [first, second])
    code, out, err = ingest(path, data_dir, "fresh-twins", capsys)
    assert_rejected(code, out, err, path, "sample_id")
    assert_nothing_written(data_dir, kept, "fresh-twins")


def test_sessions_out_of_time_order_are_reordered_and_the_repair_is_reported(tmp_path, capsys) -> None:
    data = small_sample(3)
    conv = data[0]["conversation"]
    conv["session_1_date_time"], conv["session_3_date_time"] = conv["session_3_date_time"], conv["session_1_date_time"]
    path = write_json(tmp_path / "shuffled.json", data)
    data_dir = tmp_path / "memory"
    code, out, err = ingest(path, data_dir, "shuffled", capsys)
    assert code == 0, err
    assert "repaired maya-leo: sessions were out of time order; reordered by timestamp: S3, S2, S1" in err
    with open_store(data_dir) as store:
        snap = store.snapshot("shuffled")
        assert [sid for sid, _ in sorted(snap.manifest.sessions.items(), key=lambda kv: kv[1].generation)] == [
            "S3",
            "S2",
            "S1",
        ]
        assert not memory_problems(snap)
        # Turn positions follow the repaired (time) order.
        first = min(snap.turns.values(), key=lambda t: t.position)
        assert first.session_id == "S3"


def test_the_cli_process_exits_2_with_one_line_and_no_traceback(tmp_path) -> None:
    path = write_json(tmp_path / "bad.json", _bad_locomo("missing_text")[0])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "logicmap.graphs.surfaces.cli",
            "ingest",
            str(path),
            "-n",
            "fresh",
            "--policy",
            "heuristic",
            "--quiet",
        ],
        cwd=ROOT,
        env=subprocess_env(tmp_path / "memory"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"error: {path}: sample 'maya-leo' session_2 turn 3: field 'text': missing"], proc.stderr
    assert not (tmp_path / "memory").exists() or not any((tmp_path / "memory").iterdir())


# -- random structural damage --------------------------------------------------------------------


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.none(), max_size=2),
)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_randomly_damaged_files_are_ingested_or_rejected_cleanly(data, kept_memory, tmp_path_factory, capsys) -> None:
    data_dir, kept = kept_memory
    doc = small_sample(2)
    paths = [p for p in json_paths(doc) if p]
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        target = data.draw(st.sampled_from(paths), label="where")
        parent = doc
        try:
            for key in target[:-1]:
                parent = parent[key]
            action = data.draw(st.sampled_from(["delete", "replace"]), label="action")
            if action == "delete" and isinstance(parent, dict):
                parent.pop(target[-1], None)
            else:
                parent[target[-1]] = data.draw(JUNK, label="value")
        except (KeyError, IndexError, TypeError):
            continue  # an earlier damage removed this path
    path = write_json(tmp_path_factory.mktemp("damaged") / "damaged.json", doc)
    namespace = f"damaged-{abs(hash(json.dumps(doc, sort_keys=True))) % 10**8}"
    code, out, err = ingest(path, data_dir, namespace, capsys)
    assert code in (0, 2), f"exit {code}: {err}"
    with open_store(data_dir) as store:
        if code == 2:
            assert_rejected(code, out, err, path)
            assert not [ns for ns in store.namespaces() if ns.startswith(namespace)]
        else:
            for ns in [ns for ns in store.namespaces() if ns.startswith(namespace)]:
                assert not memory_problems(store.snapshot(ns))
        assert store.snapshot("keep").fingerprint() == kept
