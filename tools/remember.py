"""The write tool: ``remember(text, speaker, when)`` stores a statement as a one-turn session.

Storing goes through an ``ingest`` callable the caller injects (the graph layer passes the ingest graph),
so this package depends on ``memory`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import Field

from logicmap.memory.files.loaders import RawTurn, Session
from logicmap.memory.language.timeparse import parse_timestamp
from logicmap.memory.records.records import stable_hash
from logicmap.tools.common import (
    MemoryToolConfigError,
    ToolArgs,
    ToolArgumentError,
    ToolResult,
    call_namespace,
    check_configured_namespace,
    make_memory_tool,
)

__all__ = ["RememberArgs", "SessionIngester", "create_remember_tool", "statement_session", "store_statement"]

SessionIngester = Callable[[Session, str], Any]
"""Stores one session in a namespace: ``ingest(session, namespace) -> report``."""


class RememberArgs(ToolArgs):
    text: str = Field(min_length=1, max_length=4000, description="What to remember, in the speaker's own words.")
    speaker: str = Field("user", min_length=1, max_length=64, description="Who said it (default 'user').")
    when: str | None = Field(
        None, max_length=40, description="When it was said: YYYY-MM-DD or 'YYYY-MM-DD HH:MM' (default: now)."
    )


def statement_session(namespace: str, text: str, speaker: str, when: datetime, *, label: str = "mem") -> Session:
    """A one-turn session for a statement, with ids derived from its content (storing it twice is a no-op)."""
    session_id = f"{label}-{stable_hash(namespace, speaker, text, when.isoformat(), length=10)}"
    turn = RawTurn(dia_id=f"M{stable_hash(session_id, length=8)}:1", speaker=speaker.strip(), text=text.strip())
    return Session(
        session_id=session_id, timestamp=when, timestamp_text=when.isoformat(timespec="minutes"), turns=[turn]
    )


def store_statement(
    namespace: str | None,
    text: str,
    speaker: str,
    when: str | None,
    *,
    ingest: SessionIngester,
    clock: Callable[[], datetime],
) -> ToolResult:
    """Store a statement through ``ingest`` in the running call's namespace (``call_namespace``): what ``remember``
    (and ``manage_memory``'s create) does."""
    if not text.strip():
        raise ToolArgumentError("Nothing to remember: text is empty. Call again with the statement to store.")
    moment = clock()
    if when:
        parsed = parse_timestamp(when)
        if parsed is None:
            raise ToolArgumentError(
                f"Could not read when={when!r}. Use YYYY-MM-DD or 'YYYY-MM-DD HH:MM', or leave it out for now."
            )
        moment = parsed
    target = call_namespace(namespace)
    session = statement_session(target, text, speaker, moment)
    report = ingest(session, target)
    turn = session.turns[0]
    summary, turn_id = "", turn.dia_id
    sessions = getattr(report, "sessions", None)
    if sessions:
        done = sessions[-1]
        summary = " (already stored)" if getattr(done, "skipped", False) else f" ({getattr(done, 'events', 0)} event)"
        turn_id = (getattr(done, "renamed", None) or {}).get(turn.dia_id, turn_id)  # another session held the id
    record: dict[str, Any] = {
        "kind": "turn",
        "id": turn_id,
        "dia_id": turn_id,
        "speaker": turn.speaker,
        "text": turn.text,
        "session_id": session.session_id,
        "session_time": moment.isoformat(),
    }
    artifact: list[dict[str, Any]] = [record]
    if hasattr(report, "model_dump"):
        artifact.append({"kind": "ingest_report", **report.model_dump(mode="json")})
    return f"Remembered as turn {turn_id} in session {session.session_id}{summary}.", artifact


def create_remember_tool(
    namespace: str | None,
    *,
    ingest: SessionIngester,
    name: str = "remember",
    clock: Callable[[], datetime] = datetime.now,
) -> StructuredTool:
    """``remember(text, speaker, when)``: store a statement in memory through ``ingest``.

    The namespace need not exist yet (the first remembered statement creates it). A template such as
    ``"{user_id}"`` (or ``None``: ``configurable["namespace"]``) is resolved on each call from its config.
    """
    if not callable(ingest):
        raise MemoryToolConfigError("create_remember_tool needs an ingest callable: ingest(session, namespace)")
    check_configured_namespace(namespace)

    def remember(text: str, speaker: str = "user", when: str | None = None) -> ToolResult:
        """Store something worth remembering (a fact, plan, preference or event someone stated) in long-term
        memory, so later questions can find it. Say it in the speaker's words."""
        return store_statement(namespace, text, speaker, when, ingest=ingest, clock=clock)

    return make_memory_tool(name, RememberArgs, remember)
