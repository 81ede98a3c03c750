"""Cues and facts about people found in text without a model, and a session's cue and tag records.

``extract_cues`` finds verbatim keywords (times, quantities, names and places, activity and thing nouns),
``extract_personal_facts`` the first-person sentences that say something lasting about their speaker,
``heuristic_links`` both for a session's events, and ``build_cue_layer`` turns links (these and an LLM
extractor's) into the ``Cue``/``Tag`` records of the layer (``memory/records/cues.py`` describes the layout).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from logicmap.memory.indexes.embeddings import HashingEmbeddings, normalize
from logicmap.memory.language.lexicon import (
    ADVERBS,
    ASPECT_DESCRIPTIONS,
    ASPECT_SYNONYMS,
    CONTRACTIONS,
    HEDGES,
    INTERJECTIONS,
    IRREGULAR_VERBS,
    KINSHIP_TERMS,
    NAME_PARTICLES,
    NUMBER_WORDS,
    PREFERENCE_WORDS,
    REPORTING_VERBS,
    SKLEARN_STOP_WORDS,
    TEMPORAL_WORDS,
)
from logicmap.memory.language.text import FUNCTION_WORDS, pattern_sentences, pattern_text, singular
from logicmap.memory.language.timeparse import MONTHS, time_phrase_spans
from logicmap.memory.records.cues import (
    CueKind,
    CueLayerBatch,
    CueLink,
    cue_id,
    normalize_cue,
    personal_fact_id,
    tag_id,
)
from logicmap.memory.records.records import Cue, Event, Tag, Turn

__all__ = [
    "ASPECTS",
    "AspectPrototypes",
    "SentenceAspects",
    "aspect_prototypes",
    "TextCue",
    "build_cue_layer",
    "detect_aspects",
    "extract_cues",
    "extract_personal_facts",
    "heuristic_links",
    "resolve_aspects",
]

# Aspects of a person's life that facts and event tags are filed under: the a-priori taxonomy of
# memory/language/lexicon.py. Without an embedder a sentence is about an aspect when it uses the aspect's label, a word of
# its description or a synonym; with one (``AspectPrototypes``) when it is nearer the description than a null one.
ASPECTS: dict[str, frozenset[str]] = {
    aspect: frozenset(
        {aspect, *(w.strip(",") for w in description.split() if w.strip(",") not in SKLEARN_STOP_WORDS)}
        | {syn for syn, label in ASPECT_SYNONYMS.items() if label == aspect}
    )
    for aspect, description in ASPECT_DESCRIPTIONS.items()
}
# Kinship terms name family (lexicon.KINSHIP_TERMS without the social ones and the naming verbs).
ASPECTS["family"] = ASPECTS["family"] | (
    KINSHIP_TERMS
    - frozenset("friend friends colleague colleagues coworker coworkers boss neighbour neighbor named called".split())
)
# What a sentence about none of the aspects is near (small talk): the prototype an aspect must beat.
_NULL_ASPECT = "small talk: greetings, thanks and reactions"
_MAX_ASPECTS = 2

# Words that start sentences with a capital letter without being names: closed classes only (lexicon.py).
_COMMON = (
    SKLEARN_STOP_WORDS
    | CONTRACTIONS
    | INTERJECTIONS
    | TEMPORAL_WORDS
    | NUMBER_WORDS
    | ADVERBS
    | HEDGES
    | PREFERENCE_WORDS
    | REPORTING_VERBS
    | frozenset(IRREGULAR_VERBS)
)
_CONNECTORS = NAME_PARTICLES | frozenset({"of", "the", "and"})
_KINSHIP = KINSHIP_TERMS
_PLACE_PREPOSITIONS = frozenset("in at to from near on into around across".split())
_MONTH_SET = frozenset(MONTHS)
_WEEKDAYS = frozenset("Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split())
_NUMBER_WORDS = (
    r"(?:\d+(?:\.\d+)?|"
    + "|".join(
        sorted(
            NUMBER_WORDS
            - {"first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"},
            key=len,
            reverse=True,
        )
    )
    + r"|a hundred)"
)
_QUANTITY_RE = re.compile(
    rf"\b{_NUMBER_WORDS}\s+(?:hours?|minutes?|seconds?|kilometres?|kilometers?|km|miles?|metres?|meters?|"
    rf"kilos?|kg|pounds?|euros?|dollars?|percent)(?:\s+(?:and\s+)?\d+\s+(?:minutes?|seconds?))?\b",
    re.IGNORECASE,
)
_MONTH_RE = "|".join(MONTHS)
_DATE_RES = [
    re.compile(
        rf"\b(?:(?:early|mid|late|the end of|end of|the beginning of|beginning of)\s+)?"
        rf"(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTH_RE})(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?\b"
    ),
    re.compile(
        r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?(?:\s+(?:mornings?|afternoons?|evenings?|nights?))?\b"
    ),
    re.compile(r"\b(?:19|20)\d{2}\b"),
    re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b"),
]
# A noun phrase cue is the run of content words after one of these: "my new flat", "an iced latte".
_DETERMINERS = frozenset("a an the my your his her our their this that these those some".split())
# Words that end such a run (function words, time and hedge words); lexicon.py classes only.
_NOT_IN_PHRASE = (_COMMON - NUMBER_WORDS) | FUNCTION_WORDS | KINSHIP_TERMS
_MAX_PHRASE_WORDS = 3
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


class AspectPrototypes:
    """Aspect prototypes from an embedder: each aspect's description (``lexicon.ASPECT_DESCRIPTIONS``) embedded once.

    A sentence is about the (at most two) aspects whose prototype is nearer to it than the prototype of a
    sentence about nothing in particular; no threshold is fitted to any conversation.
    """

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        self.labels = list(ASPECT_DESCRIPTIONS)
        vectors = embeddings.embed_documents([ASPECT_DESCRIPTIONS[a] for a in self.labels] + [_NULL_ASPECT])
        matrix = np.asarray(vectors, dtype=float)
        self._prototypes = normalize(matrix[:-1])
        self._null = normalize(matrix[-1])

    def nearest(self, sentences: Sequence[str]) -> list[list[str]]:
        """The aspects each sentence is about, nearest first."""
        if not sentences:
            return []
        vectors = normalize(np.asarray(self.embeddings.embed_documents(list(sentences)), dtype=float))
        found = []
        for sims, null in zip(vectors @ self._prototypes.T, vectors @ self._null, strict=True):
            order = [i for i in np.argsort(-sims) if sims[i] > null][:_MAX_ASPECTS]
            found.append([self.labels[i] for i in order])
        return found


def aspect_prototypes(embeddings: Any) -> AspectPrototypes | None:
    """Prototypes for a semantic embedder; ``None`` for a lexical one (hashed words), whose prototype of an
    aspect is only its words: the taxonomy words then decide alone, without chance hash collisions."""
    inner = getattr(embeddings, "inner", embeddings)
    if embeddings is None or isinstance(inner, HashingEmbeddings):
        return None
    return AspectPrototypes(embeddings)


def detect_aspects(sentence: str, *, nearest: Sequence[str] = ()) -> list[str]:
    """Aspects a sentence talks about (``preference`` first when it states a like or dislike).

    ``nearest`` are the aspects ``AspectPrototypes`` found for it; the words of the taxonomy add theirs.
    """
    words = set(_words(sentence))
    found = ["preference"] if words & PREFERENCE_WORDS else []
    found.extend(nearest)
    found.extend(a for a, lexicon in ASPECTS.items() if words & lexicon or {singular(w) for w in words} & lexicon)
    return list(dict.fromkeys(found))


class SentenceAspects(Mapping[str, list[str]]):
    """The aspects of a session's sentences (``detect_aspects`` with the prototypes' nearest), embedded only when
    read: ``prefetch`` embeds the ones about to be read in one batch, a read of another embeds it alone.

    A sentence's aspects label the tags of the cues it holds and file the facts of first-person sentences; most
    sentences of a conversation hold neither, and a turn's whole text is read only when its sentence says
    nothing topical (``heuristic_links``): embedding all of them was about half of a no-LLM ingest's encoding.
    """

    def __init__(self, sentences: Iterable[str], prototypes: AspectPrototypes | None) -> None:
        self._keys = list(dict.fromkeys(sentences))
        self._candidates = frozenset(self._keys)
        self._prototypes = prototypes
        self._known: dict[str, list[str]] = {}

    def prefetch(self, sentences: Iterable[str]) -> None:
        """Embed, in one batch, the sentences among ``sentences`` that are keys and not embedded yet."""
        wanted = [s for s in dict.fromkeys(sentences) if s in self._candidates and s not in self._known]
        if not wanted:
            return
        near = self._prototypes.nearest(wanted) if self._prototypes is not None else [[] for _ in wanted]
        for sentence, nearest in zip(wanted, near, strict=True):
            self._known[sentence] = detect_aspects(sentence, nearest=nearest)

    def __getitem__(self, sentence: str) -> list[str]:
        if sentence not in self._candidates:
            raise KeyError(sentence)
        if sentence not in self._known:
            self.prefetch([sentence])
        return self._known[sentence]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def resolve_aspects(text: str) -> list[str]:
    """Aspects a free-text aspect or question names: 'favourite food' -> ['preference', 'food']."""
    words = [w for w in _words(text)]
    found: list[str] = []
    for word in words:
        for candidate in (word, singular(word)):
            if candidate == "preference" or candidate in ASPECTS:
                found.append(candidate)
            elif candidate in ASPECT_SYNONYMS:
                found.append(ASPECT_SYNONYMS[candidate])
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
                    covered[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
        for match in _QUANTITY_RE.finditer(sentence):
            add(match.group(0), "quantity")
            spans.append(match.span())
        rest = _mask(sentence, spans)
        tokens = [(m.group(0), m.start()) for m in _TOKEN_RE.finditer(rest)]
        _capitalized_runs(tokens, rest, known_people, add)
        _noun_phrases(tokens, add)
    return found


def _capitalized_runs(tokens: list[tuple[str, int]], text: str, people: set[str], add: Callable[..., Any]) -> None:
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
        words = [tokens[k][0] for k in run]
        words[-1] = re.sub(r"['’]s$", "", words[-1])
        phrase = " ".join(words)
        before = tokens[i - 1][0].lower() if i > 0 else ""
        if phrase.lower() in people or before in _KINSHIP:
            kind: CueKind = "person"
        elif before in _PLACE_PREPOSITIONS:
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
    return bare.lower() not in _COMMON


def _noun_phrases(tokens: list[tuple[str, int]], add: Callable[..., Any]) -> None:
    """The lowercase content words after a determiner or possessive: "my new flat" -> "new flat".

    A general grammatical pattern (no noun list): the run stops at a function word, a closed-class word,
    a capitalized word (a name, found above), a number or after three words; an "-ing" head is an activity.
    """
    for i, (word, _) in enumerate(tokens):
        if word.lower() not in _DETERMINERS:
            continue
        run: list[str] = []
        for nxt, _ in tokens[i + 1 : i + 1 + _MAX_PHRASE_WORDS]:
            low = nxt.lower().replace("’", "'")
            if not nxt[0].islower() or low in _NOT_IN_PHRASE or not low.isalpha():
                break
            run.append(nxt)
        if run:
            add(" ".join(run), "activity" if run[-1].lower().endswith("ing") else "entity")


def extract_personal_facts(
    turn: Turn, aspects_of: Mapping[str, list[str]] | None = None
) -> list[tuple[str, str, str, list[TextCue]]]:
    """First-person sentences of a turn that say something about its speaker, with their aspects.

    Returns ``(person, aspect, content, cues)`` per (sentence, aspect); ``content`` is the sentence,
    verbatim, attributed to the speaker. ``aspects_of`` maps sentences to the aspects found for them
    (with an embedder's prototypes); a sentence not in it gets the taxonomy words' aspects.
    """
    facts = []
    for sentence in pattern_sentences(turn.text):
        words = set(_words(sentence))
        if not words & _FIRST_PERSON:
            continue
        aspects = (aspects_of or {}).get(sentence) or detect_aspects(sentence)
        cues = extract_cues(sentence, people=[turn.speaker])
        if not aspects or (aspects == ["preference"] and not cues):
            continue  # "I would love that." says nothing lasting about the speaker
        content = f"{turn.speaker}: {sentence}"
        for aspect in aspects:
            facts.append((turn.speaker, aspect, content, cues))
    return facts


# -- building a session's records -------------------------------------------------------------------


def heuristic_links(
    turns: Sequence[Turn], events: Sequence[Event], *, prototypes: AspectPrototypes | None = None
) -> list[CueLink]:
    """Cue links of a session without a model: cues of each event's sentences, facts of first-person ones.

    With ``prototypes`` (an embedder's aspect prototypes) sentences are filed under the aspects they are
    near; without, under the aspects whose taxonomy words they use.
    """
    by_id = {t.dia_id: t for t in turns}
    speakers = sorted({t.speaker for t in turns})
    links: list[CueLink] = []
    aspects_of = SentenceAspects(
        [s for t in turns for s in (*pattern_sentences(t.text), pattern_text(t.text))], prototypes
    )
    cued: list[tuple[Event, Turn, str, list[TextCue]]] = []  # in the order the links are made
    for event in events:
        for tid in event.turn_ids:
            turn = by_id.get(tid)
            if turn is None:  # a turn of an earlier session merged into this event: tagged back then
                continue
            sentences = pattern_sentences(turn.text)
            if turn.image_caption:
                sentences.append(f"[shares an image: {turn.image_caption}]")
            cued.extend((event, turn, sentence, extract_cues(sentence, people=speakers)) for sentence in sentences)
    # Aspects are read for sentences with cues and first-person ones (facts), then for the whole text of a turn
    # whose cued sentence names no topical aspect of its own: two batches.
    aspects_of.prefetch(
        [
            *(s for _, _, s, cues in cued if cues),
            *(s for t in turns for s in pattern_sentences(t.text) if set(_words(s)) & _FIRST_PERSON),
        ]
    )
    aspects_of.prefetch(
        pattern_text(turn.text)
        for _, turn, sentence, cues in cued
        if cues and not _topical(aspects_of.get(sentence) or detect_aspects(sentence))
    )
    for event, turn, sentence, cues in cued:
        if not cues:
            continue
        # "His name is Biscuit." follows "I adopted a dog": the turn says what the sentence is about.
        whole = pattern_text(turn.text)
        aspects = (
            _topical(aspects_of.get(sentence) or detect_aspects(sentence))
            or aspects_of.get(whole)
            or detect_aspects(whole)
        )
        for cue in cues:
            label = next((a for a in aspects if a != "preference"), None) or cue.kind
            links.append(
                CueLink(cue.text, cue.kind, "event", event.id, label, turn.speaker, f"{turn.speaker}: {sentence}")
            )
    for turn in turns:
        for person, aspect, content, cues in extract_personal_facts(turn, aspects_of):
            fid = personal_fact_id(turn.dia_id, person, aspect, content)
            links.append(CueLink(person, "person", "fact", fid, aspect, person, content))
            for cue in cues:
                if normalize_cue(cue.text) != normalize_cue(person):
                    links.append(CueLink(cue.text, cue.kind, "fact", fid, aspect, person, content))
    return links


def _topical(aspects: list[str]) -> list[str]:
    """The aspects other than ``preference`` (which says how, not what about)."""
    return [a for a in aspects if a != "preference"]


def build_cue_layer(
    namespace: str,
    turns: Sequence[Turn],
    events: Sequence[Event],
    *,
    extra_links: Sequence[CueLink] = (),
    existing_cues: Mapping[str, Cue] | None = None,
    existing_tags: Iterable[str] = (),
    heuristic: bool = True,
    prototypes: AspectPrototypes | None = None,
) -> CueLayerBatch:
    """The cue and tag records of a session: heuristic links (when asked) plus ``extra_links``.

    Cues and tags already committed are not written again, except a cue whose kind this session
    makes more specific ("Lisbon" first seen as an entity, later after "in": a place). Tags are unique
    per (cue, target, label); the first sentence that gave one is its content. ``prototypes`` file the
    heuristic links' sentences under aspects by similarity (``heuristic_links``).
    """
    links = [*(heuristic_links(turns, events, prototypes=prototypes) if heuristic else []), *extra_links]
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
        tags[tid] = Tag(
            id=tid,
            namespace=namespace,
            cue_id=cid,
            tag=label,
            target_kind=link.target_kind,
            target_id=link.target_id,
            person=link.person,
            content=link.content,
        )
    batch.cues = list(cues.values())
    batch.tags = list(tags.values())
    return batch
