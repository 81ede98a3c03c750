"""Leave-one-conversation-out (LOCO) evidence recall of the no-LLM turn ranker on public conversations.

Usage: ``python -m logicmap.evals.loco FILE [--data-dir DIR] [--write-weights memory/retrieval/turn_ranker_weights.py]``
(FILE: LoCoMo-format conversations, e.g. ``../shared/data/locomo-dev5.json``).

Each conversation is ingested once with the no-LLM policy and MiniLM into the namespace ``logicmap eval`` uses
(``--data-dir`` keeps it: a second run, or ``logicmap eval`` on the same directory, does not ingest again).
Every question of categories 1-4 with gold evidence gives each turn of its conversation a feature row (the
ranker's ``memory.retrieval.ranking`` features and the candidate keys of ``memory.retrieval.ranking_keys``) and a label (gold or
not). For each held-out conversation, every configuration is fitted on the *other* conversations only (a
logistic regression, balanced classes, C=1, as ``evals/train/turn_ranker.py``; the session-diversity weight
of the ``diverse`` component, and the ``gather`` component's for questions that gather their answer over the
conversation, ``memory.retrieval.ranking_keys.gathers``, are chosen on the other conversations too) and scored on the held-out one: recall
at 10 turns, averaged over questions, per LoCoMo category. The table has the shipped ranker (no fit), the
ranker refitted on its own features, each component alone on top of that, all of them, the chosen ones, the
chosen ones without each of them, and with each other component added. Every fit has the question's context
beside each turn's features (``design``: each feature's best value over the question's turns, the same in all
its rows; ``memory.retrieval.ranking.TurnRanker.context``); the row "chosen, fitted without question context" is the
fit before that (issue 41), ``--quick`` prints only it, the shipped ranker before this work, the chosen row
without ``gather`` (issue 41, item 3) and the chosen row.
``--write-weights`` fits the chosen configuration (``CHOSEN``) on every conversation of FILE and writes the
weights module: its LOCO figures are the ones reported, since no figure is measured on a conversation it saw.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, cast

import numpy as np

from logicmap.evals.common import machine_line, open_resources, print_table

__all__ = [
    "BASE",
    "CHOSEN",
    "COMPONENTS",
    "Learner",
    "Question",
    "Scorer",
    "design",
    "featurised",
    "linear",
    "loco",
    "main",
    "model_scorer",
    "table_row",
    "training_rows",
]

BUDGET = 10
#: The ranker's features before this work (the shipped weights cover these).
BASE = (
    "own",
    "z_own",
    "own_question",
    "event",
    "z_event",
    "topic",
    "previous",
    "next",
    "reply",
    "bm25",
    "speaker_named",
    "dated_for_when",
    "length",
)  # memory.ranking.BASE_FEATURES
#: Candidate components: feature columns of ``memory.retrieval.ranking_keys`` (``diverse`` is a re-ranking step).
COMPONENTS: dict[str, tuple[str, ...]] = {
    "facts": ("fact_key",),
    "session": ("session_own", "session_bm25"),
    "prf": ("prf",),
    "bridge": ("bridge",),
    "time": ("time_match",),
    "diverse": (),
    "gather": (),
    "event_bm25": ("event_bm25",),
    "window_bm25": ("window_bm25",),
    "stems": ("bm25_stem", "window_stem", "session_stem"),
}
#: Columns a component takes the place of: ``stems`` reads the turn's, its window's and its session's BM25 with
#: -ing and -ed forms stemmed, instead of as they are (issue 41, item 3).
REPLACES: dict[str, tuple[str, ...]] = {"stems": ("bm25", "window_bm25", "session_bm25")}
#: The components kept in the default strategy. A first LOCO table over the five conversations (session and
#: event_bm25 chosen, every other component added to them; docs/performance.md) showed each of these adding recall
#: to them and bridge and diverse adding none; the table this module prints checks the set (without each one).
#: ``gather`` (session diversity for gathering questions only) and ``stems`` (stemmed lexical keys) were added for
#: multi-hop (issue 41, item 3).
CHOSEN: tuple[str, ...] = ("session", "event_bm25", "window_bm25", "facts", "prf", "time", "gather", "stems")
#: The ranker shipped before this work (fitted on the project's files in ``data/`` by evals/train/turn_ranker.py,
#: 2026-11-22): the table's first row, the baseline.
PREVIOUS_COEFFICIENTS = {
    "own": 4.720746,
    "z_own": 0.497204,
    "own_question": -4.464639,
    "event": 0.198678,
    "z_event": 0.908939,
    "topic": 0.482859,
    "previous": 0.649357,
    "next": 0.338936,
    "reply": 1.688303,
    "bm25": 3.236689,
    "speaker_named": 1.196862,
    "dated_for_when": -0.236899,
    "length": 1.744476,
}
PREVIOUS_INTERCEPT = -8.880255
DIVERSITY_GRID = (0.0, 0.25, 0.5, 1.0, 2.0)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class Question:
    """One question's rows: every turn's features (``names`` columns), labels, gold ids and sessions."""

    conversation: str
    category: int
    ids: list[str]
    matrix: np.ndarray
    labels: np.ndarray
    gold: list[str]
    session_of: np.ndarray
    gathering: bool = False


def _code_digest() -> str:
    root = Path(__file__).resolve().parents[1]
    parts = [(root / p).read_bytes() for p in ("memory/retrieval/ranking.py", "memory/retrieval/ranking_keys.py")]
    return hashlib.sha256(b"".join(parts)).hexdigest()[:12]


def feature_names() -> tuple[str, ...]:
    from logicmap.memory.retrieval.ranking import ALL_FEATURES

    return tuple(ALL_FEATURES)


def questions_of(path: Path, resources: Any, cache_dir: Path) -> list[Question]:
    """Every question with gold evidence of categories 1-4, ingested (once) and featurised (cached)."""
    from logicmap.evals.metrics import normalize_evidence_ids
    from logicmap.evals.runner import _embedder_label, eval_namespace, select_questions
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations
    from logicmap.memory.indexes.embeddings import normalize
    from logicmap.memory.language.text import query_readings
    from logicmap.memory.retrieval.ranking import turn_features
    from logicmap.memory.retrieval.ranking_keys import gathers

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    cache = cache_dir / f"loco-{digest[:12]}-{_code_digest()}.pkl"
    if cache.exists():
        cached: list[Question] = pickle.loads(cache.read_bytes())  # our own cache file
        return cached
    out: list[Question] = []
    for conversation in load_conversations(path):
        started = time.perf_counter()
        namespace = eval_namespace(digest, "heuristic", _embedder_label(resources), conversation.conversation_id)
        ingest_conversation(conversation, namespace, resources=resources, policy="heuristic")
        snapshot = resources.store.snapshot(namespace)
        asked = [qa for _, qa in select_questions([conversation], categories=list(CATEGORIES))]
        vectors = resources.embeddings.embed_documents([r for qa in asked for r in query_readings(qa.question)])
        at = 0
        for qa in asked:
            count = len(query_readings(qa.question))
            readings = normalize(np.asarray(vectors[at : at + count], dtype=np.float32))
            at += count
            gold = normalize_evidence_ids(qa.evidence)
            if not gold:
                continue
            base = turn_features(snapshot, qa.question, readings, feature_names())
            matrix = base.matrix
            sessions = [snapshot.turns[t].session_id for t in base.turn_ids]
            index = {s: i for i, s in enumerate(dict.fromkeys(sessions))}
            category = cast("int | str", qa.category)  # one of CATEGORIES (select_questions), so never None
            out.append(
                Question(
                    conversation.conversation_id,
                    int(category),
                    base.turn_ids,
                    matrix,
                    np.array([1 if t in gold else 0 for t in base.turn_ids]),
                    gold,
                    np.array([index[s] for s in sessions], dtype=np.int64),
                    gathers(qa.question),
                )
            )
        print(
            f"  {conversation.conversation_id}: {sum(q.conversation == conversation.conversation_id for q in out)} "
            f"questions, {time.perf_counter() - started:.1f}s",
            flush=True,
        )
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(out))
    return out


def featurised(path: Path, data_dir: str | None, embeddings: str = "minilm") -> list[Question]:
    """``questions_of`` the file with fresh resources of the ``embeddings`` embedder, its ingest and feature cache
    kept in ``data_dir`` (a temporary directory without one)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="logicmap-loco-") as tmp:
        directory = Path(data_dir or tmp)
        with open_resources(directory, embeddings=embeddings) as resources:
            return questions_of(path, resources, directory)


