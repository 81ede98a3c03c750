"""Chat messages into memory: ``add_messages(namespace, messages)`` appends LangChain messages or ``{role, content}``
dicts to the namespace's open chat session (``aadd_messages``: its async twin).

What a message becomes: a user's statement is memory; a user's question is stored as the context of the reply that
follows it (``Turn.evidence`` False: recall never returns it); an assistant's reply is stored as the assistant's,
model-written, and is evidence only with ``trust_assistant=True``. System and tool messages, and an assistant's
tool-call message without text, are not conversation: they are counted and left out.

Sessions: a message joins the namespace's open chat session (the session of its last chat message) unless it
comes more than ``LOGICMAP_CHAT_IDLE_GAP_S`` seconds after the message before it, or the caller names a session.
Each call stores its messages of one session as one part of it (session id ``<session>#<hash>``), so repeated
calls append and nothing committed is rewritten. A message's time comes from the message (``timestamp``, ``time``
or ``created_at`` in a dict, or in a message's ``additional_kwargs`` / ``response_metadata``), else the clock.

Re-sending messages already stored is a no-op: a message is known by its id, else by its role, text and position in
the list sent (so a whole thread can be sent again after each turn). Without ids, the same text sent again at the
same position counts as the same message: give messages ids (LangGraph's ``add_messages`` reducer does) to store
repeats. A message re-sent with its id and new text is an edit: the stored turn gets the new text, its old text and
what was derived only from it retired in the same commit (``graphs.writes.forget.update_memory``). Within one call, one id
on two messages of different content is refused. A message a forget left a tombstone for (``memory.records.tombstones``: the
same message key, or the same text) is not stored again (``MessagesReport.forgotten``) unless ``allow_forgotten=True``.
Every message is checked before anything is written; bad input raises ``MessageFormatError`` (or
``InputTooLargeError``) naming the message and the problem.

A large call is stored in batches of ``MESSAGE_BATCH`` messages, each batch its own commit: the ingest works on one
batch at a time however many messages are sent, a crash loses no committed batch, and sending the same messages
again stores only what is missing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from logicmap.graphs.ingest.ingest import IngestReport, ingest_conversation
from logicmap.graphs.runtime.entry import run_entry
from logicmap.graphs.runtime.resources import Resources, default_resources
from logicmap.graphs.writes.consolidate import store_sessions
from logicmap.graphs.writes.forget import update_memory
from logicmap.memory.files.loaders import MAX_SESSION_ID, Conversation, RawTurn, Session
from logicmap.memory.language.timeparse import parse_timestamp
from logicmap.memory.records.chat_turns import is_question
from logicmap.memory.records.records import stable_hash, validate_namespace
from logicmap.memory.records.tombstones import Forgotten
from logicmap.memory.runtime.blocking import run_blocking
from logicmap.memory.runtime.input_limits import check_message, value_problem
from logicmap.memory.store.live import live_snapshot

__all__ = [
    "MessageFormatError",
    "MessagesReport",
    "aadd_messages",
    "add_messages",
    "chat_sessions",
    "chat_turn",
    "normalize_messages",
]

Role = Literal["user", "assistant"]
_ROLES: dict[str, Role | None] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": None,
    "developer": None,
    "tool": None,
    "function": None,
}
_TIME_KEYS = ("timestamp", "time", "created_at")
MAX_MESSAGE_ID = 256
MAX_NAME = 100
MESSAGE_BATCH = 2000  # messages per commit of a large call (an ingest's working memory is one batch's)


class MessageFormatError(ValueError):
    """A message ``add_messages`` cannot store (wrong type, unknown role, empty text...); nothing was written."""


class MessagesReport(BaseModel):
    """What ``add_messages`` did: how many messages it stored, skipped as already stored, or left out, and where."""

    namespace: str
    added: int = 0
    already_stored: int = Field(0, description="messages re-sent that the namespace holds already (no-op)")
    forgotten: int = Field(0, description="messages left out because a forget left a tombstone for them")
    updated: int = Field(0, description="messages re-sent with their id and new text: the stored turn took the text")
    not_conversation: int = Field(0, description="system and tool messages, and assistant tool calls without text")
    sessions: list[str] = Field(default_factory=list, description="the chat sessions the added messages joined")
    parts: list[str] = Field(default_factory=list, description="the session ids stored (one per chat session)")
    ingest: IngestReport | None = None


@dataclass(frozen=True)
class ChatTurn:
    """One checked message: who, what, when, and its key in memory (the dia id of its turn)."""

    role: Role
    text: str
    dia_id: str
    when: datetime | None
    name: str | None
    message_id: str | None = None


# -- checking messages --------------------------------------------------------------------------------------


def _bad(index: int, problem: str) -> MessageFormatError:
    return MessageFormatError(f"message {index}: {problem}; nothing was written")


def _text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return " ".join(parts)
    raise _bad(index, f"content must be text or a list of text blocks, not {type(content).__name__}")


def _local(stamp: datetime) -> datetime:
    """Times compare as the chatbot's clock does (naive local time)."""
    return stamp.astimezone().replace(tzinfo=None) if stamp.tzinfo is not None else stamp


