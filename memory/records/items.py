"""Store items: how ``LogicMapStore`` (``graphs.surfaces.basestore``) keeps LangGraph ``BaseStore`` items as memory.

A namespace tuple maps to one LogicMap namespace (``("memories", "alice")`` -> ``memories.alice``); an item's key
to one session of that namespace (``kv-<hash of the key>``), whose first turn holds the item (``Turn.item``: its
key, JSON value and times) and whose turns hold its text. Keys are untrusted: any string a caller gives is hashed,
never used as an id, a path or a filter, and the item is read back only from the namespace it was put in.
``items_of`` reads a snapshot's items (cached on the snapshot); ``matches`` is LangGraph's ``filter`` on values
($eq, $ne, $gt, $gte, $lt, $lte, plain and nested equality); ``item_text`` is what retrieval indexes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from logicmap.memory.records.records import Turn, stable_hash, validate_namespace
from logicmap.memory.runtime.input_limits import MAX_VALUE_CHARS, value_problem
from logicmap.memory.store.model import NamespaceSnapshot

__all__ = [
    "KEY_SESSION_PREFIX",
    "STORE_SOURCE",
    "InvalidItemError",
    "ItemIndex",
    "StoredItem",
    "item_index",
    "item_session_id",
    "dumps_value",
    "item_text",
    "items_of",
    "matches",
    "message_turns",
    "namespace_of",
    "namespace_tuple",
    "refuse_period_labels",
    "stored_item",
    "validate_key",
]

KEY_SESSION_PREFIX = "kv-"
STORE_SOURCE = "store"  # the source a namespace the store creates records (``ingest_nodes.foreign_sessions``)
# Before issue 37 a put into a namespace the chat or a file created went under ``<session>@<this tag>``: still read.
_OLD_FOREIGN_TAG = "@" + stable_hash(STORE_SOURCE, length=8)
MAX_KEY_CHARS = 1024
_LABEL_RE = re.compile(r"[A-Za-z0-9_:@-]+")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


class InvalidItemError(ValueError):
    """A namespace tuple, key, value or filter the store cannot take; the message says which and why."""


def namespace_of(namespace: Sequence[str]) -> str:
    """The LogicMap namespace of a store namespace tuple: its labels joined with ``.``.

    Each label is 1+ characters from ASCII letters, digits and ``_ : @ -`` (``.`` joins them), and the whole name
    must be a valid namespace (at most 128 characters, starting with a letter or digit)."""
    if not isinstance(namespace, tuple | list) or not namespace:
        raise InvalidItemError(f"a store namespace is a non-empty tuple of strings, not {type(namespace).__name__}")
    refuse_period_labels(namespace)
    for label in namespace:
        if not isinstance(label, str) or not _LABEL_RE.fullmatch(label):
            raise InvalidItemError(
                f"store namespace label {_shown(label)} cannot map to a LogicMap namespace: use ASCII letters, "
                "digits and _ : @ - (a label cannot be empty or hold '.')"
            )
    try:
        return validate_namespace(".".join(namespace))
    except ValueError as exc:
        raise InvalidItemError(
            f"store namespace {tuple(namespace)!r} cannot map to a LogicMap namespace: {exc}"
        ) from None


def _shown(label: object) -> str:
    return repr(label) if len(repr(label)) <= 60 else repr(label)[:50] + "..."


def refuse_period_labels(labels: Iterable[object]) -> None:
    """``InvalidItemError`` for a label holding ``.`` (LangGraph refuses one in every store call, and LogicMap joins
    labels with it), with the fix for the usual cause, an email as the user id: its periods replaced by ``:``
    (which no usual email address holds, so two users do not share a label)."""
    for label in labels:
        if isinstance(label, str) and "." in label:
            fixed = _shown(label.replace(".", ":"))
            raise InvalidItemError(
                f"store namespace label {_shown(label)} holds '.', which a LangGraph store refuses in a label: for a "
                f"user id such as an email, replace its periods, e.g. {fixed} (user_id.replace('.', ':'))"
            )


def namespace_tuple(namespace: str) -> tuple[str, ...]:
    """The store namespace tuple of a LogicMap namespace (the inverse of ``namespace_of``)."""
    return tuple(namespace.split("."))


def validate_key(key: object) -> str:
    """The key if a store can hold it: a string of 1-1024 characters without control characters."""
    if not isinstance(key, str):
        raise InvalidItemError(f"a store key is a string, not {type(key).__name__}")
    if not key or len(key) > MAX_KEY_CHARS:
        raise InvalidItemError(f"a store key has 1-{MAX_KEY_CHARS} characters (this one has {len(key)})")
    if _CONTROL_RE.search(key) or _SURROGATE_RE.search(key):
        raise InvalidItemError("a store key cannot hold control characters or lone surrogates")
    return key


def item_session_id(key: str) -> str:
    """The session that holds the item of ``key`` in its namespace: the key's hash, never the key itself."""
    return f"{KEY_SESSION_PREFIX}{stable_hash('store-key', validate_key(key), length=32)}"


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        if value.strip():
            yield value.strip()
    elif isinstance(value, bool | int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)


