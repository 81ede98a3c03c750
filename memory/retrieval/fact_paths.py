"""The facts REAL searches, as a graph: the fact index, evidence paths over it, and the neighbour filter.

``FactIndex`` indexes a namespace's facts by head, tail and cited turn; a ``FactPath`` is a chain of facts
from a root entity; ``SearchFilter`` admits a neighbour by time validity, confidence and intent. No model
here: the roles that plan, score and answer over these live in ``agents/real.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from logicmap.memory.language.timeparse import parse_date
from logicmap.memory.records.facts import STABLE_CONFIDENCE, entity_key, interval_text, valid_during
from logicmap.memory.records.records import Fact, FactIntent, stable_hash
from logicmap.memory.runtime.deadline import check_deadline

__all__ = [
    "INTENT_COMPATIBILITY",
    "PAPER_INTENT_COMPATIBILITY",
    "FactIndex",
    "FactPath",
    "SearchFilter",
    "path_text",
    "reference_window",
    "render_paths",
]

# Which fact intents a beam's exploration intent may traverse. CAUSAL facts only serve "why"
# questions and CONTRAST facts only comparisons. A causal beam follows causes and what comes before
# or after them (dated events, changes of state), not plain attributes: a "why" is not answered by a
# favourite food. The causality repair rule can still reach a causal fact from any beam.
INTENT_COMPATIBILITY: dict[str, frozenset[str]] = {
    "FACT": frozenset({"FACT", "TEMPORAL", "EVOLUTION"}),
    "CAUSAL": frozenset({"CAUSAL", "TEMPORAL", "EVOLUTION"}),
    "TEMPORAL": frozenset({"TEMPORAL", "EVOLUTION", "FACT"}),
    "CONTRAST": frozenset({"CONTRAST", "FACT", "EVOLUTION"}),
    "EVOLUTION": frozenset({"EVOLUTION", "TEMPORAL", "FACT"}),
}

# REAL's ``faithful`` configuration: the paper's own example of the rule (III-B2, "for a causal intent, only
# edges labeled CAUSAL are allowed") read literally, so a causal beam follows CAUSAL facts only; the other
# intents keep the project's table (the paper gives no further entry; its temporal example, "edges labeled
# TEMPORAL are retained", does not say "only").
PAPER_INTENT_COMPATIBILITY: dict[str, frozenset[str]] = {**INTENT_COMPATIBILITY, "CAUSAL": frozenset({"CAUSAL"})}


class FactIndex:
    """Facts of a namespace indexed by head, tail and cited turn: the graph the beam search walks."""

    def __init__(self, facts: Mapping[str, Fact]) -> None:
        self.facts: dict[str, Fact] = dict(facts)
        self.by_head: dict[str, list[Fact]] = {}
        self.by_tail: dict[str, list[Fact]] = {}
        self.by_turn: dict[str, list[Fact]] = {}
        self.names: dict[str, str] = {}
        for count, fact in enumerate(sorted(self.facts.values(), key=lambda f: (f.valid_from or datetime.min, f.id))):
            if not count % 256:
                check_deadline("while indexing facts")
            head, tail = entity_key(fact.head), entity_key(fact.tail)
            self.by_head.setdefault(head, []).append(fact)
            self.by_tail.setdefault(tail, []).append(fact)
            self.names.setdefault(head, fact.head)
            self.names.setdefault(tail, fact.tail)
            for turn in fact.turn_ids:
                self.by_turn.setdefault(turn, []).append(fact)

    def __len__(self) -> int:
        return len(self.facts)

    def name(self, key: str) -> str:
        return self.names.get(entity_key(key), key)

    def resolve(self, name: str) -> str | None:
        """The known entity key a name refers to (exact key, else a unique key containing it)."""
        key = entity_key(name)
        if key in self.names:
            return key
        containing = [k for k in self.names if re.search(rf"\b{re.escape(key)}\b", k)] if key else []
        return containing[0] if len(containing) == 1 else None

    def outgoing(self, entity: str) -> list[Fact]:
        return list(self.by_head.get(entity_key(entity), []))

    def incoming(self, entity: str) -> list[Fact]:
        return list(self.by_tail.get(entity_key(entity), []))

    def versions(self, fact: Fact) -> list[Fact]:
        """Other versions of the same attribute (same head and relation), in time order."""
        return [
            f for f in self.by_head.get(entity_key(fact.head), []) if f.relation == fact.relation and f.id != fact.id
        ]

    def sharing_turns(self, turn_ids: Sequence[str]) -> list[Fact]:
        seen: dict[str, Fact] = {}
        for turn in turn_ids:
            for fact in self.by_turn.get(turn, []):
                seen.setdefault(fact.id, fact)
        return list(seen.values())

    def related_entities(self, entity: str) -> list[str]:
        """Hypernyms and hyponyms by name: keys that contain the entity's words, or share its head noun."""
        key = entity_key(entity)
        words = set(key.split())
        if not words:
            return []
        last = key.split()[-1]
        found = []
        for other in self.names:
            if other == key:
                continue
            other_words = other.split()
            if words <= set(other_words) or set(other_words) <= words or (len(last) > 3 and other_words[-1] == last):
                found.append(other)
        return found

    def entities(self) -> list[str]:
        """Entity names, heads (the people and things facts are about) first, by number of facts."""
        heads = sorted(self.by_head, key=lambda k: (-len(self.by_head[k]), k))
        tails = sorted((k for k in self.by_tail if k not in self.by_head), key=lambda k: (-len(self.by_tail[k]), k))
        return [self.names[k] for k in [*heads, *tails]]

    def latest_time(self) -> datetime | None:
        times = [t for f in self.facts.values() for t in (f.valid_from, f.valid_to) if t is not None]
        return max(times) if times else None