def _time(value: Any, index: int) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return _local(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value))
        except (OverflowError, OSError, ValueError):
            raise _bad(index, f"timestamp {value!r} is out of range") from None
    if isinstance(value, str):
        try:
            return _local(datetime.fromisoformat(value))
        except ValueError:
            parsed = parse_timestamp(value[:200])
            if parsed is not None:
                return parsed
    raise _bad(index, f"unreadable timestamp {str(value)[:60]!r} (ISO 8601, a datetime or epoch seconds)")


def _shape(value: Any, index: int) -> None:
    """A message (or the parts of it read: content, metadata, id, name) within the value limits of
    ``memory.runtime.input_limits``, checked without recursion before anything prints or walks it."""
    problem = value_problem(value)
    if problem is not None:
        raise _bad(index, f"the message {problem}")


def _fields(message: Any, index: int) -> tuple[str, Any, Any, Any, Any, bool]:
    """``(role name, content, id, time value, name, has tool calls)`` of a message in any accepted form."""
    if isinstance(message, BaseMessage):
        _shape([message.content, message.additional_kwargs, message.response_metadata, message.id, message.name], index)
        if isinstance(message, HumanMessage):
            role = "user"
        elif isinstance(message, AIMessage):
            role = "assistant"
        else:
            role = message.role if isinstance(message, ChatMessage) else message.type  # system, tool, function
        extra = {**(message.response_metadata or {}), **(message.additional_kwargs or {})}
        when = next((extra[k] for k in _TIME_KEYS if extra.get(k) is not None), None)
        calls = bool(getattr(message, "tool_calls", None))
        return role, message.content, message.id, when, message.name, calls
    if isinstance(message, dict | tuple):
        _shape(message, index)
    if isinstance(message, dict):
        if "role" not in message or "content" not in message:
            raise _bad(index, "a message dict needs 'role' and 'content'")
        when = next((message[k] for k in _TIME_KEYS if message.get(k) is not None), None)
        return (
            message["role"],
            message["content"],
            message.get("id"),
            when,
            message.get("name"),
            bool(message.get("tool_calls")),
        )
    if isinstance(message, tuple) and len(message) == 2:
        return message[0], message[1], None, None, None, False
    raise _bad(
        index,
        f"expected a LangChain message, a {{'role', 'content'}} dict or a (role, text) pair, "
        f"not {type(message).__name__}",
    )


