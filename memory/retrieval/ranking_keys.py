"""Extra retrieval keys of the graph-feature reranker (``memory.retrieval.ranking``), measured one by one.

Each function gives every turn of a namespace one more feature for a question, from records ingest already
writes (no change to ingest): the facts extracted from the turn as extra keys of it, the turn's session as a
whole, pseudo-relevance feedback from a parameter-free first pass, entity bridges from that first pass to other
sessions, and the session dates a question's absolute date points at. ``evals/loco.py`` measures each on
public conversations, alone and with the others, leave-one-conversation-out; ``memory.retrieval.ranking.FEATURES``
lists the ones that held out. Nothing here holds a word list: entities are capitalised words inside a
sentence, dates are read by ``memory.language.timeparse``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.language.timeparse import parse_date
from logicmap.memory.retrieval.retrieval import BM25Index
from logicmap.memory.store import NamespaceSnapshot

__all__ = [
    "CANDIDATE_FEATURES",
    "DIVERSE_BUDGET",
    "FIRST_PASS",
    "build_key_layout",
    "diversified_rows",
    "diversify",
    "gathers",
    "key_features",
]

CANDIDATE_FEATURES = (
    "fact_key",  # best similarity of a fact extracted from the turn to a reading of the question (0: no fact)
    "session_own",  # best own similarity of a turn of the turn's session
    "session_bm25",  # BM25 of the turn's whole session, over the best session's
    "prf",  # similarity of the turn to the centroid of the first pass's best turns
    "bridge",  # the turn names an entity that a first-pass best turn of another session names too
    "time_match",  # the question states an absolute date and the turn's session falls in it
    "event_bm25",  # BM25 of the turn's event (its turns' text), over the best event's
    "window_bm25",  # BM25 of the turn with the turns before and after it in its session, over the best window's
    # The lexical keys again, read with -ing and -ed forms stemmed ("researching" matches "research"), each turn
    # as ``Turn.render()`` (speaker and image caption included):
    "bm25_stem",  # BM25 of the turn, over the best turn's
    "window_stem",  # BM25 of the turn with its neighbours in its session, over the best window's
    "session_stem",  # BM25 of the turn's whole session, over the best session's
)
#: How many of the first pass's best turns feed pseudo-relevance feedback and entity bridges.
FIRST_PASS = 5
#: How many turns session diversity orders (the evidence budget of recall at 10), from five times as many.
DIVERSE_BUDGET = 10
_YEAR_DATE = re.compile(r"(?:\b[A-Za-z]+\.?\s+)?(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?(?:\b[A-Za-z]+\.?\s+)?\b\d{4}\b")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")
# A question that gathers its answer over the conversation: a present perfect whose subject is a name ("What
# books has Tim read?": everything up to now), "both" (two people's turns) or "how many" (a count of mentions);
# "how long has X ..." asks one duration and is not one.
_GATHERING = re.compile(r"(?<!long )\b(?:has|have)\s+[A-Z]|(?i:\bboth\b|\bhow many\b)")


def _entities(text: str, speakers: set[str]) -> set[str]:
    """Capitalised words inside a sentence (not its first word): the names a text mentions, speakers aside."""
    found = set()
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        for match in _NAME.finditer(sentence):
            if match.start() > 0 and match.group(0) not in speakers:
                found.add(match.group(0).lower())
    return found


def build_key_layout(snapshot: NamespaceSnapshot, layout: dict[str, Any]) -> dict[str, Any]:
    """Question-independent arrays of the extra keys, from the ranker's ``layout`` (``memory.retrieval.ranking.turn_layout``;
    ``memory.retrieval.ranking.key_layout`` builds them once per snapshot)."""
    ids: list[str] = layout["ids"]
    row = {t: i for i, t in enumerate(ids)}
    sessions = [snapshot.turns[t].session_id for t in ids]
    session_ids = sorted(set(sessions))
    session_row = {s: i for i, s in enumerate(session_ids)}
    fact_ids = [
        f for f, fact in snapshot.facts.items() if f in snapshot.fact_vectors and any(t in row for t in fact.turn_ids)
    ]
    fact_turns = [[row[t] for t in snapshot.facts[f].turn_ids if t in row] for f in fact_ids]
    dim = layout["turn_matrix"].shape[1] if len(ids) else 1
    speakers = {s for s in layout["speakers"] if s}
    speaker_words = {w for s in speakers for w in s.split()}
    times = [snapshot.turns[t].session_time for t in ids]
    lines = [
        snapshot.turns[t].text + (f" {snapshot.turns[t].image_caption}" if snapshot.turns[t].image_caption else "")
        for t in ids
    ]
    event_of = layout["event_of"]
    events = sorted({int(e) for e in event_of if e >= 0})
    event_texts = {e: " ".join(line for line, owner in zip(lines, event_of) if owner == e) for e in events}
    event_row = {e: i for i, e in enumerate(events)}
    rendered = [snapshot.turns[t].render() for t in ids]
    return {
        "session_of": np.array([session_row[s] for s in sessions], dtype=np.int64),
        "sessions": len(session_ids),
        "session_index": BM25Index(_session_texts(lines, sessions, session_ids)),
        "fact_matrix": normalize(np.vstack([snapshot.fact_vectors[f] for f in fact_ids]))
        if fact_ids
        else np.zeros((0, dim)),
        "fact_turns": fact_turns,
        "entities": [_entities(snapshot.turns[t].text, speaker_words) for t in ids],
        "session_time": [None if s is None else s.replace(tzinfo=None) for s in times],
        "event_index": BM25Index([event_texts[e] for e in events]),
        "event_row": np.array([event_row.get(int(e), -1) for e in event_of], dtype=np.int64),
        "window_index": BM25Index(_windows(lines, sessions)),
        "stem_index": BM25Index(rendered, stemmed=True),
        "stem_window_index": BM25Index(_windows(rendered, sessions), stemmed=True),
        "stem_session_index": BM25Index(_session_texts(rendered, sessions, session_ids), stemmed=True),
    }


def _session_texts(lines: Sequence[str], sessions: Sequence[str], session_ids: Sequence[str]) -> list[str]:
    """Each session's lines joined, in ``session_ids`` order."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for line, s in zip(lines, sessions):
        grouped[s].append(line)
    return [" ".join(grouped[s]) for s in session_ids]