def diversified(scores: np.ndarray, session_of: np.ndarray, weight: float, budget: int = BUDGET) -> list[int]:
    from logicmap.memory.retrieval.ranking_keys import diversified_rows

    return diversified_rows(scores, session_of, weight, budget)


def recall(question: Question, rows: Sequence[int]) -> float:
    held = {question.ids[i] for i in rows}
    return len(held & set(question.gold)) / len(set(question.gold))


def columns_of(components: Sequence[str]) -> list[int]:
    names = feature_names()
    replaced = {f for c in components for f in REPLACES.get(c, ())}
    wanted = [n for n in (*BASE, *(f for c in components for f in COMPONENTS[c])) if n not in replaced]
    return [names.index(n) for n in wanted]


def design(matrix: np.ndarray, context: bool = True) -> np.ndarray:
    """One question's rows as the fit sees them: each turn's features and, with ``context``, the question's
    best value of each (its maximum over the question's turns, repeated in every row). The pooled fit compares
    turns of different questions; these columns take up what differs between questions (how well their best
    turn matches, whether they ask "when"), so the turn-level weights are left to rank turns within one. On
    the five development conversations this raised LOCO R@10 from 0.795 to 0.812 (docs/performance.md)."""
    if not context or not len(matrix):
        return matrix
    return np.hstack([matrix, np.broadcast_to(matrix.max(axis=0), matrix.shape)])


