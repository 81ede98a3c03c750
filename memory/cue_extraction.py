"""Cues and facts about people found in text without a model, and a session's cue and tag records.

``extract_cues`` finds verbatim keywords (times, quantities, names and places, activity and thing nouns),
``extract_personal_facts`` the first-person sentences that say something lasting about their speaker,
``heuristic_links`` both for a session's events, and ``build_cue_layer`` turns links (these and an LLM
extractor's) into the ``Cue``/``Tag`` records of the layer (``memory/cues.py`` describes the layout).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from logicmap.memory.cues import CueKind, CueLayerBatch, CueLink, cue_id, normalize_cue, personal_fact_id, tag_id
from logicmap.memory.records import Cue, Event, Tag, Turn
from logicmap.memory.text import FUNCTION_WORDS, pattern_sentences, pattern_text, singular
from logicmap.memory.timeparse import MONTHS, time_phrase_spans

__all__ = [
    "ASPECTS",
    "TextCue",
    "build_cue_layer",
    "detect_aspects",
    "extract_cues",
    "extract_personal_facts",
    "heuristic_links",
    "resolve_aspects",
]

# Aspects of a person's life that facts and event tags are filed under. Words are matched as whole
# lowercase tokens; "preference" is detected separately because it combines with the others.
ASPECTS: dict[str, frozenset[str]] = {
    aspect: frozenset(words.split())
    for aspect, words in {
        "pet": "dog dogs puppy puppies cat cats kitten pet pets vet retriever adopted adopt adopting",
        "work": "job jobs work works worked working shift shifts nurse nurses hospital office career boss "
        "colleague colleagues team offer employer salary promotion profession",
        "home": "live lives lived living move moved moving flat apartment house home neighbourhood "
        "neighborhood balcony pack packed",
        "family": "sister sisters brother brothers mother mom mum father dad parent parents kid kids son sons "
        "daughter daughters wife husband family cousin aunt uncle grandma grandmother grandfather niece nephew",
        "food": "food foods eat eating ate sushi ramen fish rice pizza pasta tart tarts cake dinner lunch "
        "breakfast restaurant cook cooking nata pasteis custard",
        "drink": "drink drinks drank coffee tea latte matcha beer wine juice cafe",
        "sport": "run ran running runs runner marathon race races training train kilometres kilometers km gym "
        "yoga swim swimming cycling football tennis hike hiking medal workout",
        "hobby": "hobby hobbies class classes pottery painting paint music guitar piano reading book books "
        "garden gardening photography craft creative knitting",
        "health": "sick ill infection doctor sleep sore tired exhausting injury hurt appointment health",
        "travel": "visit visiting visited trip travel travelling traveling conference vacation holiday flight",
        "education": "school study studying university degree course exam college",
    }.items()
}
_PREFERENCE_WORDS = frozenset(
    "love loves loved like likes favourite favorite prefer prefers enjoy enjoys best fan hate hates".split()
)
_ASPECT_SYNONYMS: dict[str, str] = {
    "preference": "preference", "preferences": "preference", "likes": "preference", "favourites": "preference",
    "favorites": "preference", "taste": "preference", "tastes": "preference", "dislikes": "preference",
    "occupation": "work", "career": "work", "employment": "work", "profession": "work", "workplace": "work",
    "residence": "home", "location": "home", "city": "home", "address": "home", "housing": "home",
    "relatives": "family", "siblings": "family", "relationship": "family", "relationships": "family",
    "hobbies": "hobby", "interests": "hobby", "interest": "hobby", "pastime": "hobby", "leisure": "hobby",
    "sports": "sport", "fitness": "sport", "exercise": "sport", "animals": "pet", "pets": "pet",
    "medical": "health", "wellbeing": "health", "trips": "travel", "travels": "travel",
    "drinks": "drink", "beverage": "drink", "beverages": "drink", "foods": "food", "diet": "food",
    "meal": "food", "meals": "food", "cuisine": "food", "studies": "education",
}

# Words that start sentences with a capital letter without being names.
_COMMON = frozenset(
    """a about after again ah all also although amazing an and another any anyway are as at aw awesome
    because before besides big both but by can cheers congrats congratulations could did do does don't
    during each either even every exactly fine first for from good great guess had has have he hello her
    here hey hi him his how however i i'd i'll i'm i've if in is it it's its just last later let let's
    like maybe me mine most mostly much my nah neither never next nice no nor not nothing now of oh ok
    okay on once one only or other our out perhaps please plus really right same see she should since
    so some someone something sorry soon still such sure thank thanks that that's the their them then
    there these they this those though thus to today too totally um uh very was we well were what
    what's when where which while who why will with wow would yeah yes yet you you're your yours
    wonderful lovely sounds sound night day days morning evening afternoon tonight tomorrow yesterday
    send tell give take make go went come came bring brought love loved hope wish welcome enjoy send
    dear glad happy sad poor new old want wants shall guess meet hmm haha lol""".split()
)
_CONNECTORS = frozenset("de da das do dos del della di du la le van von of the and".split())
_KINSHIP = frozenset(
    "sister brother mother mom mum father dad son daughter wife husband friend cousin aunt uncle "
    "grandma grandpa grandmother grandfather niece nephew boyfriend girlfriend partner colleague boss "
    "named called".split()
)
_PLACE_PREPOSITIONS = frozenset("in at to from near on into around across".split())
_PLACE_NOUNS = frozenset(
    "hospital cafe café bar beach park river street road avenue square station museum restaurant "
    "school university church market airport hotel island lake mountain city town village".split()
)
_MONTH_SET = frozenset(MONTHS)
_WEEKDAYS = frozenset("Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split())
_NUMBER_WORDS = r"(?:\d+(?:\.\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|fifty|a hundred)"
_QUANTITY_RE = re.compile(
    rf"\b{_NUMBER_WORDS}\s+(?:hours?|minutes?|seconds?|kilometres?|kilometers?|km|miles?|metres?|meters?|"
    rf"kilos?|kg|pounds?|euros?|dollars?|percent)(?:\s+(?:and\s+)?\d+\s+(?:minutes?|seconds?))?\b",
    re.IGNORECASE,
)
_MONTH_RE = "|".join(MONTHS)
_DATE_RES = [
    re.compile(rf"\b(?:(?:early|mid|late|the end of|end of|the beginning of|beginning of)\s+)?"
               rf"(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTH_RE})(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?\b"),
    re.compile(r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?(?:\s+(?:mornings?|afternoons?|evenings?|nights?))?\b"),
    re.compile(r"\b(?:19|20)\d{2}\b"),
    re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b"),
]
# Nouns that name activities (kind "activity") or things people have, eat and drink (kind "entity").
_ACTIVITY_NOUNS = frozenset(
    """marathon race training running run yoga hiking hike swimming cycling pottery painting cooking
    baking dancing reading gardening photography camping fishing surfing climbing skiing knitting
    conference trip concert party class lesson lessons course shift shifts job hobby workout game
    match festival wedding vacation holiday interview exam appointment move""".split()
)
_THING_NOUNS = frozenset(
    """dog dogs puppy cat kitten sushi ramen fish rice pizza pasta burger tarts tart cake latte coffee
    tea matcha beer wine juice milk flat apartment house car bike guitar piano book medal bowl
    view balcony cafe bar restaurant nata""".split()
)
_NOT_MODIFIERS = frozenset(
    """have had has love loved like liked try tried eat ate drink drank get got want wanted need make
    made see saw do did go went take took bring brought buy bought start started finished finish
    visit visited adopted adopt order ordered signed sign own owned is was are were be been loves
    likes enjoy enjoys enjoyed work works worked""".split()
)
# Words that never modify a noun in a cue ("a", "my", "this" ...); content words like "night" may.
_FUNCTION_WORDS = FUNCTION_WORDS | frozenset("some any every each still all more most mostly much many such".split())
_TOKEN_RE = re.compile(r"[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ'’-]*|\d+(?:[.,:]\d+)?")
_FIRST_PERSON = frozenset("i i'm i've i'd i'll my me mine myself".split())
_KIND_RANK = {"person": 0, "place": 1, "time": 2, "quantity": 3, "activity": 4, "entity": 5}
_PUNCT_EDGE = re.compile(r"^[\W_]+|(?<![\W_])[\W_]+$")  # the trailing run tried once, at its start


@dataclass(frozen=True)
class TextCue:
    """A cue found in a text: the words as written and what kind of keyword they are."""

    text: str
    kind: CueKind




def _words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _TOKEN_RE.findall(text or "")]


def detect_aspects(sentence: str) -> list[str]:
    """Aspects a sentence talks about (``preference`` first when it states a like or dislike)."""
    words = set(_words(sentence))
    found = ["preference"] if words & _PREFERENCE_WORDS else []
    found.extend(a for a, lexicon in ASPECTS.items() if words & lexicon)
    return found


def resolve_aspects(text: str) -> list[str]:
    """Aspects a free-text aspect or question names: 'favourite food' -> ['preference', 'food']."""
    words = [w for w in _words(text)]
    found: list[str] = []
    for word in words:
        for candidate in (word, singular(word)):
            if candidate == "preference" or candidate in ASPECTS:
                found.append(candidate)
            elif candidate in _ASPECT_SYNONYMS:
                found.append(_ASPECT_SYNONYMS[candidate])
    found.extend(detect_aspects(text))
    return list(dict.fromkeys(found))


def _mask(text: str, spans: Iterable[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            chars[i] = " "
    return "".join(chars)


def _clean(text: str) -> str:
    return _PUNCT_EDGE.sub("", re.sub(r"\s+", " ", text)).strip()


def extract_cues(text: str, *, people: Iterable[str] = ()) -> list[TextCue]:
    """Verbatim cues of a text without a model: times, quantities, names and places, activity and thing nouns.

    ``people`` are names known to be persons (the speakers); other capitalized names preceded by a
    kinship word ("my sister Ana") are persons too, names after "in/at/to/near..." are places.
    """
    known_people = {p.lower() for p in people if p}
    found: list[TextCue] = []
    seen: set[str] = set()

    def add(raw: str, kind: CueKind) -> None:
        cleaned = _clean(raw)
        key = normalize_cue(cleaned)
        if not key or key in seen or len(key) < 2:
            return
        seen.add(key)
        found.append(TextCue(cleaned, kind))

    for sentence in pattern_sentences(text) or [pattern_text(text)]:
        spans: list[tuple[int, int]] = []
        covered = bytearray(len(sentence) + 1)  # 1 where a time cue already covers the character
        for phrase, start, end in time_phrase_spans(sentence):
            add(phrase, "time")
            spans.append((start, end))
            covered[start:end] = b"\x01" * (end - start)
        for pattern in _DATE_RES:
            for match in pattern.finditer(sentence):
                if not covered[match.start()]:
                    add(match.group(0), "time")
                    spans.append(match.span())
                    covered[match.start():match.end()] = b"\x01" * (match.end() - match.start())
        for match in _QUANTITY_RE.finditer(sentence):
            add(match.group(0), "quantity")
            spans.append(match.span())
        rest = _mask(sentence, spans)
        tokens = [(m.group(0), m.start()) for m in _TOKEN_RE.finditer(rest)]
        _capitalized_runs(tokens, rest, known_people, add)
        _lexicon_nouns(tokens, add)
    return found


def _capitalized_runs(tokens: list[tuple[str, int]], text: str, people: set[str], add) -> None:  # noqa: ANN001
    i = 0
    while i < len(tokens):
        word, start = tokens[i]
        if not _is_name_word(word, first=(i == 0 or _starts_sentence(text, start))):
            i += 1
            continue
        run = [i]
        j = i + 1
        while j < len(tokens):
            nxt = tokens[j][0]
            if _is_name_word(nxt, first=False):
                run.append(j)
                j += 1
            elif nxt.lower() in _CONNECTORS and j + 1 < len(tokens) and _is_name_word(tokens[j + 1][0], first=False):
                run.extend([j, j + 1])
                j += 2
            else:
                break
        # A lowercase place noun right after a name belongs to it: "Santo Antonio hospital".
        if j < len(tokens) and tokens[j][0].lower() in _PLACE_NOUNS:
            run.append(j)
            j += 1
        words = [tokens[k][0] for k in run]
        words[-1] = re.sub(r"['’]s$", "", words[-1])
        phrase = " ".join(words)
        before = tokens[i - 1][0].lower() if i > 0 else ""
        if phrase.lower() in people or before in _KINSHIP:
            kind: CueKind = "person"
        elif before in _PLACE_PREPOSITIONS or words[-1].lower() in _PLACE_NOUNS or words[0] in ("Rua", "Avenida"):
            kind = "place"
        else:
            kind = "entity"
        add(phrase, kind)
        i = j


def _starts_sentence(text: str, start: int) -> bool:
    end = start  # the text before ``start`` without its trailing spaces, read back from ``start`` (no copy)
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end == 0 or text[end - 1] in ".!?:;\"'(" or (end >= 2 and text[end - 2 : end] == "--")


def _is_name_word(word: str, *, first: bool) -> bool:
    if not word or not word[0].isupper() or word in ("I", "I'm", "I've", "I'd", "I'll"):
        return False
    bare = re.sub(r"['’]s$", "", word)
    if bare in _MONTH_SET or bare in _WEEKDAYS:
        return False
    if bare.lower() in _COMMON:
        return False
    # A sentence-initial "Pottery" or "Sushi" is a noun the lexicon pass picks up with its kind.
    return not (first and bare.lower() in (_ACTIVITY_NOUNS | _THING_NOUNS))


def _lexicon_nouns(tokens: list[tuple[str, int]], add) -> None:  # noqa: ANN001
    lowered = [t[0].lower() for t in tokens]
    for i, word in enumerate(lowered):
        if word not in _ACTIVITY_NOUNS and word not in _THING_NOUNS:
            continue
        if not tokens[i][0][0].islower() and i > 0:
            continue  # a capitalized head mid-sentence is part of a name, found above
        if i + 1 < len(lowered) and tokens[i + 1][0][0].islower() and (
            lowered[i + 1] in _ACTIVITY_NOUNS or lowered[i + 1] in _THING_NOUNS
        ):
            continue  # "ramen bar", "matcha latte": the compound is the cue, found at its last word
        start = i
        while start > 0 and i - start < 2:
            prev = tokens[start - 1][0]
            # "Night shifts ..." at the start of a sentence: a capitalized common word still modifies.
            sentence_start = start - 1 == 0 and prev.lower() in _COMMON
            if not (prev[0].islower() or sentence_start):
                break
            low = prev.lower()
            if low in _FUNCTION_WORDS or low in _NOT_MODIFIERS or prev.isdigit():
                break
            start -= 1
        phrase = " ".join(tokens[k][0] for k in range(start, i + 1))
        kind: CueKind = "activity" if word in _ACTIVITY_NOUNS else "entity"
        add(phrase, kind)


def extract_personal_facts(turn: Turn) -> list[tuple[str, str, str, list[TextCue]]]:
    """First-person sentences of a turn that say something about its speaker, with their aspects.

    Returns ``(person, aspect, content, cues)`` per (sentence, aspect); ``content`` is the sentence,
    verbatim, attributed to the speaker.
    """
    facts = []
    for sentence in pattern_sentences(turn.text):
        words = set(_words(sentence))
        if not words & _FIRST_PERSON:
            continue
        aspects = detect_aspects(sentence)
        cues = extract_cues(sentence, people=[turn.speaker])
        if not aspects or (aspects == ["preference"] and not cues):
            continue  # "I would love that." says nothing lasting about the speaker
        content = f"{turn.speaker}: {sentence}"
        for aspect in aspects:
            facts.append((turn.speaker, aspect, content, cues))
    return facts


# -- building a session's records -------------------------------------------------------------------


def heuristic_links(turns: Sequence[Turn], events: Sequence[Event]) -> list[CueLink]:
    """Cue links of a session without a model: cues of each event's sentences, facts of first-person ones."""
    by_id = {t.dia_id: t for t in turns}
    speakers = sorted({t.speaker for t in turns})
    links: list[CueLink] = []
    for event in events:
        for tid in event.turn_ids:
            turn = by_id.get(tid)
            if turn is None:  # a turn of an earlier session merged into this event: tagged back then
                continue
            sentences = pattern_sentences(turn.text)
            if turn.image_caption:
                sentences.append(f"[shares an image: {turn.image_caption}]")
            turn_aspects = detect_aspects(pattern_text(turn.text))
            for sentence in sentences:
                # "His name is Biscuit." follows "I adopted a dog": the turn says what the sentence is about.
                aspects = [a for a in detect_aspects(sentence) if a != "preference"] or turn_aspects
                for cue in extract_cues(sentence, people=speakers):
                    label = next((a for a in aspects if a != "preference"), None) or cue.kind
                    links.append(CueLink(cue.text, cue.kind, "event", event.id, label, turn.speaker,
                                         f"{turn.speaker}: {sentence}"))
    for turn in turns:
        for person, aspect, content, cues in extract_personal_facts(turn):
            fid = personal_fact_id(turn.dia_id, person, aspect, content)
            links.append(CueLink(person, "person", "fact", fid, aspect, person, content))
            for cue in cues:
                if normalize_cue(cue.text) != normalize_cue(person):
                    links.append(CueLink(cue.text, cue.kind, "fact", fid, aspect, person, content))
    return links


