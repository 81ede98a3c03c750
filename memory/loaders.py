"""Loaders for conversations: LoCoMo, LongMemEval and plain JSONL, into sessions of turns.

A malformed file raises ``DataFormatError`` naming the file, the record and the field; nothing is
written to memory for a rejected file. Repairs that are safe (sessions out of time order) are
applied and recorded in ``Conversation.repairs``.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from logicmap.memory.records import stable_hash
from logicmap.memory.timeparse import parse_timestamp

__all__ = [
    "Conversation",
    "DataFormatError",
    "QAItem",
    "RawTurn",
    "Session",
    "load_conversations",
    "load_jsonl",
    "load_locomo",
    "load_longmemeval",
]


class DataFormatError(ValueError):
    """A conversation file that cannot be read: names the file, the record and the field."""

    def __init__(self, path: str | Path, record: str, field: str, problem: str) -> None:
        self.path, self.record, self.field, self.problem = str(path), record, field, problem
        super().__init__(f"{self.path}: {record}: field {field!r}: {problem}")


class RawTurn(BaseModel):
    dia_id: str
    speaker: str
    text: str
    image_caption: str | None = None
    has_answer: bool = False


class Session(BaseModel):
    session_id: str
    timestamp: datetime | None = None
    timestamp_text: str | None = None
    turns: list[RawTurn]

    def content_hash(self) -> str:
        payload = json.dumps(
            [self.timestamp_text, [t.model_dump() for t in self.turns]], sort_keys=True, ensure_ascii=False
        )
        return stable_hash(payload, length=16)


class QAItem(BaseModel):
    question_id: str
    question: str
    answer: str
    evidence: list[str] = Field(default_factory=list)
    category: int | str | None = None
    adversarial_answer: str | None = None
    question_date: datetime | None = None


class Conversation(BaseModel):
    conversation_id: str
    speakers: list[str] = Field(default_factory=list)
    sessions: list[Session]
    qa: list[QAItem] = Field(default_factory=list)
    source_format: Literal["locomo", "longmemeval", "jsonl"] = "locomo"
    repairs: list[str] = Field(default_factory=list)

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def _read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataFormatError(path, "file", "-", f"cannot read: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, f"byte {exc.start}", "-", "file is not UTF-8 text") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"line {exc.lineno} column {exc.colno}", "-", f"malformed JSON: {exc.msg}") from exc


def _require(obj: Any, key: str, kind: type | tuple[type, ...], path: Path, record: str) -> Any:
    if not isinstance(obj, dict):
        raise DataFormatError(path, record, key, f"expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise DataFormatError(path, record, key, "missing")
    value = obj[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataFormatError(path, record, key, f"expected {names}, got {type(value).__name__}")
    return value


def _build(model: type[BaseModel], path: Path, record: str, **values: Any) -> Any:
    """A record from checked values; what pydantic still rejects becomes a one-line DataFormatError."""
    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else "-"
        raise DataFormatError(path, record, field, f"{first['msg']} (got {str(first.get('input'))[:40]!r})") from None


def _finish(conv: Conversation, path: Path) -> Conversation:
    """Checks shared by every format: non-empty, unique dia ids, sessions in time order."""
    if not conv.sessions or conv.turn_count == 0:
        raise DataFormatError(path, conv.conversation_id, "sessions", "the conversation has no turns")
    seen: dict[str, str] = {}
    for session in conv.sessions:
        for turn in session.turns:
            if turn.dia_id in seen:
                raise DataFormatError(
                    path,
                    f"{conv.conversation_id} {session.session_id}",
                    "dia_id",
                    f"duplicate dia id {turn.dia_id!r} (also in {seen[turn.dia_id]})",
                )
            seen[turn.dia_id] = session.session_id
    stamped = [s for s in conv.sessions if s.timestamp is not None]
    if len(stamped) == len(conv.sessions):
        ordered = sorted(conv.sessions, key=lambda s: s.timestamp)  # type: ignore[arg-type,return-value]
        if [s.session_id for s in ordered] != [s.session_id for s in conv.sessions]:
            conv.repairs.append(
                "sessions were out of time order; reordered by timestamp: "
                + ", ".join(s.session_id for s in ordered)
            )
            conv.sessions = ordered
    return conv


def load_locomo(path: str | Path) -> list[Conversation]:
    """A LoCoMo file: a list of samples with ``conversation`` and ``qa``."""
    path = Path(path)
    data = _read_json(path)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise DataFormatError(path, "top level", "-", "expected a non-empty list of samples")
    conversations = []
    seen_ids: dict[str, int] = {}
    for n, sample in enumerate(data):
        record = f"sample {n}"
        sample_id = str(sample.get("sample_id", f"conv-{n}")) if isinstance(sample, dict) else f"conv-{n}"
        if sample_id in seen_ids:
            raise DataFormatError(path, f"sample {n}", "sample_id", f"duplicate sample_id {sample_id!r} (also sample {seen_ids[sample_id]})")
        seen_ids[sample_id] = n
        record = f"sample {sample_id!r}"
        conv = _require(sample, "conversation", dict, path, record)
        speakers = [str(conv.get("speaker_a", "")), str(conv.get("speaker_b", ""))]
        numbers = sorted(
            int(k.split("_")[1])
            for k in conv
            if k.startswith("session_") and k.split("_")[1].isdigit() and k.count("_") == 1
        )
        sessions = []
        for number in numbers:
            key = f"session_{number}"
            turns_raw = _require(conv, key, list, path, record)
            stamp_text = conv.get(f"{key}_date_time")
            if stamp_text is not None and not isinstance(stamp_text, str):
                raise DataFormatError(path, record, f"{key}_date_time", "expected a string")
            stamp = parse_timestamp(stamp_text)
            if stamp_text and stamp is None:
                raise DataFormatError(path, record, f"{key}_date_time", f"unreadable timestamp {stamp_text!r}")
            turns = []
            for i, turn in enumerate(turns_raw):
                where = f"{record} {key} turn {i}"
                speaker = _require(turn, "speaker", str, path, where)
                dia_id = _require(turn, "dia_id", str, path, where)
                text = _require(turn, "text", str, path, where)
                caption = turn.get("blip_caption")
                if caption is not None and not isinstance(caption, str):
                    raise DataFormatError(path, where, "blip_caption", "expected a string")
                turns.append(RawTurn(dia_id=dia_id, speaker=speaker, text=text, image_caption=caption))
            if turns:
                sessions.append(Session(session_id=f"S{number}", timestamp=stamp, timestamp_text=stamp_text, turns=turns))
        qa_items = []
        qa_raw = sample.get("qa", []) or []
        if not isinstance(qa_raw, list):
            raise DataFormatError(path, record, "qa", f"expected a list of questions, got {type(qa_raw).__name__}")
        for i, qa in enumerate(qa_raw):
            where = f"{record} qa {i}"
            question = _require(qa, "question", str, path, where)
            category = qa.get("category")
            answer = qa.get("answer", qa.get("adversarial_answer"))
            if answer is None:
                raise DataFormatError(path, where, "answer", "missing (and no adversarial_answer)")
            evidence = qa.get("evidence", []) or []
            if not isinstance(evidence, list):
                raise DataFormatError(path, where, "evidence", "expected a list of dia ids")
            qa_items.append(
                _build(
                    QAItem, path, where,
                    question_id=f"{sample_id}-q{i}",
                    question=question,
                    answer=str(answer),
                    evidence=[str(e) for e in evidence],
                    category=category,
                    adversarial_answer=qa.get("adversarial_answer"),
                )
            )
        conversations.append(
            _finish(
                Conversation(conversation_id=sample_id, speakers=[s for s in speakers if s], sessions=sessions, qa=qa_items),
                path,
            )
        )
    return conversations


def load_longmemeval(path: str | Path) -> list[Conversation]:
    """A LongMemEval file: one haystack of sessions per question."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, list) or not data:
        raise DataFormatError(path, "top level", "-", "expected a non-empty list of questions")
    conversations = []
    for n, item in enumerate(data):
        qid = str(item.get("question_id", n)) if isinstance(item, dict) else str(n)
        record = f"question {qid!r}"
        haystack = _require(item, "haystack_sessions", list, path, record)
        session_ids = item.get("haystack_session_ids") or [f"s{i}" for i in range(len(haystack))]
        dates = item.get("haystack_dates") or [None] * len(haystack)
        if len(session_ids) != len(haystack) or len(dates) != len(haystack):
            raise DataFormatError(path, record, "haystack_session_ids", "lengths differ from haystack_sessions")
        sessions, evidence = [], []
        for s_index, (sid, stamp_text, turns_raw) in enumerate(zip(session_ids, dates, haystack)):
            if not isinstance(turns_raw, list):
                raise DataFormatError(path, f"{record} session {sid}", "haystack_sessions", "expected a list of turns")
            stamp = parse_timestamp(stamp_text) if stamp_text else None
            if stamp_text and stamp is None:
                raise DataFormatError(path, record, "haystack_dates", f"unreadable timestamp {stamp_text!r}")
            turns = []
            for t_index, turn in enumerate(turns_raw):
                where = f"{record} session {sid} turn {t_index}"
                role = _require(turn, "role", str, path, where)
                content = _require(turn, "content", str, path, where)
                dia_id = f"D{s_index + 1}:{t_index + 1}"
                if turn.get("has_answer"):
                    evidence.append(dia_id)
                turns.append(RawTurn(dia_id=dia_id, speaker=role, text=content, has_answer=bool(turn.get("has_answer"))))
            if turns:
                sessions.append(Session(session_id=f"S{s_index + 1}", timestamp=stamp, timestamp_text=stamp_text, turns=turns))
        question = _require(item, "question", str, path, record)
        question_date = item.get("question_date")
        if question_date is not None and not isinstance(question_date, str):
            raise DataFormatError(path, record, "question_date", f"expected a string, got {type(question_date).__name__}")
        answer = item.get("answer")
        if answer is None:
            raise DataFormatError(path, record, "answer", "missing")
        qa = QAItem(
            question_id=qid,
            question=question,
            answer=str(answer),
            evidence=evidence,
            category=item.get("question_type"),
            question_date=parse_timestamp(item.get("question_date")),
        )
        conversations.append(
            _finish(
                Conversation(conversation_id=qid, speakers=["user", "assistant"], sessions=sessions, qa=[qa], source_format="longmemeval"),
                path,
            )
        )
    return conversations


