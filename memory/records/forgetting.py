"""Forgetting: the records derived only from forgotten turns, found through ``memory.records.kinds``, retired in one commit.

``plan_forget`` takes a snapshot and the turns, sessions or date a user asked to forget and follows the registry's
``sources`` links from those turns to everything built on them: events citing only forgotten turns, relations and
topic memberships touching those events, facts, Memory-R2 facts, tags and their cues. A record that also cites kept
turns is kept and rewritten without the forgotten ones (an event's summary is rebuilt from its kept turns by the
caller, with the namespace's ingest policy; a fact's history loses the entries of forgotten turns). ``forget_change``
turns the plan into one ``ChangeSet`` whose ``retire`` lists every retired record and whose ``forget`` is the
audit record the manifest keeps (kinds and counts, when, by which surface; never the text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel

from logicmap.memory.records.kinds import BY_FIELD, BY_NAME, RECORD_KINDS, derived_from
from logicmap.memory.records.r2 import FactRecord
from logicmap.memory.records.records import Event, Fact, Topic, Turn
from logicmap.memory.store.errors import UnknownMemoryError
from logicmap.memory.store.model import ChangeSet, ForgetAudit, NamespaceSnapshot

__all__ = [
    "ForgetAudit",
    "ForgetPlan",
    "UnknownMemoryError",
    "forget_change",
    "plan_forget",
    "turns_to_forget",
    "with_replacement",
]


@dataclass
class ForgetPlan:
    """What forgetting some turns changes in one snapshot."""

    namespace: str
    generation: int
    turns: set[str]  # the forgotten turn ids
    retire: dict[str, set[str]] = field(default_factory=dict)  # kind field -> ids
    rebuild_events: dict[str, list[str]] = field(default_factory=dict)  # event id -> its kept turn ids
    rewritten: dict[str, dict[str, BaseModel]] = field(default_factory=dict)  # kind field -> id -> new record
    sessions_emptied: list[str] = field(default_factory=list)  # sessions none of whose turns are kept

    def retired(self, kind: str) -> set[str]:
        return self.retire.setdefault(kind, set())

    def counts(self) -> dict[str, int]:
        """Records retired per kind (``events_rebuilt`` etc. for records kept without the forgotten turns)."""
        found = {kind.field: len(self.retire.get(kind.field, ())) for kind in RECORD_KINDS}
        found = {k: n for k, n in found.items() if n}
        if self.rebuild_events:
            found["events_rebuilt"] = len(self.rebuild_events)
        for kind, records in self.rewritten.items():
            if records:
                found[f"{kind}_rewritten"] = len(records)
        return found


def _as_datetime(before: date | datetime | str) -> datetime:
    if isinstance(before, str):
        before = datetime.fromisoformat(before)
    if not isinstance(before, datetime):
        before = datetime(before.year, before.month, before.day)
    return before if before.tzinfo is not None else before.replace(tzinfo=UTC)


def _earlier(turn: Turn, limit: datetime) -> bool:
    when = turn.session_time
    if when is None:
        return False
    when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return when < limit


def turns_to_forget(
    snap: NamespaceSnapshot,
    *,
    turn_ids: Iterable[str] = (),
    session_ids: Iterable[str] = (),
    before: date | datetime | str | None = None,
) -> set[str]:
    """The turn ids named by ids, sessions or a date; ``UnknownMemoryError`` when any id or session is not here."""
    turn_ids, session_ids = list(turn_ids), list(session_ids)
    if not turn_ids and not session_ids and before is None:
        raise ValueError("say what to forget: turn ids, session ids, store keys or a date (before=)")
    if any(t not in snap.turns for t in turn_ids):
        raise UnknownMemoryError(snap.namespace, "turn")
    known_sessions = {t.session_id for t in snap.turns.values()} | set(snap.manifest.sessions)
    if any(s not in known_sessions for s in session_ids):
        raise UnknownMemoryError(snap.namespace, "session")
    chosen = set(turn_ids)
    wanted = set(session_ids)
    chosen.update(t.dia_id for t in snap.turns.values() if t.session_id in wanted)
    if before is not None:
        limit = _as_datetime(before)
        chosen.update(t.dia_id for t in snap.turns.values() if _earlier(t, limit))
    return chosen


def plan_forget(snap: NamespaceSnapshot, turns: set[str], *, replaced: Sequence[str] = ()) -> ForgetPlan:
    """Everything derived only from ``turns``, through the registry's links (``memory.records.kinds.derived_from``).

    ``replaced`` turns are rewritten, not retired (``update_memory``): what derives from them is forgotten, and
    events citing them are rebuilt with their new text."""
    plan = ForgetPlan(namespace=snap.namespace, generation=snap.generation, turns=set(turns))
    kept_turns = set(replaced)
    plan.retired("turns").update(t for t in turns if t not in kept_turns)
    gone: dict[str, set[str]] = {"turn": set(turns)}
    _plan_events(snap, plan, gone, kept_turns)
    for kind in RECORD_KINDS:
        if kind.name in ("turn", "event", "cue"):
            continue
        for rid, record in getattr(snap, kind.field).items():
            _plan_record(plan, kind.field, rid, record, gone)
        gone[kind.name] = set(plan.retire.get(kind.field, ()))
    _plan_rebuilt_tags(snap, plan, kept_turns)
    _plan_cues(snap, plan)
    remaining = {t.session_id for tid, t in snap.turns.items() if tid not in plan.retire["turns"]}
    plan.sessions_emptied = sorted(s for s in {t.session_id for t in snap.turns.values()} if s not in remaining)
    return plan


def _plan_events(snap: NamespaceSnapshot, plan: ForgetPlan, gone: dict[str, set[str]], replaced: set[str]) -> None:
    for eid, event in snap.events.items():
        cited = derived_from(BY_NAME["event"], event).get("turn", [])
        if not set(cited) & gone["turn"]:
            continue
        kept = [t for t in cited if t not in gone["turn"] or t in replaced]
        if kept:
            plan.rebuild_events[eid] = kept
        else:
            plan.retired("events").add(eid)
    gone["event"] = set(plan.retire.get("events", ()))


def _plan_record(plan: ForgetPlan, kind: str, rid: str, record: Any, gone: dict[str, set[str]]) -> None:
    """Retire a record whose sources are all forgotten (or that touches a forgotten event); else drop its
    forgotten turns."""
    links = derived_from(BY_FIELD[kind], record)
    if not links:
        return
    hit = {target: set(ids) & gone.get(target, set()) for target, ids in links.items()}
    if not any(hit.values()):
        return
    if isinstance(record, Topic):
        members = [m for m in record.members if m not in gone["event"]]
        if members:
            plan.rewritten.setdefault(kind, {})[rid] = record.model_copy(update={"members": members})
        else:
            plan.retired(kind).add(rid)
        return
    events_hit = bool(hit.get("event"))
    turns = links.get("turn", [])
    kept_turns = [t for t in turns if t not in gone["turn"]]
    if events_hit or hit.get("cue") or not kept_turns:
        plan.retired(kind).add(rid)
        return
    plan.rewritten.setdefault(kind, {})[rid] = _without_turns(record, gone["turn"])


def _without_turns(record: Any, forgotten: set[str]) -> Any:
    """A fact or relation kept for its other sources: its forgotten turns and their history entries dropped."""
    if isinstance(record, FactRecord):
        return record.model_copy(
            update={
                "turn_ids": tuple(t for t in record.turn_ids if t not in forgotten),
                "history": tuple(h for h in record.history if not set(h.turn_ids) & forgotten),
                "deleted_by": tuple(t for t in record.deleted_by if t not in forgotten),
            }
        )
    update: dict[str, Any] = {"turn_ids": [t for t in record.turn_ids if t not in forgotten]}
    if isinstance(record, Fact):
        update["history"] = [h for h in record.history if not set(_history_turns(h)) & forgotten]
    return record.model_copy(update=update)


def _history_turns(entry: dict[str, object]) -> list[str]:
    turns = entry.get("turn_ids")
    return [str(t) for t in turns] if isinstance(turns, list | tuple) else []


def _plan_rebuilt_tags(snap: NamespaceSnapshot, plan: ForgetPlan, replaced: set[str]) -> None:
    """A tag on a rebuilt event stays only when what it quotes is still said by the event's kept turns."""
    if not plan.rebuild_events:
        return
    said = {
        eid: " ".join(snap.turns[t].text for t in kept if t not in replaced)
        for eid, kept in plan.rebuild_events.items()
    }
    for tid, tag in snap.tags.items():
        if tag.target_kind == "event" and tag.target_id in said and (tag.content or "") not in said[tag.target_id]:
            plan.retired("tags").add(tid)