def build_cue_layer(
    namespace: str,
    turns: Sequence[Turn],
    events: Sequence[Event],
    *,
    extra_links: Sequence[CueLink] = (),
    existing_cues: Mapping[str, Cue] | None = None,
    existing_tags: Iterable[str] = (),
    heuristic: bool = True,
) -> CueLayerBatch:
    """The cue and tag records of a session: heuristic links (when asked) plus ``extra_links``.

    Cues and tags already committed are not written again, except a cue whose kind this session
    makes more specific ("Lisbon" first seen as an entity, later after "in": a place). Tags are unique
    per (cue, target, label); the first sentence that gave one is its content.
    """
    links = [*(heuristic_links(turns, events) if heuristic else []), *extra_links]
    known_cues, known_tags = dict(existing_cues or {}), set(existing_tags)
    # A name said once at the start of a sentence ("Porto is lovely") and once after "in" is a place:
    # the most specific kind any mention gives wins.
    kinds: dict[str, str] = {}
    for link in links:
        cid = cue_id(link.cue)
        if _KIND_RANK.get(link.kind, 9) < _KIND_RANK.get(kinds.get(cid, ""), 9):
            kinds[cid] = link.kind
    batch = CueLayerBatch()
    cues: dict[str, Cue] = {}
    tags: dict[str, Tag] = {}
    for link in links:
        key = normalize_cue(link.cue)
        if not key or not link.tag.strip():
            continue
        cid = cue_id(link.cue)
        kind = kinds.get(cid, link.kind)
        known = known_cues.get(cid)
        if cid not in cues and (known is None or _KIND_RANK.get(kind, 9) < _KIND_RANK.get(known.kind, 9)):
            text = known.text if known is not None else _clean(link.cue)
            cues[cid] = Cue(id=cid, namespace=namespace, text=text, kind=kind)
        label = link.tag.strip().lower()[:40]
        tid = tag_id(cid, link.target_kind, link.target_id, label)
        if tid in known_tags or tid in tags:
            continue
        tags[tid] = Tag(id=tid, namespace=namespace, cue_id=cid, tag=label, target_kind=link.target_kind,
                        target_id=link.target_id, person=link.person, content=link.content)
    batch.cues = list(cues.values())
    batch.tags = list(tags.values())
    return batch
