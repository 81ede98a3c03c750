"""Loaders for conversations: LoCoMo, LongMemEval and plain JSONL, into sessions of turns.

A malformed file raises ``DataFormatError`` naming the file, the record and the field. A whole file
is read and checked before a caller sees any of it, so nothing is written for a rejected file.
Every identifier in a file (sample and question ids, session keys, dia ids) is checked for shape
and length, and ``conversation_namespace`` is the one place a conversation id becomes a namespace:
ids that would share a namespace are rejected up front. Repairs that are safe (sessions out of
time order) are applied and recorded in ``Conversation.repairs``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast, overload

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from logicmap.memory.language.timeparse import parse_timestamp
from logicmap.memory.records.records import Turn, drop_empty_item, stable_hash, validate_namespace
from logicmap.memory.runtime.input_limits import MAX_VALUE_DEPTH

__all__ = [
    "MAX_CONVERSATION_ID",
    "MAX_DIA_ID",
    "Conversation",
    "DataFormatError",
    "QAItem",
    "RawTurn",
    "Session",
    "check_sessions",
    "conversation_namespace",
    "conversation_slug",
    "load_conversations",
    "load_jsonl",
    "load_locomo",
    "load_longmemeval",
    "session_turns",
]

MAX_CONVERSATION_ID = 80
"""Longest sample or question id: the eval namespace keeps 80 characters of it, so longer ids could merge."""
MAX_DIA_ID = 64
MAX_SESSION_ID = 128
_MAX_NESTING = MAX_VALUE_DEPTH  # the formats nest 6 levels deep; json itself gives up near 1,000
_MAX_BASE = 128 - 1 - 12  # a per-conversation namespace keeps room for ".<slug>-<hash8>"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NOT_NAMESPACE = re.compile(r"[^A-Za-z0-9_.:@-]+")
# ASCII digits only ("session_²" is not a session) and no leading zeros ("session_01" is not session 1).
_SESSION_KEY = re.compile(r"session_(0|[1-9][0-9]{0,5})(_date_time)?")
_LONG_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|(-?[0-9]{1000,})')  # strings are matched only to be skipped
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)|[\[\]{},:]', re.DOTALL)


class DataFormatError(ValueError):
    """A conversation file that cannot be read: names the file, the record and the field."""

    def __init__(self, path: str | Path, record: str, field: str, problem: str) -> None:
        self.path, self.record, self.field, self.problem = str(path), record, field, problem
        if record == FILE and field == "-":  # the whole file: no record, no field to name
            super().__init__(f"{self.path}: {problem}")
        else:
            super().__init__(f"{self.path}: {record}: field {field!r}: {problem}")


FILE = "file"
"""The ``record`` of a ``DataFormatError`` about the whole file (missing, unreadable): its message names the path
and the problem only."""


class RawTurn(BaseModel):
    dia_id: str
    speaker: str
    text: str
    image_caption: str | None = None
    has_answer: bool = False
    item: dict[str, Any] | None = None  # a store item (``LogicMapStore.put``); left out of dumps when None

    @model_serializer(mode="wrap")
    def _without_empty_item(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_empty_item(handler(self))

    # Chat turns only (see ``Turn``): unset fields stay out of ``content_hash``, which is unchanged for files.
    role: Literal["user", "assistant"] | None = Field(default=None, exclude_if=lambda v: v is None)
    model_written: bool = Field(default=False, exclude_if=lambda v: not v)
    evidence: bool = Field(default=True, exclude_if=lambda v: v)
    said_at: datetime | None = Field(default=None, exclude_if=lambda v: v is None)


class Session(BaseModel):
    session_id: str
    timestamp: datetime | None = None
    timestamp_text: str | None = None
    turns: list[RawTurn]

    def content_hash(self) -> str:
        payload = json.dumps(
            [self.timestamp_text, [t.model_dump(mode="json") for t in self.turns]], sort_keys=True, ensure_ascii=False
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


# -- identifiers and namespaces ------------------------------------------------------------------
def _identifier_problem(value: str, limit: int, *, spaces: bool) -> str | None:
    """Why ``value`` cannot serve as an identifier, or ``None`` when it can."""
    if not value or not value.strip():
        return "empty"
    if len(value) > limit:
        return f"longer than {limit} characters ({len(value)})"
    if _SURROGATE.search(value):
        return "contains a lone surrogate (not encodable text)"
    if _CONTROL.search(value):
        return "contains a control character"
    if value != value.strip():
        return "has leading or trailing whitespace"
    if not spaces and any(c.isspace() for c in value):
        return "contains whitespace"
    return None


def conversation_slug(conversation_id: str) -> str:
    """A conversation id as a namespace suffix: runs of characters a namespace cannot hold become ``-``."""
    return _NOT_NAMESPACE.sub("-", conversation_id).strip("-") or "conv"


def conversation_namespace(base: str, conversation_id: str) -> str:
    """The namespace of one conversation of a many-conversation file: ``<base>.<slug of the id>``.

    Raises ``ValueError`` for an invalid base or conversation id. The loaders reject files in which two
    ids share a slug, so distinct conversations of one file never share a namespace; a name too long
    for the base is shortened and given a hash of the id. The base's length alone decides whether it is
    usable, so a base is refused before the first conversation, never halfway through a file.
    """
    validate_namespace(base)
    if len(base) > _MAX_BASE:
        raise ValueError(
            f"namespace {base!r} is too long to hold per-conversation namespaces (at most {_MAX_BASE} characters)"
        )
    problem = (
        _identifier_problem(conversation_id, MAX_CONVERSATION_ID, spaces=True)
        if isinstance(conversation_id, str)
        else "not a string"
    )
    if problem:
        raise ValueError(f"invalid conversation id {conversation_id!r}: {problem}")
    slug = conversation_slug(conversation_id)
    room = 127 - len(base)
    if len(slug) > room:
        slug = f"{slug[: room - 9]}-{stable_hash(conversation_id, length=8)}"
    return validate_namespace(f"{base}.{slug}")


# -- reading a file ------------------------------------------------------------------------------
class _DuplicateKeys(dict[str, Any]):
    """A JSON object that named a key twice (``json`` would silently keep the last value)."""

    duplicate: str = ""


def _seen_before(key: str, seen: set[str]) -> bool:
    """Whether ``key`` is in ``seen``; it is from now on."""
    if key in seen:
        return True
    seen.add(key)
    return False


def _timestamp_of(session: Session) -> datetime:
    """A stamped session's timestamp (the sort key of sessions that all have one)."""
    assert session.timestamp is not None, "only stamped sessions are sorted by time"
    return session.timestamp


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    marked = _DuplicateKeys(obj)
    marked.duplicate = next(k for k, _ in pairs if _seen_before(k, seen))
    return marked


