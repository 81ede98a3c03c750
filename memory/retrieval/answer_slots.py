"""The answer slot: what a question asks for, and the evidence sentence (or clause) that fills it, without a model.

A question asks for one kind of thing, its focus (``question_focus``, from its wh-word and a few patterns): a
time, a place, a person, a name, a count, a reason, or a thing. ``choose_answer`` scores every candidate
sentence of the cited evidence by

- overlap: the question's content words it shares (``text.sentence_scores``: idf-weighted over the candidates,
  the speakers' names and fillers such as "now" not counting, a question or a mere echo of the question
  discounted), and ``CONTEXT_WEIGHT`` of the overlap of its context (the rest of its turn, and the question the
  turn answers): the sentence that fills the slot often leaves the question's words to its neighbour;
- focus: whether it holds a span of the asked type that the question does not already name (``focus_spans``:
  ``cue_extraction.extract_cues``' typed spans, i.e. time expressions (``timeparse``), quantities, capitalised
  names and places; numbers; quoted titles; "because" clauses), with no gazetteer;
- aspect: the question's aspect words (``cue_extraction.resolve_aspects``, and ``SLOT_WORDS``: "live" asks about
  home, so "my new flat" and "moved" count);
- rank: where its evidence item ranks (the strategy's order).

``answer_clause`` then trims the chosen sentence to the clause that holds the slot when the sentence joins
clauses with commas, semicolons or "and"/"but". The weights were chosen on development data only: the LoCoMo
development half (``../shared/data/locomo-dev5.json``) and the bundled sample (``evals/bench/bench_answers.py``,
figures in docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from logicmap.memory.indexes.cue_extraction import ASPECTS, TextCue, extract_cues, resolve_aspects
from logicmap.memory.language.text import content_stems, sentence_scores, tokenize
from logicmap.memory.language.timeparse import find_time_phrases

__all__ = [
    "FOCUS_WEIGHT",
    "ASPECT_WEIGHT",
    "OPEN_FOCUS_WEIGHT",
    "CONTEXT_WEIGHT",
    "RANK_WEIGHT",
    "SLOT_WORDS",
    "Focus",
    "SlotCandidate",
    "answer_clause",
    "choose_answer",
    "focus_spans",
    "question_focus",
    "slot_scores",
]

Focus = Literal["time", "count", "name", "place", "person", "reason", "thing", "other"]

FOCUS_WEIGHT = 4.0
"""What a span of the asked type adds to a sentence's score (one shared rare word adds about 2-4)."""
OPEN_FOCUS_WEIGHT = 1.0
"""The same for a thing or a reason, whose spans (noun phrases, "because") most sentences hold."""
ASPECT_WEIGHT = 1.0
"""What the question's aspect words in a sentence add (once per aspect)."""
CONTEXT_WEIGHT = 0.5
"""The share of its turn's other sentences' overlap a sentence adds to its own."""
RANK_WEIGHT = 1.0
"""What the first evidence item adds (``RANK_WEIGHT / (1 + rank)``): ties go to the better-ranked evidence."""

