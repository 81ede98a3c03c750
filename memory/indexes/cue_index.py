"""Lookups of MRAgent's Cue-Tag-Content layer over a committed snapshot: by cue, by person and aspect, by event."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from logicmap.memory.indexes.cue_extraction import extract_cues, resolve_aspects
from logicmap.memory.records.cues import cue_key, fact_source_turn, normalize_cue
from logicmap.memory.records.records import Cue, Tag

if TYPE_CHECKING:
    from logicmap.memory.store import NamespaceSnapshot

__all__ = ["CueIndex", "PersonalFact"]


@dataclass
class PersonalFact:
    """A semantic fact about a person, gathered from the fact tags that share a target id."""

    id: str
    person: str
    aspects: list[str]
    content: str
    cues: list[str]
    turn_ids: list[str]


class CueIndex:
    """Lookups of the cue-tag layer of one committed snapshot (built once per snapshot)."""

    def __init__(self, snapshot: NamespaceSnapshot) -> None:
        self.snapshot = snapshot
        self.cues: dict[str, Cue] = dict(snapshot.cues)
        self.by_key: dict[str, Cue] = {cue_key(c.text): c for c in self.cues.values()}
        self.tags_by_cue: dict[str, list[Tag]] = defaultdict(list)
        self.tags_by_target: dict[str, list[Tag]] = defaultdict(list)
        fact_tags: dict[str, list[Tag]] = defaultdict(list)
        for tag in snapshot.tags.values():
            self.tags_by_cue[tag.cue_id].append(tag)
            self.tags_by_target[tag.target_id].append(tag)
            if tag.target_kind == "fact":
                fact_tags[tag.target_id].append(tag)
        self.facts: dict[str, PersonalFact] = {}
        self.people: dict[str, str] = {}
        # One sentence filed under several aspects is one fact with several aspects.
        same: dict[tuple[str, str, str], PersonalFact] = {}
        for fid, group in sorted(fact_tags.items()):
            first = group[0]
            person = first.person or ""
            turn = fact_source_turn(fid)
            cues = [self.cues[t.cue_id].text for t in group if t.cue_id in self.cues]
            key = (person.lower(), turn or fid, first.content or "")
            fact = same.get(key)
            if fact is None:
                fact = same[key] = self.facts[fid] = PersonalFact(
                    id=fid,
                    person=person,
                    aspects=[],
                    content=first.content or "",
                    cues=[],
                    turn_ids=[turn] if turn else [],
                )
            fact.aspects = list(dict.fromkeys([*fact.aspects, *(t.tag for t in group)]))
            fact.cues = list(dict.fromkeys([*fact.cues, *cues]))
            if person:
                self.people.setdefault(person.lower(), person)
        for cue in self.cues.values():
            if cue.kind == "person":
                self.people.setdefault(cue.text.lower(), cue.text)

    @classmethod
    def of(cls, snapshot: NamespaceSnapshot) -> CueIndex:
        """The index of a snapshot, cached on it (a snapshot never changes)."""
        return snapshot.derived(cls)

    def find_cues(self, text: str, limit: int = 5) -> list[tuple[Cue, float]]:
        """Cues matching a text: the same key (1.0), else word containment either way (share of words)."""
        key = cue_key(text)
        if not key:
            return []
        if key in self.by_key:
            exact = self.by_key[key]
            rest = [m for m in self._partial(key) if m[0].id != exact.id]
            return [(exact, 1.0), *rest][:limit]
        return self._partial(key)[:limit]

    def _partial(self, key: str) -> list[tuple[Cue, float]]:
        words = set(key.split())
        scored = []
        for stored, cue in self.by_key.items():
            other = set(stored.split())
            common = words & other
            if not common or not (common == words or common == other):
                continue
            scored.append((cue, len(common) / len(words | other)))
        scored.sort(key=lambda m: (-m[1], m[0].text))
        return scored

    def cues_in_text(self, text: str) -> list[Cue]:
        """Stored cues whose words appear, in order, in a text (how a question's cues are recognized)."""
        padded = f" {cue_key(text)} "
        hits = [cue for key, cue in self.by_key.items() if f" {key} " in padded]
        hits.sort(key=lambda c: (-len(normalize_cue(c.text)), c.text))
        return hits

    def cues_of_text(self, text: str, limit: int = 8) -> list[Cue]:
        """The stored cues a text (a question) points at: its own cues matched to stored ones, then
        stored cues it contains word for word. Persons come last: they lead to many events."""
        found: list[Cue] = []
        for cue in extract_cues(text, people=self.known_people()):
            found.extend(match for match, _ in self.find_cues(cue.text, limit=1))
        found.extend(self.cues_in_text(text))
        unique = list({c.id: c for c in found}.values())
        unique.sort(key=lambda c: c.kind == "person")
        return unique[:limit]

    def event_tags(self, cue: Cue, tag: str | None = None) -> list[Tag]:
        """Tags linking a cue to events, optionally only those whose label matches ``tag``."""
        found = [t for t in self.tags_by_cue.get(cue.id, []) if t.target_kind == "event"]
        if tag:
            wanted = cue_key(tag)
            aspects = set(resolve_aspects(tag))
            found = [
                t
                for t in found
                if cue_key(t.tag) == wanted or t.tag in aspects or (wanted and wanted in cue_key(t.tag))
            ]
        order = {eid: i for i, eid in enumerate(self.snapshot.events)}
        return sorted(found, key=lambda t: (order.get(t.target_id, len(order)), t.tag))

    def keywords_of(self, event_id: str) -> list[tuple[Cue, Tag]]:
        """The cues linked to an event and the tags that link them."""
        return [(self.cues[t.cue_id], t) for t in self.tags_by_target.get(event_id, []) if t.cue_id in self.cues]

    def find_person(self, person: str) -> str | None:
        """The stored spelling of a person's name (case-insensitive, possessive tolerated)."""
        wanted = normalize_cue(person)
        for key, name in self.people.items():
            if normalize_cue(key) == wanted:
                return name
        return None

    def person_facts(self, person: str, aspect: str | None = None) -> list[PersonalFact]:
        """Facts about a person (the person's own facts first, then facts that mention them)."""
        name = self.find_person(person) or person
        own = [f for f in self.facts.values() if f.person.lower() == name.lower()]
        key = normalize_cue(name)
        mentions = [f for f in self.facts.values() if f not in own and any(normalize_cue(c) == key for c in f.cues)]
        facts = own + mentions
        if aspect:
            wanted = set(resolve_aspects(aspect)) | {normalize_cue(aspect)}
            facts = [
                f
                for f in facts
                if wanted & {normalize_cue(a) for a in f.aspects} or wanted & set(resolve_aspects(" ".join(f.aspects)))
            ]
        return facts

    def aspects_of(self, person: str) -> list[str]:
        counts: dict[str, int] = defaultdict(int)
        for fact in self.person_facts(person):
            for aspect in fact.aspects:
                counts[aspect] += 1
        return sorted(counts, key=lambda a: (-counts[a], a))

    def known_people(self) -> list[str]:
        return sorted(self.people.values())
