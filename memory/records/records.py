"""Pydantic records of the memory model: turns, events, relations, topics, facts, cues and tags.

Every record carries its namespace and the turns it came from; ids are deterministic.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, field_validator, model_serializer

__all__ = [
    "Cue",
    "DatePrecision",
    "Event",
    "Fact",
    "FactIntent",
    "Relation",
    "SessionFallback",
    "SessionInfo",
    "Tag",
    "Topic",
    "Turn",
    "distinct_turn_id",
    "drop_empty_item",
    "event_id",
    "relation_id",
    "stable_hash",
    "validate_namespace",
]

# Matched against the whole string (``fullmatch``): with ``match`` and ``$`` a trailing newline passed,
# and "acme\n" would be stored apart from "acme" yet print like it. ASCII classes only, so no lookalikes.
_NAMESPACE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}")


def validate_namespace(namespace: object) -> str:
    """Return the namespace if it is a well-formed name, else raise ``ValueError``. A store namespace tuple of
    strings (``("memories", "alice")``) is told the name it maps to (``"memories.alice"``)."""
    if not isinstance(namespace, str) or not _NAMESPACE_RE.fullmatch(namespace):
        shown = repr(namespace)
        if len(shown) > 80:  # a megabyte of "namespace" should not become a megabyte of error
            shown = f"{shown[:60]}... ({len(shown)} characters)"
        if isinstance(namespace, tuple | list) and namespace and all(isinstance(p, str) for p in namespace):
            joined = ".".join(namespace)
            if _NAMESPACE_RE.fullmatch(joined):
                raise ValueError(
                    f"invalid namespace {shown}: a namespace is one string; pass {joined!r} (the "
                    "name LogicMapStore gives this namespace tuple)"
                )
        raise ValueError(
            f"invalid namespace {shown}: use 1-128 characters from ASCII letters, digits and _ . : @ -, "
            "starting with a letter or digit"
        )
    return namespace


def drop_empty_item(data: Any) -> Any:
    """A dumped turn without its ``item`` key when it holds no store item (records and content hashes of turns
    written before store items existed stay byte-identical)."""
    if isinstance(data, dict) and data.get("item", 0) is None:
        data.pop("item")
    return data


def stable_hash(*parts: str, length: int = 12) -> str:
    """Short deterministic hash of the parts (ids, cache keys)."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:length]


def distinct_turn_id(dia_id: str, session_id: str, taken: Container[str]) -> str:
    """A turn id for ``dia_id`` of session ``session_id`` that is not in ``taken``: ``<dia id>@<session id>``
    (a hash stands for a long session id), then ``#2``, ``#3``... until one is free.

    Used when another session already holds ``dia_id`` in the namespace: a stored turn is never overwritten.
    """
    base = f"{dia_id}@{session_id if len(session_id) <= 40 else stable_hash(session_id, length=12)}"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}#{n}"
    return candidate


def event_id(session_id: str, index: int) -> str:
    """Readable, deterministic event id: ``S3-E2`` is the second event segmented from session S3."""
    return f"{session_id}-E{index}"


def relation_id(source: str, label: str, target: str) -> str:
    return f"{source}|{label}|{target}"


class Turn(BaseModel):
    """One utterance: the source of truth every other record cites."""

    namespace: str
    session_id: str
    dia_id: str
    speaker: str
    text: str
    image_caption: str | None = None
    session_time: datetime | None = None
    session_time_text: str | None = None
    position: int = Field(0, description="Order of the turn within the whole conversation.")
    source_dia_id: str | None = Field(
        None, description="The dia id in the source when another session already held it (then dia_id is distinct)."
    )
    item: dict[str, Any] | None = Field(
        None,
        description="The store item this turn holds (``LogicMapStore.put``: its key, JSON value and times); "
        "left out of the record when None, so turns without one serialize as before.",
    )

    @model_serializer(mode="wrap")
    def _without_empty_item(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_empty_item(handler(self))

    # Chat turns only (``add_messages``, the chatbot); a conversation file's turns leave them unset, and unset
    # fields are left out of the record's JSON, so records and content hashes written before them are unchanged.
    role: Literal["user", "assistant"] | None = Field(
        default=None, exclude_if=lambda v: v is None, description="Who said it in a chat: the user, or the assistant."
    )
    model_written: bool = Field(
        default=False, exclude_if=lambda v: not v, description="Written by a chat model (an assistant's reply)."
    )
    evidence: bool = Field(
        default=True,
        exclude_if=lambda v: v,
        description="Whether recall may return it: False for a user's question (kept as the context of the reply "
        "that follows it) and for a model's reply not trusted as evidence (add_messages' trust_assistant).",
    )
    said_at: datetime | None = Field(
        default=None, exclude_if=lambda v: v is None, description="When the message was sent (chat turns)."
    )

    @property
    def id(self) -> str:
        return self.dia_id

    def answers(self, previous: Turn | None) -> bool:
        """Whether this turn is the reply of an adjacency pair: ``previous`` asks a question and another
        speaker answers it ("What did you get her?" / "A vintage film camera.")."""
        return previous is not None and previous.speaker != self.speaker and previous.text.rstrip().endswith("?")

    def render(self) -> str:
        """The turn as a line a model or a person reads."""
        line = f"[{self.dia_id}] {self.speaker}: {self.text}"
        if self.image_caption:
            line += f" [shares an image: {self.image_caption}]"
        return line


class Event(BaseModel):
    """A segment of conversation summarised as something that happened, with when and who."""

    id: str
    namespace: str
    session_id: str
    summary: str
    time: str | None = Field(None, description="Absolute ISO date when stated or derivable.")
    time_phrase: str | None = Field(None, description="The phrase the time came from, e.g. 'last year'.")
    session_time: datetime | None = None
    order: int = Field(0, description="Relative order of the event within the namespace.")
    participants: list[str] = Field(default_factory=list)
    turn_ids: list[str] = Field(default_factory=list)
    sessions: list[str] = Field(default_factory=list, description="Sessions merged into this event.")
    source: str = Field("llm", description="Which policy produced it: llm, heuristic or fallback.")
    created_at: datetime | None = None

    @field_validator("participants")
    @classmethod
    def _at_most_three(cls, value: list[str]) -> list[str]:
        if len(value) <= 3 and len(set(value)) == len(value) and all(p and p == p.strip() for p in value):
            return value  # already clean (every stored event): no new list
        return list(dict.fromkeys(p.strip() for p in value if p and p.strip()))[:3]

    def render(self) -> str:
        when = self.time or (self.session_time.date().isoformat() if self.session_time else "undated")
        return f"({self.id}, {when}) {self.summary}"


class Relation(BaseModel):
    """A typed, directed relation between two events, with the turns that support it."""

    id: str
    namespace: str
    source: str
    target: str
    label: str
    turn_ids: list[str] = Field(default_factory=list)
    session_id: str | None = None


class Topic(BaseModel):
    """A topic of the topic layer: centroid and member events, and (MRAgent, Eq. 18) the abstraction of its events.

    ``label`` and ``description`` are written by the topic abstractor at ingest (the paper's "Topic description"
    of a coherent set of episodes); ``label_source`` says who wrote them (``llm``, or ``fallback``: the key terms
    of the most central events). Unset fields stay out of the dump, so topics without them (every topic written
    before they existed, every topic of the no-LLM policy) keep byte-identical records and backups.
    """

    id: str
    namespace: str
    centroid: list[float]
    members: list[str] = Field(default_factory=list)
    label: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="A short name for what the topic's events share (at most a few words).",
    )
    description: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="One or two sentences summarising the recurring pattern of its events.",
    )
    label_source: Literal["llm", "fallback"] | None = Field(
        default=None, exclude_if=lambda v: v is None, description="Who abstracted the label: llm or fallback."
    )


