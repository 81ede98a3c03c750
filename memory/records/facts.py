"""REAL's fact layer: cardinality-aware, non-destructive updates of temporal facts and as-of queries.

Pure functions over ``Fact`` records: nothing here reads or writes the store, and nothing is deleted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

from logicmap.memory.language.timeparse import parse_date
from logicmap.memory.records.records import DatePrecision, Fact, FactIntent, stable_hash

__all__ = [
    "ASSERTED_CONFIDENCE",
    "DEFAULT_CARDINALITY",
    "FACT_INTENTS",
    "HEDGED_CONFIDENCE",
    "INFERRED_CONFIDENCE",
    "RELATION_ALIASES",
    "STABLE_CONFIDENCE",
    "Cardinality",
    "FactDecision",
    "FactUpdate",
    "apply_fact_updates",
    "attribute_history",
    "combine_confidence",
    "describe_facts",
    "entity_key",
    "fact_id",
    "fact_text",
    "facts_as_of",
    "interval_text",
    "make_fact",
    "normalize_relation",
    "parse_when",
    "relation_cardinality",
    "render_fact",
    "valid_at",
    "valid_during",
    "when_precision",
    "when_text",
]

Cardinality = Literal["single", "multi"]
FACT_INTENTS: tuple[FactIntent, ...] = ("FACT", "CAUSAL", "TEMPORAL", "CONTRAST", "EVOLUTION")

# REAL's "stable" confidence: a fact below it is shown to the search only when the question asks
# for uncertain information. Assertions start above it, hedged statements below it.
STABLE_CONFIDENCE = 0.8
ASSERTED_CONFIDENCE = 0.9
INFERRED_CONFIDENCE = 0.7
HEDGED_CONFIDENCE = 0.6

# The relation schema the extractors share (general profile relations, as the LLM prompt lists them; entries
# once named after the sample's sentences are gone). Single-valued relations hold one value at a time: a new value closes the old one's interval.
# Anything not listed (and not hinted by the extractor) is multi-valued, the safe default: a
# parallel fact never hides another one.
DEFAULT_CARDINALITY: dict[str, Cardinality] = {
    # single
    "lives_in": "single",
    "home_in": "single",
    "works_at": "single",
    "occupation": "single",
    "married_to": "single",
    "engaged_to": "single",
    "dating": "single",
    "relationship_status": "single",
    "age": "single",
    "birthday": "single",
    "born_in": "single",
    "nationality": "single",
    "favourite_food": "single",
    "favourite_drink": "single",
    "favourite_color": "single",
    "favourite_book": "single",
    "favourite_movie": "single",
    "studies_at": "single",
    "current_goal": "single",
    # multi
    "likes": "multi",
    "dislikes": "multi",
    "visited": "multi",
    "has_pet": "multi",
    "adopted": "multi",
    "friend_of": "multi",
    "sibling": "multi",
    "sister": "multi",
    "brother": "multi",
    "child": "multi",
    "parent": "multi",
    "hobby": "multi",
    "plays": "multi",
    "owns": "multi",
    "speaks": "multi",
    "drinks": "multi",
    "eats": "multi",
    "wants": "multi",
    "plans": "multi",
    "started": "multi",
    "finished": "multi",
    "signed_up_for": "multi",
    "is_a": "multi",
    "helped": "multi",
    "decided_because": "multi",
}

# Spellings extractors use for the same relation; the canonical name decides cardinality and ids.
RELATION_ALIASES: dict[str, str] = {
    "live_in": "lives_in",
    "lives_at": "lives_in",
    "resides_in": "lives_in",
    "residence": "lives_in",
    "home_city": "lives_in",
    "city_of_residence": "lives_in",
    "moved_to": "lives_in",
    "work_at": "works_at",
    "works_for": "works_at",
    "employed_at": "works_at",
    "employed_by": "works_at",
    "employer": "works_at",
    "job": "occupation",
    "profession": "occupation",
    "works_as": "occupation",
    "is_married_to": "married_to",
    "spouse": "married_to",
    "favorite_food": "favourite_food",
    "favorite_drink": "favourite_drink",
    "favorite_color": "favourite_color",
    "favorite_book": "favourite_book",
    "favorite_movie": "favourite_movie",
    "like": "likes",
    "love": "likes",
    "loves": "likes",
    "enjoys": "likes",
    "dislike": "dislikes",
    "hates": "dislikes",
    "visit": "visited",
    "has_dog": "has_pet",
    "has_cat": "has_pet",
    "owns_pet": "has_pet",
    "pet": "has_pet",
    "hobbies": "hobby",
    "has_sister": "sister",
    "has_brother": "brother",
    "type_of": "is_a",
    "kind_of": "is_a",
    "instance_of": "is_a",
    "lived_in": "lives_in",
    "moved_into": "lives_in",
    "work_as": "occupation",
    "worked_at": "works_at",
    "enjoy": "likes",
    "want": "wants",
    "want_to": "wants",
    "wanted": "wants",
    "wanted_to": "wants",
    "plan_to": "plans",
    "hope_to": "wants",
    "drink": "drinks",
}

_ARTICLES = re.compile(r"^(?:the|a|an|my|his|her|their|our)\s+", re.IGNORECASE)
_NON_WORD = re.compile(r"[^a-z0-9']+")


def normalize_relation(text: str) -> str:
    """``"Lives in"`` -> ``lives_in``; known aliases map to one canonical name."""
    rel = _NON_WORD.sub("_", (text or "").strip().lower()).strip("_").replace("'", "")
    return RELATION_ALIASES.get(rel, rel) or "related_to"


@lru_cache(maxsize=65536)  # fact updates compare every fact of a (head, relation) group: keys repeat
def entity_key(text: str) -> str:
    """The comparison key of an entity: lowercase, no leading article, single spaces, no punctuation."""
    value = re.sub(r"\s+", " ", (text or "").strip().lower())
    value = _ARTICLES.sub("", value)
    value = re.sub(r"[^\w\s'-]", "", value).strip()
    return value


def relation_cardinality(
    relation: str, table: Mapping[str, Cardinality] | None = None, hint: str | None = None
) -> Cardinality:
    """Cardinality from the table, else the extractor's hint, else multi (unknown is multi-valued)."""
    rel = normalize_relation(relation)
    known = (table if table is not None else DEFAULT_CARDINALITY).get(rel)
    if known:
        return known
    return "single" if hint == "single" else "multi"