def _plan_cues(snap: NamespaceSnapshot, plan: ForgetPlan) -> None:
    """A cue goes with its last tag: cues every one of whose tags is retired."""
    retired_tags = plan.retire.get("tags", set())
    if not retired_tags:
        return
    kept_cues = {tag.cue_id for tid, tag in snap.tags.items() if tid not in retired_tags}
    orphans = {snap.tags[t].cue_id for t in retired_tags} - kept_cues
    plan.retired("cues").update(c for c in orphans if c in snap.cues)


def forget_change(
    snap: NamespaceSnapshot,
    plan: ForgetPlan,
    *,
    rebuilt: Sequence[Event] = (),
    rebuilt_vectors: Sequence[Sequence[float]] = (),
    new_turns: Sequence[Turn] = (),
    new_turn_vectors: Sequence[Sequence[float]] = (),
    surface: str = "python",
    extra_notes: Sequence[str] = (),
    purged: bool = False,
) -> ChangeSet:
    """The one commit that forgets: retirements, rebuilt events, rewritten records and the audit record."""
    change = ChangeSet(namespace=snap.namespace, base_generation=snap.generation)
    change.turns, change.turn_vectors = list(new_turns), [list(map(float, v)) for v in new_turn_vectors]
    change.events, change.event_vectors = list(rebuilt), [list(map(float, v)) for v in rebuilt_vectors]
    topics = dict(plan.rewritten.get("topics", {}))
    for tid, topic in topics.items():
        assert isinstance(topic, Topic)
        topics[tid] = _recentred(topic, snap, plan, rebuilt, change.event_vectors)
    for kind, records in plan.rewritten.items():
        values = list(topics.values()) if kind == "topics" else list(records.values())
        getattr(change, kind).extend(values)
        vector_field = BY_FIELD[kind].vector_field
        if vector_field is not None:
            table = getattr(snap, vector_field)
            getattr(change, vector_field).extend([np.asarray(table[rid], dtype=np.float32).tolist() for rid in records])
    change.retire = {kind: sorted(ids) for kind, ids in plan.retire.items() if ids}
    change.forget = ForgetAudit(
        at=datetime.now(UTC),
        surface=surface,
        generation=snap.generation + 1,
        removed={k: n for k, n in plan.counts().items()},
        sessions_emptied=len(plan.sessions_emptied),
        notes=list(extra_notes),
        purged=purged,
    )
    change.drop_sessions = list(plan.sessions_emptied)
    return change


