"""Loaders: LoCoMo, LongMemEval and JSONL files, and errors that name the file, the record and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logicmap.memory.loaders import DataFormatError, load_conversations


def _locomo(sessions: dict, qa: list | None = None) -> list:
    conv = {"speaker_a": "Ann", "speaker_b": "Bo"}
    for n, (stamp, turns) in sessions.items():
        conv[f"session_{n}_date_time"] = stamp
        conv[f"session_{n}"] = turns
    return [{"sample_id": "s1", "conversation": conv, "qa": qa or []}]


def _write(tmp_path: Path, data: object, name: str = "conv.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_sample_conversation_loads_with_sessions_turns_and_qa(sample) -> None:
    assert [s.session_id for s in sample.sessions] == ["S1", "S2", "S3", "S4", "S5"]
    assert sample.turn_count == 38
    assert sample.sessions[0].timestamp.isoformat() == "2023-03-04T14:15:00"
    assert sample.sessions[0].turns[0].image_caption
    adversarial = [q for q in sample.qa if q.category == 5]
    assert adversarial and adversarial[0].adversarial_answer
    assert all(e.startswith("D") for q in sample.qa for e in q.evidence)


def test_missing_field_names_file_record_and_field(tmp_path) -> None:
    path = _write(tmp_path, _locomo({1: ("1:56 pm on 8 May, 2023", [{"speaker": "Ann", "dia_id": "D1:1"}])}))
    with pytest.raises(DataFormatError) as err:
        load_conversations(path)
    message = str(err.value)
    assert str(path) in message and "session_1 turn 0" in message and "'text'" in message and "missing" in message


def test_wrong_type_is_reported(tmp_path) -> None:
    path = _write(tmp_path, _locomo({1: ("1:56 pm on 8 May, 2023", [{"speaker": "Ann", "dia_id": "D1:1", "text": 42}])}))
    with pytest.raises(DataFormatError, match="expected str, got int"):
        load_conversations(path)


def test_malformed_json_and_non_utf8(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"sample_id": "x", ', encoding="utf-8")
    with pytest.raises(DataFormatError, match="malformed JSON"):
        load_conversations(bad)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b'[{"a": "\xff\xfe"}]')
    with pytest.raises(DataFormatError, match="not UTF-8"):
        load_conversations(binary)


def test_duplicate_dia_ids_and_empty_conversations_are_rejected(tmp_path) -> None:
    turn = {"speaker": "Ann", "dia_id": "D1:1", "text": "hi"}
    path = _write(tmp_path, _locomo({1: ("1:56 pm on 8 May, 2023", [turn, turn])}))
    with pytest.raises(DataFormatError, match="duplicate dia id 'D1:1'"):
        load_conversations(path)
    empty = _write(tmp_path, _locomo({1: ("1:56 pm on 8 May, 2023", [])}), "empty.json")
    with pytest.raises(DataFormatError, match="no turns"):
        load_conversations(empty)


def test_sessions_out_of_time_order_are_reordered_and_the_repair_recorded(tmp_path) -> None:
    path = _write(tmp_path, _locomo({
        1: ("1:00 pm on 9 May, 2023", [{"speaker": "Ann", "dia_id": "D1:1", "text": "later"}]),
        2: ("1:00 pm on 1 May, 2023", [{"speaker": "Bo", "dia_id": "D2:1", "text": "earlier"}]),
    }))
    conv = load_conversations(path)[0]
    assert [s.session_id for s in conv.sessions] == ["S2", "S1"]
    assert conv.repairs and "out of time order" in conv.repairs[0]


def test_unreadable_timestamp_is_an_error(tmp_path) -> None:
    path = _write(tmp_path, _locomo({1: ("someday", [{"speaker": "Ann", "dia_id": "D1:1", "text": "x"}])}))
    with pytest.raises(DataFormatError, match="session_1_date_time"):
        load_conversations(path)


def test_longmemeval_format(tmp_path) -> None:
    data = [{
        "question_id": "q1", "question_type": "single-session-user", "question": "What pet?", "answer": "a cat",
        "question_date": "2023/05/30 (Tue) 10:00", "haystack_session_ids": ["a", "b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 09:00"],
        "haystack_sessions": [
            [{"role": "user", "content": "I adopted a cat", "has_answer": True}, {"role": "assistant", "content": "Nice!"}],
            [{"role": "user", "content": "Weather is good"}],
        ],
        "answer_session_ids": ["a"],
    }]
    conv = load_conversations(_write(tmp_path, data, "lme.json"))[0]
    assert conv.source_format == "longmemeval"
    assert [len(s.turns) for s in conv.sessions] == [2, 1]
    assert conv.qa[0].evidence == ["D1:1"] and conv.qa[0].category == "single-session-user"
    assert conv.qa[0].question_date.year == 2023


def test_jsonl_messages_grouped_into_sessions(tmp_path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [
        {"session": "a", "speaker": "Ann", "text": "hello", "timestamp": "2023-05-01 10:00"},
        {"session": "a", "role": "Bo", "content": "hi"},
        {"session": "b", "speaker": "Ann", "text": "again", "timestamp": "2023-05-02 10:00"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    conv = load_conversations(path)[0]
    assert [len(s.turns) for s in conv.sessions] == [2, 1]
    assert conv.sessions[0].turns[1].speaker == "Bo"
    path.write_text('{"speaker": "Ann"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 1.*'text'"):
        load_conversations(path)


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[2] / "data").glob("*.json")), ids=lambda p: p.name)
def test_every_shipped_dataset_loads_and_its_evidence_names_real_turns(path) -> None:
    from logicmap.evals.metrics import normalize_evidence_ids

    (conversation,) = load_conversations(path)
    dia_ids = {turn.dia_id for session in conversation.sessions for turn in session.turns}
    assert conversation.qa and {q.category for q in conversation.qa} <= {1, 2, 3, 4, 5}
    for item in conversation.qa:
        assert set(normalize_evidence_ids(item.evidence)) <= dia_ids, item.question
        assert item.category == 5 or normalize_evidence_ids(item.evidence), item.question