def training_rows(
    questions: Sequence[Question], columns: list[int], context: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Every turn of ``questions`` as a fit sees it (``design``) and its label (gold or not)."""
    x = np.vstack([design(q.matrix[:, columns], context) for q in questions])
    return x, np.concatenate([q.labels for q in questions])


def fit(questions: Sequence[Question], columns: list[int], context: bool = True, strength: float = 1.0) -> Any:
    """The shipped fit: a logistic regression, balanced classes, ``C = strength`` (1)."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=strength, max_iter=5000, class_weight="balanced").fit(
        *training_rows(questions, columns, context)
    )


#: A question's score for each of its turns (higher: cited first).
Scorer = Callable[[Question], np.ndarray]
#: Fits a scorer on the training questions' ``columns`` (with the question's context columns or not).
Learner = Callable[[Sequence[Question], list[int], bool], Scorer]


def model_scorer(model: Any, columns: list[int], context: bool = True) -> Scorer:
    """A fitted classifier's scorer: its decision function over a question's turns as the fit saw them."""

    def score(q: Question) -> np.ndarray:
        return np.asarray(model.decision_function(design(q.matrix[:, columns], context)))

    return score


def linear(questions: Sequence[Question], columns: list[int], context: bool = True, strength: float = 1.0) -> Scorer:
    """The shipped learner: ``fit``'s logistic regression (at ``C = strength``), scoring by its logit."""
    return model_scorer(fit(questions, columns, context, strength), columns, context)


def _best_weight(questions: Sequence[Question], score: Callable[[Question], np.ndarray]) -> float:
    """The diversity weight of ``DIVERSITY_GRID`` with the best mean recall on ``questions`` (0 without any)."""
    if not questions:
        return 0.0
    scored = [(q, score(q)) for q in questions]
    means = [np.mean([recall(q, diversified(s, q.session_of, w)) for q, s in scored]) for w in DIVERSITY_GRID]
    return DIVERSITY_GRID[int(np.argmax(means))]


