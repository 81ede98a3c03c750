"""The live view: a namespace's committed records with its pending writes on top, as every reader sees them.

A fast write (``memory.store.pending_log``) is visible at once: ``live_snapshot`` is the committed snapshot plus each
pending session's turns (with the vectors the write embedded) and one provisional event per session (its turns as said,
``provisional_event``, so strategies that navigate events reach it; no relation, topic, fact or cue until the
consolidator builds those), its manifest listing the session with ``SessionInfo.pending``. A pending
session that replaces a committed one (a put on a key that exists) hides the old one in the same view: its turns,
and what derives only from them (the forget plan a replacing commit applies, ``memory.records.forgetting``); an event that
also held other sessions' turns keeps those, with its summary as it was until the consolidator rebuilds it. So a
reader sees the old item or the new one, never both, never neither.

Nothing here writes: the view is computed from the snapshot and the log, and cached per (snapshot, last pending
sequence number), so readers between two writes share it. ``through`` (a run's pin, ``graphs.runtime.pin``) shows the
writes up to that sequence number only, so a run reads one memory however many writes land while it goes on.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from logicmap.memory.indexes.snapshot_file import VectorTable
from logicmap.memory.records.forgetting import forget_change, plan_forget, turns_to_forget
from logicmap.memory.records.items import StoredItem, stored_item
from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.records.records import Event, SessionInfo, Turn
from logicmap.memory.records.tombstones import said_summary
from logicmap.memory.store.model import ChangeSet, Manifest, NamespaceSnapshot, PendingHead, PendingWrite, ordered

__all__ = [
    "LiveReader",
    "LiveView",
    "applied",
    "latest_entries",
    "live_snapshot",
    "overlay",
    "pending_item",
    "pending_turns",
    "provisional_event",
]

_CACHE_SIZE = 32
_cache: OrderedDict[tuple[int, int, int], tuple[NamespaceSnapshot, NamespaceSnapshot]] = OrderedDict()
_cache_lock = threading.Lock()

W = TypeVar("W", PendingWrite, PendingHead)


class LiveReader(Protocol):
    """What the live view reads: committed snapshots and the pending log (a ``StoragePort``)."""

    @property
    def fast_writes(self) -> bool: ...

    def snapshot(self, namespace: str) -> NamespaceSnapshot: ...

    def snapshot_at(self, namespace: str, generation: int) -> NamespaceSnapshot: ...

    def pending_writes(self, namespace: str, after: int | None = None) -> list[PendingWrite]: ...

    @property
    def embedder(self) -> str: ...


def live_snapshot(
    store: LiveReader, namespace: str, *, generation: int | None = None, through: int | None = None
) -> NamespaceSnapshot:
    """``namespace`` as readers see it: committed (the latest, or ``generation``) plus the pending writes above the
    snapshot's ``consolidated_through`` (up to ``through`` when given)."""
    committed = store.snapshot(namespace) if generation is None else store.snapshot_at(namespace, generation)
    if not getattr(store, "fast_writes", False):
        return committed
    entries = [
        e
        for e in store.pending_writes(namespace, after=committed.manifest.consolidated_through)
        if through is None or e.seq <= through
    ]
    if not entries:
        return committed
    key = (id(committed), entries[-1].seq, len(entries))
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is committed:
            _cache.move_to_end(key)
            return hit[1]
    view = overlay(committed, entries, embedder=store.embedder)
    with _cache_lock:
        _cache[key] = (committed, view)  # the committed snapshot is held, so its id is not reused while cached
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return view


class LiveView:
    """A reader of ``store``'s live view (``snapshot`` is ``live_snapshot``), for code that reads the latest memory
    without a run's pin (the baselines' retrievers)."""

    def __init__(self, store: LiveReader) -> None:
        self.store = store

    def snapshot(self, namespace: str) -> NamespaceSnapshot:
        return live_snapshot(self.store, namespace)


def latest_entries(entries: Sequence[W]) -> list[W]:
    """The last write of each session, in the order of those last writes (an earlier write of a session is
    superseded by its later one: the later value is the item). Of pending writes or of their heads."""
    last: dict[str, W] = {}
    for entry in entries:
        sid = entry.session_id if isinstance(entry, PendingHead) else str(entry.session["session_id"])
        last.pop(sid, None)
        last[sid] = entry
    return list(last.values())


def pending_item(entry: PendingWrite, namespace: str) -> StoredItem | None:
    """The store item a pending write holds (None: a chat's turns)."""
    if entry.key is None:
        return None
    turns = [t for t in entry.session.get("turns", []) if isinstance(t, dict)]
    item = next((t.get("item") for t in turns if t.get("item")), None)
    if not isinstance(item, dict):
        return None
    return stored_item(item, namespace, str(entry.session["session_id"]), tuple(str(t["dia_id"]) for t in turns))


def pending_turns(entry: PendingWrite, namespace: str, offset: int) -> list[Turn]:
    """The turns a pending session shows as (what the ingest would store, numbered from ``offset``)."""
    from logicmap.memory.files.loaders import Session, session_turns

    session = Session.model_validate(entry.session)
    return session_turns(namespace, session, offset, [raw.dia_id for raw in session.turns])


