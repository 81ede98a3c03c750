"""REAL fact extractor role: one LLM call per session -> atomic temporal facts; a pattern extractor without one.

The pattern extractor is both the LLM role's fallback and the no-LLM policy; both give ``Fact`` records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from logicmap.agents.base import run_role
from logicmap.agents.windowing import (
    ContextBudget,
    WindowedOutcome,
    fit_lines,
    merge_outcomes,
    plan_windows,
    prompt_chars,
    run_windows,
)
from logicmap.memory.language.lexicon import (
    ADVERBS,
    COGNITION_VERBS,
    IRREGULAR_VERBS,
    REPORTING_VERBS,
    SKLEARN_STOP_WORDS,
)
from logicmap.memory.language.text import pattern_sentences, pattern_text
from logicmap.memory.language.timeparse import find_time_phrases, resolve_relative
from logicmap.memory.records.facts import (
    ASSERTED_CONFIDENCE,
    HEDGED_CONFIDENCE,
    INFERRED_CONFIDENCE,
    Cardinality,
    entity_key,
    make_fact,
    normalize_relation,
    parse_when,
    relation_cardinality,
)
from logicmap.memory.records.records import Fact, FactIntent, Turn
from logicmap.prompts import real_extract as prompt
from logicmap.prompts.real_extract import ExtractedFact, FactExtraction

__all__ = [
    "HEDGE_WORDS",
    "extract_session_facts",
    "facts_from_extraction",
    "is_hedged",
    "merge_extractions",
    "pattern_extraction",
    "validate_extraction",
]

# Word lists and patterns here: general English grammar and memory/language/lexicon.py classes, none read off data/.
HEDGE_WORDS = re.compile(
    r"\b(maybe|perhaps|probably|possibly|might|i think|i guess|i suppose|not sure|i hope|hopefully|kind of)\b",
    re.IGNORECASE,
)
_DATE_RE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
_PRONOUNS = {"it", "that", "this", "them", "they", "he", "she", "him", "her", "those", "these", "one", "something"}
_FIRST_PERSON = {"i", "me", "myself", "my"}
_SECOND_PERSON = {"you", "yourself", "your"}
# A name: capitalised words, maybe joined by a particle. Each space between words is matched in one way only
# (no "\s+ ... \s*" that could split a run of spaces), so a failed match backtracks in linear time.
_NAME = r"[A-Z][\w'-]*(?:\s+(?:(?:de|da|do|dos|das|of|the)\s+)?[A-Z][\w'-]*)*"
# The longest name a pattern looks back for before the words that anchor it ("... is my favourite").
_NAME_WINDOW = 200
_OBJECT = r"[^.,!?;]+"
# Words that end a captured object: the time phrase or the qualifier that follows it.
_TAIL_STOP = re.compile(  # (?<!\s): tried once per run of spaces, not at each space of it
    r"(?<!\s)\s+(?:last|next|this|yesterday|today|tonight|tomorrow|every|before|after|on|at|in \d|now|too|again|with|"
    r"as much as|because|so|when|since|that i)\b.*$",
    re.IGNORECASE,
)


def is_hedged(text: str) -> bool:
    """Whether a statement carries a hedge (maybe, I think, probably, ...)."""
    return bool(HEDGE_WORDS.search(text or ""))


def _clean(value: str, *, max_words: int = 6) -> str | None:
    text = re.sub(r"\s+", " ", value or "").strip(" ,.;:!?\"'")
    text = _TAIL_STOP.sub("", text).strip(" ,.;:!?\"'")
    text = re.sub(r"^(?:a|an|the|some|my|our)\s+", "", text, flags=re.IGNORECASE)
    if not text or text.lower() in _PRONOUNS or len(text.split()) > max_words:
        return None
    return text


class _Pattern:
    """One statement shape: a regex over a sentence and the fact it gives."""

    def __init__(
        self,
        regex: str,
        relation: str,
        *,
        intent: FactIntent = "FACT",
        flags: int = re.IGNORECASE,
        head: str = "speaker",
        group: str = "x",
        confidence: float = ASSERTED_CONFIDENCE,
        max_words: int = 6,
    ) -> None:
        self.regex = re.compile(regex, flags)
        self.relation, self.intent, self.head, self.group = relation, intent, head, group
        self.confidence, self.max_words = confidence, max_words


# The statement shapes that need more than the general clause below: a possessive with a location, a
# favourite, a comparison idiom, a stay somewhere. Their words are memory/language/lexicon.py's general classes.
_PATTERNS: list[_Pattern] = [
    _Pattern(rf"\b[Mm]y (?:\w+ )?(?P<kind>[a-z]+) is in (?P<x>{_NAME})", "in", flags=0),
    # The name comes before its anchor: the anchor is found first and the name read back from it
    # (``_name_before``), since a pattern that opens with a name is retried at every word of a long name run.
    _Pattern(r"(?<=[\w'-]) is my favou?rite (?P<kind>\w+)", "favourite", flags=0, group="name_before"),
    _Pattern(rf"\bmy favou?rite (?P<kind>\w+) is (?P<x>{_OBJECT})", "favourite"),
    _Pattern(r"\bI(?:'m| am) (?P<more>more of )?an? (?P<x>\w+) person\b", "likes"),
    _Pattern(rf"\bI(?:'m| am) in (?P<x>{_NAME}) (?=this|for|today|now)", "visiting", intent="TEMPORAL", flags=0),
]
# The general first-person clause: "I [aux] [adverbs] VERB [particles] OBJECT". The relation is the verb and
# its particles ("moved_to", "signed_up_for"; memory/records/facts.py's aliases give canonical names), so no list of
# verbs decides what is a fact.
_CLAUSE_ADVERBS = "|".join(
    sorted(
        ADVERBS
        | {
            "never",
            "not",
            "also",
            "now",
            "still",
            "recently",
            "usually",
            "often",
            "always",
            "currently",
            "sometimes",
            "finally",
            "mostly",
        }
    )
)
_PARTICLES = "in|at|to|from|for|with|on|of|about|into|up|out|off|over|back|as"
_CLAUSE = re.compile(
    rf"\bI(?P<aux>['’](?:m|ve|d|ll)| am| have| had| will| would)?(?P<adverbs>(?: (?:{_CLAUSE_ADVERBS}))*) "
    rf"(?P<verb>[a-z]{{2,}})(?P<particles>(?: (?:{_PARTICLES})){{0,2}}) (?P<x>[^.,!?;]+)"
)
# A prepositional phrase attached to a clause's verb: "work night shifts as a nurse at Santo Antonio".
_ATTACHED = re.compile(rf"\b(?:(?P<prep>at|in|from|with) (?P<x>{_NAME})|as an? (?P<role>[a-z]+))")
# Verbs of a clause that state no fact about the speaker: function verbs, hedges, speech and thought.
_NOT_FACT_VERBS = (
    (SKLEARN_STOP_WORDS - {"have", "had", "has"})
    | REPORTING_VERBS
    | COGNITION_VERBS
    | frozenset("guess suppose".split())
)
_FAMILY = re.compile(
    r"\b[Mm]y (?P<rel>sister|brother|mother|father|mom|dad|wife|husband|partner|son|daughter|friend|cousin) "
    r"(?P<x>[A-Z][a-z]+)"
)
# A named agent acting on the speaker: "Ana helped me pack" -> (Ana, helped_pack, speaker).
_AGENT_ON_ME = re.compile(r"\b(?P<agent>[A-Z][a-z]+) (?P<verb>[a-z]+ed) me (?P<then>[a-z]+)")
_HAD = re.compile(r"(?:^|,\s*)(?P<name>[A-Z][a-z]+) had (?:a |an )?(?P<x>[^.,!?;]+)")
_NAMED = re.compile(r"\b(?i:his|her|its) name is (?P<name>[A-Z][a-z]+)")
_APPOSITIVE = re.compile(rf",\s*the (?P<name>{_NAME})")
_CAUSE = re.compile(r"^(?P<cause>.+?),?(?<!\s)\s+so\s+I\b", re.IGNORECASE)
_BECAUSE = re.compile(r"\bbecause (?P<cause>[^.,!?;]+)", re.IGNORECASE)
_NAME_AT_END = re.compile(rf"\b{_NAME}\Z")
_NAME_AT_START = re.compile(rf"{_NAME}")
_FAMILY_RELATION = {
    "wife": "married_to",
    "husband": "married_to",
    "mom": "mother",
    "dad": "father",
    "friend": "friend_of",
}


def _name_before(sentence: str, end: int) -> tuple[str, int] | None:
    """The name (``_NAME``) that ends at ``end`` and where it starts, looked for in the ``_NAME_WINDOW``
    characters before ``end`` only, so a run of capitalised words is read once, not from each of its words."""
    start = max(0, end - _NAME_WINDOW)
    if start > 0:
        space = sentence.find(" ", start, end)
        start = space + 1 if space >= 0 else end
    match = _NAME_AT_END.search(sentence, start, end)
    return (match.group(0), match.start()) if match else None


def _addressee(turns: Sequence[Turn], index: int, speakers: Sequence[str]) -> str | None:
    speaker = turns[index].speaker
    others = [s for s in speakers if s != speaker]
    if len(others) == 1:
        return others[0]
    for j in (index - 1, index + 1):
        if 0 <= j < len(turns) and turns[j].speaker != speaker:
            return turns[j].speaker
    return None


def pattern_extraction(turns: Sequence[Turn], speakers: Sequence[str] | None = None) -> FactExtraction:
    """Deterministic facts from first-person statement shapes ("I live in X", "I moved to X", "I love X", ...).

    Hedged sentences get a lower confidence; a fact inferred from the other speaker's question ("how is
    life in Porto?") gets an inferred confidence and is confirmed when the addressee's reply names it.
    """
    speakers = list(dict.fromkeys(speakers or [t.speaker for t in turns]))
    found: list[ExtractedFact] = []
    for index, turn in enumerate(turns):
        # Each turn is read up to PATTERN_TEXT_LIMIT characters, a long sentence in pieces: every pattern
        # below scans a bounded text, so a huge turn costs time in proportion to that bound.
        named = _NAMED.search(pattern_text(turn.text))
        for sentence in pattern_sentences(turn.text):
            found.extend(_sentence_facts(sentence, turn, turns, index, speakers, named))
    # The addressee's reply that names an inferred value confirms it (REAL's confidence upgrade).
    position = {t.dia_id: i for i, t in enumerate(turns)}
    lowered: dict[int, str] = {}
    for fact in list(found):
        if fact.confidence != INFERRED_CONFIDENCE:
            continue
        origin = position.get(fact.turn_ids[0])
        if origin is None or origin + 1 >= len(turns):
            continue
        reply = turns[origin + 1]
        if origin + 1 not in lowered:
            lowered[origin + 1] = pattern_text(reply.text).lower()
        if reply.speaker == fact.head and fact.tail.lower() in lowered[origin + 1]:
            found.append(fact.model_copy(update={"turn_ids": [reply.dia_id]}))
    return FactExtraction(facts=found)


def _sentence_facts(
    sentence: str, turn: Turn, turns: Sequence[Turn], index: int, speakers: Sequence[str], named: re.Match[str] | None
) -> list[ExtractedFact]:
    hedged = is_hedged(sentence)
    phrases = find_time_phrases(sentence)
    phrase = phrases[0] if phrases else None
    causal_split = _CAUSE.search(sentence)
    effect_start = causal_split.end() - 1 if causal_split else None
    out: list[ExtractedFact] = []

    def add(
        head: str | None,
        relation: str,
        tail: str | None,
        intent: FactIntent,
        confidence: float,
        at: int = 0,
        *,
        timeless: bool = False,
    ) -> None:
        if not head or not tail or entity_key(tail) == entity_key(head):
            return
        if effect_start is not None and at >= effect_start and intent == "FACT":
            intent = "CAUSAL"
        if intent == "FACT" and phrase and not timeless:
            intent = "TEMPORAL"
        if re.match(r"^\s*(?:now|these days)\b", sentence, re.IGNORECASE) and intent in ("FACT", "TEMPORAL"):
            intent = "EVOLUTION"
        out.append(
            ExtractedFact(
                head=head,
                relation=relation,
                tail=tail,
                turn_ids=[turn.dia_id],
                intent=intent,
                hedged=hedged,
                confidence=min(confidence, HEDGED_CONFIDENCE) if hedged else confidence,
                time_phrase=None if timeless else phrase,
                single_valued=True if relation in single else None,
            )
        )

    single: set[str] = set()
    for pattern in _PATTERNS:
        for hit in pattern.regex.finditer(sentence):
            head = turn.speaker if pattern.head == "speaker" else _addressee(turns, index, speakers)
            at = hit.start()
            if pattern.group == "name_before":
                found_name = _name_before(sentence, at)
                if found_name is None:
                    continue
                raw, at = found_name
            else:
                raw = hit.group(pattern.group)
            relation, intent = pattern.relation, pattern.intent
            if relation == "in":  # "my new flat is in Alfama": flat_in, single-valued (one place at a time)
                relation = f"{hit.group('kind').lower()}_in"
                single.add(relation)
            if relation == "favourite":
                kind = hit.group("kind").lower()
                relation = f"favourite_{kind}"
                add(head, "likes", _clean(raw, max_words=pattern.max_words), intent, pattern.confidence, at)
            if relation == "likes" and "more" in hit.groupdict() and hit.group("more"):
                intent = "CONTRAST"
            add(head, relation, _clean(raw, max_words=pattern.max_words), intent, pattern.confidence, at)
    first_thing = True
    position = 0
    while match := _CLAUSE.search(sentence, position):
        position = match.end("verb")  # "I think I live in Braga": the clause inside the object is read too
        verb, adverbs = match.group("verb"), match.group("adverbs").split()
        if verb in _NOT_FACT_VERBS or verb.endswith("ly"):
            continue
        particles = match.group("particles").split()
        raw, at = match.group("x"), match.start()
        relation = normalize_relation("_".join([verb, *particles]))
        negated = "never" in adverbs or "not" in adverbs
        past = (
            verb.endswith("ed")
            or IRREGULAR_VERBS.get(verb, verb) != verb
            or (match.group("aux") or "").strip("'’ ") in ("ve", "have", "had")
        )
        if particles and particles[-1] in ("in", "at", "to", "from", "into") and (name := _NAME_AT_START.match(raw)):
            raw = name.group(0)  # "moved to Lisbon two weeks ago": the place
        if relation == "likes" and " as much as " in raw:
            first, second = raw.split(" as much as ", 1)
            add(turn.speaker, "likes", _clean(first), "FACT", ASSERTED_CONFIDENCE, at)
            add(turn.speaker, "likes", _clean(second), "FACT", ASSERTED_CONFIDENCE, at)
            continue
        if past and (appositive := _APPOSITIVE.search(sentence, at)):
            raw = appositive.group("name")  # "I visited a cafe, the Blue Finch": the name
        if negated:
            relation, intent = f"never_{relation}", "CONTRAST"
        elif past or verb.endswith("ing"):
            # A past change of a single-valued attribute ("moved to", "live in") is an evolution.
            intent = "EVOLUTION" if relation_cardinality(relation) == "single" else "TEMPORAL"
        else:
            intent = "FACT"
        if not particles:
            for attached in _ATTACHED.finditer(raw):
                prep = attached.group("prep") or "as"
                add(
                    turn.speaker,
                    normalize_relation(f"{verb}_{prep}"),
                    attached.group("x") or attached.group("role"),
                    intent,
                    ASSERTED_CONFIDENCE,
                    at,
                )
        tail = _clean(raw, max_words=8 if verb in ("want", "plan", "hope") else 6)
        add(turn.speaker, relation, tail, intent, ASSERTED_CONFIDENCE, at)
        # "I adopted a dog last month. His name is Biscuit.": the thing gets its name.
        if first_thing and named and tail and tail.islower() and len(tail.split()) <= 3:
            add(turn.speaker, relation, named.group("name"), intent, ASSERTED_CONFIDENCE, at)
            add(named.group("name"), "is_a", tail, "FACT", ASSERTED_CONFIDENCE, at, timeless=True)
            first_thing = False
    for match in _FAMILY.finditer(sentence):
        rel = match.group("rel").lower()
        add(
            turn.speaker,
            _FAMILY_RELATION.get(rel, rel),
            match.group("x"),
            "FACT",
            ASSERTED_CONFIDENCE,
            match.start(),
            timeless=True,
        )
    for match in _AGENT_ON_ME.finditer(sentence):
        then = match.group("then")
        relation = match.group("verb") if then in SKLEARN_STOP_WORDS else f"{match.group('verb')}_{then}"
        add(match.group("agent"), relation, turn.speaker, "TEMPORAL", ASSERTED_CONFIDENCE, match.start())
    for match in _HAD.finditer(sentence):
        if match.group("name") not in ("I",):
            add(match.group("name"), "had", _clean(match.group("x")), "TEMPORAL", ASSERTED_CONFIDENCE, match.start())
    cause = causal_split.group("cause") if causal_split else None
    if cause is None:
        because = _BECAUSE.search(sentence)
        cause = because.group("cause") if because else None
    if cause:
        reason = re.sub(r"\s+", " ", cause).strip(" ,.;")
        if reason and len(reason.split()) <= 14:
            add(turn.speaker, "decided_because", reason, "CAUSAL", ASSERTED_CONFIDENCE, 0)
    return out


def validate_extraction(result: FactExtraction, turns: Sequence[Turn]) -> list[str]:
    """Problems a retry can fix: unknown turns, empty parts, pronoun heads or tails, malformed dates."""
    known = {t.dia_id for t in turns}
    problems: list[str] = []
    for i, fact in enumerate(result.facts):
        if not fact.turn_ids:
            problems.append(f"fact {i}: cites no turn ids")
        unknown = [t for t in fact.turn_ids if t not in known]
        if unknown:
            problems.append(f"fact {i}: unknown turn ids {unknown}; valid ids are {sorted(known)}")
        for part in ("head", "relation", "tail"):
            value = getattr(fact, part).strip()
            if not value:
                problems.append(f"fact {i}: empty {part}")
            elif part != "relation" and value.lower() in _PRONOUNS:
                problems.append(f"fact {i}: {part} {value!r} is a pronoun; name the entity")
        if fact.date and not _DATE_RE.match(fact.date.strip()):
            problems.append(f"fact {i}: date {fact.date!r} is not YYYY-MM-DD, YYYY-MM or YYYY")
        if fact.confidence is not None and not 0.0 <= fact.confidence <= 1.0:
            problems.append(f"fact {i}: confidence {fact.confidence} is outside 0..1")
    return problems


def _resolve_person(name: str, speaker: str | None, addressee: str | None) -> str:
    key = name.strip().lower()
    if key in _FIRST_PERSON and speaker:
        return speaker
    if key in _SECOND_PERSON and addressee:
        return addressee
    return name.strip()


def facts_from_extraction(
    extraction: FactExtraction,
    turns: Sequence[Turn],
    namespace: str,
    *,
    table: Mapping[str, Cardinality] | None = None,
) -> list[Fact]:
    """``Fact`` candidates: valid_from is the stated time, else the turn's session time; hedges lower confidence."""
    by_id = {t.dia_id: t for t in turns}
    position = {dia_id: i for i, dia_id in enumerate(by_id)}
    ordered = list(by_id.values())
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    facts: list[Fact] = []
    for item in extraction.facts:
        cited = [t for t in item.turn_ids if t in by_id]
        if not cited:
            continue
        turn = by_id[cited[0]]
        addressee = _addressee(ordered, position[turn.dia_id], speakers)
        head = _resolve_person(item.head, turn.speaker, addressee)
        tail = _resolve_person(item.tail, turn.speaker, addressee)
        if not head or not tail or head.lower() in _PRONOUNS or tail.lower() in _PRONOUNS:
            continue
        anchor: datetime | None = turn.session_time
        # The stated text ("2023-04") goes to make_fact, which keeps its precision (a month, not 1 April).
        when: str | datetime | None = item.date.strip() if item.date and _DATE_RE.match(item.date.strip()) else None
        if when is None and item.time_phrase:
            resolved = resolve_relative(item.time_phrase, anchor)
            when = resolved if parse_when(resolved) is not None else None
        when = when or anchor
        confidence = item.confidence if item.confidence is not None else ASSERTED_CONFIDENCE
        if item.hedged:
            confidence = min(confidence, HEDGED_CONFIDENCE)
        facts.append(
            make_fact(
                namespace,
                head,
                item.relation,
                tail,
                valid_from=None if item.ended else when,
                valid_to=when if item.ended else None,
                confidence=confidence,
                intent=item.intent,
                turn_ids=cited,
                cardinality="single" if item.single_valued else None,
                table=table,
            )
        )
    return facts