def _windows(lines: Sequence[str], sessions: Sequence[str]) -> list[str]:
    """Each line with the lines before and after it in its session."""
    n = len(lines)
    return [
        " ".join(lines[j] for j in (i - 1, i, i + 1) if 0 <= j < n and sessions[j] == sessions[i]) for i in range(n)
    ]


def _question_period(question: str) -> tuple[Any, Any] | None:
    """The period an absolute date of the question states ("in May 2023", "2022"), or None."""
    for match in _YEAR_DATE.finditer(question):
        words = match.group(0).split()
        for start in range(len(words)):  # the longest tail that reads as a date
            parsed = parse_date(" ".join(words[start:]))
            if parsed is not None:
                return parsed.start, parsed.end
    return None


def key_features(
    question: str,
    queries: np.ndarray,
    own: np.ndarray,
    lexical: np.ndarray,
    layout: dict[str, Any],
    keys: dict[str, Any],
) -> np.ndarray:
    """The ``CANDIDATE_FEATURES`` columns of every turn (rows in ``memory.retrieval.ranking.turn_layout`` order);
    ``queries`` are the question's unit reading vectors, ``own`` and ``lexical`` the turns' best reading
    similarity and normalised BM25, ``layout`` and ``keys`` the snapshot's ``turn_layout`` and ``key_layout``
    (``memory.retrieval.ranking``)."""
    n = len(layout["ids"])
    # Facts as extra keys of the turns they come from.
    fact_key = np.zeros(n)
    if len(keys["fact_matrix"]):
        sims = (keys["fact_matrix"] @ queries.T).max(axis=1)
        for s, rows in zip(sims.tolist(), keys["fact_turns"]):
            fact_key[rows] = np.maximum(fact_key[rows], s)
    # Session-level scores.
    session_of = keys["session_of"]
    best = np.full(keys["sessions"], -1.0)
    np.maximum.at(best, session_of, own)
    session_own = best[session_of]
    session_lex = _relative(keys["session_index"].scores(question))
    # A parameter-free first pass (standardised dense + lexical) for feedback and bridges.
    first = _z(own) + _z(lexical)
    top = np.argsort(-first, kind="stable")[:FIRST_PASS]
    centroid = normalize(layout["turn_matrix"][top].mean(axis=0, keepdims=True))
    prf = (layout["turn_matrix"] @ centroid.T)[:, 0]
    entities = keys["entities"]
    bridge = np.zeros(n)
    named: dict[str, set[int]] = defaultdict(set)
    for i in top.tolist():
        for e in entities[i]:
            named[e].add(int(session_of[i]))
    if named:
        for i in range(n):
            if any(session_of[i] not in named[e] or len(named[e]) > 1 for e in entities[i] if e in named):
                bridge[i] = 1.0
    time_match = np.zeros(n)
    period = _question_period(question)
    if period is not None:
        time_match = np.array(
            [1.0 if t is not None and period[0] <= t < period[1] else 0.0 for t in keys["session_time"]]
        )
    event_lex = _relative(keys["event_index"].scores(question))
    event_key = np.where(
        keys["event_row"] >= 0, event_lex[np.maximum(keys["event_row"], 0)] if len(event_lex) else 0.0, 0.0
    )
    window = _relative(keys["window_index"].scores(question))
    stemmed = [_relative(keys[k].scores(question)) for k in ("stem_index", "stem_window_index", "stem_session_index")]
    return np.column_stack(
        [
            fact_key,
            session_own,
            session_lex[session_of],
            prf,
            bridge,
            time_match,
            event_key,
            window,
            stemmed[0],
            stemmed[1],
            stemmed[2][session_of],
        ]
    )