def fact_id(namespace: str, head: str, relation: str, tail: str, episode: int = 0) -> str:
    """Deterministic id of a triple; ``episode`` counts re-openings of a triple after it was closed."""
    digest = stable_hash(namespace, entity_key(head), normalize_relation(relation), entity_key(tail), length=12)
    return f"F-{digest}" if episode == 0 else f"F-{digest}-{episode}"


def combine_confidence(old: float, new: float) -> float:
    """Noisy-or of two independent supports: a confirmation never lowers confidence."""
    old, new = min(max(old, 0.0), 1.0), min(max(new, 0.0), 1.0)
    return round(1.0 - (1.0 - old) * (1.0 - new), 4)


def parse_when(value: Any) -> datetime | None:
    """The first moment of a date as stated (a datetime, a date, ``YYYY``, ``YYYY-MM``, ``May 2023``, a
    session timestamp; ``timeparse.parse_date``), else ``None``."""
    parsed = parse_date(value)
    return parsed.start if parsed is not None else None


def when_precision(value: Any) -> DatePrecision:
    """How much of a date ``value`` states: ``2023`` a year, ``2023-05`` or ``May 2023`` a month, else a day."""
    parsed = parse_date(value) if isinstance(value, str) else None
    return parsed.precision if parsed is not None else "day"


def make_fact(
    namespace: str,
    head: str,
    relation: str,
    tail: str,
    *,
    valid_from: Any = None,
    valid_to: Any = None,
    confidence: float = ASSERTED_CONFIDENCE,
    intent: FactIntent = "FACT",
    turn_ids: Sequence[str] = (),
    cardinality: Cardinality | None = None,
    table: Mapping[str, Cardinality] | None = None,
    episode: int = 0,
) -> Fact:
    """A new fact record with a deterministic id and cardinality from the table."""
    rel = normalize_relation(relation)
    return Fact(
        id=fact_id(namespace, head, rel, tail, episode),
        namespace=namespace,
        head=head.strip(),
        relation=rel,
        tail=tail.strip(),
        valid_from=parse_when(valid_from),
        valid_to=parse_when(valid_to),
        from_precision=when_precision(valid_from),
        to_precision=when_precision(valid_to),
        confidence=round(min(max(confidence, 0.0), 1.0), 4),
        intent=intent,
        cardinality=relation_cardinality(rel, table, cardinality),
        turn_ids=list(dict.fromkeys(turn_ids)),
    )