def _checked_text(value: Any, index: int, what: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(index, f"{what} must be text, not {type(value).__name__}")
    if not value.strip() or len(value) > limit or any(0xD800 <= ord(c) <= 0xDFFF or ord(c) < 32 for c in value):
        raise _bad(index, f"{what} must be 1-{limit} printable characters")
    return value


def _one(message: Any, index: int, settings: Any) -> ChatTurn | None:
    role_name, content, message_id, when, name, calls = _fields(message, index)
    if not isinstance(role_name, str) or role_name.lower() not in _ROLES:
        raise _bad(
            index,
            f"unknown role {str(role_name)[:40]!r}; use user or assistant (system and tool "
            "messages are accepted and left out)",
        )
    role = _ROLES[role_name.lower()]
    text = _text(content, index)
    if role is None or (role == "assistant" and calls and not text.strip()):
        return None
    if not text.strip():
        raise _bad(index, f"the {role}'s message is empty")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise _bad(index, "the text holds a lone surrogate (not encodable text)")
    check_message(text, settings, where=f"message {index}")
    message_id = _checked_text(message_id, index, "id", MAX_MESSAGE_ID)
    name = _checked_text(name, index, "name", MAX_NAME)
    key = f"id:{message_id}" if message_id else f"h:{role}:{index}:{hashlib.sha256(text.encode()).hexdigest()}"
    return ChatTurn(
        role=role,
        text=text,
        dia_id=f"M{stable_hash(key, length=16)}",
        when=_time(when, index),
        name=name,
        message_id=message_id,
    )


def normalize_messages(messages: Any, settings: Any = None) -> tuple[list[ChatTurn], int]:
    """Every message checked (``MessageFormatError`` / ``InputTooLargeError`` for the first bad one): the
    conversation's turns in order, and how many messages were not conversation (system, tool)."""
    if isinstance(messages, (str, bytes, dict, BaseMessage)) or not isinstance(messages, (list, tuple)):
        raise MessageFormatError(
            f"messages must be a list of messages, not {type(messages).__name__}; nothing was written"
        )
    turns, left_out = [], 0
    by_id: dict[str, tuple[int, ChatTurn]] = {}
    for index, message in enumerate(messages):
        turn = _one(message, index, settings)
        if turn is None:
            left_out += 1
            continue
        if turn.message_id is not None:
            first, earlier = by_id.setdefault(turn.message_id, (index, turn))
            if (earlier.role, earlier.text) != (turn.role, turn.text):
                raise _bad(
                    index,
                    f"id {turn.message_id[:60]!r} is also message {first}'s, with different content "
                    "(one id, one message: give each message its own id)",
                )
        turns.append(turn)
    return turns, left_out


# -- sessions -----------------------------------------------------------------------------------------------


def _open_session(snapshot: Any) -> tuple[str | None, datetime | None]:
    """The namespace's open chat session (that of its last chat message) and that message's time."""
    if snapshot is None or not snapshot.turns:
        return None, None
    last = max(snapshot.turns.values(), key=lambda t: t.position)
    if last.role is None or "#" not in last.session_id:
        return None, last.said_at or last.session_time
    return last.session_id.rpartition("#")[0], last.said_at or last.session_time


def _new_session_id(when: datetime, first: ChatTurn) -> str:
    return f"chat-{when:%Y%m%dT%H%M%S}-{stable_hash(first.dia_id, when.isoformat(), length=6)}"


def chat_sessions(
    turns: list[ChatTurn],
    *,
    open_session: str | None,
    last_time: datetime | None,
    named: str | None,
    idle_gap: timedelta,
    now: datetime,
) -> list[tuple[str, list[tuple[ChatTurn, datetime]]]]:
    """The chat session of each turn, in order: ``[(session, [(turn, its time), ...]), ...]``."""
    groups: list[tuple[str, list[tuple[ChatTurn, datetime]]]] = []
    current, previous = open_session, last_time
    for turn in turns:
        when = turn.when or now
        if named is not None:
            current = named
        elif current is None or previous is None or when - previous > idle_gap:
            current = _new_session_id(when, turn)
        if not groups or groups[-1][0] != current:
            groups.append((current, []))
        groups[-1][1].append((turn, when))
        previous = when
    return groups


def chat_turn(
    turn: ChatTurn,
    when: datetime | None,
    *,
    user_name: str = "user",
    assistant_name: str = "assistant",
    trust_assistant: bool = False,
) -> RawTurn:
    """A checked message as the turn memory keeps: the one rule of what a chat message is to memory, for
    ``add_messages`` and ``LogicMapStore``'s ``messages`` values. A user's statement is evidence, a user's question
    is context only; an assistant's reply is model-written, evidence only with ``trust_assistant``."""
    return RawTurn(
        dia_id=turn.dia_id,
        speaker=turn.name or (user_name if turn.role == "user" else assistant_name),
        text=turn.text,
        role=turn.role,
        model_written=turn.role == "assistant",
        evidence=trust_assistant if turn.role == "assistant" else not is_question(turn.text),
        said_at=when,
    )


def _part(
    session: str,
    members: list[tuple[ChatTurn, datetime]],
    *,
    user_name: str,
    assistant_name: str,
    trust_assistant: bool,
) -> Session:
    first = members[0][1]
    raw = [
        chat_turn(turn, when, user_name=user_name, assistant_name=assistant_name, trust_assistant=trust_assistant)
        for turn, when in members
    ]
    part = f"{session}#{stable_hash(*(t.dia_id for t in raw), length=8)}"
    return Session(session_id=part, timestamp=first, timestamp_text=first.isoformat(timespec="minutes"), turns=raw)


def _session_name(session: Any) -> str | None:
    if session is None:
        return None
    if (
        not isinstance(session, str)
        or not session.strip()
        or session != session.strip()
        or "#" in session
        or len(session) > MAX_SESSION_ID - 9
        or any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in session)
    ):
        raise MessageFormatError(
            f"session must be 1-{MAX_SESSION_ID - 9} printable characters without '#' or "
            f"surrounding spaces, not {str(session)[:40]!r}; nothing was written"
        )
    return session