def _relative(scores: np.ndarray) -> np.ndarray:
    """BM25 scores over the best one (all 0 when nothing matches)."""
    out = scores.astype(np.float64)
    return cast(np.ndarray, out / (out.max() if len(out) and out.max() > 0 else 1.0))


def _z(x: np.ndarray) -> np.ndarray:
    spread = float(x.std())
    return cast(np.ndarray, (x - x.mean()) / (spread if spread > 1e-9 else 1.0))


def gathers(question: str) -> bool:
    """Whether ``question`` gathers its answer over the conversation (its evidence is several turns, usually of
    several sessions): a present perfect with a named subject, "both" or "how many". The ranker takes such a
    question's first turns with the gathering diversity weight (``memory.retrieval.ranking.TurnRanker``); LOCO on
    public conversations flags 70 of 142 multi-hop questions and 17 of 618 others (docs/performance.md)."""
    return _GATHERING.search(question) is not None


def diversified_rows(
    scores: np.ndarray, session_of: np.ndarray, weight: float, budget: int = DIVERSE_BUDGET
) -> list[int]:
    """The first ``budget`` rows, taken greedily: the best score less ``weight`` per turn already taken from
    its session (a question whose evidence spans sessions gets turns of more of them)."""
    order = np.argsort(-scores, kind="stable")
    if weight <= 0:
        return cast(list[int], order[:budget].tolist())
    pool = cast(list[int], order[: budget * 5].tolist())
    taken: list[int] = []
    per_session: dict[int, int] = {}
    while pool and len(taken) < budget:
        best = max(pool, key=lambda i: scores[i] - weight * per_session.get(int(session_of[i]), 0))
        pool.remove(best)
        taken.append(best)
        per_session[int(session_of[best])] = per_session.get(int(session_of[best]), 0) + 1
    return taken


def diversify(scores: np.ndarray, session_of: np.ndarray, weight: float, budget: int = DIVERSE_BUDGET) -> np.ndarray:
    """``scores`` with the ``diversified_rows`` first, in their order, above every other turn (whose order
    stays)."""
    rows = diversified_rows(scores, session_of, weight, budget)
    out = np.asarray(scores, dtype=np.float64).copy()
    top = float(out.max()) if len(out) else 0.0
    for rank, i in enumerate(rows):
        out[i] = top + 1.0 + (len(rows) - rank)
    return out