def overlay(snap: NamespaceSnapshot, entries: Sequence[PendingWrite], *, embedder: str) -> NamespaceSnapshot:
    """``snap`` with ``entries`` shown (see the module docstring). A write made with another embedder than
    ``embedder`` (the reader's; the provider changed while it waited) shows its turns without vectors and without a
    provisional event: found by words, never compared with vectors of another space."""
    entries = latest_entries(entries)
    sessions = [str(e.session["session_id"]) for e in entries]
    held = {t.session_id for t in snap.turns.values()}
    view = snap
    replaced = [s for s in sessions if s in held]
    if replaced:
        plan = plan_forget(snap, turns_to_forget(snap, session_ids=replaced))
        rebuilt = [
            snap.events[eid].model_copy(update={"turn_ids": list(kept)}) for eid, kept in plan.rebuild_events.items()
        ]
        vectors = [list(map(float, snap.event_vectors[e.id])) for e in rebuilt if e.id in snap.event_vectors]
        hidden = forget_change(
            snap,
            plan,
            rebuilt=rebuilt if len(vectors) == len(rebuilt) else [],
            rebuilt_vectors=vectors if len(vectors) == len(rebuilt) else [],
            surface="live",
        )
        view = applied(snap, hidden, snap.manifest)
    offset = max((t.position for t in view.turns.values()), default=-1) + 1
    order = max((e.order for e in view.events.values()), default=-1) + 1
    turns: list[Turn] = []
    unembedded: list[Turn] = []  # after ``turns``: a change's vectors are its first turns'
    vectors_out: list[list[float]] = []
    events: list[Event] = []
    event_vectors: list[list[float]] = []
    manifest = view.manifest.model_copy()
    manifest.sessions = dict(manifest.sessions)
    for entry in entries:
        shown = pending_turns(entry, snap.namespace, offset + len(turns) + len(unembedded))
        sid = str(entry.session["session_id"])
        embedded = entry.embedder in (None, embedder)  # None: logged before writes recorded it, shown as before
        if embedded:
            turns += shown
            vectors_out += entry.vectors[: len(shown)].tolist()
        else:
            unembedded += shown
        if embedded and shown and len(entry.vectors) >= len(shown):
            events.append(provisional_event(sid, shown, order + len(events)))
            mean = np.mean(entry.vectors[: len(shown)], axis=0)
            event_vectors.append(list(map(float, mean / (float(np.linalg.norm(mean)) or 1.0))))
        manifest.sessions[sid] = SessionInfo(
            session_id=sid,
            content_hash=f"pending-{entry.seq}",
            generation=snap.generation,
            policy=entry.policy,
            memory_manager=None,
            redone_with=None,
            pending=True,
        )
    change = ChangeSet(
        namespace=snap.namespace,
        base_generation=snap.generation,
        turns=turns + unembedded,
        turn_vectors=vectors_out if len(vectors_out) == len(turns) else [],
        events=events,
        event_vectors=event_vectors,
    )
    return applied(view, change, manifest)


def provisional_event(session_id: str, turns: Sequence[Turn], order: int) -> Event:
    """The one event a pending session shows as until it is consolidated: its turns as said (the no-LLM summary,
    ``memory.records.tombstones.said_summary``), so strategies that navigate events reach a fresh write; its vector is the
    mean of its turns'."""
    return Event(
        id=f"{session_id}-pending",
        namespace=turns[0].namespace,
        session_id=session_id,
        summary=said_summary(turns),
        time=None,
        time_phrase=None,
        session_time=turns[0].session_time,
        order=order,
        participants=[t.speaker for t in turns],
        turn_ids=[t.dia_id for t in turns],
        sessions=[session_id],
        source="pending",
    )


def applied(snap: NamespaceSnapshot, change: ChangeSet, manifest: Manifest) -> NamespaceSnapshot:
    """A new snapshot: ``snap`` with ``change`` applied in memory (retired ids dropped, written records added with
    their vectors), under ``manifest``. ``snap`` is not changed."""
    out = NamespaceSnapshot(namespace=snap.namespace, manifest=manifest)
    for kind in RECORD_KINDS:
        records: dict[str, Any] = dict(getattr(snap, kind.field))
        retired = set(change.retire.get(kind.field, ()))
        for rid in retired:
            records.pop(rid, None)
        written = list(getattr(change, kind.field))
        for record in written:
            records[kind.record_id(record)] = record
        setattr(out, kind.field, records)
        if kind.vector_field is not None:
            table = VectorTable.of(getattr(snap, kind.vector_field))
            rows = getattr(change, kind.vector_field)
            added = (
                VectorTable([kind.record_id(r) for r in written[: len(rows)]], np.asarray(rows, dtype=np.float32))
                if len(rows)
                else VectorTable([])
            )
            setattr(out, kind.vector_field, table.changed(retired, added))
    ordered(out)
    return out
