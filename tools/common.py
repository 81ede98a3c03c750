"""What every memory tool shares: the factory, argument errors the LLM can act on, rendering of records.

A tool's sync and async bodies run one implementation; wrong arguments come back as an error
ToolMessage the model can read; configuration errors (``MemoryToolConfigError``) raise.
A tool's namespace is a name fixed when it is built, or a template such as ``"{user_id}"`` (or ``None``:
``configurable["namespace"]``) resolved on each call from the ``config`` LangChain injects, as LangMem does.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date
from typing import Any, cast

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, ValidationError

from logicmap.memory.language.timeparse import parse_date
from logicmap.memory.records.records import Event, Turn, validate_namespace
from logicmap.memory.runtime.blocking import run_blocking
from logicmap.memory.runtime.tenancy import NamespaceRequiredError, resolve_namespace
from logicmap.memory.store import NamespaceSnapshot, StoragePort, UnknownNamespaceError
from logicmap.memory.store.live import LiveReader, live_snapshot

__all__ = [
    "MemoryAccess",
    "ToolArgs",
    "MemoryToolConfigError",
    "ToolArgumentError",
    "ToolNamespaceError",
    "ToolNamespaceRequiredError",
    "ToolResult",
    "call_namespace",
    "check_configured_namespace",
    "event_interval",
    "event_line",
    "event_record",
    "make_memory_tool",
    "parse_date_bound",
    "turn_record",
]

log = logging.getLogger(__name__)

ToolResult = tuple[str, list[dict[str, Any]]]
MAX_LINE = 320


class ToolArgs(BaseModel):
    """Base of every tool's arguments: an unknown argument is an error the model is told about."""

    model_config = ConfigDict(extra="forbid")


class MemoryToolConfigError(Exception):
    """A memory tool that cannot be built as configured. Raised, never turned into a tool message."""


class ToolNamespaceError(MemoryToolConfigError, UnknownNamespaceError):
    """A tool built for a namespace that has no committed memory."""

    def __init__(self, error: UnknownNamespaceError) -> None:
        UnknownNamespaceError.__init__(self, error.namespace)


class ToolNamespaceRequiredError(MemoryToolConfigError, NamespaceRequiredError):
    """A tool call whose config names no namespace (or not the values its template needs)."""


# The ``configurable`` of the tool call running in this context (set by ``make_memory_tool`` around each call).
_call_configurable: ContextVar[Mapping[str, Any] | None] = ContextVar("logicmap_tool_configurable", default=None)


def _is_template(namespace: str | None) -> bool:
    return namespace is None or "{" in namespace


def check_configured_namespace(namespace: str | None) -> None:
    """A tool's configured namespace checked once, when the tool is made: ``MemoryToolConfigError`` for a name that
    is no valid namespace. A template (or None) is resolved, and checked, on each call (``call_namespace``)."""
    if _is_template(namespace):
        return
    try:
        validate_namespace(namespace)
    except ValueError as exc:
        raise MemoryToolConfigError(str(exc)) from exc


def call_namespace(namespace: str | None) -> str:
    """The namespace of the running tool call: ``namespace`` itself, or the template filled from the call's
    ``configurable`` (``None``: ``configurable["namespace"]``). Errors are configuration errors: they raise."""
    try:
        return resolve_namespace(namespace, _call_configurable.get() or {})
    except NamespaceRequiredError as exc:
        raise ToolNamespaceRequiredError(str(exc)) from None
    except ValueError as exc:
        raise MemoryToolConfigError(str(exc)) from None


class ToolArgumentError(ToolException):
    """Arguments the model got wrong; the message says what to do instead."""


@dataclass
class MemoryAccess:
    """The injected side of a tool: which namespace, which store, which embedder. Never shown to the LLM.

    ``namespace`` is a fixed name or a template resolved per call (``call_namespace``). ``require``: an unknown
    namespace is a ``ToolNamespaceError``; without it (a toolkit that may write) it reads as empty memory.
    """

    namespace: str | None
    store: StoragePort
    embeddings: Embeddings | None = None
    require: bool = True

    @classmethod
    def checked(
        cls, namespace: str | None, store: StoragePort, embeddings: Embeddings | None = None, *, require: bool = True
    ) -> MemoryAccess:
        if store is None:
            raise MemoryToolConfigError("a memory tool needs a store (a StoragePort: Resources().store)")
        access = cls(namespace, store, embeddings, require)
        check_configured_namespace(namespace)
        if _is_template(namespace):
            return access  # resolved, and checked, on each call
        access.resolved()
        return access

    def resolved(self) -> str:
        """The namespace of the running call; ``ToolNamespaceError`` when it is unknown and required."""
        namespace = call_namespace(self.namespace)
        if self.require:
            try:
                self.store.require_namespace(namespace)
            except UnknownNamespaceError as exc:
                raise ToolNamespaceError(exc) from exc
        return namespace

    def snapshot(self) -> NamespaceSnapshot:
        """The running call's memory as readers see it: a run's pinned view, or the store's live view (committed
        records and the pending writes on top: ``memory.store.live``), so a fresh ``remember`` is found at once."""
        namespace = self.resolved()
        if hasattr(self.store, "pending_writes"):
            return live_snapshot(cast(LiveReader, self.store), namespace)
        return self.store.snapshot(namespace)

    def event(self, snapshot: NamespaceSnapshot, event_id: str) -> Event:
        """The event, or a ``ToolArgumentError`` that names the closest ids and how to find real ones."""
        wanted = event_id.strip()
        if wanted in snapshot.events:
            return snapshot.events[wanted]
        for eid in snapshot.events:
            if eid.lower() == wanted.lower():
                return snapshot.events[eid]
        if wanted in snapshot.turns:
            owners = [e.id for e in snapshot.events.values() if wanted in e.turn_ids]
            if owners:
                raise ToolArgumentError(
                    f"{wanted!r} is a turn id, not an event id; the event that holds it is {owners[0]}. "
                    f"Call again with event_id={owners[0]!r}."
                )
        close = difflib.get_close_matches(wanted, list(snapshot.events), n=3, cutoff=0.5)
        example = next(iter(snapshot.events), "S1-E1")
        hint = f" Closest ids: {', '.join(close)}." if close else ""
        raise ToolArgumentError(
            f"No event with id {wanted!r} in this memory.{hint} Event ids look like {example!r}; "
            "use search_events or query_tag_events to find the right one."
        )