def _weights(
    questions: Sequence[Question], components: Sequence[str], score: Callable[[Question], np.ndarray]
) -> tuple[float, float]:
    """The session-diversity weight (``diverse``) and the gathering questions' one (``gather``, chosen on the
    gathering questions of ``questions`` only), each 0 without its component."""
    weight = _best_weight(questions, score) if "diverse" in components else 0.0
    gather = _best_weight([q for q in questions if q.gathering], score) if "gather" in components else 0.0
    return weight, gather


def _diversity(question: Question, weight: float, gather: float) -> float:
    """The weight ``question``'s first turns are taken with (``memory.retrieval.ranking.TurnRanker.diversity``)."""
    return gather if gather > 0 and question.gathering else weight


def loco(
    questions: Sequence[Question], components: Sequence[str] | None, context: bool = True, learner: Learner = linear
) -> dict[int, list[float]]:
    """Per category, each question's R@10 with the configuration fitted without its conversation
    (``components`` None: the ranker shipped before this work, ``PREVIOUS_COEFFICIENTS``, no fit; ``context``:
    fitted with the question's context columns, ``design``; ``learner``: how, ``linear`` as shipped)."""
    by_category: dict[int, list[float]] = {c: [] for c in CATEGORIES}
    if components is None:
        weights = np.array([PREVIOUS_COEFFICIENTS[n] for n in BASE])
        for q in questions:
            by_category[q.category].append(
                recall(q, diversified(q.matrix[:, : len(BASE)] @ weights + PREVIOUS_INTERCEPT, q.session_of, 0))
            )
        return by_category
    columns = columns_of(components)
    for held in dict.fromkeys(q.conversation for q in questions):
        train = [q for q in questions if q.conversation != held]
        score = learner(train, columns, context)
        weight, gather = _weights(train, components, score)
        for q in questions:
            if q.conversation == held:
                chosen = diversified(score(q), q.session_of, _diversity(q, weight, gather))
                by_category[q.category].append(recall(q, chosen))
    return by_category


def table_row(label: str, results: dict[int, list[float]], reference: float | None) -> list[str]:
    every = [v for values in results.values() for v in values]
    overall = float(np.mean(every))
    gain = "" if reference is None else f"{overall - reference:+.3f}"
    return [label, f"{overall:.3f}", gain, *(f"{np.mean(results[c]):.3f}" if results[c] else "-" for c in CATEGORIES)]


WITHOUT_CONTEXT = "chosen, fitted without question context (the fit before issue 41)"
#: The shipped fit before the stemmed lexical keys (``CHOSEN`` without ``stems``), in the quick table too.
WITHOUT_STEMS = [c for c in CHOSEN if c != "stems"]
#: The shipped fit before issue 41's item 3 (without ``gather`` and ``stems``), in the quick table too.
WITHOUT_GATHER = [c for c in WITHOUT_STEMS if c != "gather"]


def configurations(quick: bool = False) -> list[tuple[str, list[str] | None]]:
    names = list(COMPONENTS)
    if quick:
        return [
            ("ranker before this work (fitted on data/, no refit)", None),
            (WITHOUT_CONTEXT, WITHOUT_GATHER),
            ("chosen without gather and stems", WITHOUT_GATHER),
            ("chosen without stems", WITHOUT_STEMS),
            (f"chosen: {' + '.join(CHOSEN)}", list(CHOSEN)),
        ]
    configs: list[tuple[str, list[str] | None]] = [
        ("ranker before this work (fitted on data/, no refit)", None),
        ("refit on the base features", []),
    ]
    configs += [(f"refit + {c}", [c]) for c in names]
    configs += [("refit + all components", names)]
    configs += [(WITHOUT_CONTEXT, WITHOUT_GATHER), (f"chosen: {' + '.join(CHOSEN)}", list(CHOSEN))]
    configs += [(f"chosen without {c}", [n for n in CHOSEN if n != c]) for c in CHOSEN if len(CHOSEN) > 1]
    configs += [(f"chosen + {c}", [*CHOSEN, c]) for c in names if c not in CHOSEN]
    seen: set[tuple[Any, ...] | None] = set()
    unique = []
    for label, components in configs:
        key = None if components is None else (label == WITHOUT_CONTEXT, *sorted(components))
        if key not in seen:
            seen.add(key)
            unique.append((label, components))
    return unique


