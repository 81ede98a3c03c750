"""The no-LLM answerers: every answer or reply a run gives without a chat model (the no-LLM policy of a method's
answering role, and that role's recorded fallback), one function each, named for what it answers from.

| answerer | answers from | used by |
| --- | --- | --- |
| ``answer_from_evidence`` | the evidence handed to the responder: the sentence that fills the question's slot (``memory.retrieval.answer_slots``), a "when" question's date | ``responder`` (CompassMem, rerank, dense, bm25, Memory-R2's answer agent) |
| ``answer_from_memory_lines`` | retrieved memory lines: their best sentence | ``goalmem_forward`` (the forward baselines) |
| ``answer_from_best_fact`` | R2 facts: the best fact's best sentence without the question's words | ``r2`` (fact answerer), ``evals.train`` |
| ``answer_from_active_set`` | MRAgent's active set: the best-matching turn, its event's date for "when" | ``reconstruct_policy``, ``graphs.strategies.reconstruct`` |
| ``reply_from_recall`` | what recall found: memory's answer to a question, an acknowledgement otherwise | ``graphs.chat.graph`` |

They read memory (``logicmap.memory``) and answer with the roles' typed outputs (``logicmap.prompts``); they import
no role module, so every role can import them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from logicmap.memory.indexes.cue_extraction import ASPECTS, resolve_aspects
from logicmap.memory.indexes.cue_index import CueIndex
from logicmap.memory.language.text import (
    NO_ANSWER,
    best_sentence,
    content_stems,
    is_no_answer,
    sentence_scores,
    split_sentences,
    tokenize,
)
from logicmap.memory.language.timeparse import date_text, find_time_phrases, parse_timestamp, resolve_relative
from logicmap.memory.records.r2 import FactRecord
from logicmap.memory.retrieval.answer_slots import SlotCandidate, answer_clause, choose_answer, question_focus
from logicmap.memory.retrieval.retrieval import BM25Index
from logicmap.memory.runtime.deadline import check_deadline
from logicmap.memory.store import NamespaceSnapshot
from logicmap.prompts.chat import ChatReply
from logicmap.prompts.forward_answer import ForwardAnswer
from logicmap.prompts.reconstruct import ReconstructedAnswer
from logicmap.prompts.respond import Answer

__all__ = [
    "NOTHING_RECALLED",
    "ActiveItem",
    "EvidenceLike",
    "EvidenceSentence",
    "answer_from_active_set",
    "answer_from_best_fact",
    "answer_from_evidence",
    "answer_from_memory_lines",
    "answer_with_sentence",
    "asks_when",
    "evidence_sentences",
    "retrieve_facts",
    "reply_from_recall",
]


class EvidenceLike(Protocol):
    """One evidence item as the responder sees it (``responder.EvidenceText``)."""

    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def time(self) -> str | None: ...


class ActiveItem(Protocol):
    """An item of MRAgent's active set (``graphs.runtime.result.EvidenceItem``): what the answerer reads of it."""

    @property
    def kind(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def turn_ids(self) -> list[str]: ...


# -- the responder's evidence -----------------------------------------------------------------------

_LEAD = re.compile(r"^(\[[^\]]*\]\s*|\([^)]*\)\s*)+")
_TRAIL = re.compile(r"(?<!\s)\s*\((?:\d{4}[-\d]*|undated)\)$")  # (?<!\s): tried once per run of spaces
_SPEAKER = re.compile(r"^[A-Z][\w .'-]{0,30}:\s+")
_LINE_DATE = re.compile(r"\((\d{4}-\d{2}-\d{2})\)\s*$")
_WHEN = re.compile(r"^\s*when\b|\bwhat (?:date|day|month|year)\b", re.IGNORECASE)


class EvidenceSentence(NamedTuple):
    """One sentence of the evidence: its text (speaker prefix and trailing date stripped), the evidence item it
    is in, the day its turn was said, where the item ranks (0: the first evidence item), and the other sentences
    of its turn."""

    text: str
    item_id: str
    anchor: datetime | None
    rank: int
    context: str = ""


_TURN_BREAK = re.compile(r"(?<=[.!?\])])\s+(?=[A-Z][\w.'-]{0,30}:\s)")  # "... puppy. Leo: That's ...": a new turn


def evidence_sentences(evidence: Sequence[EvidenceLike]) -> tuple[list[EvidenceSentence], list[str]]:
    """The sentences of ``evidence`` in order, each once, and the speaker prefixes seen (``"Maya: "``).

    An item that quotes its turns (lines dated ``(YYYY-MM-DD)``, as ``compass_policy.render_with_turns`` writes
    them) is read from those lines, its summary (which repeats or paraphrases them, dated by the event) left out;
    a line that joins several turns ("Maya: ... Leo: ...") is read turn by turn.
    """
    lines = [_LEAD.sub("", line.strip()) for item in evidence for line in item.text.splitlines()]
    speakers = [m.group(0) for line in lines if (m := _SPEAKER.match(line))]
    sentences: list[EvidenceSentence] = []
    seen: set[str] = set()
    for rank, item in enumerate(evidence):
        dated: list[tuple[str, re.Match[str] | None]] = [
            (line, said) for line in item.text.splitlines() if (said := _LINE_DATE.search(line))
        ]
        asked = ""  # the turn before, when it asked a question: the turn after answers it
        for line, said in dated or [(line, None) for line in item.text.splitlines()]:
            # The date a turn was said: its line's "(YYYY-MM-DD)", else the evidence item's time.
            anchor = parse_timestamp(said.group(1) if said else (item.time or "")[:10])
            for turn in _TURN_BREAK.split(_LEAD.sub("", line.strip())):
                parts = [_TRAIL.sub("", _SPEAKER.sub("", s)) for s in split_sentences(_SPEAKER.sub("", turn))]
                for index, sentence in enumerate(parts):
                    if not content_stems(sentence) or sentence in seen:
                        continue
                    seen.add(sentence)
                    context = " ".join([asked, *parts[:index], *parts[index + 1 :]]).strip()
                    sentences.append(EvidenceSentence(sentence, item.id, anchor, rank, context))
                asked = " ".join(p for p in parts if p.rstrip().endswith("?"))
    return sentences, speakers


def answer_from_evidence(question: str, evidence: Sequence[EvidenceLike]) -> Answer:
    """The evidence sentence (or clause) that fills the question's slot (``answer_slots.choose_answer``: what
    the question asks for, a time, count, name, place, person, reason or thing; the question's words it and its
    turn share; the evidence's rank), its speaker prefix stripped; earlier evidence wins ties.

    A "when" question is answered with the date the sentence's time phrase means on the day its turn was said,
    or, when the sentence has no time phrase, with the sentence and that day.
    """
    sentences, speakers = evidence_sentences(evidence)
    best = choose_answer(question, [SlotCandidate(s.text, s.rank, s.context) for s in sentences], ignore=speakers)
    return answer_with_sentence(question, sentences[best] if best is not None else None, speakers)


def answer_with_sentence(question: str, chosen: EvidenceSentence | None, speakers: Sequence[str]) -> Answer:
    """The answer ``answer_from_evidence`` gives once its sentence is ``chosen`` (None: nothing answers): a "when"
    question's date, else the sentence's clause that answers (``answer_slots.answer_clause``)."""
    if chosen is None:
        return Answer(answer=NO_ANSWER, cited_ids=[])
    sentence, item_id, anchor = chosen[:3]
    if question_focus(question) == "time":  # "yesterday", said on 8 May 2023, answers "When ...?" with 7 May 2023
        for phrase in find_time_phrases(sentence):
            resolved = resolve_relative(phrase, anchor)
            if resolved:
                return Answer(answer=date_text(resolved), cited_ids=[item_id])
        if anchor is not None:  # no time phrase: the event was told the day it was said
            return Answer(answer=f"{sentence} ({date_text(anchor)})", cited_ids=[item_id])
    return Answer(answer=answer_clause(question, sentence, ignore=speakers), cited_ids=[item_id])


# -- the forward baselines' memory lines ------------------------------------------------------------

_LINE_SPEAKER = re.compile(r"^\s*(\[[^\]]*\]\s*)?(\([^)]*\)\s*)?[A-Z][\w' ]{0,30}:\s*")


def answer_from_memory_lines(question: str, memories: Sequence[tuple[str, str, str | None]]) -> ForwardAnswer:
    """The sentence of the retrieved memories (``(id, text, date)`` lines) that best answers the question
    (``best_sentence``). The forward baselines cite the memory their answer comes from, so this rule stays: the
    answer-slot rule would change their evidence, not only their answer."""
    sentences = [(mid, s) for mid, text, _ in memories for s in split_sentences(_LINE_SPEAKER.sub("", text))]
    best = best_sentence(question, [s for _, s in sentences])
    if best is None:
        return ForwardAnswer(answer=NO_ANSWER, cited=[])
    mid, sentence = sentences[best]
    return ForwardAnswer(answer=sentence, cited=[mid])


# -- Memory-R2's facts ------------------------------------------------------------------------------

# The same patterns as ``agents.r2``'s (a fact's "X said:" lead, a word): this module imports no role module.
_SAID = re.compile(r"^\s*[A-Z][\w'-]*\s+said:\s*")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")


def _stemmed(text: str) -> str:
    return " ".join(content_stems(text))


def retrieve_facts(question: str, facts: Sequence[FactRecord], k: int = 3) -> list[FactRecord]:
    """The k facts that match the question best by BM25 over the facts; ties go to the more recent fact."""
    if not facts:
        return []
    scores = BM25Index([_stemmed(f.text) for f in facts]).scores(_stemmed(question))
    order = sorted(range(len(facts)), key=lambda i: (float(scores[i]), i), reverse=True)
    return [facts[i] for i in order[:k] if scores[i] > 0]


def answer_from_best_fact(question: str, facts: Sequence[FactRecord]) -> str:
    """From the best-matching fact, its sentence that best answers the question (``best_sentence``), without
    the question's own words and stop words (``NO_ANSWER`` when no fact matches)."""
    top = retrieve_facts(question, facts, k=1)
    if not top:
        return NO_ANSWER
    asked = frozenset(content_stems(question))
    sentences = split_sentences(_SAID.sub("", top[0].text)) or [top[0].text]
    best = sentences[best_sentence(question, sentences) or 0]
    kept = [w for w in _WORD.findall(best) if (toks := frozenset(content_stems(w))) and not toks <= asked]
    return " ".join(kept)


# -- MRAgent's active set ---------------------------------------------------------------------------

_TEMPORAL_WORDS = ("when", "what date", "what time", "how long ago", "which day", "which month", "which year")
_FILLER = ("now", "then", "still", "also", "just", "really", "ever", "ago", "say", "said", "tell", "told")


def asks_when(question: str) -> bool:
    """Whether ``question`` asks for a time ("When ...", "... what date ...", "how long ago ...")."""
    q = question.lower()
    return any(q.startswith(w) or f" {w} " in q for w in _TEMPORAL_WORDS)


def _words_of(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z']+", text)]


def _answer_candidates(question: str, turns: Iterable[str], snapshot: NamespaceSnapshot) -> list[tuple[str, int, str]]:
    """(turn id, sentence index, sentence) of every sentence of ``turns`` that could answer ``question``."""
    candidates: list[tuple[str, int, str]] = []
    asked = " ".join(tokenize(question))
    for tid in turns:
        check_deadline("while reconstruct read candidate sentences")
        turn = snapshot.turns.get(tid)
        if turn is None:
            continue
        for index, sentence in enumerate(split_sentences(turn.text)):
            # A question is rarely its own answer (the same question asked earlier never is).
            if not sentence.rstrip().endswith("?") and " ".join(tokenize(sentence)) != asked:
                candidates.append((tid, index, sentence))
    return candidates


def answer_from_active_set(
    question: str,
    active: Sequence[ActiveItem],
    snapshot: NamespaceSnapshot,
    *,
    ranked_events: list[str] | None = None,
    cues: list[str] | None = None,
) -> ReconstructedAnswer:
    """The sentences of the best-matching turn among the active set, with its event's date for "when" questions.
    ``NO_ANSWER`` when nothing in the active set shares a word with the question."""
    ranked = ranked_events or [i.id for i in active if i.kind == "event"]
    event_rank = {eid: r for r, eid in enumerate(ranked)}
    turn_event: dict[str, str] = {}
    for eid in ranked[:3]:
        for tid in snapshot.events[eid].turn_ids if eid in snapshot.events else []:
            turn_event.setdefault(tid, eid)
    for item in active:
        if item.kind in ("turn", "fact"):
            for tid in item.turn_ids:
                owner = next((e.id for e in snapshot.events.values() if tid in e.turn_ids), None)
                turn_event.setdefault(tid, owner or "")
    candidates = _answer_candidates(question, turn_event, snapshot)
    if not candidates:
        return ReconstructedAnswer(answer=NO_ANSWER, confidence=0.0)
    # Names of the people talking are in most greetings ("Hi Leo!"); they say nothing about the answer.
    names = CueIndex.of(snapshot).known_people()
    people = {w for p in names for w in tokenize(p)}
    # "Where does Maya live?" is about her home: sentences with home words ("flat", "moved") get a share.
    aspect_words = [ASPECTS[a] for a in resolve_aspects(question) if a in ASPECTS]
    scores = sentence_scores(question, [s for _, _, s in candidates], ignore=[*names, *_FILLER])
    cue_words = [words for words in (set(tokenize(c)) for c in (cues or [])) if words and not words <= people]
    best_turn, best_score = None, 0.0
    per_turn: dict[str, list[tuple[int, str, float]]] = {}
    for (tid, index, sentence), score in zip(candidates, scores, strict=True):
        words = set(tokenize(sentence))
        bonus = 0.5 * sum(1 for cw in cue_words if cw and cw <= words)
        bonus += 0.4 * sum(1 for lexicon in aspect_words if lexicon & set(_words_of(sentence)))
        rank = event_rank.get(turn_event.get(tid, ""), 5)
        total = float(score) + bonus + 0.3 / (1 + rank) if score > 0 or bonus else 0.0
        per_turn.setdefault(tid, []).append((index, sentence, total))
    for tid, sentences in per_turn.items():
        top = sorted((s[2] for s in sentences), reverse=True)
        turn_score = top[0] + 0.25 * sum(top[1:])
        if turn_score > best_score:
            best_turn, best_score = tid, turn_score
    if best_turn is None or best_score <= 0:
        return ReconstructedAnswer(answer=NO_ANSWER, confidence=0.05)
    chosen = sorted((s for s in per_turn[best_turn] if s[2] > 0), key=lambda s: -s[2])[:2]
    text = " ".join(s[1] for s in sorted(chosen))
    event_id = turn_event.get(best_turn) or None
    if asks_when(question) and event_id in snapshot.events:
        event = snapshot.events[event_id]
        when = event.time or (event.session_time.date().isoformat() if event.session_time else None)
        if when:
            text = f"{text} (when: {date_text(when)})"
    return ReconstructedAnswer(
        answer=text,
        cited_event_ids=[event_id] if event_id in snapshot.events else [],
        cited_turn_ids=[best_turn],
        confidence=round(best_score / (best_score + 3.0), 3),
    )


# -- the chatbot's reply ----------------------------------------------------------------------------

NOTHING_RECALLED = "I don't have anything in memory about that yet."
_QUESTION_STARTS = (
    "what",
    "when",
    "where",
    "who",
    "whom",
    "whose",
    "which",
    "why",
    "how",
    "do ",
    "does",
    "did",
    "is ",
    "are ",
    "was",
    "were",
    "can",
    "could",
    "should",
    "would",
    "will",
    "have",
    "has",
    "tell me",
    "remind me",
    "remember",
)


def _is_question(text: str) -> bool:
    lowered = text.strip().lower()
    return lowered.endswith("?") or lowered.startswith(_QUESTION_STARTS)


def reply_from_recall(message: str, recall: Mapping[str, Any] | None) -> ChatReply:
    """The chatbot's reply to ``message`` from what recall found: memory's answer to a question, an
    acknowledgement of a statement."""
    answer = (recall or {}).get("answer") or ""
    if _is_question(message):
        if not is_no_answer(answer):
            return ChatReply(reply=f"From memory: {answer}", used_memory_ids=list((recall or {}).get("cited", [])))
        return ChatReply(reply=NOTHING_RECALLED)
    return ChatReply(reply="Noted, I'll remember that.")