class FactPath(BaseModel):
    """A chain of facts from a root entity; ``directions[i]`` says whether fact i was walked head->tail."""

    id: str
    root: str
    intent: FactIntent = "FACT"
    nodes: list[str]
    fact_ids: list[str] = Field(default_factory=list)
    directions: list[Literal["out", "in"]] = Field(default_factory=list)
    parent: str | None = None
    hypothesis: str | None = None
    similarity: float = 0.0
    relevance: float | None = None
    coherence: float | None = None
    sufficiency: float | None = None
    score: float | None = None
    step: int = 0

    @property
    def end(self) -> str:
        return self.nodes[-1]

    @property
    def depth(self) -> int:
        return len(self.fact_ids)

    @classmethod
    def start(cls, root: str, intent: FactIntent) -> FactPath:
        return cls(id=f"root-{stable_hash(entity_key(root), intent, length=8)}", root=root, intent=intent, nodes=[root])

    def extend(
        self, fact: Fact, direction: Literal["out", "in"], *, hypothesis: str | None = None, step: int = 0
    ) -> FactPath:
        target = fact.tail if direction == "out" else fact.head
        fact_ids = [*self.fact_ids, fact.id]
        return FactPath(
            id=f"path-{stable_hash(entity_key(self.root), self.intent, *fact_ids, length=10)}",
            root=self.root,
            intent=self.intent,
            nodes=[*self.nodes, target],
            fact_ids=fact_ids,
            directions=[*self.directions, direction],
            parent=self.id,
            hypothesis=hypothesis or self.hypothesis,
            step=step,
        )

    def passes(self, relevance_threshold: float, coherence_threshold: float) -> bool:
        return (self.relevance or 0.0) >= relevance_threshold and (self.coherence or 0.0) >= coherence_threshold


def path_text(path: FactPath, index: FactIndex) -> str:
    """The path as one readable line: each fact with relation, validity interval and confidence."""
    parts = [path.nodes[0]]
    for fact_id, direction, previous, node in zip(
        path.fact_ids, path.directions, path.nodes, path.nodes[1:], strict=False
    ):
        fact = index.facts[fact_id]
        near = fact.head if direction == "out" else fact.tail
        if entity_key(near) != entity_key(previous):
            parts.append(f"~ {near}")  # a repair hop through a related entity, not a stored edge
        label = f"{fact.relation} {interval_text(fact)} conf {fact.confidence:.2f}"
        parts.append(f"-[{label}]-> {node}" if direction == "out" else f"<-[{label}]- {node}")
    return " ".join(parts)


def render_paths(paths: Sequence[FactPath], index: FactIndex, labels: Sequence[str]) -> str:
    lines = []
    for label, path in zip(labels, paths, strict=True):
        hypothesis = f" (repair: {path.hypothesis})" if path.hypothesis else ""
        lines.append(f"{label}: {path_text(path, index)}{hypothesis}")
    return "\n".join(lines)


@dataclass
class SearchFilter:
    """Neighbour filter: time validity in the reference window, stable confidence, intent compatibility."""

    window: tuple[datetime | None, datetime | None] | None = None
    min_confidence: float = STABLE_CONFIDENCE
    include_uncertain: bool = False
    compatibility: Mapping[str, frozenset[str]] = field(default_factory=lambda: INTENT_COMPATIBILITY)
    """Which fact intents each beam intent may traverse: the project's table, or the paper's
    (``PAPER_INTENT_COMPATIBILITY``, REAL's ``faithful``)."""

    def admits(self, fact: Fact, intent: str, *, relax_time: bool = False, relax_intent: bool = False) -> bool:
        if not self.include_uncertain and fact.confidence < self.min_confidence:
            return False
        if not relax_intent and fact.intent not in self.compatibility.get(intent, self.compatibility["FACT"]):
            return False
        if not relax_time and self.window is not None and not valid_during(fact, *self.window):
            return False
        return True


def reference_window(reference: str | None, latest: datetime | None) -> tuple[datetime | None, datetime | None] | None:
    """The ``[start, end)`` window a reference time means; ``now`` is the latest known time; ``None``: no filter."""
    if not reference:
        return None
    text = reference.strip().lower()
    if text == "now":
        return (latest, None) if latest else None
    stated = parse_date(text)
    return (stated.start, stated.end) if stated is not None else None
