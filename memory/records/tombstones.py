"""Tombstones: what a forget leaves behind so that forgotten memory does not come back.

A forget (``graphs.writes.forget.forget``) writes one ``Tombstone`` per turn it retires, in the same commit: a hash of the
turn's content and, for a chat message, its message key; never the text. ``add_messages``, a file ingest and
``import`` leave out every turn a tombstone of the namespace matches, unless the caller says ``allow_forgotten``;
a turn written anyway (deliberately) lifts the tombstones it matches in the commit that writes it, so a later
backup of the namespace restores it.

Tombstones are records of their namespace (the ``tombstone`` kind of ``memory.records.kinds``): scoped, snapshotted and
exported like every record, never retired by a forget and so never removed by a purge (a purge removes retired
versions: the text, not its tombstones). Deleting the namespace deletes them with everything else.

Matching (``Forgotten.matches``):

- content: SHA-256 of the turn's text (and image caption) after Unicode NFKC, case folding and collapsing runs of
  white space, so "I live in  Milan" matches "i live in Milan"; a turn of a file, a chat message and a backup's
  turn all match by content;
- message: a chat message (``Turn.role`` set) also by its key in memory, the ``M...`` dia id ``add_messages`` makes
  from the message's id (or, for a message without one, from its role, position and a hash of its text). A
  conversation file's dia ids (``D1:3``) are reused by every conversation, so a file's turns match by content only.

The content hash is not the text, but it is not secret from someone who can guess the exact text and reads the
data directory: they can confirm the guess. It never leaves the namespace's own records.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from logicmap.memory.files.loaders import Session
from logicmap.memory.records.records import Turn, stable_hash

__all__ = [
    "FORGOTTEN_NOTE",
    "Forgotten",
    "Tombstone",
    "content_hash",
    "message_key",
    "said_summary",
    "tombstones_for",
]

FORGOTTEN_NOTE = "forgotten (a tombstone matches; allow_forgotten / --allow-forgotten admits it)"
_SPACES = re.compile(r"\s+")
_DOMAIN = "logicmap-tombstone-v1\x1f"


class Tombstone(BaseModel):
    """A forgotten turn, as its namespace remembers it: hashes, never the text."""

    id: str
    namespace: str
    content: str = Field(description="'sha256:' and the hash of the turn's normalized text (content_hash)")
    message: str | None = Field(None, description="a chat message's key in memory (its M... dia id), else None")
    created_at: datetime | None = Field(
        None,
        description="when the forget left it (like every record's created_at, not part of a snapshot's fingerprint)",
    )


def content_hash(text: str, image_caption: str | None = None) -> str:
    """The hash a tombstone keeps of a turn's content (text and image caption, normalized; see the module)."""
    said = text if not image_caption else f"{text}\x1f{image_caption}"
    normal = _SPACES.sub(" ", unicodedata.normalize("NFKC", said).casefold()).strip()
    return "sha256:" + hashlib.sha256((_DOMAIN + normal).encode("utf-8")).hexdigest()


def message_key(turn: Turn) -> str | None:
    """A chat message's key in memory (its dia id as ``add_messages`` made it), None for a file's turn."""
    if turn.role is None:
        return None
    return turn.source_dia_id or turn.dia_id


def tombstones_for(turns: Iterable[Turn], namespace: str, *, at: datetime | None = None) -> list[Tombstone]:
    """One tombstone per forgotten turn (two turns with the same content and key share one)."""
    when = at or datetime.now(UTC)
    stones: dict[str, Tombstone] = {}
    for turn in turns:
        content, message = content_hash(turn.text, turn.image_caption), message_key(turn)
        sid = "x" + stable_hash(content, message or "", length=24)
        stones[sid] = Tombstone(id=sid, namespace=namespace, content=content, message=message, created_at=when)
    return list(stones.values())


@dataclass
class Forgotten:
    """A namespace's tombstones, indexed for matching turns against them."""

    by_content: dict[str, list[str]] = field(default_factory=dict)  # content hash -> tombstone ids
    by_message: dict[str, list[str]] = field(default_factory=dict)  # message key -> tombstone ids

    @classmethod
    def of(cls, tombstones: Mapping[str, Tombstone] | Iterable[Tombstone]) -> Forgotten:
        found = cls()
        for stone in tombstones.values() if isinstance(tombstones, Mapping) else tombstones:
            found.by_content.setdefault(stone.content, []).append(stone.id)
            if stone.message is not None:
                found.by_message.setdefault(stone.message, []).append(stone.id)
        return found

    def __bool__(self) -> bool:
        return bool(self.by_content)

    def matches(self, text: str, *, image_caption: str | None = None, message: str | None = None) -> list[str]:
        """The ids of the tombstones this content (and, for a chat message, its key) matches."""
        if not self.by_content:
            return []
        ids = list(self.by_content.get(content_hash(text, image_caption), []))
        if message is not None:
            ids += [i for i in self.by_message.get(message, []) if i not in ids]
        return ids

    def matches_turn(self, turn: Turn) -> list[str]:
        return self.matches(turn.text, image_caption=turn.image_caption, message=message_key(turn))

    def admitted(self, session: Session) -> Session:
        """The session without the turns a tombstone matches (itself when none does)."""
        if not self:
            return session
        kept = [
            raw
            for raw in session.turns
            if not self.matches(
                raw.text, image_caption=raw.image_caption, message=raw.dia_id if raw.role is not None else None
            )
        ]
        return session if len(kept) == len(session.turns) else session.model_copy(update={"turns": kept})

    def lifted(self, turns: Iterable[Turn]) -> list[str]:
        """The tombstones the given turns match: a commit that writes them (deliberately) retires these."""
        return sorted({sid for turn in turns for sid in self.matches_turn(turn)})


def said_summary(turns: Sequence[Turn]) -> str:
    """The no-LLM summary of an event, its turns as they were said: ``agents.segmenter.turns_summary``, which
    memory may not import (a test checks they agree). An import that leaves a forgotten turn out rebuilds the
    events that also cite kept turns with it, as ``forget`` does."""
    return " ".join(
        f"{t.speaker}: {t.text}" + (f" [image: {t.image_caption}]" if t.image_caption else "") for t in turns
    )