def _kind_name(value: Any) -> str:
    if value is None:
        return "null"
    kinds: dict[type, str] = {dict: "object", list: "list"}
    return kinds.get(type(value), type(value).__name__)


def _line_column(text: str, pos: int) -> str:
    line, column = text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
    return f"line {line} column {column}"


def _locate(text: str, end: int, *, unit: str, max_depth: int | None = None) -> tuple[str, str, int]:
    """The record and field of raw JSON text at ``end`` (or where nesting first passes ``max_depth``).

    Used only on the error path, for text ``json`` could not turn into records: it scans tokens,
    so a file nested 200,000 levels deep costs no recursion.
    """
    stack: list[list[Any]] = []  # open containers: ["list", index] or ["object", key]
    last_string, pos = "", end
    for match in _JSON_TOKEN.finditer(text, 0, end):
        token = match.group()
        if token[0] == '"':
            last_string = (token[1:-1] if token.endswith('"') and len(token) > 1 else token[1:])[:40]
        elif token in "[{":
            stack.append(["list", 0] if token == "[" else ["object", None])
            if max_depth is not None and len(stack) > max_depth:
                pos = match.start()
                break
        elif token in "]}":
            if stack:
                stack.pop()
        elif token == "," and stack:
            stack[-1][1] = stack[-1][1] + 1 if stack[-1][0] == "list" else None
        elif token == ":" and stack and stack[-1][0] == "object":
            stack[-1][1] = last_string
    if not stack or stack[0][0] != "list":
        return "", "-", pos
    parts = [f"[{at}]" if kind == "list" else f".{at}" for kind, at in stack[1:7]]
    field = "".join(parts).lstrip(".") + ("..." if len(stack) > 7 else "")
    return f"{unit} {stack[0][1]}", field or "-", pos


