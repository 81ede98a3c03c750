"""Size limits of what a caller asks: questions and chat messages are refused above the settings' bounds.

Work on a question grows with its length; refusing an oversized one up front keeps every run bounded.
"""

from __future__ import annotations

from typing import Any

from logicmap.settings import LogicMapSettings

__all__ = ["InputTooLargeError", "check_message", "check_question", "recall_query"]


class InputTooLargeError(ValueError):
    """A question or message longer than its configured limit; nothing was run or stored."""


def _limit(settings: Any, name: str) -> int:
    value = getattr(settings if settings is not None else LogicMapSettings(), name)
    return int(value)


def _refuse(what: str, length: int, limit: int, setting: str, where: str) -> InputTooLargeError:
    place = f"{where}: " if where else ""
    return InputTooLargeError(f"{place}the {what} is {length:,} characters, longer than the limit of {limit:,} "
                              f"({setting}); shorten it, or raise {setting}")


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