def _window_messages(
    turns: Sequence[Turn], session_date: str | None, speakers: list[str], budget: ContextBudget, notes: list[str]
) -> list[BaseMessage]:
    lines, clipped = fit_lines(
        [t.render() for t in turns],
        lambda shown: prompt_chars(prompt.build_messages("\n".join(shown), session_date, speakers)),
        budget.prompt_chars,
        labels=[f"turn {t.dia_id}" for t in turns],
        role="fact_extractor",
    )
    notes.extend(clipped)
    return prompt.build_messages("\n".join(lines), session_date, speakers)


def merge_extractions(extractions: Sequence[FactExtraction]) -> FactExtraction:
    """The windows' facts in order; a triple stated in two windows is one fact citing both windows' turns."""
    merged: dict[tuple[str, str, str], ExtractedFact] = {}
    for extraction in extractions:
        for fact in extraction.facts:
            key = (fact.head.strip().lower(), fact.relation.strip().lower(), fact.tail.strip().lower())
            if key in merged:
                kept = merged[key]
                kept.turn_ids = list(dict.fromkeys([*kept.turn_ids, *fact.turn_ids]))
            else:
                merged[key] = fact.model_copy(deep=True)
    return FactExtraction(facts=list(merged.values()))


def extract_session_facts(
    llm: BaseChatModel | None,
    turns: Sequence[Turn],
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    budget: ContextBudget | None = None,
) -> WindowedOutcome[FactExtraction]:
    """One call per window of turns that fits the budget (one for a session that fits); the pattern extractor
    for a window without a model or without a valid reply."""
    budget = budget or ContextBudget()
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    session_time = next((t.session_time for t in turns if t.session_time), None)
    session_date = session_time.isoformat() if session_time else None
    overhead = prompt_chars(prompt.build_messages("", session_date, speakers))
    lines = [len(t.render()) + 1 for t in turns]
    ends = [0]
    for size in lines:
        ends.append(ends[-1] + size)
    windows = plan_windows(len(turns), lambda start, end: overhead + ends[end] - ends[start] - 1, budget.prompt_chars)
    notes: list[str] = []
    options: dict[str, Any] = {
        "method": method,
        "tags": tags,
        "metadata": {**(metadata or {}), "prompt_version": prompt.VERSION},
    }
    tasks = [
        partial(
            run_role,
            llm,
            role="fact_extractor",
            messages=_window_messages(turns[start:end], session_date, speakers, budget, notes),
            schema=FactExtraction,
            validate=partial(validate_extraction, turns=turns[start:end]),
            fallback=partial(pattern_extraction, turns[start:end], speakers),
            **options,
        )
        for start, end in windows or [(0, 0)]
    ]
    outcomes = run_windows(tasks)
    output = outcomes[0].output if len(outcomes) == 1 else merge_extractions([o.output for o in outcomes])
    return merge_outcomes(output, outcomes, notes)