# -- the entry points ---------------------------------------------------------------------------------------


@run_entry("add_messages")
def add_messages(
    namespace: str,
    messages: Any,
    *,
    session: str | None = None,
    resources: Resources | None = None,
    policy: Literal["auto", "llm", "heuristic"] = "auto",
    trust_assistant: bool = False,
    idle_gap_s: float | None = None,
    user_name: str = "user",
    assistant_name: str = "assistant",
    memory_manager: Literal["none", "r2"] | None = None,
    allow_forgotten: bool = False,
    config: RunnableConfig | None = None,
) -> MessagesReport:
    """Append chat messages to ``namespace``'s memory (see the module docstring); re-sent messages are a no-op.

    ``session`` names the chat session (default: the open one, or a new one after an idle gap of ``idle_gap_s``,
    default ``LOGICMAP_CHAT_IDLE_GAP_S``); ``trust_assistant`` lets the assistant's replies be evidence;
    ``allow_forgotten`` stores messages a forget left a tombstone for (and lifts those tombstones).
    ``config`` (a LangChain ``RunnableConfig``): the call is one run named ``add_messages`` under it, the ingest
    graph's run nested in it (``entry.run_entry``).
    """
    validate_namespace(namespace)
    named = _session_name(session)
    res = resources or default_resources()
    turns, left_out = normalize_messages(messages, res.settings)
    # What readers see (pending writes included): a message already written and waiting is not written again.
    snapshot = live_snapshot(res.store, namespace) if res.store.has_namespace(namespace) else None
    fresh, edits = _sort_out(turns, _held(snapshot))
    tombstones = Forgotten.of(snapshot.tombstones) if snapshot is not None and not allow_forgotten else Forgotten()
    admitted = [turn for turn in fresh if not tombstones.matches(turn.text, message=turn.dia_id)]
    refused, fresh = len(fresh) - len(admitted), admitted
    report = MessagesReport(
        namespace=namespace,
        already_stored=len(turns) - len(fresh) - refused - len(edits),
        forgotten=refused,
        updated=len(edits),
        not_conversation=left_out,
    )
    for dia_id, text in edits:  # each edit one commit: the new text in, the old and what came only from it out
        update_memory(namespace, dia_id, text, surface="chat", resources=res)
    if not fresh:
        return report
    open_session, last_time = _open_session(snapshot)
    gap = timedelta(seconds=idle_gap_s if idle_gap_s is not None else res.settings.chat_idle_gap_s)
    groups = chat_sessions(
        fresh, open_session=open_session, last_time=last_time, named=named, idle_gap=gap, now=datetime.now()
    )
    flat = [(name, member) for name, members in groups for member in members]
    part_ids: list[str] = []
    ingests: list[IngestReport] = []
    for start in range(0, len(flat), MESSAGE_BATCH):  # one commit per batch (per chat session in it)
        batch = flat[start : start + MESSAGE_BATCH]
        parts = [
            _part(
                name,
                [m for _, m in run],
                user_name=user_name,
                assistant_name=assistant_name,
                trust_assistant=trust_assistant,
            )
            for name, run in groupby(batch, key=lambda pair: pair[0])
        ]
        ingests.append(_store_parts(namespace, parts, res, policy, memory_manager, allow_forgotten))
        part_ids.extend(p.session_id for p in parts)
    return report.model_copy(
        update={
            "added": len(fresh),
            "sessions": list(dict.fromkeys(n for n, _ in groups)),
            "parts": part_ids,
            "ingest": _joined(namespace, ingests),
        }
    )