_PLACE_NOUNS = (
    "city",
    "country",
    "town",
    "state",
    "place",
    "location",
    "area",
    "region",
    "island",
    "beach",
    "park",
    "restaurant",
    "cafe",
    "store",
    "shop",
    "venue",
    "neighbourhood",
    "neighborhood",
    "destination",
)
_PERSON_NOUNS = (
    "person",
    "friend",
    "friends",
    "artist",
    "artists",
    "author",
    "band",
    "singer",
    "musician",
    "actor",
    "player",
    "team",
    "mentor",
    "partner",
)
_FOCUS_PATTERNS: tuple[tuple[Focus, re.Pattern[str]], ...] = (
    (
        "time",
        re.compile(
            r"^\s*when\b|\b(?:what|which) (?:date|day|month|year|time|week|weekend|season)\b"
            r"|\bhow long ago\b|\bsince when\b",
            re.IGNORECASE,
        ),
    ),
    (
        "count",
        re.compile(
            r"\bhow (?:many|much|long|old|often|far|fast)\b|\bwhat (?:age|number|score|percentage)\b"
            r"|\b(?:time|score|age|pace|distance|price|cost)\W*$",
            re.IGNORECASE,
        ),
    ),
    ("name", re.compile(r"\b(?:name|names|named|called|title)\b", re.IGNORECASE)),
    (
        "place",
        re.compile(
            rf"^\s*(?:from\s+)?where\b|\b(?:what|which|in what|in which) (?:{'|'.join(_PLACE_NOUNS)})\b", re.IGNORECASE
        ),
    ),
    (
        "person",
        re.compile(
            rf"^\s*(?:who|whom|whose)\b|\b(?:with|by|to|for|from) whom\b"
            rf"|\b(?:what|which) (?:{'|'.join(_PERSON_NOUNS)})\b",
            re.IGNORECASE,
        ),
    ),
    (
        "reason",
        re.compile(
            r"^\s*why\b|\bwhat (?:made|makes|caused|motivated|inspired|prompted|led)\b"
            r"|\bfor what reason\b",
            re.IGNORECASE,
        ),
    ),
    ("thing", re.compile(r"^\s*(?:what|which)\b|\b(?:what|which) (?:kind|type|sort)\b", re.IGNORECASE)),
)
_NUMBER = re.compile(
    r"\b\d+(?:[.,:]\d+)?\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"fifteen|twenty|thirty|forty|fifty|hundred|thousand|dozen|once|twice|a couple)\b",
    re.IGNORECASE,
)
_REASON = re.compile(r"\b(?:because|since|so that|due to|thanks to|in order to)\b|, so\b", re.IGNORECASE)
_QUOTED = re.compile(r"[\"“]([^\"“”]{2,60})[\"”]")
_CLAUSE = re.compile(
    r"\s*[;,]\s+(?:(?:and|but|so|then)\s+)?|\s+(?:and|but)\s+(?=(?:I|we|he|she|they|it|you|my|our|his|her|their)\b)"
)


def question_focus(question: str) -> Focus:
    """What ``question`` asks for: the first of time, count, name, place, person, reason, thing whose pattern it
    matches ("When ...", "How many ...", "... the name of ...", "Where ...", "Who ...", "Why ...", "What ..."),
    else ``"other"`` (a yes/no question, an instruction)."""
    for focus, pattern in _FOCUS_PATTERNS:
        if pattern.search(question):
            return focus
    return "other"


@dataclass(frozen=True)
class SlotCandidate:
    """A sentence that may answer: its text, its evidence item's rank (0: the best), and its context (the other
    sentences of its turn: a sentence that fills the slot often leaves the question's words to its neighbour)."""

    text: str
    rank: int = 0
    context: str = ""


def _known(words: Iterable[str]) -> frozenset[str]:
    return frozenset(w for text in words for w in tokenize(text))


def focus_spans(focus: Focus, sentence: str, *, known: Iterable[str] = ()) -> list[str]:
    """The spans of ``sentence`` of the asked type that name something not in ``known`` (the question's words,
    the speakers' names): time expressions for a time, numbers and quantities for a count, capitalised names
    for a name or a person, places (capitalised, after "in/at/to/from/near...") for a place, "because", "since",
    "so that", "due to" for a reason, noun phrases, names and quoted titles for a thing. Gazetteer-free."""
    old = _known(known)

    def new(span: str) -> bool:
        return bool(set(tokenize(span)) - old)

    if focus == "reason":
        return [m.group(0) for m in _REASON.finditer(sentence)]
    if focus == "count":
        return [m.group(0) for m in _NUMBER.finditer(sentence)]
    if focus == "time":
        spans = find_time_phrases(sentence)
        spans += [c.text for c in extract_cues(sentence) if c.kind == "time" and c.text not in spans]
        return spans
    cues = [c for c in extract_cues(sentence) if new(c.text) and not sentence.startswith(c.text)]
    titles = [m.group(1) for m in _QUOTED.finditer(sentence) if new(m.group(1))]  # "Charlotte's Web": a title
    if focus in ("name", "thing"):
        cues = [*cues, *(TextCue(t, "entity") for t in titles)]
    if focus == "place":
        return [c.text for c in cues if c.kind == "place"]
    if focus == "person":
        return [c.text for c in cues if c.kind in ("person", "entity") and c.text[:1].isupper()]
    if focus == "name":
        return [c.text for c in cues if c.kind in ("person", "place", "entity") and c.text[:1].isupper()]
    if focus == "thing":
        return [c.text for c in cues if c.kind in ("entity", "activity", "place", "person")]
    return []


