"""The registry of record kinds: each kind of memory record declared once, for every place that handles all of them.

The store (its collections, commits and snapshots), the snapshot file, backup and enrichment loop over
``RECORD_KINDS`` instead of listing kinds by hand; ``sources`` says which records each kind derives from, what
forgetting a turn has to follow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from logicmap.memory.records.r2 import FactRecord
from logicmap.memory.records.records import Cue, Event, Fact, Relation, Tag, Topic, Turn
from logicmap.memory.records.tombstones import Tombstone

__all__ = ["BY_FIELD", "BY_NAME", "RECORD_KINDS", "RecordKind", "Reference", "derived_from"]


@dataclass(frozen=True)
class Reference:
    """One field of a record that names records of another kind (``Event.turn_ids`` names turns)."""

    field: str
    target: str = "turn"  # the kind's ``name``
    when: Callable[[Any], bool] | None = None  # the field names ``target`` records only when this holds
    parse: Callable[[str], str] | None = None  # the target's id inside the field's value
    checked_in_backup: bool = True  # a backup refuses a file whose record cites a missing target

    def ids(self, record: Any) -> list[str]:
        """The ids this field of ``record`` names (none when ``when`` says it names another kind)."""
        if self.when is not None and not self.when(record):
            return []
        value = getattr(record, self.field)
        if value is None:
            return []
        ids = [value] if isinstance(value, str) else list(value)
        return [self.parse(i) for i in ids] if self.parse is not None else ids


@dataclass(frozen=True)
class RecordKind:
    """One kind of record and where it lives: its change-set/snapshot field, its vectors, its id."""

    name: str  # singular: a backup line's ``kind``
    field: str  # plural: the ChangeSet and NamespaceSnapshot field, the store's collection, a ``retire`` key
    model: type[BaseModel]
    vector_field: str | None = None  # the ChangeSet/NamespaceSnapshot field of its vectors (rows in record order)
    id_field: str = "id"
    centroid_field: str | None = None  # a vector kept inside the record itself (a topic's centroid)
    sources: tuple[Reference, ...] = ()  # the records it is derived from
    session_bound: bool = False  # its ``session_id`` must be one of the manifest's sessions
    optional_in_backup: bool = False  # added after backup format 1 was first written: older files do not count it

    @property
    def has_vectors(self) -> bool:
        """Whether the store keeps a real vector for it (else a placeholder, and ``query`` refuses the kind)."""
        return self.vector_field is not None or self.centroid_field is not None

    def record_id(self, record: BaseModel) -> str:
        return str(getattr(record, self.id_field))

    def stored_vectors(self, change: Any) -> list[Any] | None:
        """The vectors a commit of ``change`` stores with this kind's records (None: placeholders)."""
        if self.vector_field is not None:
            return list(getattr(change, self.vector_field))
        if self.centroid_field is not None:
            return [getattr(r, self.centroid_field) for r in getattr(change, self.field)]
        return None

    def references(self, record: Any) -> Iterator[tuple[Reference, list[str]]]:
        for ref in self.sources:
            yield ref, ref.ids(record)


def _targets_kind(kind: str) -> Callable[[Any], bool]:
    return lambda tag: tag.target_kind == kind


def _stated_in(person_fact_id: str) -> str:
    """The turn a person fact was stated in: its id is ``pf|<dia id>|<hash>`` (``memory.records.cues``)."""
    if not person_fact_id.startswith("pf|") or person_fact_id.count("|") < 2:
        return person_fact_id
    return person_fact_id[3:].rsplit("|", 1)[0]


# In the order records are written, snapshotted, exported and fingerprinted (do not reorder: backups and
# snapshot fingerprints list kinds in this order).
RECORD_KINDS: tuple[RecordKind, ...] = (
    RecordKind("turn", "turns", Turn, "turn_vectors", id_field="dia_id", session_bound=True),
    RecordKind("event", "events", Event, "event_vectors", sources=(Reference("turn_ids"),), session_bound=True),
    RecordKind(
        "relation",
        "relations",
        Relation,
        sources=(Reference("source", "event"), Reference("target", "event"), Reference("turn_ids")),
    ),
    RecordKind("topic", "topics", Topic, centroid_field="centroid", sources=(Reference("members", "event"),)),
    RecordKind("fact", "facts", Fact, "fact_vectors", sources=(Reference("turn_ids"),)),
    RecordKind("cue", "cues", Cue, "cue_vectors"),
    RecordKind(
        "tag",
        "tags",
        Tag,
        sources=(
            Reference("cue_id", "cue"),
            Reference("target_id", "event", when=_targets_kind("event")),
            Reference("target_id", "turn", when=_targets_kind("fact"), parse=_stated_in, checked_in_backup=False),
        ),
    ),
    # Memory-R2's managed fact memory (ingest with the r2 memory manager).
    RecordKind(
        "r2_fact", "r2_facts", FactRecord, "r2_fact_vectors", sources=(Reference("turn_ids"),), optional_in_backup=True
    ),
    # What forgets left: hashes of forgotten turns, never their text (``memory.records.tombstones``). Derived from nothing,
    # so a forget never retires one and a purge never removes one.
    RecordKind("tombstone", "tombstones", Tombstone, optional_in_backup=True),
)
BY_NAME: dict[str, RecordKind] = {kind.name: kind for kind in RECORD_KINDS}
BY_FIELD: dict[str, RecordKind] = {kind.field: kind for kind in RECORD_KINDS}


def derived_from(kind: RecordKind, record: Any) -> dict[str, list[str]]:
    """The records ``record`` derives from, by kind name: ``{"turn": [...], "event": [...]}`` (forgetting follows
    these links from a turn to everything built on it)."""
    found: dict[str, list[str]] = {}
    for ref, ids in kind.references(record):
        for rid in ids:
            if rid not in found.setdefault(ref.target, []):
                found[ref.target].append(rid)
    return {target: ids for target, ids in found.items() if ids}
