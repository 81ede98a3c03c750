"""Forget, update, list and get memories: the public memory lifecycle (``logicmap.forget`` and its siblings).

``forget`` finds what derives only from the named turns (``memory.records.forgetting.plan_forget``, through the record-kind
registry), rebuilds each event that also cites kept turns from those turns, and commits one change that retires the
rest, with an audit record in the manifest; ``purge=True`` then removes the retired versions physically
(``MemoryStore.purge``; the commit records the purge as owed, so one a killed process did not finish is finished by
the next open or write). ``purge(namespace)`` removes every retired version of a namespace, whatever retired it
(forgets, deletes and replaced items of ``LogicMapStore``, ``update_memory``'s old text). Events are rebuilt with the no-LLM policy's summary (the turns as said): an event a model had
summarized is recorded as a fallback in the audit record's notes. Each function has an async twin that runs it on
the shared executor (``memory.runtime.blocking``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from logicmap.graphs.runtime.entry import run_entry
from logicmap.graphs.runtime.resources import Resources, default_resources
from logicmap.graphs.writes.replacement import rebuilt_events, replacement_forget
from logicmap.memory.records.forgetting import (
    UnknownMemoryError,
    forget_change,
    plan_forget,
    turns_to_forget,
)
from logicmap.memory.records.items import StoredItem, items_of, validate_key
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.records.tombstones import tombstones_for
from logicmap.memory.runtime.blocking import run_blocking
from logicmap.memory.store import GenerationConflict, NamespaceSnapshot, PurgeReport
from logicmap.memory.store.live import live_snapshot

__all__ = [
    "KINDS",
    "ForgetReport",
    "MemoryKind",
    "MemoryPage",
    "UnknownMemoryError",
    "aforget",
    "adelete_namespace",
    "aget_memory",
    "alist_memories",
    "apurge",
    "aupdate_memory",
    "delete_namespace",
    "forget",
    "get_memory",
    "list_memories",
    "memory_editor",
    "purge",
    "replacement_forget",
    "update_memory",
]

MAX_TRIES = 5  # a forget that lost its commit to a concurrent writer is computed again on the new snapshot
MemoryKind = Literal["turns", "events", "facts", "r2_facts", "items"]
"""What ``list_memories`` lists: turns, events, REAL's temporal ``facts``, Memory-R2's facts (``r2_facts``; before
issue 43 they were listed as ``items``), or the store ``items`` ``LogicMapStore.put`` wrote, by key."""
_KIND_FIELDS = {"turns": "turns", "events": "events", "facts": "facts", "r2_facts": "r2_facts"}
KINDS: tuple[str, ...] = (*_KIND_FIELDS, "items")
"""Every kind ``list_memories`` lists, in the order the CLI offers them."""


class ForgetReport(BaseModel):
    """What one forget (or update) did: the kinds and counts retired, the generation it committed."""

    namespace: str
    generation: int
    removed: dict[str, int] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    purge: PurgeReport | None = None
    wall_time_s: float = 0.0


class MemoryPage(BaseModel):
    """One page of ``list_memories``: records as ``{"id", "kind", "text", "session_id"}`` and the next cursor."""

    namespace: str
    kind: str
    items: list[dict[str, Any]] = Field(default_factory=list)
    next_cursor: str | None = None


def _resources(resources: Resources | None) -> Resources:
    return resources if resources is not None else default_resources()


def _commit_forget(
    res: Resources,
    namespace: str,
    choose: Any,
    *,
    surface: str,
    replace: dict[str, str] | None = None,
    purge: bool = False,
) -> ForgetReport:
    started = time.perf_counter()
    store = res.store
    if store.fast_writes and surface != "store" and store.pending_writes(namespace):
        # What is forgotten may still be a pending write: consolidated first, so the forget reaches it
        # (``LogicMapStore``'s delete removes its own key's pending writes from the log instead).
        from logicmap.graphs.writes.consolidate import flush

        flush(namespace, resources=res)
    for attempt in range(MAX_TRIES):
        store.require_namespace(namespace)
        snap = store.snapshot(namespace)
        chosen = choose(snap)
        if not chosen:  # a date before every turn: nothing to forget, nothing committed
            return ForgetReport(
                namespace=namespace,
                generation=snap.generation,
                notes=["no turn matched"],
                wall_time_s=time.perf_counter() - started,
            )
        replaced = dict(replace or {})
        plan = plan_forget(snap, chosen, replaced=list(replaced))
        new_turns = [snap.turns[t].model_copy(update={"text": text}) for t, text in replaced.items()]
        turns = {**snap.turns, **{t.dia_id: t for t in new_turns}}
        events, notes = rebuilt_events(snap, plan, turns)
        texts = [t.text for t in new_turns] + [e.summary for e in events]
        vectors = res.embeddings.embed_documents(texts) if texts else []
        change = forget_change(
            snap,
            plan,
            rebuilt=events,
            rebuilt_vectors=vectors[len(new_turns) :],
            new_turns=new_turns,
            new_turn_vectors=vectors[: len(new_turns)],
            surface=surface,
            extra_notes=notes,
            purged=purge,
        )
        # What comes back through add_messages, ingest or import is refused by these (memory.tombstones).
        change.tombstones = tombstones_for([snap.turns[t] for t in sorted(plan.retire.get("turns", ()))], namespace)
        try:
            manifest = store.commit(change)
        except GenerationConflict:
            if attempt == MAX_TRIES - 1:
                raise
            continue
        return ForgetReport(
            namespace=namespace,
            generation=manifest.generation,
            removed=plan.counts(),
            notes=notes,
            wall_time_s=time.perf_counter() - started,
        )
    raise AssertionError("unreachable")


def _chosen_turns(
    snap: NamespaceSnapshot,
    *,
    turn_ids: list[str],
    session_ids: list[str],
    keys: list[str],
    before: date | datetime | str | None,
) -> set[str]:
    held = items_of(snap)
    if any(k not in held for k in keys):
        raise UnknownMemoryError(snap.namespace, "key")
    sessions = session_ids + [held[k].session_id for k in keys]
    return turns_to_forget(snap, turn_ids=turn_ids, session_ids=sessions, before=before)


def _one_turn(snap: NamespaceSnapshot, *, memory_id: str) -> set[str]:
    if memory_id not in snap.turns:
        raise UnknownMemoryError(snap.namespace, "turn")
    return {memory_id}


@run_entry("forget")
def forget(
    namespace: str,
    *,
    turn_ids: Iterable[str] = (),
    session_ids: Iterable[str] = (),
    keys: Iterable[str] = (),
    before: date | datetime | str | None = None,
    purge: bool = False,
    surface: str = "python",
    resources: Resources | None = None,
    config: RunnableConfig | None = None,
) -> ForgetReport:
    """Forget turns (by id, by session, by store item key, or every turn said before a date) and everything
    derived only from them. ``keys`` name items ``LogicMapStore.put`` stored (its ``delete`` calls this).

    One atomic commit: a reader holding an older snapshot finishes its run, every later run sees the namespace
    without them. ``purge=True`` then removes the retired versions from disk (``MemoryStore.purge``). Ids that name
    nothing here (another tenant's included) raise ``UnknownMemoryError``, which names only this namespace.
    ``config`` (a LangChain ``RunnableConfig``): the call is one run named ``forget`` under it (``entry.run_entry``:
    its callbacks see it, its tags and metadata are the run's); so for every function of this module."""
    namespace = validate_namespace(namespace)
    res = _resources(resources)
    keys = [validate_key(k) for k in keys]
    choose = partial(_chosen_turns, turn_ids=list(turn_ids), session_ids=list(session_ids), keys=keys, before=before)
    report = _commit_forget(res, namespace, choose, surface=surface, purge=purge)
    return _purged(res, report) if purge else report


@run_entry("update_memory")
def update_memory(
    namespace: str,
    memory_id: str,
    text: str,
    *,
    purge: bool = False,
    surface: str = "python",
    resources: Resources | None = None,
    config: RunnableConfig | None = None,
) -> ForgetReport:
    """Give a turn new text: what was derived from its old text is forgotten, events citing it are rebuilt.
    ``purge=True`` then removes the old text's versions from disk, as ``forget``'s does."""
    namespace = validate_namespace(namespace)
    if not text.strip():
        raise ValueError("the new text is empty: to remove a memory, forget it")
    res = _resources(resources)
    choose = partial(_one_turn, memory_id=memory_id)
    report = _commit_forget(res, namespace, choose, surface=surface, replace={memory_id: text}, purge=purge)
    return _purged(res, report) if purge else report


def purge(namespace: str, *, resources: Resources | None = None) -> PurgeReport:
    """Remove every retired version of ``namespace`` from disk (``MemoryStore.purge``), whatever retired it: forgets
    and updates without ``purge``, ``LogicMapStore``'s deletes and replaced values, a purge a killed process left
    unfinished. Nothing visible changes. ``UnknownNamespaceError`` for a namespace with no committed memory."""
    return _resources(resources).store.purge(validate_namespace(namespace))


def _purged(res: Resources, report: ForgetReport) -> ForgetReport:
    started = time.perf_counter()
    report.purge = res.store.purge(report.namespace)
    report.wall_time_s += time.perf_counter() - started
    return report


@run_entry("delete_namespace")
def delete_namespace(
    namespace: str, *, resources: Resources | None = None, config: RunnableConfig | None = None
) -> dict[str, Any]:
    """Delete one namespace and purge it (``acme.bob`` survives deleting ``acme``)."""
    return _resources(resources).store.drop_namespace(validate_namespace(namespace))


def _item(kind: str, rid: str, record: Any) -> dict[str, Any]:
    text = getattr(record, "text", None) or getattr(record, "summary", None)
    if text is None and hasattr(record, "head"):
        text = f"{record.head} {record.relation} {record.tail}"
    return {"id": rid, "kind": kind, "text": text, "session_id": getattr(record, "session_id", None)}


def _store_item(snap: NamespaceSnapshot, item: StoredItem) -> dict[str, Any]:
    """A store item as ``list_memories`` shows it: its key as the id, the text its turns hold, its value and times."""
    text = " ".join(snap.turns[t].text for t in item.turn_ids if t in snap.turns)
    return {
        "id": item.key,
        "kind": "items",
        "text": text,
        "session_id": item.session_id,
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def _listed(snap: NamespaceSnapshot, kind: str) -> list[dict[str, Any]]:
    if kind == "items":
        return [_store_item(snap, item) for item in items_of(snap).values()]
    return [_item(kind, rid, r) for rid, r in getattr(snap, _KIND_FIELDS[kind]).items()]


@run_entry("list_memories")
def list_memories(
    namespace: str,
    *,
    kind: MemoryKind = "turns",
    limit: int = 50,
    cursor: str | None = None,
    resources: Resources | None = None,
    config: RunnableConfig | None = None,
) -> MemoryPage:
    """One page of a namespace's memories of one kind (``MemoryKind``), in memory order; pass ``next_cursor`` back
    for the next. A store item's id is its key."""
    namespace = validate_namespace(namespace)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    if limit < 1:
        raise ValueError("limit must be at least 1")
    try:
        start = int(cursor or 0)
    except ValueError:
        raise ValueError("cursor: pass back the next_cursor of the page before") from None
    store = _resources(resources).store
    store.require_namespace(namespace)
    records = _listed(live_snapshot(store, namespace), kind)  # what readers see: pending writes included
    more = start + limit < len(records)
    return MemoryPage(
        namespace=namespace,
        kind=kind,
        items=records[start : start + limit],
        next_cursor=str(start + limit) if more else None,
    )


@run_entry("get_memory")
def get_memory(
    namespace: str, memory_id: str, *, resources: Resources | None = None, config: RunnableConfig | None = None
) -> dict[str, Any]:
    """One memory by id (a turn, event, fact or Memory-R2 fact) with its whole record, else the store item of that
    key (``LogicMapStore``) with its first turn's record."""
    namespace = validate_namespace(namespace)
    store = _resources(resources).store
    store.require_namespace(namespace)
    snap = live_snapshot(store, namespace)  # what readers see: pending writes included
    for kind, field in _KIND_FIELDS.items():
        record = getattr(snap, field).get(memory_id)
        if record is not None:
            return {**_item(kind, memory_id, record), "record": record.model_dump(mode="json")}
    item = items_of(snap).get(memory_id)
    if item is not None:
        return {**_store_item(snap, item), "record": snap.turns[item.turn_ids[0]].model_dump(mode="json")}
    raise UnknownMemoryError(namespace, "memory")


@dataclass(frozen=True)
class _Editor:
    resources: Resources | None = None
    surface: str = "tool"

    def forget(self, namespace: str, turn_ids: list[str], purge: bool = False) -> ForgetReport:
        return forget(namespace, turn_ids=turn_ids, purge=purge, surface=self.surface, resources=self.resources)

    def update(self, namespace: str, turn_id: str, text: str, purge: bool = False) -> ForgetReport:
        return update_memory(namespace, turn_id, text, purge=purge, surface=self.surface, resources=self.resources)

    def purge(self, namespace: str) -> PurgeReport:
        return purge(namespace, resources=self.resources)


def memory_editor(resources: Resources | None = None, *, surface: str = "tool") -> _Editor:
    """The ``editor`` of ``tools.create_memory_toolkit``: its ``forget_memory`` and ``update_memory`` tools write
    through ``forget`` and ``update_memory`` (audited as ``surface``: ``tool``, or ``mcp`` for the MCP server)."""
    return _Editor(resources, surface)


async def aforget(namespace: str, **kwargs: Any) -> ForgetReport:
    """``forget`` on the shared executor (``memory.runtime.blocking``): the event loop keeps running."""
    return await run_blocking(lambda: forget(namespace, **kwargs))


async def aupdate_memory(namespace: str, memory_id: str, text: str, **kwargs: Any) -> ForgetReport:
    """``update_memory`` on the shared executor."""
    return await run_blocking(lambda: update_memory(namespace, memory_id, text, **kwargs))


async def apurge(namespace: str, **kwargs: Any) -> PurgeReport:
    """``purge`` on the shared executor."""
    return await run_blocking(lambda: purge(namespace, **kwargs))


async def adelete_namespace(namespace: str, **kwargs: Any) -> dict[str, Any]:
    """``delete_namespace`` on the shared executor."""
    return await run_blocking(lambda: delete_namespace(namespace, **kwargs))


async def alist_memories(namespace: str, **kwargs: Any) -> MemoryPage:
    """``list_memories`` on the shared executor."""
    return await run_blocking(lambda: list_memories(namespace, **kwargs))


async def aget_memory(namespace: str, memory_id: str, **kwargs: Any) -> dict[str, Any]:
    """``get_memory`` on the shared executor."""
    return await run_blocking(lambda: get_memory(namespace, memory_id, **kwargs))