def load_jsonl(path: str | Path) -> list[Conversation]:
    """Plain JSONL: one message per line ``{"speaker"|"role", "text"|"content", "session"?, "timestamp"?}``.

    Messages are grouped into sessions by their ``session`` field (or one session when absent).
    """
    path = Path(path)
    try:
        raw = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, f"byte {exc.start}", "-", "file is not UTF-8 text") from exc
    except OSError as exc:
        raise DataFormatError(path, "file", "-", f"cannot read: {exc.strerror}") from exc
    grouped: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, f"line {lineno}", "-", f"malformed JSON: {exc.msg}") from exc
        if not isinstance(message, dict):
            raise DataFormatError(path, f"line {lineno}", "-", "expected an object")
        grouped.setdefault(str(message.get("session", "1")), []).append((lineno, message))
    sessions = []
    for s_index, (sid, messages) in enumerate(grouped.items(), start=1):
        turns, stamp_text = [], None
        for t_index, (lineno, message) in enumerate(messages, start=1):
            speaker = message.get("speaker", message.get("role"))
            text = message.get("text", message.get("content"))
            if not isinstance(speaker, str):
                raise DataFormatError(path, f"line {lineno}", "speaker", "missing or not a string")
            if not isinstance(text, str):
                raise DataFormatError(path, f"line {lineno}", "text", "missing or not a string")
            stamp_text = stamp_text or message.get("timestamp")
            turns.append(RawTurn(dia_id=str(message.get("dia_id", f"D{s_index}:{t_index}")), speaker=speaker, text=text))
        stamp = parse_timestamp(stamp_text) if stamp_text else None
        if stamp_text and stamp is None:
            raise DataFormatError(path, f"session {sid}", "timestamp", f"unreadable timestamp {stamp_text!r}")
        sessions.append(Session(session_id=f"S{s_index}", timestamp=stamp, timestamp_text=stamp_text, turns=turns))
    speakers = sorted({t.speaker for s in sessions for t in s.turns})
    return [_finish(Conversation(conversation_id=path.stem, speakers=speakers, sessions=sessions, source_format="jsonl"), path)]


def load_conversations(path: str | Path, fmt: Literal["auto", "locomo", "longmemeval", "jsonl"] = "auto") -> list[Conversation]:
    """Load a conversation file, detecting the format from its content when ``fmt`` is ``auto``."""
    path = Path(path)
    if not path.exists():
        raise DataFormatError(path, "file", "-", "no such file")
    if fmt == "auto":
        if path.suffix == ".jsonl":
            fmt = "jsonl"
        else:
            data = _read_json(path)
            first = data[0] if isinstance(data, list) and data else data
            fmt = "longmemeval" if isinstance(first, dict) and "haystack_sessions" in first else "locomo"
    return {"locomo": load_locomo, "longmemeval": load_longmemeval, "jsonl": load_jsonl}[fmt](path)
