"""How store items rank for a query: independent facts, scored by dense similarity, the newer statement first.

A store item (``memory.records.items``) is one memory, a fact, not a turn of a conversation: the conversation features of
the graph-feature reranker (session, event, window) say nothing about it. An item's score for a query is:

- its relevance: the cosine of the query's embedding with its turns' ``speaker: text`` embeddings (the best turn), clipped to
  ``[0, 1]`` (a score below 0 is no relevance at all), as dense stores score (``InMemoryStore``: the raw cosine);
- whose fact it is: an item whose statement is about ANOTHER person, its subject a relative or friend of the
  speaker's ("My brother works as a teacher.", "My friend's dog is called Max."), or about something else with no
  word for the speaker at all, its subject a noun phrase of its own ("A dog named Luna lives next door.", "The
  restaurant had a keto menu.": ``about_someone_else``, ``third_party_items``), is a fact about that person or
  thing; for a question about the memory's owner (one that does not itself ask about a relative or friend:
  ``asks_about_third_party``) its relevance is weighted by ``THIRD_PARTY_WEIGHT``;
- when the item is SUPERSEDED (a newer item of its namespace states the same attribute), the lower of its
  relevance and its superseder's, divided by ``STALE_DIVISOR``: it ranks below the item that supersedes it, and
  stays findable (a stale memory is history, not garbage). Two rules decide "the same attribute" (``superseded_items``):

  1. REAL's cardinality rule on the facts the items carry (``agents.fact_extractor.pattern_extraction`` on each
     item's text, ``memory.records.facts.relation_cardinality``): both carry a fact with the same head and the same
     SINGLE-valued relation (``lives_in``, ``works_at``, ``occupation``, ``married_to``...) and different values.
  2. Time among rivals, at query time (``rival_supersession``): of two items about the same person (both the
     owner's, or both another's), both scoring at least ``RIVAL_FLOOR`` for the query (among its ``RIVALS`` most
     relevant), the newer one wins (the older is superseded for this query) when they are within ``RIVAL_MARGIN``
     of each other and their own embeddings at least ``RIVAL_SIMILARITY`` alike, or when they are COUNTERPARTS:
     each is the other's most alike item on the other side of time among those relevant items (the older's most
     alike newer one, the newer's most alike older one), at least ``COUNTERPART_SIMILARITY`` alike, within
     ``COUNTERPART_MARGIN``, and of the same kind (the same value fields: a structured profile never supersedes a
     note): a restatement of the same attribute, phrased further from the question than the statement it replaces
     ("I took up surfing instead." after "In my free time I do photography.").

  A put on an existing key has already replaced the item (``LogicMapStore.put``): one key, one value.

Scores are in ``[0, 1]`` and monotonic in relevance among items of the same standing (current or superseded, the
owner's or another's); a caller can threshold them (docs/store.md). Nothing here ranks conversation turns: the
strategies keep their own rankers.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np
from langchain_core.embeddings import Embeddings

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.language.lexicon import KINSHIP_TERMS
from logicmap.memory.records.items import ItemIndex, item_index
from logicmap.memory.runtime.heap import trim_freed_memory
from logicmap.memory.store.model import NamespaceSnapshot

__all__ = [
    "COUNTERPART_MARGIN",
    "COUNTERPART_SIMILARITY",
    "RIVAL_FLOOR",
    "RIVAL_MARGIN",
    "RIVAL_SIMILARITY",
    "RIVALS",
    "STALE_DIVISOR",
    "THIRD_PARTY_WEIGHT",
    "ItemVectors",
    "about_someone_else",
    "asks_about_third_party",
    "item_relevance",
    "item_scores",
    "item_vectors",
    "rival_supersession",
    "superseded_items",
    "third_party_items",
    "turn_scores_of",
]

STALE_DIVISOR = 2.0  # a superseded item keeps its order among the stale, below every current item as relevant
RIVAL_FLOOR = 0.2  # the three chosen on the development users of evals/bench/bench_items.py (MiniLM, seeds
RIVAL_MARGIN = 0.1  # 41-43; the margin and the similarity again since its distractors are interleaved with the
RIVAL_SIMILARITY = 0.3  # corrections: 0.15 and 0.2 let newer items of other attributes bury older facts)
RIVALS = 64  # the rival rule compares the 64 most relevant items (pairs: 64 x 64), whatever the namespace's size
COUNTERPART_MARGIN = 0.3  # these three chosen on the development users of bench_items (MiniLM, seeds 41-43)
COUNTERPART_SIMILARITY = 0.4
THIRD_PARTY_WEIGHT = 0.5

# Whose fact a statement is: a relative's or friend's (``KINSHIP_TERMS``, a closed class, without the family as a
# whole and the naming verbs) when that person is the subject: possessed by the speaker ("my", "our", an adjective
# between: "My best friend ..."), then a possessive ("My friend's dog ..."), a verb ("My brother works ..."), or a
# copula and an article ("My mother was a nurse."). "My partner is Ana." names the speaker's partner: the speaker's.
_KIN = "|".join(sorted(KINSHIP_TERMS - {"family", "named", "called"}, key=len, reverse=True))
_COPULA = r"(?:is|was|are|were)"
_OTHER = rf"(?:{_KIN})(?:['’]s\b|\s+{_COPULA}\s+(?:an?|the)\b|\s+(?!{_COPULA}\b)[a-z]+)"
_THIRD_PARTY_STATEMENT = re.compile(rf"^\W*(?:my|our)\s+(?:[a-z]+\s+)?{_OTHER}", re.IGNORECASE)
# A statement with no word for the speaker (I, me, my, we, us, our...: a first-person pronoun or determiner) whose
# subject is a noun phrase of its own (an article or a demonstrative first) is about that person or thing, not the
# speaker. A statement with the subject left out ("Bought a violin and practise daily.") is the speaker's.
# LangMem's manage tool writes the model's notes about the owner in the third person ("The user lives in Lisbon.",
# "User prefers dark mode."): "user" names the speaker too.
_SPEAKER = re.compile(r"\b(?:i|me|my|mine|myself|we|us|our|ours|ourselves|user)\b", re.IGNORECASE)
_OWN_SUBJECT = re.compile(r"^\W*(?:a|an|the|this|that|these|those)\b", re.IGNORECASE)
# A question about another person: a relative or friend as the subject of its verb or the possessor of what it
# asks ("What does my brother do?", "the user's sister's city", "the city of my sister"); "Who is the user's
# partner?" asks the owner's.
_THIRD_PARTY_QUESTION = re.compile(
    rf"\b(?:(?:my|our|your|his|her|their|[a-z]+['’]s)\s+(?:[a-z]+\s+)?{_OTHER}"
    rf"|of\s+(?:my|our|your|his|her|their|the)\s+(?:[a-z]+\s+)?(?:{_KIN})\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ItemVectors:
    """Each item's turn vectors (unit rows, ``ItemIndex.flat_turns`` order) and its own (its first turn's)."""

    turns: np.ndarray  # (flat turns, dims); zero rows for a turn without a vector
    own: np.ndarray  # (items, dims)
    evidence: np.ndarray  # bool, per flat turn: recall may return it (``Turn.evidence``: not a question, not an
    # untrusted reply)


def item_vectors(snapshot: NamespaceSnapshot, embeddings: Embeddings) -> ItemVectors:
    """The vectors of the snapshot's ``item_index``: each turn as ``embeddings`` embeds ``speaker: text`` (whose
    statement it is, not the rendered turn with its id), computed once per snapshot and embedder
    (``CachedEmbeddings`` keeps each text's vector across snapshots)."""
    with _BUILDERS_LOCK:
        build = _BUILDERS.get(embeddings)
        if build is None:
            build = _BUILDERS[embeddings] = partial(_build_vectors, embeddings=embeddings)
    return snapshot.derived(build)


_BUILDERS: weakref.WeakKeyDictionary[Embeddings, Callable[[NamespaceSnapshot], ItemVectors]] = (
    weakref.WeakKeyDictionary()
)
_BUILDERS_LOCK = threading.Lock()


_TRIM_AFTER = 1_000  # turns embedded in one build (12 kB of Python floats each) before freed pages are trimmed


def _build_vectors(snapshot: NamespaceSnapshot, *, embeddings: Embeddings) -> ItemVectors:
    index = item_index(snapshot)
    turns_of = [snapshot.turns.get(t) for t in index.flat_turns]
    texts = [f"{turn.speaker}: {turn.text}" if turn is not None else "" for turn in turns_of]
    turns = (
        normalize(np.asarray(embeddings.embed_documents(texts), dtype=np.float32))
        if texts
        else np.zeros((0, 1), dtype=np.float32)
    )
    if len(texts) >= _TRIM_AFTER:  # the embedder's lists of Python floats are freed: hand their pages back
        trim_freed_memory()
    own = _first_rows(turns, np.searchsorted(index.flat_items, np.arange(len(index.items))))
    evidence = np.fromiter((turn is not None and turn.evidence for turn in turns_of), dtype=bool, count=len(turns_of))
    return ItemVectors(turns=turns, own=own, evidence=evidence)


def _first_rows(turns: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The rows ``first`` of ``turns`` (each item's first turn): a view of the leading rows when they are those
    (every item of one turn, as a store's one-line items), not a copy of the whole table (1.5 kB an item)."""
    if not len(first):
        return np.zeros((0, turns.shape[1]), dtype=np.float32)
    rows: np.ndarray = turns[: len(first)] if np.array_equal(first, np.arange(len(first))) else turns[first]
    return rows


def item_relevance(index: ItemIndex, vectors: ItemVectors, query: np.ndarray) -> np.ndarray:
    """Each item's relevance in ``[0, 1]``: the best cosine of its evidence turns with the query (unit vector),
    clipped; NaN for an item with no evidence turn (only questions and untrusted replies)."""
    best = np.full(len(index.items), -np.inf)
    if len(index.flat_turns):
        cosine = np.where(vectors.evidence, np.clip(vectors.turns @ normalize(query), 0.0, 1.0), -np.inf)
        np.maximum.at(best, index.flat_items, cosine)
    return np.where(np.isneginf(best), np.nan, best)


def about_someone_else(text: str) -> bool:
    """Whether the statement ``text`` is another person's or thing's fact, not the speaker's: a relative or friend
    of the speaker's is its subject ("My brother works as a teacher."), or it never names the speaker and its
    subject is a noun phrase of its own ("A dog named Luna lives next door.")."""
    if _THIRD_PARTY_STATEMENT.search(text):
        return True
    return bool(_OWN_SUBJECT.search(text)) and not _SPEAKER.search(text)


def asks_about_third_party(query: str) -> bool:
    """Whether ``query`` asks about a relative or friend of the memory's owner, not about the owner."""
    return bool(_THIRD_PARTY_QUESTION.search(query))


def third_party_items(snapshot: NamespaceSnapshot) -> np.ndarray:
    """For each item of the snapshot's ``item_index``, whether it states another person's or thing's fact: every
    one of its evidence turns is ``about_someone_else`` (computed once per snapshot)."""
    return snapshot.derived(_third_party)


def _third_party(snapshot: NamespaceSnapshot) -> np.ndarray:
    index = item_index(snapshot)
    found = np.zeros(len(index.items), dtype=bool)
    for row, item in enumerate(index.items):
        turns = [snapshot.turns[t] for t in item.turn_ids if t in snapshot.turns and snapshot.turns[t].evidence]
        found[row] = bool(turns) and all(about_someone_else(turn.text) for turn in turns)
    return found


def superseded_items(snapshot: NamespaceSnapshot) -> np.ndarray:
    """For each item of the snapshot's ``item_index``, the row of the newer item that supersedes it by REAL's
    cardinality rule (the newest statement of the same single-valued fact), or -1 (computed once per snapshot)."""
    return snapshot.derived(_cardinality_superseded)


@lru_cache(maxsize=65536)
def _single_valued_facts(speaker: str, text: str) -> tuple[tuple[tuple[str, str], str], ...]:
    """``((head, relation), value)`` of each single-valued fact an item's turn states (cached per text: the
    snapshots after each put read the same items again)."""
    from logicmap.agents.fact_extractor import pattern_extraction
    from logicmap.memory.records.facts import entity_key, normalize_relation, relation_cardinality
    from logicmap.memory.records.records import Turn

    turn = Turn(
        namespace="items",
        session_id="item",
        dia_id="item:1",
        speaker=speaker,
        text=text,
        position=0,
        source_dia_id=None,
        item=None,
    )
    found = []
    for fact in pattern_extraction([turn]).facts:
        relation = normalize_relation(fact.relation)
        if relation_cardinality(relation, hint="single" if fact.single_valued else None) == "single":
            found.append(((entity_key(fact.head), relation), entity_key(fact.tail)))
    return tuple(found)


def _cardinality_superseded(snapshot: NamespaceSnapshot) -> np.ndarray:
    index = item_index(snapshot)
    by = np.full(len(index.items), -1, dtype=np.int64)
    newest: dict[tuple[str, str], int] = {}  # (head, relation) -> the row of its newest statement
    slots: list[list[tuple[tuple[str, str], str]]] = []
    for row, item in enumerate(index.items):
        turns = [snapshot.turns[t] for t in item.turn_ids if t in snapshot.turns]
        found = [slot for turn in turns for slot in _single_valued_facts(turn.speaker, turn.text)]
        slots.append(found)
        for slot, _ in found:
            if slot not in newest or index.updated[row] > index.updated[newest[slot]]:
                newest[slot] = row
    for row, found in enumerate(slots):
        for slot, value in found:
            winner = newest[slot]
            if index.updated[winner] > index.updated[row] and all(v != value for s, v in slots[winner] if s == slot):
                by[row] = winner
    return by


def rival_supersession(
    index: ItemIndex, vectors: ItemVectors, relevance: np.ndarray, third_party: np.ndarray | None = None
) -> np.ndarray:
    """For each item, the row of the newest rival that supersedes it for this query, or -1: both relevant
    (``RIVAL_FLOOR``), about the same person (given ``third_party``: ``third_party_items``), and either close in
    relevance (``RIVAL_MARGIN``) and alike (``RIVAL_SIMILARITY``), or counterparts (``COUNTERPART_MARGIN``,
    ``COUNTERPART_SIMILARITY``: the module docstring)."""
    by = np.full(len(index.items), -1, dtype=np.int64)
    rows = np.flatnonzero(relevance >= RIVAL_FLOOR)
    if len(rows) > RIVALS:  # only the most relevant compete: what a page of results shows, at a bounded cost
        rows = rows[np.argpartition(-relevance[rows], RIVALS - 1)[:RIVALS]]
    if len(rows) < 2:
        return by
    alike = vectors.own[rows] @ vectors.own[rows].T
    gap = np.abs(relevance[rows][:, None] - relevance[rows][None, :])
    newer = index.updated[rows][None, :] > index.updated[rows][:, None]  # [i, j]: j is newer than i
    if third_party is not None:
        newer &= third_party[rows][:, None] == third_party[rows][None, :]
    rival = newer & (gap <= RIVAL_MARGIN) & (alike >= RIVAL_SIMILARITY)
    shape = [tuple(sorted(index.items[r].value)) for r in rows]  # a value's fields: the kind of memory it is
    same_kind = np.array([[a == b for b in shape] for a in shape], dtype=bool)
    rival |= _counterparts(newer & same_kind, alike) & (gap <= COUNTERPART_MARGIN) & (alike >= COUNTERPART_SIMILARITY)
    when = np.where(rival, index.updated[rows][None, :], -np.inf)
    by[rows] = np.where(rival.any(axis=1), rows[np.argmax(when, axis=1)], -1)
    return by


def _counterparts(newer: np.ndarray, alike: np.ndarray) -> np.ndarray:
    """``[i, j]``: j is the most alike of the items newer than i, and i the most alike of the items older than j."""
    pairs = np.zeros_like(newer)
    if not newer.any():
        return pairs
    similarity = np.where(newer, alike, -np.inf)
    older = np.flatnonzero(newer.any(axis=1))
    best_newer = np.argmax(similarity[older], axis=1)
    mutual = np.argmax(similarity[:, best_newer], axis=0) == older
    pairs[older[mutual], best_newer[mutual]] = True
    return pairs


def item_scores(snapshot: NamespaceSnapshot, query: str, embeddings: Embeddings) -> np.ndarray:
    """Each item's score in ``[0, 1]`` for ``query``, rows as the snapshot's ``item_index`` (see the module
    docstring); NaN for an item not indexed (``put(..., index=False)``) or without an evidence turn."""
    index, vectors = item_index(snapshot), item_vectors(snapshot, embeddings)
    if not len(index.items):
        return np.zeros(0)
    vector = np.asarray(embeddings.embed_query(query), dtype=np.float32)
    found = item_relevance(index, vectors, vector)
    unscored = ~index.indexed | np.isnan(found)  # put(..., index=False), or no evidence turn
    relevance = np.where(unscored, 0.0, found)
    third = third_party_items(snapshot)
    if not asks_about_third_party(query):  # a question about the owner: another person's fact answers it less
        relevance = np.where(third, relevance * THIRD_PARTY_WEIGHT, relevance)
    by = superseded_items(snapshot)
    by = np.where(by >= 0, by, rival_supersession(index, vectors, relevance, third))
    stale = by >= 0  # below its superseder: at most half the lower of their two relevances
    scores = relevance.copy()
    scores[stale] = np.minimum(relevance[stale], relevance[by[stale]]) / STALE_DIVISOR
    scores[unscored] = np.nan
    return scores


def turn_scores_of(snapshot: NamespaceSnapshot, scores: np.ndarray, embeddings: Embeddings) -> Mapping[str, float]:
    """Each evidence turn's score: its item's ``item_scores`` (for a strategy that ranks turns); a question or an
    untrusted reply of a ``messages`` value is not scored, as recall never returns it."""
    index, vectors = item_index(snapshot), item_vectors(snapshot, embeddings)
    return {
        t: float(scores[row])
        for t, row, ok in zip(index.flat_turns, index.flat_items, vectors.evidence)
        if ok and not np.isnan(scores[row])
    }