# -- time ---------------------------------------------------------------------------------------


def valid_at(fact: Fact, when: Any) -> bool:
    """Whether the fact holds at ``when`` (``valid_from <= when < valid_to``; open ends are unbounded)."""
    moment = parse_when(when)
    if moment is None:
        return True
    if fact.valid_from is not None and fact.valid_from > moment:
        return False
    return fact.valid_to is None or moment < fact.valid_to


def valid_during(fact: Fact, start: Any, end: Any = None) -> bool:
    """Whether the fact's interval overlaps ``[start, end)``; without ``end`` it is ``valid_at(start)``."""
    lo, hi = parse_when(start), parse_when(end)
    if hi is None:
        return valid_at(fact, lo)
    if lo is None:
        return fact.valid_from is None or fact.valid_from < hi
    if fact.valid_from is not None and fact.valid_from >= hi:
        return False
    return fact.valid_to is None or fact.valid_to > lo


def _facts_of(source: Any) -> list[Fact]:
    records = getattr(source, "facts", source)
    if isinstance(records, Mapping):
        return list(records.values())
    return list(records)


def facts_as_of(
    source: Any,
    when: Any,
    *,
    head: str | None = None,
    relation: str | None = None,
    min_confidence: float = 0.0,
) -> list[Fact]:
    """Facts valid at ``when`` from a ``NamespaceSnapshot``, a dict of facts or a list, ordered by time."""
    head_key = entity_key(head) if head else None
    rel = normalize_relation(relation) if relation else None
    found = [
        f
        for f in _facts_of(source)
        if valid_at(f, when)
        and f.confidence >= min_confidence
        and (head_key is None or entity_key(f.head) == head_key)
        and (rel is None or f.relation == rel)
    ]
    return sorted(found, key=_time_order)


def attribute_history(source: Any, head: str, relation: str) -> list[Fact]:
    """Every version of one attribute (head + relation), oldest first, closed and open alike."""
    head_key, rel = entity_key(head), normalize_relation(relation)
    found = [f for f in _facts_of(source) if entity_key(f.head) == head_key and f.relation == rel]
    return sorted(found, key=_time_order)


def _time_order(fact: Fact) -> tuple[datetime, datetime, str]:
    return (fact.valid_from or datetime.min, fact.valid_to or datetime.max, fact.id)


def when_text(moment: datetime | None, precision: DatePrecision = "day") -> str | None:
    """A fact time as stated: ``2023``, ``2023-04``, ``2023-04-24`` or ``2023-04-24T18:30``."""
    if moment is None:
        return None
    if precision == "year":
        return f"{moment.year:04d}"
    if precision == "month":
        return f"{moment.year:04d}-{moment.month:02d}"
    return moment.date().isoformat() if moment.time() == datetime.min.time() else moment.isoformat(timespec="minutes")


def interval_text(fact: Fact) -> str:
    """``[2023-04-24 -> open)`` style validity interval, each end at the precision it was stated with."""
    return f"[{when_text(fact.valid_from, fact.from_precision) or '?'} -> {when_text(fact.valid_to, fact.to_precision) or 'open'})"


def fact_text(fact: Fact) -> str:
    """``head relation tail`` with the relation's words: the text facts are embedded with."""
    return f"{fact.head} {fact.relation.replace('_', ' ')} {fact.tail}"


def render_fact(fact: Fact) -> str:
    """One line a person or a model reads: triple, interval, confidence, intent and cited turns."""
    turns = f" turns {', '.join(fact.turn_ids)}" if fact.turn_ids else ""
    return (
        f"{fact.head} -[{fact.relation}]-> {fact.tail} {interval_text(fact)} "
        f"confidence {fact.confidence:.2f} {fact.intent}{turns}"
    )