def write_weights(questions: Sequence[Question], components: Sequence[str], out: Path, summary: str) -> None:
    columns = columns_of(components)
    names = [feature_names()[i] for i in columns]
    model = fit(questions, columns)
    weight, gather = _weights(questions, components, model_scorer(model, columns))
    files = sorted({q.conversation for q in questions})
    lines = [
        '"""Weights of the graph-feature reranker (``memory.retrieval.ranking``), written by ``python -m logicmap.evals.loco``.',
        "",
        f"Fitted on {date.today().isoformat()} (logistic regression, balanced classes, C=1, with the question's context:",
        "CONTEXT weighs each feature's best value over the question's turns; evals.loco.design) on the public LoCoMo",
        f"conversations {', '.join(files)} (../shared/data/locomo-dev5.json; not in this repository).",
        "Leave-one-conversation-out evidence recall at 10 turns of this configuration when they were written:",
        f"    {summary}",
        '"""',
        "",
        "COEFFICIENTS = {",
        *[f"    {json.dumps(name)}: {float(c):.6f}," for name, c in zip(names, model.coef_[0][: len(names)])],
        "}",
        "CONTEXT = {",
        *[f"    {json.dumps(name)}: {float(c):.6f}," for name, c in zip(names, model.coef_[0][len(names) :])],
        "}",
        f"INTERCEPT = {float(model.intercept_[0]):.6f}",
        f"SESSION_DIVERSITY = {weight}",
        f"GATHER_DIVERSITY = {gather}",
        "",
    ]
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="LoCoMo-format conversations (e.g. ../shared/data/locomo-dev5.json)")
    parser.add_argument("--data-dir", help="memory directory to keep and reuse (default: temporary)")
    parser.add_argument(
        "--write-weights", help="fit the chosen configuration on every conversation and write this module"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="only the shipped ranker before this work and the chosen configuration without context, without gather "
        "and as chosen",
    )
    parser.add_argument(
        "--embeddings",
        default="minilm",
        choices=["minilm", "openai", "hashing"],
        help="the embedder (default minilm, the one the figures are for)",
    )
    args = parser.parse_args(argv)
    path = Path(args.file)
    if not path.is_file():
        parser.error(f"no such file: {path}")
    print(machine_line())
    started = time.perf_counter()
    questions = featurised(path, args.data_dir, args.embeddings)
    convs = list(dict.fromkeys(q.conversation for q in questions))
    print(
        f"{len(questions)} questions with gold evidence (categories 1-4) in {len(convs)} conversations "
        f"({', '.join(convs)}), featurised in {time.perf_counter() - started:.1f}s"
    )
    rows, reference, chosen = [], None, None
    for label, components in configurations(args.quick):
        results = loco(questions, components, context=label != WITHOUT_CONTEXT)
        rows.append(table_row(label, results, reference))
        if components == []:
            reference = float(np.mean([v for values in results.values() for v in values]))
        if components is not None and list(CHOSEN) == components and label != WITHOUT_CONTEXT:
            chosen = results
        print(f"  {label}: {rows[-1][1]}", flush=True)
    counts = {c: sum(q.category == c for q in questions) for c in CATEGORIES}
    print_table(
        [
            "configuration (LOCO: fitted without the held-out conversation)",
            "R@10",
            "vs refit",
            *(f"{CATEGORIES[c]} ({counts[c]} q)" for c in CATEGORIES),
        ],
        rows,
    )
    if args.write_weights:
        summary = table_row("", chosen or loco(questions, list(CHOSEN)), None)
        text = f"R@10 {summary[1]}; " + ", ".join(f"{CATEGORIES[c]} {v}" for c, v in zip(CATEGORIES, summary[3:]))
        write_weights(questions, CHOSEN, Path(args.write_weights), text)
        print(f"wrote {args.write_weights}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