SLOT_WORDS: dict[str, frozenset[str]] = {
    "live": frozenset(
        "moved move moving flat apartment house home neighbourhood neighborhood settled relocated lives living".split()
    ),
    "work": frozenset("job works working hired employed office career colleagues boss".split()),
    "name": frozenset("named called name".split()),
    "called": frozenset("named called name".split()),
}
"""The words a sentence that answers a question with the key's verb tends to use instead ("Where does Maya live?":
"I moved to Lisbon", "my new flat is in Alfama"): they count as an aspect of the question."""
_TYPED: frozenset[Focus] = frozenset({"time", "count", "name", "place", "person"})
"""The focus types whose span can answer a question that shares no word with the sentence ("Where does Maya live?":
"I moved to Lisbon"), and whose answer is cut to the clause that holds the span."""
_FILLER = (
    "now",
    "then",
    "still",
    "also",
    "just",
    "really",
    "ever",
    "ago",
    "say",
    "said",
    "tell",
    "told",
    "mention",
    "mentioned",
)


def slot_scores(question: str, candidates: Sequence[SlotCandidate], *, ignore: Sequence[str] = ()) -> list[float]:
    """Each candidate's score as an answer to ``question`` (0.0: it shares no content word with the question
    and holds nothing of the asked type): overlap + focus + aspect + rank, the module's weights."""
    focus = question_focus(question)
    overlap = sentence_scores(question, [c.text for c in candidates], ignore=[*ignore, *_FILLER])
    around = sentence_scores(question, [c.context for c in candidates], ignore=[*ignore, *_FILLER])
    known = [question, *ignore]
    asked = set(tokenize(question))
    aspects = [ASPECTS[a] for a in resolve_aspects(question) if a in ASPECTS]
    aspects += [words for verb, words in SLOT_WORDS.items() if verb in asked]
    scores = []
    for candidate, own, near in zip(candidates, overlap, around, strict=True):
        shared = own + CONTEXT_WEIGHT * near
        words = {w.lower() for w in re.findall(r"[A-Za-z']+", candidate.text)}
        spans = not candidate.text.rstrip().endswith("?") and focus_spans(focus, candidate.text, known=known)
        typed = (FOCUS_WEIGHT if focus in _TYPED else OPEN_FOCUS_WEIGHT) if spans else 0.0
        aspect = ASPECT_WEIGHT * sum(1 for lexicon in aspects if lexicon & words)
        if shared <= 0 and not aspect and not (typed and focus in _TYPED):
            scores.append(0.0)
            continue
        scores.append(shared + typed + aspect + RANK_WEIGHT / (1 + candidate.rank))
    return scores


def choose_answer(question: str, candidates: Sequence[SlotCandidate], *, ignore: Sequence[str] = ()) -> int | None:
    """The index of the candidate that best fills the question's slot (``slot_scores``; the earlier candidate
    wins a tie), or ``None`` when none shares a content word or an aspect with the question or holds a span of
    its (time, count, name, place or person) focus."""
    scores = slot_scores(question, candidates, ignore=ignore)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i), default=None)
    return best if best is not None and scores[best] > 0 else None


def answer_clause(question: str, sentence: str, *, ignore: Sequence[str] = ()) -> str:
    """The clause of ``sentence`` that alone holds a span of the asked type (a time, count, name, place or
    person), or the whole sentence (one clause, another focus, or no clause or several hold such a span)."""
    clauses = [c for c in _CLAUSE.split(sentence) if content_stems(c)]
    if len(clauses) < 2:
        return sentence
    focus = question_focus(question)
    if focus not in _TYPED:
        return sentence
    known = [question, *ignore]
    typed = [i for i, c in enumerate(clauses) if focus_spans(focus, c, known=known)]
    if len(typed) != 1:
        return sentence
    return clauses[typed[0]].strip().rstrip(".,;") + "."
