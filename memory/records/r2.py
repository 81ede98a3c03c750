"""Memory-R2 fact memory: atomic text facts edited by ADD / UPDATE / DELETE / NOOP batches.

Edits are validated as a whole before they touch memory; UPDATE and DELETE are non-destructive;
snapshots are O(1) copy-on-write views so several rollouts can continue from an identical state.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from logicmap.memory.records.records import validate_namespace

__all__ = [
    "DECISION_ORDER",
    "CandidateFact",
    "EditOp",
    "EditReport",
    "FactEdit",
    "FactMemory",
    "FactRecord",
    "FactRevision",
    "InvalidEditBatch",
    "canonical_order",
    "fact_memory_from_records",
    "fact_memory_path",
    "fact_number",
    "load_fact_memory",
    "normalize_fact_text",
    "save_fact_memory",
]

EditOp = Literal["ADD", "UPDATE", "DELETE", "NOOP"]

# The manager lists its edits in this order. A fixed order gives one serialization per decision,
# which keeps GRPO completions comparable, and it is the order the edits are applied in.
DECISION_ORDER: tuple[str, ...] = ("ADD", "UPDATE", "DELETE", "NOOP")
_RANK = {op: i for i, op in enumerate(DECISION_ORDER)}

_FORMAT = "logicmap.r2-facts/1"
_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\s\"'.,;:!?]+|[\s\"'.,;:!?]+$")


def normalize_fact_text(text: str) -> str:
    """The form two texts are compared in for duplicates: case, spacing and edge punctuation ignored."""
    return _EDGE_PUNCT.sub("", _SPACE.sub(" ", text.casefold())).strip()


class CandidateFact(BaseModel):
    """A new fact the extractor produced, waiting for the manager's decision."""

    model_config = ConfigDict(frozen=True)

    text: str
    turn_ids: tuple[str, ...] = ()


class FactEdit(BaseModel):
    """One manager decision about new fact number ``fact``.

    ``id`` names the memory record an UPDATE or DELETE acts on (a NOOP may name the record that
    already holds the fact); ``text`` is the text an ADD stores or an UPDATE writes, by default the
    new fact's own text.
    """

    model_config = ConfigDict(frozen=True)

    op: EditOp
    fact: int
    id: str | None = None
    text: str | None = None


class FactRevision(BaseModel):
    """An earlier state of a record, kept when an UPDATE replaced it."""

    model_config = ConfigDict(frozen=True)

    text: str
    turn_ids: tuple[str, ...] = ()
    step: int = Field(description="The batch that wrote this text.")
    replaced_at: int = Field(description="The batch whose UPDATE replaced it.")
    replaced_in: str | None = Field(None, description="The session whose UPDATE replaced it (ingest).")


class FactRecord(BaseModel):
    """A fact in memory. Immutable: an edit installs a new version of the record."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    turn_ids: tuple[str, ...] = ()
    history: tuple[FactRevision, ...] = ()
    deleted: bool = False
    created_step: int = 0
    updated_step: int = 0
    deleted_step: int | None = None
    deleted_by: tuple[str, ...] = Field(default=(), description="Turns of the new fact that made it obsolete.")
    namespace: str | None = Field(None, description="The tenant whose memory holds it (set by the memory).")
    created_in: str | None = Field(None, description="The session whose ADD wrote it (ingest).")
    updated_in: str | None = Field(None, description="The session whose UPDATE last rewrote it (ingest).")
    deleted_in: str | None = Field(default=None, description="The session whose DELETE retired it (ingest).")

    def render(self) -> str:
        turns = f" [{', '.join(self.turn_ids)}]" if self.turn_ids else ""
        return f"{self.id}: {self.text}{turns}"


class EditReport(BaseModel):
    """What one applied batch did."""

    step: int
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    noop: int = 0


class InvalidEditBatch(ValueError):
    """An edit batch that failed validation; memory was not touched."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid edit batch: " + "; ".join(self.problems))


def _edited(table: dict[str, FactRecord], edit: FactEdit) -> FactRecord:
    """The fact an UPDATE or DELETE names (``validate`` has checked it names a live one)."""
    if edit.id is None:
        raise InvalidEditBatch([f"{edit.op} names no memory id"])
    return table[edit.id]


def canonical_order(edits: Iterable[FactEdit]) -> list[FactEdit]:
    """Edits sorted into the fixed decision order, then by new-fact number."""
    return sorted(edits, key=lambda e: (_RANK[e.op], e.fact))


def _union(first: Sequence[str], second: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*first, *second]))