def _clip(text: str, limit: int = MAX_LINE) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_record(event: Event, **extra: Any) -> dict[str, Any]:
    """An event as an artifact record: its fields plus ``kind`` (and any scores given)."""
    return {"kind": "event", **event.model_dump(mode="json"), **extra}


def turn_record(turn: Turn, **extra: Any) -> dict[str, Any]:
    return {"kind": "turn", "id": turn.dia_id, **turn.model_dump(mode="json"), **extra}


def event_line(event: Event, snapshot: NamespaceSnapshot | None = None, limit: int = MAX_LINE) -> str:
    """One line per event: id, when, turns, summary (clipped)."""
    when = event.time or (event.session_time.date().isoformat() if event.session_time else "undated")
    topic = snapshot.topic_of(event.id) if snapshot is not None else None
    where = f"; topic {topic}" if topic else ""
    return f"{event.id} ({when}{where}; turns {', '.join(event.turn_ids)}): {_clip(event.summary, limit)}"


def parse_date_bound(text: str, *, end: bool) -> date:
    """A date from YYYY-MM-DD, YYYY-MM, YYYY, 'May 2023' or a full date; a partial date is its first
    (``end=False``) or last (``end=True``) day. Raises ``ToolArgumentError`` with the accepted forms."""
    parsed = parse_date((text or "").strip())
    if parsed is not None:
        return parsed.last_day if end else parsed.start.date()
    raise ToolArgumentError(
        f"Could not read {text!r} as a date. Use YYYY-MM-DD, YYYY-MM or YYYY (for example '2023-05' for "
        "May 2023, or '2023-05-08'), then call again."
    )


def event_interval(event: Event) -> tuple[date, date] | None:
    """The days an event's time covers: its resolved date (a month or year is a range), else its session day."""
    if event.time:
        try:
            return parse_date_bound(event.time, end=False), parse_date_bound(event.time, end=True)
        except ToolArgumentError:
            pass
    if event.session_time:
        day = event.session_time.date()
        return day, day
    return None


def _argument_help(schema: type[BaseModel]) -> str:
    parts = []
    for name, info in schema.model_fields.items():
        annotation = getattr(info.annotation, "__name__", None) or str(info.annotation).replace("typing.", "")
        required = "required" if info.is_required() else f"default {info.default!r}"
        parts.append(f"{name} ({annotation}, {required})")
    return "; ".join(parts)


def _validation_message(tool_name: str, schema: type[BaseModel]) -> Callable[[Exception], str]:
    def message(error: Exception) -> str:
        problems = []
        if isinstance(error, ValidationError):
            for item in error.errors()[:6]:
                where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
                got = item.get("input")
                shown = (
                    f" (got {_clip(repr(got), 80)})"
                    if item.get("type") != "missing" and not isinstance(got, dict)
                    else ""
                )
                problems.append(f"{where}: {item.get('msg', 'invalid')}{shown}")
        else:
            problems.append(str(error))
        return (
            f"Invalid arguments for {tool_name}: " + "; ".join(problems) + ". "
            f"Expected arguments: {_argument_help(schema)}. Fix them and call {tool_name} again."
        )

    return message


def make_memory_tool(
    name: str,
    args_schema: type[BaseModel],
    run: Callable[..., ToolResult],
    *,
    description: str | None = None,
) -> StructuredTool:
    """A ``StructuredTool`` whose sync and async bodies share ``run`` (returning content and records).

    The description is ``run``'s docstring. Argument errors and unexpected failures become an error
    ToolMessage; ``MemoryToolConfigError`` propagates.
    """

    def guarded(config: RunnableConfig, **kwargs: Any) -> ToolResult:
        # The call's configurable (injected by LangChain, hidden from the model) resolves a template namespace.
        token = _call_configurable.set((config or {}).get("configurable") or {})
        try:
            return run(**kwargs)
        except (ToolException, MemoryToolConfigError):
            raise
        except Exception as exc:  # the agent gets a message, the log keeps the trace
            log.exception("memory tool %s failed", name)
            raise ToolException(
                f"{name} failed: {type(exc).__name__}: {_clip(str(exc), 200)}. Try different arguments or another tool."
            ) from exc
        finally:
            _call_configurable.reset(token)

    async def guarded_async(config: RunnableConfig, **kwargs: Any) -> ToolResult:
        return await run_blocking(guarded, config, **kwargs)

    return StructuredTool.from_function(
        func=guarded,
        coroutine=guarded_async,
        name=name,
        description=description or inspect.cleandoc(run.__doc__ or name),
        args_schema=args_schema,
        response_format="content_and_artifact",
        handle_validation_error=_validation_message(name, args_schema),
        handle_tool_error=True,
    )