# -- updates ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FactDecision:
    """What the update rules did with one incoming fact.

    ``action``: add (new fact), parallel (another value of a multi-valued relation), confirm (same
    triple: turns merged, confidence raised), extend (same triple stated earlier: interval starts
    earlier), close (a single-valued value replaced; the old version keeps its closed interval),
    backfill (an older value stated late: added with a closed interval), contest (a hedged value
    that does not retire a more confident one), end (the triple was said to have stopped),
    promote (a confirmation made a contested value stable and closed the older value).
    """

    action: str
    fact_id: str
    other_id: str | None = None
    detail: str = ""


@dataclass
class FactUpdate:
    """Facts to write (new facts and new versions of existing ones) and the decisions taken."""

    facts: list[Fact] = field(default_factory=list)
    decisions: list[FactDecision] = field(default_factory=list)

    def actions(self) -> list[str]:
        return [d.action for d in self.decisions]


def _event(action: str, at: datetime | None, precision: DatePrecision = "day", **extra: Any) -> dict[str, object]:
    entry: dict[str, object] = {"action": action, "at": when_text(at, precision)}
    entry.update({k: v for k, v in extra.items() if v is not None})
    return entry


class _Working:
    """The facts touched so far, keyed by id, with an index by (head key, relation)."""

    def __init__(self, existing: Iterable[Fact]) -> None:
        self.facts: dict[str, Fact] = {}
        self.by_attribute: dict[tuple[str, str], list[str]] = {}
        self.written: dict[str, Fact] = {}
        for fact in existing:
            self._index(fact)

    def _index(self, fact: Fact) -> None:
        if fact.id not in self.facts:
            self.by_attribute.setdefault((entity_key(fact.head), fact.relation), []).append(fact.id)
        self.facts[fact.id] = fact

    def group(self, fact: Fact) -> list[Fact]:
        return [self.facts[i] for i in self.by_attribute.get((entity_key(fact.head), fact.relation), [])]

    def write(self, fact: Fact) -> None:
        self._index(fact)
        self.written[fact.id] = fact


def apply_fact_updates(
    existing: Iterable[Fact] | Mapping[str, Fact],
    incoming: Sequence[Fact],
    *,
    table: Mapping[str, Cardinality] | None = None,
    stable_confidence: float = STABLE_CONFIDENCE,
) -> FactUpdate:
    """Apply incoming facts (in time order) to the existing ones; return what to write.

    Only facts with the same head and relation are ever compared, so an update can never touch an
    unrelated fact. Existing facts are never removed: a replaced value gets a new version of the same
    fact id with ``valid_to`` set and a ``history`` entry saying what closed it.
    """
    working = _Working(existing.values() if isinstance(existing, Mapping) else existing)
    decisions: list[FactDecision] = []
    ordered = sorted(enumerate(incoming), key=lambda item: (item[1].valid_from or datetime.min, item[0]))
    for _, raw in ordered:
        rel = normalize_relation(raw.relation)
        cardinality = relation_cardinality(rel, table, raw.cardinality)
        candidate = raw.model_copy(update={"relation": rel, "cardinality": cardinality})
        decisions.extend(_apply_one(working, candidate, stable_confidence))
    return FactUpdate(facts=list(working.written.values()), decisions=decisions)