def _recentred(
    topic: Topic,
    snap: NamespaceSnapshot,
    plan: ForgetPlan,
    rebuilt: Sequence[Event],
    vectors: Sequence[Sequence[float]],
) -> Topic:
    """A topic's centroid from its kept members only (a forgotten event's vector leaves no trace in it)."""
    fresh = {e.id: np.asarray(v, dtype=np.float32) for e, v in zip(rebuilt, vectors)}
    rows = [
        fresh[m] if m in fresh else np.asarray(snap.event_vectors[m], dtype=np.float32)
        for m in topic.members
        if m in fresh or m in snap.event_vectors
    ]
    if not rows:
        return topic
    centroid = np.mean(np.vstack(rows), axis=0)
    return topic.model_copy(update={"centroid": [float(x) for x in centroid]})


def rebuilt_event(event: Event, kept: Sequence[Turn], summarize: Callable[[Sequence[Turn]], str], source: str) -> Event:
    """``event`` made again from its kept turns only (``summarize`` is the namespace's policy's summary)."""
    sessions = list(dict.fromkeys(t.session_id for t in kept))
    return event.model_copy(
        update={
            "summary": summarize(kept),
            "turn_ids": [t.dia_id for t in kept],
            "participants": list(dict.fromkeys(t.speaker for t in kept)),
            "sessions": [s for s in event.sessions if s in sessions] or sessions,
            "session_id": event.session_id if event.session_id in sessions else sessions[0],
            "source": source,
        }
    )


def with_replacement(change: ChangeSet, forgotten: ChangeSet, snap: NamespaceSnapshot) -> ChangeSet:
    """``change`` (an ingest's commit) carrying ``forgotten`` (a ``forget_change`` of the sessions it replaces):
    one commit that retires the old records and writes the new ones.

    A record the ingest writes wins over the forget's version of the same id (its old version is retired by being
    replaced); an event id the ingest writes again is not gone, so topics keep it as a member, and a cue it tags
    again stays; relations and topic members pointing at events that are gone are dropped."""
    merged = change.model_copy(deep=True)
    written = {kind.field: {kind.record_id(r) for r in getattr(change, kind.field)} for kind in RECORD_KINDS}
    for kind in RECORD_KINDS:
        extra = [
            (i, r) for i, r in enumerate(getattr(forgotten, kind.field)) if kind.record_id(r) not in written[kind.field]
        ]
        getattr(merged, kind.field).extend(r for _, r in extra)
        if kind.vector_field is not None:
            rows = getattr(forgotten, kind.vector_field)
            getattr(merged, kind.vector_field).extend(rows[i] for i, _ in extra)
    retire = {k: set(v) for k, v in merged.retire.items()}
    for k, ids in forgotten.retire.items():
        retire.setdefault(k, set()).update(ids)
    # A cue the ingest tags again stays (it writes only the tag of a cue the namespace holds).
    retire.get("cues", set()).difference_update({tag.cue_id for tag in change.tags})
    gone_events = retire.get("events", set()) - written["events"]
    topics = {t.id: t for t in merged.topics}
    for tid in sorted(retire.get("topics", set()) - written["topics"]):
        old = snap.topics.get(tid)
        if old is not None and set(old.members) & written["events"]:
            topics[tid] = old  # a member is written again: the topic stays
            retire["topics"].discard(tid)
    kept_topics = []
    for topic in topics.values():
        members = [m for m in topic.members if m not in gone_events]
        if members:
            kept_topics.append(topic.model_copy(update={"members": members}))
        elif topic.id in snap.topics:
            retire.setdefault("topics", set()).add(topic.id)
    merged.topics = kept_topics
    merged.relations = [r for r in merged.relations if r.source not in gone_events and r.target not in gone_events]
    merged.retire = {k: sorted(v) for k, v in retire.items() if v}
    own = change.session.session_id if change.session is not None else None
    merged.drop_sessions = [s for s in forgotten.drop_sessions if s != own]
    merged.forget = forgotten.forget
    return merged
