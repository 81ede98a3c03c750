"""Loaders: LoCoMo, LongMemEval and JSONL files, and errors that name the file, the record and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logicmap.memory.files.loaders import DataFormatError, load_conversations


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
    path = _write(
        tmp_path, _locomo({1: ("1:56 pm on 8 May, 2023", [{"speaker": "Ann", "dia_id": "D1:1", "text": 42}])})
    )
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
    path = _write(
        tmp_path,
        _locomo(
            {
                1: ("1:00 pm on 9 May, 2023", [{"speaker": "Ann", "dia_id": "D1:1", "text": "later"}]),
                2: ("1:00 pm on 1 May, 2023", [{"speaker": "Bo", "dia_id": "D2:1", "text": "earlier"}]),
            }
        ),
    )
    conv = load_conversations(path)[0]
    assert [s.session_id for s in conv.sessions] == ["S2", "S1"]
    assert conv.repairs and "out of time order" in conv.repairs[0]


def test_unreadable_timestamp_is_an_error(tmp_path) -> None:
    path = _write(tmp_path, _locomo({1: ("someday", [{"speaker": "Ann", "dia_id": "D1:1", "text": "x"}])}))
    with pytest.raises(DataFormatError, match="session_1_date_time"):
        load_conversations(path)


def test_longmemeval_format(tmp_path) -> None:
    data = [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "What pet?",
            "answer": "a cat",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": ["a", "b"],
            "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 09:00"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": "I adopted a cat", "has_answer": True},
                    {"role": "assistant", "content": "Nice!"},
                ],
                [{"role": "user", "content": "Weather is good"}],
            ],
            "answer_session_ids": ["a"],
        }
    ]
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


# -- issue item 10: every gap is a DataFormatError naming file, record and field ---------------------
def _lme_item(qid: str = "q1", **changes: object) -> dict:
    item = {
        "question_id": qid,
        "question_type": "single-session-user",
        "question": "What pet?",
        "answer": "a cat",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["a"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [[{"role": "user", "content": "I adopted a cat", "has_answer": True}]],
        "answer_session_ids": ["a"],
    }
    item.update(changes)
    return item


def _locomo_sample(sample_id: str, **conversation: object) -> dict:
    body = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "hi"}],
    }
    body.update(conversation)
    return {"sample_id": sample_id, "conversation": body, "qa": []}


def _rejected(path: Path, *names: str) -> DataFormatError:
    with pytest.raises(DataFormatError) as err:
        load_conversations(path)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    for name in names:
        assert name in message, f"{name!r} not in {message!r}"
    return err.value


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("haystack_dates", 5, "expected a list, got int"),
        ("haystack_session_ids", "a", "expected a list, got str"),
        ("haystack_sessions", {"a": []}, "expected a list, got object"),
        ("answer_session_ids", 3, "expected a list, got int"),
        ("question_type", ["x"], "expected int or str, got list"),
        ("answer", {"a": 1}, "expected a string or a number, got object"),
        ("question_date", "someday", "unreadable timestamp"),
    ],
)
def test_non_list_and_wrong_type_longmemeval_fields_are_named(tmp_path, field, value, problem) -> None:
    path = _write(tmp_path, [_lme_item("q0"), _lme_item(**{field: value})], "lme.json")
    error = _rejected(path, "question 'q1'", f"'{field}'", problem)
    assert (error.record, error.field) == ("question 'q1'", field)


def test_has_answer_and_session_ids_are_typed(tmp_path) -> None:
    bad_flag = _lme_item(haystack_sessions=[[{"role": "user", "content": "x", "has_answer": "yes"}]])
    _rejected(
        _write(tmp_path, [bad_flag], "flag.json"), "question 'q1' session a turn 0", "'has_answer'", "expected bool"
    )
    bad_id = _lme_item(haystack_session_ids=[{"id": "a"}])
    _rejected(_write(tmp_path, [bad_id], "sid.json"), "question 'q1'", "haystack_session_ids[0]", "expected an id")


def test_duplicate_longmemeval_question_ids_are_rejected_up_front(tmp_path) -> None:
    path = _write(tmp_path, [_lme_item("q1"), _lme_item("q2"), _lme_item("q1", answer="a dog")], "lme.json")
    error = _rejected(path, "question 2", "'question_id'", "duplicate question_id 'q1' (also question 0)")
    assert error.field == "question_id"


@pytest.mark.parametrize(("first", "second"), [("x y", "x/y"), ("conv 1", "conv-1"), ("!!", "??"), ("a", "-a-")])
def test_ids_that_clean_to_one_namespace_are_rejected(tmp_path, first, second) -> None:
    from logicmap.memory.files.loaders import conversation_namespace

    assert conversation_namespace("base", first) == conversation_namespace("base", second)
    path = _write(tmp_path, [_locomo_sample(first), _locomo_sample(second)])
    _rejected(path, "sample 1", "'sample_id'", "would share the namespace suffix")
    lme = _write(tmp_path, [_lme_item(first), _lme_item(second)], "lme.json")
    _rejected(lme, "question 1", "'question_id'", "would share the namespace suffix")


def test_two_hundred_thousand_levels_of_nesting_name_the_record(tmp_path) -> None:
    text = json.dumps([_locomo_sample("a"), _locomo_sample("b", session_2="DEEP")])
    path = tmp_path / "deep.json"
    path.write_text(text.replace('"DEEP"', "[" * 200_000 + "]" * 200_000), encoding="utf-8")
    _rejected(path, "record 1", "conversation.session_2[0]", "nested more than 100 levels deep")
    lme = tmp_path / "deep.jsonl"
    lme.write_text('{"speaker": "A", "text": "x"}\n{"speaker": "A", "text": ' + "[" * 200_000 + "\n", encoding="utf-8")
    _rejected(lme, "line 2", "nested more than")


def test_lone_surrogates_name_the_record_and_field(tmp_path) -> None:
    path = _write(tmp_path, [_lme_item("q0"), _lme_item(question="why \ud800?")], "lme.json")
    assert "\\ud800" in path.read_text(encoding="utf-8")  # json.dumps escapes it; json.loads brings it back
    _rejected(path, "question 'q1'", "'question'", "lone surrogate")
    turn = {"speaker": "Ann", "dia_id": "D1:\udc80", "text": "hi"}
    _rejected(
        _write(tmp_path, [_locomo_sample("a", session_1=[turn])]),
        "sample 'a' session_1 turn 0",
        "'dia_id'",
        "surrogate",
    )
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text('{"speaker": "A", "text": "\\udfff"}\n', encoding="utf-8")
    _rejected(jsonl, "line 1", "'text'", "surrogate")


def test_non_utf8_bytes_name_the_record_they_fall_in(tmp_path) -> None:
    raw = json.dumps([_locomo_sample("a"), _locomo_sample("b")]).encode()
    path = tmp_path / "latin.json"
    path.write_bytes(raw[: raw.rindex(b'"hi"')] + b'"h\xe9"' + raw[raw.rindex(b'"hi"') + 4 :])
    _rejected(path, "record 1", "conversation.session_1[0].text", "not UTF-8", "byte 0xe9")


@pytest.mark.parametrize(
    "key",
    [
        "session_01",
        "session_\u00b2",
        "session_1_",
        "session_x",
        "session_-1",
        "session_\u0663",
        "session_1_date",
        "session_01_date_time",
    ],
)
def test_odd_session_keys_are_rejected_not_skipped(tmp_path, key) -> None:
    path = _write(tmp_path, [_locomo_sample("a", **{key: [{"speaker": "Ann", "dia_id": "D9:1", "text": "x"}]})])
    error = _rejected(path, "sample 'a'", "not a session key")
    assert error.field == key


def test_duplicate_json_keys_are_rejected(tmp_path) -> None:
    path = tmp_path / "dup.json"
    path.write_text(
        json.dumps([_locomo_sample("a")]).replace('"text": "hi"', '"text": "hi", "text": "ho"'), encoding="utf-8"
    )
    _rejected(path, "sample 'a' session_1 turn 0", "'text'", "appears twice")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "empty"),
        ("x" * 81, "longer than 80"),
        ("a\x00b", "control character"),
        (" a", "whitespace"),
        (True, "expected an id (str), got bool"),
        (["a"], "got list"),
        (None, "got null"),
    ],
)
def test_conversation_ids_are_checked_for_shape_and_length(tmp_path, value, problem) -> None:
    _rejected(_write(tmp_path, [_locomo_sample(value)]), "sample 0", "'sample_id'", problem)
    _rejected(_write(tmp_path, [_lme_item(value)], "lme.json"), "question 0", "'question_id'", problem)


@pytest.mark.parametrize(
    ("dia_id", "problem"), [("D1 :1", "whitespace"), ("D" * 65, "longer than 64"), (7, "got int"), ("", "empty")]
)
def test_dia_ids_are_checked_for_shape_and_length(tmp_path, dia_id, problem) -> None:
    turn = {"speaker": "Ann", "dia_id": dia_id, "text": "hi"}
    _rejected(
        _write(tmp_path, [_locomo_sample("a", session_1=[turn])]), "sample 'a' session_1 turn 0", "'dia_id'", problem
    )


def test_huge_integers_are_named(tmp_path) -> None:
    path = tmp_path / "big.json"
    path.write_text(
        json.dumps([_locomo_sample("a")]).replace('"qa": []', '"qa": [' + "9" * 5000 + "]"), encoding="utf-8"
    )
    _rejected(path, "record 0", "qa[0]", "unreadable JSON value")


def test_conversation_namespace_is_validated_distinct_and_bounded() -> None:
    from logicmap.memory.files.loaders import conversation_namespace

    assert conversation_namespace("base", "conv-26") == "base.conv-26"
    assert conversation_namespace("base", "x y/z") == "base.x-y-z"
    long_base = "b" * 100
    one, two = (conversation_namespace(long_base, f"{'z' * 60}-{n}") for n in (1, 2))
    assert one != two and len(one) <= 128 and len(two) <= 128
    for base, cid in (("bad base", "x"), ("b" * 116, "x"), ("base", "x" * 81), ("base", "a\ud800"), ("base", "")):
        with pytest.raises(ValueError):
            conversation_namespace(base, cid)


def test_numeric_answers_and_ids_still_load(tmp_path) -> None:
    sample = _locomo_sample(26)  # type: ignore[arg-type]  # a number where an id is text: on purpose
    sample["qa"] = [{"question": "When?", "answer": 2022, "evidence": ["D1:1"], "category": 2}]
    (conv,) = load_conversations(_write(tmp_path, [sample]))
    assert conv.conversation_id == "26" and conv.qa[0].answer == "2022"