def _parse_json(text: str, path: Path, unit: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_object_pairs)
    except json.JSONDecodeError as exc:
        record, field, _ = _locate(text, exc.pos, unit=unit)
        where = _line_column(text, exc.pos)
        raise DataFormatError(
            path, f"{record} ({where})" if record else where, field, f"malformed JSON: {exc.msg}"
        ) from None
    except RecursionError:
        record, field, pos = _locate(text, len(text), unit=unit, max_depth=_MAX_NESTING)
        where = _line_column(text, pos)
        raise DataFormatError(
            path, f"{record} ({where})" if record else where, field, f"nested more than {_MAX_NESTING} levels deep"
        ) from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        huge = next((m for m in _LONG_NUMBER.finditer(text) if m.group(1)), None)
        record, field, _ = _locate(text, huge.start(1), unit=unit) if huge else ("", "-", 0)
        where = _line_column(text, huge.start(1)) if huge else "top level"
        raise DataFormatError(
            path, f"{record} ({where})" if record else where, field, f"unreadable JSON value: {str(exc)[:80]}"
        ) from None


def _parse_line(line: str, record: _Record) -> Any:
    """One JSONL line; its errors name the line of the file."""
    try:
        return json.loads(line, object_pairs_hook=_object_pairs)
    except json.JSONDecodeError as exc:
        raise record.error("-", f"malformed JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise record.error("-", f"nested more than {_MAX_NESTING} levels deep") from None
    except ValueError as exc:
        raise record.error("-", f"unreadable JSON value: {str(exc)[:80]}") from None


def _decode(raw: bytes, path: Path, unit: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        prefix = raw[: exc.start].decode("utf-8", errors="replace")
        record, field, _ = _locate(prefix, len(prefix), unit=unit)
        where = f"byte {exc.start}, {_line_column(prefix, len(prefix))}"
        raise DataFormatError(
            path,
            f"{record} ({where})" if record else where,
            field,
            f"file is not UTF-8 text (byte 0x{raw[exc.start]:02x})",
        ) from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataFormatError(path, FILE, "-", f"cannot read: {exc.strerror}") from exc


def _read_json(path: Path, unit: str = "record") -> Any:
    return _parse_json(_decode(_read_bytes(path), path, unit), path, unit)


# -- typed access to one record ------------------------------------------------------------------
@dataclass(frozen=True)
class _Record:
    """Where in a file a value comes from; every check failing here names the file and this record."""

    path: Path
    name: str

    def at(self, suffix: str) -> _Record:
        return _Record(self.path, f"{self.name} {suffix}")

    def error(self, field: str, problem: str) -> DataFormatError:
        return DataFormatError(self.path, self.name, field, problem)

    def object(self, value: Any, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(field, f"expected an object, got {_kind_name(value)}")
        if isinstance(value, _DuplicateKeys):
            raise self.error(value.duplicate, "the key appears twice in one object (one value would be lost)")
        return value

    def value(self, obj: Any, key: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
        """``obj[key]`` of the given JSON kind; ``None`` when optional and absent or null."""
        obj = self.object(obj, key)
        if key not in obj or (obj[key] is None and not required):
            if required:
                raise self.error(key, "missing")
            return None
        value = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            articles: dict[type, str] = {dict: "an object", list: "a list"}
            names = " or ".join(articles.get(k, k.__name__) for k in kinds)
            raise self.error(key, f"expected {names}, got {_kind_name(value)}")
        if isinstance(value, str):
            self.check_text(value, key)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(key, f"expected a finite number, got {value}")
        return value

    @overload
    def text(self, obj: Any, key: str, *, required: Literal[True] = True) -> str: ...

    @overload
    def text(self, obj: Any, key: str, *, required: bool) -> str | None: ...

    def text(self, obj: Any, key: str, *, required: bool = True) -> str | None:
        """``obj[key]`` as text: a string when required (``value`` refuses a missing or null one), else maybe None."""
        return cast("str | None", self.value(obj, key, str, required=required))

    def check_text(self, value: str, field: str) -> str:
        found = _SURROGATE.search(value)
        if found:
            raise self.error(
                field, f"lone surrogate {found.group()!r} at character {found.start()} (not encodable text)"
            )
        return value

    def identifier(self, value: Any, field: str, limit: int, *, spaces: bool = False) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise self.error(field, f"expected an id (str), got {_kind_name(value)}")
        problem = _identifier_problem(value, limit, spaces=spaces)
        if problem:
            raise self.error(field, f"invalid id {value[: limit + 8]!r}: {problem}")
        return value

    def timestamp(self, text: str | None, field: str) -> datetime | None:
        if not text:
            return None
        try:
            stamp = parse_timestamp(text)
        except (ValueError, OverflowError):
            stamp = None
        if stamp is None:
            raise self.error(field, f"unreadable timestamp {text[:60]!r}")
        return stamp

    def answer(self, value: Any, field: str) -> str:
        if isinstance(value, str):
            return self.check_text(value, field)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return str(value)
        raise self.error(field, f"expected a string or a number, got {_kind_name(value)}")

    def category(self, obj: dict[str, Any], key: str) -> int | str | None:
        value = self.value(obj, key, (int, str), required=False)
        if isinstance(value, str):
            self.identifier(value, key, MAX_SESSION_ID, spaces=True)
        return cast("int | str | None", value)


class _IdRegistry:
    """Conversation ids of one file: no id twice, and no two ids that become one namespace."""

    def __init__(self, path: Path, unit: str, field: str) -> None:
        self.path, self.unit, self.field = path, unit, field
        self.ids: dict[str, int] = {}
        self.slugs: dict[str, tuple[str, int]] = {}

    def add(self, record: _Record, conversation_id: str, index: int) -> None:
        if conversation_id in self.ids:
            raise record.error(
                self.field, f"duplicate {self.field} {conversation_id!r} (also {self.unit} {self.ids[conversation_id]})"
            )
        slug = conversation_slug(conversation_id)
        if slug in self.slugs:
            other, where = self.slugs[slug]
            raise record.error(
                self.field,
                f"{self.field} {conversation_id!r} and {other!r} ({self.unit} {where}) would share the namespace "
                f"suffix {slug!r}; give them ids that differ in letters, digits or _ . : @ -",
            )
        self.ids[conversation_id] = index
        self.slugs[slug] = (conversation_id, index)


def _finish(conv: Conversation, record: _Record) -> Conversation:
    """Checks shared by every format: non-empty, unique dia ids, sessions in time order."""
    if not conv.sessions or conv.turn_count == 0:
        raise record.error("sessions", "the conversation has no turns")
    seen: dict[str, str] = {}
    for session in conv.sessions:
        for turn in session.turns:
            if turn.dia_id in seen:
                raise record.at(session.session_id).error(
                    "dia_id", f"duplicate dia id {turn.dia_id!r} (also in {seen[turn.dia_id]})"
                )
            seen[turn.dia_id] = session.session_id
    stamped = [s for s in conv.sessions if s.timestamp is not None]
    if len(stamped) == len(conv.sessions):
        ordered = sorted(stamped, key=_timestamp_of)  # every session is stamped
        if [s.session_id for s in ordered] != [s.session_id for s in conv.sessions]:
            conv.repairs.append(
                "sessions were out of time order; reordered by timestamp: " + ", ".join(s.session_id for s in ordered)
            )
            conv.sessions = ordered
    return conv


def check_sessions(sessions: list[Session], where: str = "sessions input") -> list[Session]:
    """Sessions given directly (the Python API, the ingest graph's ``sessions``), checked as a file's are.

    Raises ``DataFormatError`` naming ``where``, the session's index and the field: a session id that is
    empty, too long, holds a control character or a lone surrogate, or repeats another session's id (the two
    would merge); a dia id of the same shapes; a session without turns; a speaker or text that is not text.
    """
    seen: dict[str, int] = {}
    for index, session in enumerate(sessions):
        record = _Record(Path(where), f"session {index}")
        sid = record.identifier(session.session_id, "session_id", MAX_SESSION_ID, spaces=True)
        if sid in seen:
            raise record.error(
                "session_id", f"duplicate session id {sid!r} (also session {seen[sid]}); the two would merge into one"
            )
        seen[sid] = index
        if not session.turns:
            raise record.error("turns", "the session has no turns")
        for t, turn in enumerate(session.turns):
            where_turn = record.at(f"turn {t}")
            where_turn.identifier(turn.dia_id, "dia_id", MAX_DIA_ID)
            where_turn.check_text(turn.speaker, "speaker")
            where_turn.check_text(turn.text, "text")
    return sessions


def _top_level_list(data: Any, path: Path, what: str) -> list[Any]:
    if not isinstance(data, list) or not data:
        raise DataFormatError(path, "top level", "-", f"expected a non-empty list of {what}")
    return data


# -- LoCoMo --------------------------------------------------------------------------------------
def _locomo_session_numbers(conv: dict[str, Any], record: _Record) -> list[int]:
    numbers = []
    for key in conv:
        if not key.startswith("session_"):
            continue
        match = _SESSION_KEY.fullmatch(key)
        if match is None:
            raise record.error(
                key[:40],
                "not a session key: expected session_<n> or session_<n>_date_time, <n> in digits 0-9 "
                "without leading zeros",
            )
        if match.group(2) is None:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def _locomo_session(conv: dict[str, Any], number: int, record: _Record) -> Session | None:
    key = f"session_{number}"
    turns_raw = record.value(conv, key, list)
    stamp_text = record.text(conv, f"{key}_date_time", required=False)
    stamp = record.timestamp(stamp_text, f"{key}_date_time")
    turns = []
    for i, turn in enumerate(turns_raw):
        where = record.at(f"{key} turn {i}")
        speaker = where.text(turn, "speaker")
        dia_id = where.identifier(where.value(turn, "dia_id", str), "dia_id", MAX_DIA_ID)
        text = where.text(turn, "text")
        caption = where.text(turn, "blip_caption", required=False)
        turns.append(RawTurn(dia_id=dia_id, speaker=speaker, text=text, image_caption=caption))
    if not turns:
        return None
    return Session(session_id=f"S{number}", timestamp=stamp, timestamp_text=stamp_text, turns=turns)


def _locomo_qa(sample: dict[str, Any], sample_id: str, record: _Record) -> list[QAItem]:
    qa_raw = record.value(sample, "qa", list, required=False) or []
    items = []
    for i, qa in enumerate(qa_raw):
        where = record.at(f"qa {i}")
        question = where.text(qa, "question")
        adversarial = qa.get("adversarial_answer")
        if adversarial is not None:
            adversarial = where.answer(adversarial, "adversarial_answer")
        answer = qa.get("answer")
        if answer is None and adversarial is None:
            raise where.error("answer", "missing (and no adversarial_answer)")
        evidence = where.value(qa, "evidence", list, required=False) or []
        for e, item in enumerate(evidence):
            if not isinstance(item, str):
                raise where.error("evidence", f"item {e}: expected a dia id (str), got {_kind_name(item)}")
            if len(item) > 4 * MAX_DIA_ID:
                raise where.error("evidence", f"item {e}: longer than {4 * MAX_DIA_ID} characters")
            where.check_text(item, "evidence")
        items.append(
            QAItem(
                question_id=f"{sample_id}-q{i}",
                question=question,
                answer=where.answer(answer, "answer") if answer is not None else adversarial,
                evidence=list(evidence),
                category=where.category(qa, "category"),
                adversarial_answer=adversarial,
            )
        )
    return items


_CHAT_MESSAGES_HINT = (
    "missing: this file holds chat messages ({role, content}), not LoCoMo samples; write one message per line to a "
    ".jsonl file (logicmap ingest reads it), or pass the list to add_messages(namespace, messages) in Python"
)


def _locomo_sample(sample: Any, n: int, path: Path, ids: _IdRegistry) -> Conversation:
    record = _Record(path, f"sample {n}")
    sample = record.object(sample, "-")
    sample_id = record.identifier(sample.get("sample_id", f"conv-{n}"), "sample_id", MAX_CONVERSATION_ID, spaces=True)
    ids.add(record, sample_id, n)
    record = _Record(path, f"sample {sample_id!r}")
    if "conversation" not in sample and ({"role", "content"} <= set(sample) or "messages" in sample):
        raise record.error("conversation", _CHAT_MESSAGES_HINT)
    conv = record.value(sample, "conversation", dict)
    record.object(conv, "conversation")
    speakers = [record.text(conv, key, required=False) or "" for key in ("speaker_a", "speaker_b")]
    sessions = [s for number in _locomo_session_numbers(conv, record) if (s := _locomo_session(conv, number, record))]
    qa = _locomo_qa(sample, sample_id, record)
    return _finish(
        Conversation(conversation_id=sample_id, speakers=[s for s in speakers if s], sessions=sessions, qa=qa), record
    )


def _locomo(data: Any, path: Path) -> list[Conversation]:
    if isinstance(data, dict):
        data = [data]
    ids = _IdRegistry(path, "sample", "sample_id")
    return [_locomo_sample(sample, n, path, ids) for n, sample in enumerate(_top_level_list(data, path, "samples"))]


def load_locomo(path: str | Path) -> list[Conversation]:
    """A LoCoMo file: a list of samples with ``conversation`` and ``qa``."""
    path = Path(path)
    return _locomo(_read_json(path, "sample"), path)


# -- LongMemEval ---------------------------------------------------------------------------------
def _longmemeval_lists(item: dict[str, Any], record: _Record) -> tuple[list[Any], list[str], list[str | None]]:
    """The haystack, its session ids and its dates, checked to be lists of one length."""
    haystack = record.value(item, "haystack_sessions", list)
    session_ids = record.value(item, "haystack_session_ids", list, required=False) or [
        f"s{i}" for i in range(len(haystack))
    ]
    if len(session_ids) != len(haystack):
        raise record.error("haystack_session_ids", f"{len(session_ids)} ids for {len(haystack)} haystack_sessions")
    session_ids = [
        record.identifier(sid, f"haystack_session_ids[{i}]", MAX_SESSION_ID, spaces=True)
        for i, sid in enumerate(session_ids)
    ]
    dates = record.value(item, "haystack_dates", list, required=False) or [None] * len(haystack)
    if len(dates) != len(haystack):
        raise record.error("haystack_dates", f"{len(dates)} dates for {len(haystack)} haystack_sessions")
    for i, stamp in enumerate(dates):
        if stamp is not None and not isinstance(stamp, str):
            raise record.error("haystack_dates", f"item {i}: expected a string, got {_kind_name(stamp)}")
        if stamp is not None:
            record.check_text(stamp, "haystack_dates")
    answer_ids = record.value(item, "answer_session_ids", list, required=False) or []
    for i, sid in enumerate(answer_ids):
        record.identifier(sid, f"answer_session_ids[{i}]", MAX_SESSION_ID, spaces=True)
    return haystack, session_ids, dates


def _longmemeval_item(item: Any, n: int, path: Path, ids: _IdRegistry) -> Conversation:
    record = _Record(path, f"question {n}")
    item = record.object(item, "-")
    qid = record.identifier(item.get("question_id", str(n)), "question_id", MAX_CONVERSATION_ID, spaces=True)
    ids.add(record, qid, n)
    record = _Record(path, f"question {qid!r}")
    haystack, session_ids, dates = _longmemeval_lists(item, record)
    sessions, evidence = [], []
    for s_index, (sid, stamp_text, turns_raw) in enumerate(zip(session_ids, dates, haystack)):
        if not isinstance(turns_raw, list):
            raise record.at(f"session {sid}").error(
                "haystack_sessions", f"expected a list of turns, got {_kind_name(turns_raw)}"
            )
        stamp = record.timestamp(stamp_text, "haystack_dates")
        turns = []
        for t_index, turn in enumerate(turns_raw):
            where = record.at(f"session {sid} turn {t_index}")
            role = where.text(turn, "role")
            content = where.text(turn, "content")
            has_answer = bool(where.value(turn, "has_answer", bool, required=False))
            dia_id = f"D{s_index + 1}:{t_index + 1}"
            if has_answer:
                evidence.append(dia_id)
            turns.append(RawTurn(dia_id=dia_id, speaker=role, text=content, has_answer=has_answer))
        if turns:
            sessions.append(
                Session(session_id=f"S{s_index + 1}", timestamp=stamp, timestamp_text=stamp_text, turns=turns)
            )
    question = record.text(item, "question")
    if item.get("answer") is None:
        raise record.error("answer", "missing")
    question_date = record.text(item, "question_date", required=False)
    qa = QAItem(
        question_id=qid,
        question=question,
        answer=record.answer(item["answer"], "answer"),
        evidence=evidence,
        category=record.category(item, "question_type"),
        question_date=record.timestamp(question_date, "question_date"),
    )
    return _finish(
        Conversation(
            conversation_id=qid, speakers=["user", "assistant"], sessions=sessions, qa=[qa], source_format="longmemeval"
        ),
        record,
    )


def _longmemeval(data: Any, path: Path) -> list[Conversation]:
    ids = _IdRegistry(path, "question", "question_id")
    return [_longmemeval_item(item, n, path, ids) for n, item in enumerate(_top_level_list(data, path, "questions"))]


def load_longmemeval(path: str | Path) -> list[Conversation]:
    """A LongMemEval file: one haystack of sessions per question."""
    path = Path(path)
    return _longmemeval(_read_json(path, "question"), path)


# -- JSONL ---------------------------------------------------------------------------------------
def _jsonl_groups(
    messages: list[tuple[_Record, dict[str, Any]]], idle_gap_s: float
) -> list[tuple[str | None, list[tuple[_Record, dict[str, Any]]]]]:
    """The file's sessions in order: lines with a ``session`` field by its value; lines without one in order,
    a new session where a line's ``timestamp`` comes more than ``idle_gap_s`` after the line before it (the rule
    of ``add_messages``; a line without a timestamp stays in the current session)."""
    named: dict[str, list[tuple[_Record, dict[str, Any]]]] = {}
    groups: list[tuple[str | None, list[tuple[_Record, dict[str, Any]]]]] = []
    current: list[tuple[_Record, dict[str, Any]]] | None = None
    previous: datetime | None = None
    for record, message in messages:
        if "session" in message:
            sid = record.identifier(message["session"], "session", MAX_SESSION_ID, spaces=True)
            if sid not in named:
                named[sid] = []
                groups.append((sid, named[sid]))
            named[sid].append((record, message))
            continue
        stamp = record.timestamp(record.text(message, "timestamp", required=False), "timestamp")
        if current is None or (
            stamp is not None and previous is not None and (stamp - previous).total_seconds() > idle_gap_s
        ):
            current = []
            groups.append((None, current))
        current.append((record, message))
        previous = stamp or previous
    return groups


def load_jsonl(path: str | Path, *, idle_gap_s: float | None = None) -> list[Conversation]:
    """Plain JSONL: one message per line ``{"speaker"|"role", "text"|"content", "session"?, "timestamp"?}``.

    Lines with a ``session`` field are grouped by it; lines without one form sessions split where the
    conversation pauses for more than ``idle_gap_s`` seconds (default ``LOGICMAP_CHAT_IDLE_GAP_S``). Session
    ids are made from the session's content (``S<n>-<hash>``), so a second file's sessions never take the ids
    of a first file's in the same namespace.
    """
    path = Path(path)
    raw = _read_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = raw.count(b"\n", 0, exc.start) + 1
        raise DataFormatError(path, f"line {bad_line} (byte {exc.start})", "-", "file is not UTF-8 text") from None
    conversation_id = path.stem
    if _SURROGATE.search(conversation_id) or _CONTROL.search(conversation_id):
        raise DataFormatError(path, "file name", "-", "the file name is not usable as a conversation id")
    lines: list[tuple[_Record, dict[str, Any]]] = []
    # "\n" only: str.splitlines also splits at U+2028, U+0085 and other characters a JSON string may hold raw.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        record = _Record(path, f"line {lineno}")
        lines.append((record, record.object(_parse_line(line, record), "-")))
    if idle_gap_s is None:
        from logicmap.settings import LogicMapSettings

        idle_gap_s = LogicMapSettings().chat_idle_gap_s
    sessions = []
    for s_index, (sid, messages) in enumerate(_jsonl_groups(lines, idle_gap_s), start=1):
        turns, stamp_text = [], None
        for t_index, (record, message) in enumerate(messages, start=1):
            speaker = message.get("speaker", message.get("role"))
            said = message.get("text", message.get("content"))
            if not isinstance(speaker, str):
                raise record.error("speaker", "missing or not a string")
            if not isinstance(said, str):
                raise record.error("text", "missing or not a string")
            record.check_text(speaker, "speaker")
            record.check_text(said, "text")
            stamp_text = stamp_text or record.text(message, "timestamp", required=False)
            dia_id = record.identifier(message.get("dia_id", f"D{s_index}:{t_index}"), "dia_id", MAX_DIA_ID)
            turns.append(RawTurn(dia_id=dia_id, speaker=speaker, text=said))
        stamp = _Record(path, f"session {sid or s_index}").timestamp(stamp_text, "timestamp")
        session = Session(session_id=f"S{s_index}", timestamp=stamp, timestamp_text=stamp_text, turns=turns)
        sessions.append(session.model_copy(update={"session_id": f"S{s_index}-{session.content_hash()[:8]}"}))
    speakers = sorted({t.speaker for s in sessions for t in s.turns})
    conversation = Conversation(
        conversation_id=conversation_id, speakers=speakers, sessions=sessions, source_format="jsonl"
    )
    return [_finish(conversation, _Record(path, f"conversation {conversation_id!r}"))]


def load_conversations(
    path: str | Path, fmt: Literal["auto", "locomo", "longmemeval", "jsonl"] = "auto"
) -> list[Conversation]:
    """Every conversation of a file, all checked before any is returned (format detected when ``auto``).

    Raises ``DataFormatError`` naming the file, the record and the field of the first problem,
    including two conversations whose ids are equal or would share a namespace.
    """
    path = Path(path)
    if not path.exists():
        # A relative path names the directory it was resolved against: a server's is not the caller's.
        where = (
            "" if path.is_absolute() else f": {Path.cwd() / path} (relative paths are resolved against {Path.cwd()})"
        )
        raise DataFormatError(path, FILE, "-", f"no such file{where}")
    if fmt == "jsonl" or (fmt == "auto" and path.suffix == ".jsonl"):
        return load_jsonl(path)
    if fmt == "auto":
        data = _read_json(path)
        first = data[0] if isinstance(data, list) and data else data
        fmt = "longmemeval" if isinstance(first, dict) and "haystack_sessions" in first else "locomo"
        return _longmemeval(data, path) if fmt == "longmemeval" else _locomo(data, path)
    return load_longmemeval(path) if fmt == "longmemeval" else load_locomo(path)


def session_turns(namespace: str, session: Session, offset: int, ids: Sequence[str]) -> list[Turn]:
    """The records the session's turns are stored as: positions from ``offset``, dia ids ``ids`` (a turn whose id
    another session held is stored under a distinct one, the source's kept in ``source_dia_id``)."""
    return [
        Turn(
            namespace=namespace,
            session_id=session.session_id,
            dia_id=tid,
            speaker=raw.speaker,
            text=raw.text,
            image_caption=raw.image_caption,
            item=raw.item,
            session_time=session.timestamp,
            session_time_text=session.timestamp_text,
            position=offset + i,
            source_dia_id=raw.dia_id if tid != raw.dia_id else None,
            role=raw.role,
            model_written=raw.model_written,
            evidence=raw.evidence,
            said_at=raw.said_at,
        )
        for i, (raw, tid) in enumerate(zip(session.turns, ids))
    ]