def message_turns(value: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``(speaker, text)`` of each message of a ``messages`` value (LangChain messages or ``{role, content}``
    dicts), or None when the value holds no messages."""
    messages = value.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    turns = []
    for message in messages:
        role = message.get("role") if isinstance(message, Mapping) else getattr(message, "type", None)
        content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
        text = " ".join(_leaves(content)) if not isinstance(content, str) else content.strip()
        if text:
            turns.append((str(role or "user"), text))
    return turns or None


def item_text(value: Mapping[str, Any], fields: Sequence[str] | None = None) -> str:
    """The text retrieval indexes for a value: its indexed ``fields`` when given (LangGraph's ``index.fields``
    paths), else ``content`` or ``text`` when a string, else every string, number and boolean of the value."""
    if fields:
        from langgraph.store.base.embed import get_text_at_path  # local: the memory layer's one langgraph helper

        return "\n".join(t for path in fields for t in get_text_at_path(dict(value), path) if t.strip())
    for name in ("content", "text"):
        if isinstance(value.get(name), str) and value[name].strip():
            return str(value[name]).strip()
    return ". ".join(_leaves(value))


@dataclass(frozen=True)
class StoredItem:
    """One item as a snapshot holds it: its key, value, times and the turns that carry its text."""

    namespace: str
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    session_id: str
    turn_ids: tuple[str, ...]
    indexed: bool = True


def stored_item(item: dict[str, Any], namespace: str, session_id: str, turn_ids: tuple[str, ...]) -> StoredItem | None:
    """The item a turn's ``item`` record holds (a committed turn's, or a pending write's: ``memory.store.live``);
    None for a record that is not one."""
    try:
        return StoredItem(
            namespace=namespace,
            key=str(item["key"]),
            value=dict(item["value"]),
            created_at=datetime.fromisoformat(str(item["created_at"])),
            updated_at=datetime.fromisoformat(str(item["updated_at"])),
            session_id=session_id,
            turn_ids=turn_ids,
            indexed=bool(item.get("indexed", True)),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _stored(turn: Turn, turn_ids: tuple[str, ...]) -> StoredItem | None:
    return stored_item(turn.item or {}, turn.namespace, turn.session_id, turn_ids)


def items_of(snapshot: NamespaceSnapshot) -> dict[str, StoredItem]:
    """The snapshot's store items by key (computed once per snapshot)."""
    return snapshot.derived(_build_items)


def _build_items(snapshot: NamespaceSnapshot) -> dict[str, StoredItem]:
    sessions: dict[str, list[str]] = {}
    holders: dict[str, Turn] = {}
    for tid, turn in snapshot.turns.items():
        if not turn.session_id.startswith(KEY_SESSION_PREFIX):
            continue
        sessions.setdefault(turn.session_id, []).append(tid)
        if turn.item is not None:
            holders[turn.session_id] = turn
    found: dict[str, StoredItem] = {}
    for sid, turn in sorted(holders.items(), key=lambda held: held[0].endswith(_OLD_FOREIGN_TAG)):
        stored = _stored(turn, tuple(sessions[sid]))
        if stored is not None and sid in (own := item_session_id(stored.key), own + _OLD_FOREIGN_TAG):
            found.setdefault(stored.key, stored)
    return found


@dataclass(frozen=True)
class ItemIndex:
    """A snapshot's items as arrays, for ranking thousands of them without a Python object per item per search."""

    items: list[StoredItem]  # the most recently updated first
    updated: np.ndarray  # float seconds, per item
    indexed: np.ndarray  # bool, per item: ranked by a query (``put(..., index=False)`` is not)
    flat_turns: list[str]  # every item's turns, one after the other
    flat_items: np.ndarray  # the item (row) of each of ``flat_turns``
    _columns: dict[tuple[str, bool], Any] = field(default_factory=dict, repr=False, compare=False)

    def mask(self, filter: Mapping[str, Any] | None) -> np.ndarray:  # LangGraph's name
        """Which items pass ``filter`` (all without one): ``matches`` on every item, computed a field at a time
        (a field's values, and their numbers for the comparison operators, are read once per snapshot)."""
        keep = np.ones(len(self.items), dtype=bool)
        for name, wanted in (filter or {}).items():
            keep &= self._field_mask(str(name), wanted)
        return keep

    def _column(self, name: str, numbers: bool = False) -> Any:
        found = self._columns.get((name, numbers))
        if found is None:
            values = [it.value.get(name) for it in self.items]
            found = (
                np.array([np.nan if (n := _number(v)) is None else n for v in values], dtype=np.float64)
                if numbers
                else values
            )
            self._columns[(name, numbers)] = found
        return found

    def _field_mask(self, name: str, wanted: Any) -> np.ndarray:
        values = self._column(name)
        if isinstance(wanted, Mapping) and wanted and all(str(k).startswith("$") for k in wanted):
            keep = np.ones(len(values), dtype=bool)
            for op, target in wanted.items():
                if op in ("$gt", "$gte", "$lt", "$lte"):
                    right = _number(target)
                    if right is None:
                        return np.zeros(len(values), dtype=bool)
                    with np.errstate(invalid="ignore"):
                        keep &= _NUMERIC[op](self._column(name, numbers=True), right)
                else:
                    keep &= np.fromiter((_apply(v, str(op), target) for v in values), dtype=bool, count=len(values))
            return keep
        return np.fromiter((_compare(v, wanted) for v in values), dtype=bool, count=len(values))

    def scores(self, turn_scores: Mapping[str, float]) -> np.ndarray:
        """Each item's score: its best turn's in ``turn_scores``; NaN for an item not indexed or not scored."""
        values = np.fromiter(
            (turn_scores.get(t, -np.inf) for t in self.flat_turns), dtype=np.float64, count=len(self.flat_turns)
        )
        best = np.full(len(self.items), -np.inf)
        np.maximum.at(best, self.flat_items, values)
        best[~self.indexed | np.isneginf(best)] = np.nan
        return best


def item_index(snapshot: NamespaceSnapshot) -> ItemIndex:
    """The snapshot's items as an ``ItemIndex`` (computed once per snapshot)."""
    return snapshot.derived(_build_index)


def _build_index(snapshot: NamespaceSnapshot) -> ItemIndex:
    items = sorted(items_of(snapshot).values(), key=lambda it: it.updated_at, reverse=True)
    flat_turns = [t for it in items for t in it.turn_ids]
    flat_items = np.fromiter(
        (row for row, it in enumerate(items) for _ in it.turn_ids), dtype=np.int64, count=len(flat_turns)
    )
    return ItemIndex(
        items=items,
        updated=np.array([it.updated_at.timestamp() for it in items], dtype=np.float64),
        indexed=np.array([it.indexed for it in items], dtype=bool),
        flat_turns=flat_turns,
        flat_items=flat_items,
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


_NUMERIC = {"$gt": np.greater, "$gte": np.greater_equal, "$lt": np.less, "$lte": np.less_equal}


def _apply(value: Any, operator: str, wanted: Any) -> bool:
    if operator == "$eq":
        return bool(value == wanted)
    if operator == "$ne":
        return bool(value != wanted)
    if operator not in _OPERATORS:
        raise InvalidItemError(f"unsupported filter operator {operator!r}: use {', '.join(_OPERATORS)}")
    left, right = _number(value), _number(wanted)
    if left is None or right is None:
        return False
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right, "$lte": left <= right}[operator]


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(value, str(op), v) for op, v in wanted.items())
        return isinstance(value, Mapping) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted))
        )
    return bool(value == wanted)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:  # LangGraph's name
    """Whether a value passes a LangGraph ``filter`` (each field equal, or every operator on it true)."""
    return not filter or all(_compare(value.get(k), wanted) for k, wanted in filter.items())


def dumps_value(value: Mapping[str, Any]) -> str:
    """A value as canonical JSON (``InvalidItemError`` for a value JSON cannot hold, or one nested or sized past
    the limits of ``memory.runtime.input_limits``, measured before any recursive step)."""
    problem = value_problem(value)
    if problem is not None:
        raise InvalidItemError(f"a store value {problem}")
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidItemError(f"a store value must be JSON: {str(exc).splitlines()[0][:120]}") from None
    if len(text) > MAX_VALUE_CHARS:
        raise InvalidItemError(
            f"a store value is {len(text):,} characters as JSON, more than the limit of "
            f"{MAX_VALUE_CHARS:,} (MAX_VALUE_CHARS in logicmap.memory.runtime.input_limits)"
        )
    return text
