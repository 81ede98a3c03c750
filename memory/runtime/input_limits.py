"""Size limits of what a caller asks: questions and chat messages are refused above the settings' bounds; JSON
values (a store item's value, a chat message's content and metadata) above ``MAX_VALUE_DEPTH`` levels of nesting
or ``MAX_VALUE_CHARS`` characters; ports outside 0-65535.

Work on a question grows with its length; refusing an oversized one up front keeps every run bounded. A value is
measured without recursion (``value_problem``), so a value nested 100,000 deep is one clear error, never a
``RecursionError``.
"""

from __future__ import annotations

from typing import Any

from logicmap.settings import LogicMapSettings

__all__ = [
    "MAX_VALUE_CHARS",
    "MAX_VALUE_DEPTH",
    "InputTooLargeError",
    "check_message",
    "check_port",
    "check_question",
    "recall_query",
    "value_problem",
]

MAX_VALUE_DEPTH = 100  # levels of dicts and lists in one value (Python's json gives up near 1,000, pydantic near 200)
MAX_VALUE_CHARS = 16_000_000  # characters of a value as JSON


class InputTooLargeError(ValueError):
    """A question or message longer than its configured limit; nothing was run or stored."""


def _limit(settings: Any, name: str) -> int:
    value = getattr(settings if settings is not None else LogicMapSettings(), name)
    return int(value)


def _refuse(what: str, length: int, limit: int, setting: str, where: str) -> InputTooLargeError:
    place = f"{where}: " if where else ""
    return InputTooLargeError(
        f"{place}the {what} is {length:,} characters, longer than the limit of {limit:,} "
        f"({setting}); shorten it, or raise {setting}"
    )


def check_question(question: Any, settings: Any = None, *, where: str = "") -> str:
    """``question`` if it is a string within ``max_question_chars``, else ``InputTooLargeError`` (a ``ValueError``)
    naming its length, the limit and ``where`` (e.g. ``"answer(strategy='goalmem')"``)."""
    if not isinstance(question, str):
        raise ValueError(f"{where + ': ' if where else ''}the question must be text, not {type(question).__name__}")
    limit = _limit(settings, "max_question_chars")
    if len(question) > limit:
        raise _refuse("question", len(question), limit, "LOGICMAP_MAX_QUESTION_CHARS", where)
    return question


def check_message(message: str, settings: Any = None, *, where: str = "") -> str:
    """``message`` if within ``max_message_chars`` (a chat message, stored as a turn), else ``InputTooLargeError``."""
    limit = _limit(settings, "max_message_chars")
    if len(message) > limit:
        raise _refuse("message", len(message), limit, "LOGICMAP_MAX_MESSAGE_CHARS", where)
    return message


def recall_query(message: str, settings: Any = None) -> str:
    """What memory is searched with for a chat message: its last ``max_question_chars`` characters (the ask
    usually ends a long message), so recall stays within the question limit."""
    limit = _limit(settings, "max_question_chars")
    return message if len(message) <= limit else message[-limit:]


def value_problem(value: Any, *, max_depth: int = MAX_VALUE_DEPTH, max_chars: int = MAX_VALUE_CHARS) -> str | None:
    """Why ``value`` is too deep or too large to take (``"nested more than 100 levels deep ..."``), or None.

    Walked with an explicit stack, never recursively, and stopped at the first limit passed: the cost is bounded
    by the limits, not by the value. Size counts what the value's JSON holds at least (each string's characters
    and quotes, a few characters per other leaf and per element); objects other than dicts, lists and tuples
    count as leaves. A value that refers to itself passes the depth limit."""
    too_large = (
        f"is larger than {max_chars:,} characters as JSON (the limit, MAX_VALUE_CHARS in "
        "logicmap.memory.runtime.input_limits)"
    )
    stack: list[tuple[Any, int]] = [(value, 0)]
    size = 0
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list | tuple):
            size += len(item) + 2 if isinstance(item, str) else 4
            if size > max_chars:
                return too_large
            continue
        if depth >= max_depth:
            return f"is nested more than {max_depth} levels deep (the limit, MAX_VALUE_DEPTH in logicmap.memory.runtime.input_limits)"
        size += 2 + len(item)  # brackets and separators, counted before any element is visited
        if size > max_chars:
            return too_large
        if isinstance(item, dict):
            size += sum(len(k) + 3 if isinstance(k, str) else 8 for k in item)
            stack.extend((child, depth + 1) for child in item.values())
        else:
            stack.extend((child, depth + 1) for child in item)
    return None


def check_port(port: Any, *, option: str = "--port") -> int:
    """``port`` if it is a TCP port number a server can listen on (1-65535, or 0: any free port), else
    ``ValueError`` naming ``option`` (one line; never the ``OverflowError`` a socket raises)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"{option} must be a port number from 1 to 65535 (or 0: any free port), not {port!r}")
    return port