class FactMemory:
    """A namespace's fact memory.

    The record table is never mutated in place: ``apply`` builds a new table and swaps it in. A
    snapshot therefore shares the table until one side writes (copy-on-write at O(1) snapshot
    cost), and edits in one snapshot can never appear in another.
    """

    def __init__(
        self,
        namespace: str = "default",
        records: Iterable[FactRecord] = (),
        *,
        step: int = 0,
        next_number: int | None = None,
    ) -> None:
        self.namespace = validate_namespace(namespace)
        self._records: dict[str, FactRecord] = {r.id: r for r in records}
        self.step = step
        numbers = [int(r.id[1:]) for r in self._records.values() if r.id[:1] == "F" and r.id[1:].isdigit()]
        self._next_number = next_number if next_number is not None else max(numbers, default=0) + 1

    # -- reading ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    @property
    def size(self) -> int:
        """Live (not deleted) facts: what the compression penalty counts."""
        return sum(1 for r in self._records.values() if not r.deleted)

    def get(self, fact_id: str) -> FactRecord | None:
        return self._records.get(fact_id)

    def records(self, *, include_deleted: bool = False) -> list[FactRecord]:
        """Records in creation order."""
        return [r for r in self._records.values() if include_deleted or not r.deleted]

    def live(self) -> list[FactRecord]:
        return self.records()

    def render(self) -> str:
        """The live facts as the manager reads them, one per line."""
        lines = [r.render() for r in self.live()]
        return "\n".join(lines) if lines else "(memory is empty)"

    # -- snapshots ----------------------------------------------------------------------------
    def snapshot(self) -> FactMemory:
        """An independent memory with the same state, sharing storage until either side writes."""
        clone = FactMemory.__new__(FactMemory)
        clone.namespace = self.namespace
        clone._records = self._records
        clone.step = self.step
        clone._next_number = self._next_number
        return clone

    def shares_storage_with(self, other: FactMemory) -> bool:
        return self._records is other._records

    # -- editing ------------------------------------------------------------------------------
    def validate(self, edits: Sequence[FactEdit], candidates: Sequence[CandidateFact]) -> list[str]:
        """Every problem of the batch, as text a model can act on. Empty when the batch may be applied."""
        problems: list[str] = []
        n = len(candidates)
        ranks = [_RANK[e.op] for e in edits]
        if ranks != sorted(ranks):
            problems.append(
                "edits are not in the fixed decision order: list all ADD edits first, then UPDATE, then "
                "DELETE, then NOOP"
            )
        # Memory-R2's manager procedure deletes every related memory a new fact contradicts and then decides
        # the fact itself once (NOOP, UPDATE or ADD): a fact may have several DELETEs, at most one other edit.
        per_fact: dict[int, int] = {}
        decided: dict[int, int] = {}
        for e in edits:
            per_fact[e.fact] = per_fact.get(e.fact, 0) + 1
            if e.op != "DELETE":
                decided[e.fact] = decided.get(e.fact, 0) + 1
        for index in sorted(per_fact):
            if not 0 <= index < n:
                problems.append(f"edit names new fact {index}, but new facts are numbered 0..{n - 1}")
            elif decided.get(index, 0) > 1:
                problems.append(
                    f"new fact {index} has {decided[index]} edits besides DELETE; give one ADD, UPDATE or NOOP per "
                    "new fact (plus a DELETE for each memory it contradicts)"
                )
        missing = [i for i in range(n) if i not in per_fact]
        if missing:
            problems.append(f"new facts {missing} have no edit; give every new fact its edit")

        live_texts = {normalize_fact_text(r.text): r.id for r in self._records.values() if not r.deleted}
        written: dict[str, str] = {}
        targeted: dict[str, str] = {}
        for e in edits:
            where = f"{e.op} for new fact {e.fact}"
            in_range = 0 <= e.fact < n
            text = e.text if e.text is not None else (candidates[e.fact].text if in_range else "")
            if e.op in ("UPDATE", "DELETE"):
                record = self._records.get(e.id) if e.id else None
                if not e.id:
                    problems.append(f"{where}: names no memory id")
                elif record is None:
                    problems.append(f"{where}: unknown memory id {e.id!r}")
                elif record.deleted:
                    problems.append(f"{where}: memory id {e.id!r} is already deleted")
                elif e.id in targeted:
                    problems.append(f"{where}: memory id {e.id!r} is already changed by {targeted[e.id]} in this batch")
                if e.id:
                    targeted.setdefault(e.id, where)
            elif e.op == "NOOP" and e.id is not None and e.id not in self._records:
                problems.append(f"{where}: unknown memory id {e.id!r}")
            if e.op in ("ADD", "UPDATE"):
                key = normalize_fact_text(text)
                if not key:
                    problems.append(f"{where}: empty text")
                    continue
                owner = live_texts.get(key)
                if owner is not None and not (e.op == "UPDATE" and owner == e.id):
                    problems.append(f"{where}: memory already holds this fact as {owner}; use NOOP")
                elif e.op == "UPDATE" and owner == e.id:
                    problems.append(f"{where}: the text of {e.id} would not change; use NOOP")
                if key in written:
                    problems.append(f"{where}: same text as {written[key]} in this batch")
                written.setdefault(key, where)
        return problems

    def apply(
        self, edits: Sequence[FactEdit], candidates: Sequence[CandidateFact], *, session_id: str | None = None
    ) -> EditReport:
        """Validate the whole batch, then apply it in decision order. Raises ``InvalidEditBatch``
        (memory untouched) when any edit is invalid: a batch is never half-applied. ``session_id`` (an
        ingest's session) is recorded on what the batch writes, replaces or deletes."""
        problems = self.validate(edits, candidates)
        if problems:
            raise InvalidEditBatch(problems)
        step = self.step + 1
        table = dict(self._records)  # never mutate the shared table: snapshots may be reading it
        number = self._next_number
        report = EditReport(step=step)
        for e in canonical_order(edits):
            candidate = candidates[e.fact]
            text = (e.text if e.text is not None else candidate.text).strip()
            if e.op == "ADD":
                fact_id = f"F{number}"
                number += 1
                table[fact_id] = FactRecord(
                    id=fact_id,
                    text=text,
                    turn_ids=candidate.turn_ids,
                    created_step=step,
                    updated_step=step,
                    namespace=self.namespace,
                    created_in=session_id,
                    updated_in=session_id,
                )
                report.added.append(fact_id)
            elif e.op == "UPDATE":
                old = _edited(table, e)
                revision = FactRevision(
                    text=old.text,
                    turn_ids=old.turn_ids,
                    step=old.updated_step,
                    replaced_at=step,
                    replaced_in=session_id,
                )
                table[old.id] = old.model_copy(
                    update={
                        "text": text,
                        "turn_ids": _union(old.turn_ids, candidate.turn_ids),
                        "history": (*old.history, revision),
                        "updated_step": step,
                        "updated_in": session_id,
                    }
                )
                report.updated.append(old.id)
            elif e.op == "DELETE":
                old = _edited(table, e)
                table[old.id] = old.model_copy(
                    update={
                        "deleted": True,
                        "deleted_step": step,
                        "deleted_by": candidate.turn_ids,
                        "deleted_in": session_id,
                    }
                )
                report.deleted.append(old.id)
            else:
                report.noop += 1
        self._records = table
        self._next_number = number
        self.step = step
        return report

    def changed_in(self, report: EditReport) -> list[FactRecord]:
        """The records an applied batch wrote (added, updated, deleted): what a store commit must write."""
        return [self._records[i] for i in dict.fromkeys([*report.added, *report.updated, *report.deleted])]

    # -- persistence --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "namespace": self.namespace,
            "step": self.step,
            "next_number": self._next_number,
            "records": [r.model_dump(mode="json") for r in self._records.values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FactMemory:
        if data.get("format") != _FORMAT:
            raise ValueError(f"not a fact memory (format {data.get('format')!r}, expected {_FORMAT!r})")
        return cls(
            data["namespace"],
            [FactRecord.model_validate(r) for r in data.get("records", [])],
            step=int(data.get("step", 0)),
            next_number=int(data["next_number"]) if "next_number" in data else None,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> FactMemory:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> Path:
        """Write atomically (temp file + rename), so a crash never leaves half a file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(self.to_dict(), out, ensure_ascii=False, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | Path) -> FactMemory:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def __repr__(self) -> str:
        return f"FactMemory(namespace={self.namespace!r}, live={self.size}, step={self.step})"


def fact_number(fact_id: str) -> int:
    """The number of an ``F<n>`` id (0 for any other id): records sort in creation order by it."""
    return int(fact_id[1:]) if fact_id[:1] == "F" and fact_id[1:].isdigit() else 0


def fact_memory_from_records(namespace: str, records: Iterable[FactRecord], *, step: int = 0) -> FactMemory:
    """A namespace's memory rebuilt from its stored records (any order), live and deleted ones, at ``step``."""
    ordered = sorted(records, key=lambda r: (fact_number(r.id), r.id))
    return FactMemory(namespace, ordered, step=step)


def fact_memory_path(data_dir: str | Path, namespace: str) -> Path:
    """Where a namespace's fact memory lives under the data directory (beside, not inside, Chroma)."""
    return Path(data_dir) / "r2_facts" / f"{validate_namespace(namespace)}.json"


def save_fact_memory(memory: FactMemory, data_dir: str | Path) -> Path:
    return memory.save(fact_memory_path(data_dir, memory.namespace))


def load_fact_memory(namespace: str, data_dir: str | Path) -> FactMemory:
    """The saved fact memory of a namespace, or an empty one when none was saved."""
    path = fact_memory_path(data_dir, namespace)
    return FactMemory.load(path) if path.exists() else FactMemory(namespace)