def _store_parts(
    namespace: str,
    parts: list[Session],
    res: Resources,
    policy: Literal["auto", "llm", "heuristic"],
    memory_manager: Literal["none", "r2"] | None,
    allow_forgotten: bool,
) -> IngestReport:
    """One batch of a call's parts stored: on the write path (``graphs.writes.consolidate``: a fast write, consolidated as
    ``LOGICMAP_CONSOLIDATION`` says), or through the ingest graph at once (the Memory-R2 manager, lifted
    tombstones, a backend without a pending log)."""
    if res.store.fast_writes and memory_manager in (None, "none") and not allow_forgotten:
        return store_sessions(namespace, parts, resources=res, policy=policy, source="chat")
    conversation = Conversation(
        conversation_id=namespace, sessions=parts, speakers=sorted({t.speaker for p in parts for t in p.turns})
    )
    return ingest_conversation(
        conversation,
        namespace,
        resources=res,
        policy=policy,
        source="chat",
        append=True,
        memory_manager=memory_manager,
        allow_forgotten=allow_forgotten,
    )


def _held(snapshot: Any) -> dict[str, Any]:
    """The namespace's turns by dia id, and by the dia id a renamed turn was given (``Turn.source_dia_id``)."""
    if snapshot is None:
        return {}
    held = {t.source_dia_id: t for t in snapshot.turns.values() if t.source_dia_id}
    held.update(snapshot.turns)
    return held


def _sort_out(turns: list[ChatTurn], held: dict[str, Any]) -> tuple[list[ChatTurn], list[tuple[str, str]]]:
    """The turns to store, and the edits (a stored turn's dia id, its new text): a message with an id whose stored
    turn holds other text. The rest (stored already, or sent twice in the call) is a no-op."""
    fresh, edits, seen = [], [], set()
    for turn in turns:
        if turn.dia_id in seen:
            continue
        seen.add(turn.dia_id)
        stored = held.get(turn.dia_id)
        if stored is None:
            fresh.append(turn)
        elif turn.message_id is not None and stored.text != turn.text:
            edits.append((stored.dia_id, turn.text))
    return fresh, edits


def _joined(namespace: str, reports: list[IngestReport]) -> IngestReport:
    """The ingest reports of a call's batches as one."""
    if len(reports) == 1:
        return reports[0]
    cost = sum((r.cost for r in reports[1:]), reports[0].cost)
    return IngestReport(
        namespace=namespace,
        sessions=[s for r in reports for s in r.sessions],
        fallbacks=[f for r in reports for f in r.fallbacks],
        cost=cost,
        wall_time_s=sum(r.wall_time_s for r in reports),
    )


async def aadd_messages(namespace: str, messages: Any, **kwargs: Any) -> MessagesReport:
    """``add_messages`` on the shared executor (``memory.runtime.blocking``): the event loop keeps running and no call adds
    a thread."""
    return await run_blocking(lambda: add_messages(namespace, messages, **kwargs))