def _apply_one(working: _Working, cand: Fact, stable: float) -> list[FactDecision]:
    group = working.group(cand)
    tail_key = entity_key(cand.tail)
    same = sorted((f for f in group if entity_key(f.tail) == tail_key), key=_time_order)
    t = cand.valid_from

    # The triple was said to have stopped ("I no longer work at X"): close its open version.
    if cand.valid_to is not None:
        open_same = [f for f in same if f.valid_to is None]
        if open_same:
            target = open_same[-1]
            working.write(
                _closed(target, cand.valid_to, cand.to_precision, by=None, turn_ids=cand.turn_ids, action="end")
            )
            return [FactDecision("end", target.id, detail=f"closed at {when_text(cand.valid_to, cand.to_precision)}")]

    # The same triple again: confirm it, or extend its interval.
    for existing in reversed(same):
        inside = (t is None or existing.valid_from is None or existing.valid_from <= t) and (
            existing.valid_to is None or t is None or t < existing.valid_to
        )
        earlier = t is not None and existing.valid_from is not None and t < existing.valid_from
        if not (inside or earlier):
            continue
        confidence = combine_confidence(existing.confidence, cand.confidence)
        valid_from = t if earlier else existing.valid_from
        updated = existing.model_copy(
            update={
                "confidence": confidence,
                "valid_from": valid_from,
                "from_precision": cand.from_precision if earlier else existing.from_precision,
                "turn_ids": list(dict.fromkeys([*existing.turn_ids, *cand.turn_ids])),
                "history": [
                    *existing.history,
                    _event(
                        "extend" if earlier else "confirm",
                        t,
                        cand.from_precision,
                        turn_ids=list(cand.turn_ids),
                        confidence=[existing.confidence, confidence],
                        valid_from=when_text(valid_from, cand.from_precision) if earlier else None,
                    ),
                ],
            }
        )
        working.write(updated)
        out = [FactDecision("extend" if earlier else "confirm", existing.id, detail=f"confidence {confidence:.2f}")]
        if cand.cardinality == "single" and existing.confidence < stable <= confidence and updated.valid_to is None:
            out.extend(_retire_older_values(working, updated, stable, action="promote"))
        return out

    episode = len(same)
    new = cand.model_copy(
        update={
            "id": fact_id(cand.namespace, cand.head, cand.relation, cand.tail, episode),
            "valid_to": None,
            "to_precision": "day",
            "history": [
                _event("add", t, cand.from_precision, turn_ids=list(cand.turn_ids), confidence=cand.confidence)
            ],
        }
    )
    if cand.cardinality == "multi":
        action = "parallel" if group else "add"
        working.write(new)
        return [FactDecision(action, new.id)]

    # Single-valued: a later value is stated after this one -> this one is history already.
    if t is not None:
        later = [f for f in group if f.valid_from is not None and f.valid_from > t and entity_key(f.tail) != tail_key]
        if later:
            successor = min(later, key=_time_order)
            end, precision = successor.valid_from, successor.from_precision
            new = new.model_copy(
                update={
                    "valid_to": end,
                    "to_precision": precision,
                    "history": [*new.history, _event("backfill", end, precision)],
                }
            )
            working.write(new)
            return [FactDecision("backfill", new.id, detail=f"closed at {when_text(end, precision)} by a later value")]
    working.write(new)
    decisions = [FactDecision("add", new.id)]
    decisions.extend(_retire_older_values(working, new, stable, action="close"))
    return decisions


def _retire_older_values(working: _Working, current: Fact, stable: float, *, action: str) -> list[FactDecision]:
    """Close the open, older, differently valued facts of a single-valued attribute at ``current``'s start."""
    t = current.valid_from
    key = entity_key(current.tail)
    out: list[FactDecision] = []
    for other in working.group(current):
        if other.id == current.id or other.valid_to is not None or entity_key(other.tail) == key:
            continue
        if t is None:
            out.append(FactDecision("contest", current.id, other.id, "undated: both kept open"))
            continue
        if other.valid_from is not None and other.valid_from > t:
            continue
        # A hedged value does not retire a more confident one until a confirmation makes it stable.
        if current.confidence < stable and current.confidence < other.confidence:
            out.append(FactDecision("contest", current.id, other.id, "less confident than the open value"))
            continue
        working.write(
            _closed(other, t, current.from_precision, by=current.id, turn_ids=current.turn_ids, action="close")
        )
        out.append(FactDecision(action, other.id, current.id, f"closed at {when_text(t, current.from_precision)}"))
    return out


def _closed(
    fact: Fact, at: datetime, precision: DatePrecision, *, by: str | None, turn_ids: Sequence[str], action: str
) -> Fact:
    # An interval never ends before it starts, even when a statement's time is coarse.
    if fact.valid_from is not None and fact.valid_from > at:
        at, precision = fact.valid_from, fact.from_precision
    return fact.model_copy(
        update={
            "valid_to": at,
            "to_precision": precision,
            "history": [*fact.history, _event(action, at, precision, by=by, turn_ids=list(turn_ids))],
        }
    )


def describe_facts(source: Any, *, as_of: Any = None, history: tuple[str, str] | None = None) -> list[str]:
    """Readable lines for a namespace's facts: all, those valid ``as_of`` a time, or one attribute's history."""
    if history is not None:
        facts = attribute_history(source, *history)
    elif as_of is not None:
        facts = facts_as_of(source, as_of)
    else:
        facts = sorted(_facts_of(source), key=lambda f: (entity_key(f.head), f.relation, *_time_order(f)))
    return [render_fact(f) for f in facts]