FactIntent = Literal["FACT", "CAUSAL", "TEMPORAL", "CONTRAST", "EVOLUTION"]
DatePrecision = Literal["day", "month", "year"]


class Fact(BaseModel):
    """A temporal, confidence-aware atomic fact (REAL)."""

    id: str
    namespace: str
    head: str
    relation: str
    tail: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    # How much of each end was stated: "2023-04" is April 2023, not 1 April (the datetime holds the start).
    from_precision: DatePrecision = "day"
    to_precision: DatePrecision = "day"
    confidence: float = 1.0
    intent: FactIntent = "FACT"
    cardinality: Literal["single", "multi"] = "multi"
    turn_ids: list[str] = Field(default_factory=list)
    history: list[dict[str, object]] = Field(default_factory=list)


class Cue(BaseModel):
    """A verbatim keyword (entity, place, time, activity) that leads to events and facts (MRAgent)."""

    id: str
    namespace: str
    text: str
    kind: str = "entity"


class Tag(BaseModel):
    """A short label linking a cue to an event or to a semantic fact about a person (MRAgent)."""

    id: str
    namespace: str
    cue_id: str
    tag: str
    target_kind: Literal["event", "fact"] = "event"
    target_id: str
    person: str | None = None
    content: str | None = None


class SessionFallback(BaseModel):
    """A role that fell back while a session was built: which, why, the error it got, how many calls."""

    role: str
    reason: str
    errors: list[str] = Field(
        default_factory=list, description="The first errors the role got (model or provider text)."
    )
    calls: int = Field(1, description="How many of the role's calls (windows of the session) fell back.")

    @property
    def first_error(self) -> str:
        """The first line of the first error (the reason when there is none)."""
        return (self.errors[0].strip().splitlines() or [self.reason])[0] if self.errors else self.reason


class SessionInfo(BaseModel):
    """What the manifest remembers of a committed session."""

    session_id: str
    content_hash: str
    generation: int
    policy: str = Field(description="llm, or heuristic: built without a model by choice (not a fallback).")
    events: int = 0
    relations: int = 0
    fallbacks: list[SessionFallback] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="What the build had to adapt, e.g. clipped turns.")
    memory_manager: str | None = Field(
        None, description="'r2' when the Memory-R2 manager maintained the namespace's R2 fact memory in this session."
    )
    redone_with: str | None = Field(
        None,
        description="the chat model whose --redo-fallbacks pass rebuilt this session (None: never rebuilt); a "
        "pass with that model does not rebuild it again, so an interrupted pass resumes where it stopped",
    )
    pending: bool = Field(
        default=False,
        exclude_if=lambda v: not v,
        description="written by a fast write and not consolidated yet (only in a live view, ``memory.store.live``: "
        "a committed manifest never holds one)",
    )

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _legacy_fallbacks(cls, value: object) -> object:
        """Manifests written before fallbacks were structured hold ``"role: reason"`` strings."""
        if not isinstance(value, list):
            return value
        out = []
        for item in value:
            if isinstance(item, str):
                role, _, reason = item.partition(": ")
                item = {"role": role.strip() or "unknown", "reason": reason.strip() or item}
            out.append(item)
        return out
