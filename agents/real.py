"""REAL's search roles: root planner, one-call-per-step path evaluator, answerer, and the repair rule table.

Each LLM role runs through ``run_role`` with a deterministic, similarity-based fallback that is also the
no-LLM policy. The fact index, the paths and the neighbour filter they use live in ``memory/retrieval/fact_paths.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np
from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.memory.indexes.cue_extraction import ASPECTS
from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.language.lexicon import PREFERENCE_WORDS
from logicmap.memory.language.text import NO_ANSWER, STOP_WORDS, content_stems, stem
from logicmap.memory.language.timeparse import MONTHS, date_text, parse_date
from logicmap.memory.records.facts import entity_key, interval_text, valid_during
from logicmap.memory.records.records import Fact, FactIntent
from logicmap.memory.retrieval.fact_paths import FactIndex, FactPath, SearchFilter, render_paths
from logicmap.prompts import real_answer, real_evaluate, real_roots
from logicmap.prompts.real_answer import PathAnswer
from logicmap.prompts.real_evaluate import PathScore, PathScores
from logicmap.prompts.real_roots import RootEntity, RootPlan

__all__ = [
    "CAUSAL_RELATIONS",
    "REPAIR_RULES",
    "RepairCandidate",
    "answer_from_paths",
    "asks_uncertain",
    "cosine_to",
    "evaluate_paths",
    "heuristic_answer",
    "heuristic_roots",
    "heuristic_scores",
    "plan_roots",
    "question_intent",
    "question_reference_time",
    "relation_gloss",
    "repair_candidates",
    "validate_root_plan",
    "validate_scores",
]

CAUSAL_RELATIONS = frozenset(
    {"decided_because", "because", "caused_by", "causes", "led_to", "reason", "motivated_by", "resulted_in", "due_to"}
)
# Beams whose answer must hold at the time asked about; EVOLUTION and TEMPORAL beams look at other times too.
_TIME_BOUND_INTENTS = frozenset({"FACT", "CAUSAL", "CONTRAST"})
HYPONYM_RELATIONS = frozenset({"is_a", "type_of", "kind_of", "instance_of", "subclass_of"})

# Word lists here are memory/language/lexicon.py classes or closed-class words; none was read off data/.
# Words of a question that name no entity and no relation (on top of the stop words).
_EXTRA_STOP = STOP_WORDS | frozenset(
    "now currently still ever say said says tell much many would could should has have had also really before "
    "after then than just name kind type thing".split()
    + [m.lower() for m in MONTHS]
)
_HEDGED_QUESTION = re.compile(
    r"\b(maybe|might|plan|plans|planning|want|wants|wanted|hope|hopes|likely|unsure|uncertain|consider|considering|"
    r"thinking|intend|intends|next)\b",
    re.IGNORECASE,
)
# Each intent's name and its dictionary synonyms (lexicon.INTENT_CUES), tried in this order.
_INTENT_PATTERNS: list[tuple[FactIntent, re.Pattern[str]]] = [
    ("CAUSAL", re.compile(r"\b(why|reasons?|because|causes?|caused|led to|motivated|motivation)\b")),
    (
        "CONTRAST",
        re.compile(r"\b(differ|different|difference|instead|rather|compare|compared|contrast|unlike|versus|vs)\b"),
    ),
    ("EVOLUTION", re.compile(r"\b(changes?|changed|switch|switched|used to|anymore|no longer)\b")),
    ("TEMPORAL", re.compile(r"\b(when|what time|how long|what date|which year|which month)\b")),
]
_NOW = re.compile(r"\b(now|currently|these days|at the moment|at present|today|still)\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(r"\b(?:" + "|".join(MONTHS) + r")\s+\d{4}\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(19\d{2}|20\d{2})\b")
_ISO_DAY = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def _stems(text: str) -> set[str]:
    """Content stems of a text (an entity name, a relation gloss, a question), without years."""
    return {s for s in content_stems(text.replace("_", " "), stop=_EXTRA_STOP) if not _YEAR.fullmatch(s)}


def relation_gloss(relation: str) -> str:
    """The relation's words plus the general words of its class: ``likes`` -> ``likes`` and the preference words.

    The classes are memory/language/lexicon.py's (preference words, the aspect taxonomy): a relation word that is a
    preference word brings the others, one that names an aspect brings the aspect's words. There is no
    table of the words questions use for each relation (such a table was read off the bundled questions).
    """
    words = relation.replace("_", " ").split()
    extra: list[str] = []
    for word in words:
        if word in PREFERENCE_WORDS:
            extra.extend(sorted(PREFERENCE_WORDS))
        extra.extend(w for lexicon in ASPECTS.values() if word in lexicon for w in sorted(lexicon))
    return " ".join(dict.fromkeys([*words, *extra]))


def _relation_stems(relation: str) -> set[str]:
    return _stems(relation_gloss(relation))


# -- question analysis ---------------------------------------------------------------------------


def question_intent(question: str) -> FactIntent:
    """The exploration intent a question asks for (keyword rules; the LLM planner refines it)."""
    q = question.lower()
    for intent, pattern in _INTENT_PATTERNS:
        if pattern.search(q):
            return intent
    return "FACT"


def question_reference_time(question: str) -> str | None:
    """``now``, ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY`` when the question is about one time, else ``None``."""
    day = _ISO_DAY.search(question)
    if day:
        return day.group(1)
    month = _MONTH_YEAR.search(question)
    if month and (stated := parse_date(month.group(0))) is not None:
        return stated.iso()
    year = _YEAR.search(question)
    if year:
        return year.group(1)
    if _NOW.search(question):
        return "now"
    return None


def asks_uncertain(question: str) -> bool:
    """Whether a question is about plans, hopes or guesses (then low-confidence facts are admissible)."""
    return bool(_HEDGED_QUESTION.search(question))


# -- roots ---------------------------------------------------------------------------------------


def heuristic_roots(question: str, index: FactIndex, similar_fact_ids: Sequence[str] = (), limit: int = 3) -> RootPlan:
    """Entities named in the question (heads first), else heads of the most similar facts."""
    lowered = " " + re.sub(r"[^\w\s'-]", " ", re.sub(r"'s\b", "", question.lower())) + " "
    named = [
        key
        for key in index.names
        if len(key) >= 3 and key not in _EXTRA_STOP and re.search(rf"(?<![\w']){re.escape(key)}(?![\w'])", lowered)
    ]
    named.sort(key=lambda k: (k not in index.by_head, -len(index.by_head.get(k, [])), -len(k), k))
    roots = named[:limit]
    if not roots:
        for fact_id in similar_fact_ids:
            key = entity_key(index.facts[fact_id].head)
            if key not in roots:
                roots.append(key)
            if len(roots) >= limit:
                break
    intent = question_intent(question)
    return RootPlan(
        roots=[RootEntity(entity=index.name(k), intent=intent) for k in roots],
        reference_time=question_reference_time(question),
        include_uncertain=asks_uncertain(question),
    )


def validate_root_plan(plan: RootPlan, index: FactIndex) -> list[str]:
    problems = []
    if not plan.roots:
        problems.append("no roots: give 1 to 3 entities from the known entities")
    for i, root in enumerate(plan.roots):
        if index.resolve(root.entity) is None:
            problems.append(f"root {i}: {root.entity!r} is not one of the known entities")
    ref = (plan.reference_time or "").strip().lower()
    if ref and ref != "now" and not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", ref):
        problems.append(f"reference_time {plan.reference_time!r} is not YYYY-MM-DD, YYYY-MM, YYYY, 'now' or null")
    return problems


def plan_roots(
    llm: BaseChatModel | None,
    question: str,
    index: FactIndex,
    *,
    similar_fact_ids: Sequence[str] = (),
    max_entities: int = 60,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[RootPlan]:
    """Root entities with intents; the fallback picks entities named in the question, else by similarity."""
    entities = index.entities()
    shown = list(dict.fromkeys([*(index.facts[f].head for f in similar_fact_ids), *entities]))[:max_entities]
    latest = index.latest_time()
    outcome = run_role(
        llm,
        role="real_roots",
        messages=real_roots.build_messages(question, shown, latest.date().isoformat() if latest else None),
        schema=RootPlan,
        validate=lambda plan: validate_root_plan(plan, index),
        fallback=lambda: heuristic_roots(question, index, similar_fact_ids),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": real_roots.VERSION},
    )
    roots: list[RootEntity] = []
    for root in outcome.output.roots[:3]:
        key = index.resolve(root.entity)
        if key is not None and all(entity_key(r.entity) != key for r in roots):
            roots.append(root.model_copy(update={"entity": index.name(key)}))
    outcome.output = outcome.output.model_copy(update={"roots": roots})
    return outcome


# -- evaluation -----------------------------------------------------------------------------------


def _question_parts(question: str, index: FactIndex) -> tuple[set[str], set[str]]:
    """Question stems naming entities facts are about (heads: people, pets, places), and the other content stems."""
    stems = _stems(question)
    entity_stems = {s for key in index.by_head for s in content_stems(key)}
    named = {s for s in stems if s in entity_stems}
    return named, stems - named


def heuristic_scores(
    question: str,
    paths: Sequence[FactPath],
    labels: Sequence[str],
    index: FactIndex,
    similarities: Sequence[float],
    window: tuple[datetime | None, datetime | None] | None = None,
) -> PathScores:
    """Similarity-and-overlap scores: the evaluator's fallback and the no-LLM policy.

    relevance: named entities and content words of the question the path covers, plus embedding
    similarity; coherence: chained, time-consistent, confident facts, and (for attribute, causal and
    contrast paths) facts valid in the ``window`` the search asks about, so a temporal-succession repair
    bringing an older version does not pass for the current one; sufficiency: the path covers the
    question and adds something it does not name (for "when" a date, for "why" a reason).
    """
    named, content = _question_parts(question, index)
    q = question.lower()
    scores = []
    for label, path, similarity in zip(labels, paths, similarities, strict=True):
        facts = [index.facts[f] for f in path.fact_ids]
        tokens: set[str] = set()
        for fact in facts:
            tokens |= _stems(fact.head) | _stems(fact.tail) | _relation_stems(fact.relation)
        named_cover = len(named & tokens) / len(named) if named else 1.0
        content_cover = len(content & tokens) / len(content) if content else 1.0
        if named and content:
            lexical = 0.4 * named_cover + 0.4 * content_cover
        else:
            lexical = 0.8 * (named_cover if named else content_cover)
        relevance = lexical + 0.2 * max(0.0, float(similarity))
        coherence = 0.6 + 0.4 * min((f.confidence for f in facts), default=0.0)
        for fact, direction, previous in zip(facts, path.directions, path.nodes, strict=False):
            if entity_key(fact.head if direction == "out" else fact.tail) != entity_key(previous):
                coherence -= 0.15  # a hop through a related entity, not a stored edge
        for a, b in zip(facts, facts[1:], strict=False):
            if a.valid_to is not None and b.valid_from is not None and b.valid_from >= a.valid_to:
                coherence -= 0.2  # the second fact starts after the first stopped holding
        if len({entity_key(n) for n in path.nodes}) < len(path.nodes):
            coherence -= 0.3
        if (
            window is not None
            and path.intent in _TIME_BOUND_INTENTS
            and not all(valid_during(f, *window) for f in facts)
        ):
            coherence -= 0.5  # not valid at the time asked about (changes and dates may look at other times)
        new_info = any(not (_stems(n) <= (named | content)) for n in path.nodes[1:])
        if re.search(r"\bwhen\b", q):
            new_info = any(f.valid_from is not None for f in facts)
        # Each extra hop must earn its place: longer paths need more coverage to count as sufficient.
        sufficiency = content_cover * named_cover * (1.0 if new_info else 0.3) * 0.9 ** max(0, len(facts) - 1)
        if re.search(r"\bwhen\b", q) and not any(f.valid_from for f in facts):
            sufficiency *= 0.5
        if re.search(r"\bwhy\b", q) and not any(f.intent == "CAUSAL" or f.relation in CAUSAL_RELATIONS for f in facts):
            sufficiency *= 0.5
        scores.append(
            PathScore(
                path_id=label,
                relevance=round(min(1.0, relevance), 4),
                coherence=round(max(0.0, min(1.0, coherence)), 4),
                sufficiency=round(min(1.0, sufficiency), 4),
            )
        )
    return PathScores(scores=scores)


def validate_scores(result: PathScores, labels: Sequence[str]) -> list[str]:
    problems = []
    given = [s.path_id for s in result.scores]
    missing = [label for label in labels if label not in given]
    unknown = [g for g in given if g not in labels]
    if missing:
        problems.append(f"missing scores for paths {missing}: score every listed path once")
    if unknown:
        problems.append(f"unknown path ids {unknown}; valid ids are {list(labels)}")
    for s in result.scores:
        for name in ("relevance", "coherence", "sufficiency"):
            value = getattr(s, name)
            if not 0.0 <= value <= 1.0:
                problems.append(f"{s.path_id}: {name} {value} is outside 0..1")
    return problems


def evaluate_paths(
    llm: BaseChatModel | None,
    question: str,
    paths: Sequence[FactPath],
    index: FactIndex,
    *,
    similarities: Sequence[float],
    reference_time: str | None = None,
    window: tuple[datetime | None, datetime | None] | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[PathScores]:
    """ONE call scores relevance, coherence and sufficiency of every candidate path of a beam step."""
    labels = [f"P{i + 1}" for i in range(len(paths))]
    return run_role(
        llm,
        role="real_evaluator",
        messages=real_evaluate.build_messages(question, render_paths(paths, index, labels), reference_time),
        schema=PathScores,
        validate=lambda r: validate_scores(r, labels),
        fallback=lambda: heuristic_scores(question, paths, labels, index, similarities, window),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": real_evaluate.VERSION},
    )


# -- counterfactual repair ------------------------------------------------------------------------


@dataclass(frozen=True)
class RepairCandidate:
    fact: Fact
    direction: Literal["out", "in"]
    hypothesis: str


RepairRule = Callable[[FactIndex, FactPath, Sequence[Fact], SearchFilter], list[RepairCandidate]]


def _symmetry(index: FactIndex, parent: FactPath, failed: Sequence[Fact], flt: SearchFilter) -> list[RepairCandidate]:
    """If X r Y holds then Y r^-1 X: walk facts that point *into* the frontier entity."""
    return [
        RepairCandidate(f, "in", f"symmetry: {f.head} {f.relation} {parent.end}")
        for f in index.incoming(parent.end)
        if flt.admits(f, parent.intent)
    ]


def _hyponymy(index: FactIndex, parent: FactPath, failed: Sequence[Fact], flt: SearchFilter) -> list[RepairCandidate]:
    """What holds of a kind may be stated of an instance (and back): is_a edges and related names."""
    out = []
    end = entity_key(parent.end)
    for fact in [*index.outgoing(parent.end), *index.incoming(parent.end)]:
        if fact.relation in HYPONYM_RELATIONS and flt.admits(fact, parent.intent):
            out.append(
                RepairCandidate(
                    fact, "out" if entity_key(fact.head) == end else "in", f"hyponymy: {fact.head} is a {fact.tail}"
                )
            )
    for other in index.related_entities(parent.end):
        for fact in index.outgoing(other):
            if flt.admits(fact, parent.intent):
                out.append(RepairCandidate(fact, "out", f"hyponymy: {parent.end} ~ {index.name(other)}"))
        for fact in index.incoming(other):
            if flt.admits(fact, parent.intent):
                out.append(RepairCandidate(fact, "in", f"hyponymy: {parent.end} ~ {index.name(other)}"))
    return out


def _temporal_succession(
    index: FactIndex, parent: FactPath, failed: Sequence[Fact], flt: SearchFilter
) -> list[RepairCandidate]:
    """The value may have changed: other versions of the attributes tried, at any time."""
    seeds = [*(index.facts[f] for f in parent.fact_ids[-1:]), *failed, *index.outgoing(parent.end)]
    end = entity_key(parent.end)
    out = []
    for seed in seeds:
        for fact in [seed, *index.versions(seed)]:
            if entity_key(fact.head) == end and flt.admits(fact, parent.intent, relax_time=True):
                out.append(RepairCandidate(fact, "out", f"temporal succession: {fact.relation} {interval_text(fact)}"))
    return out


def _causality(index: FactIndex, parent: FactPath, failed: Sequence[Fact], flt: SearchFilter) -> list[RepairCandidate]:
    """There may be a reason behind it: causal facts about the frontier entity, whatever the intent."""
    end = entity_key(parent.end)
    out = []
    for fact in [*index.outgoing(parent.end), *index.incoming(parent.end)]:
        if (fact.intent == "CAUSAL" or fact.relation in CAUSAL_RELATIONS) and flt.admits(
            fact, parent.intent, relax_intent=True
        ):
            out.append(
                RepairCandidate(fact, "out" if entity_key(fact.head) == end else "in", f"causality: {fact.relation}")
            )
    return out


def _co_occurrence(
    index: FactIndex, parent: FactPath, failed: Sequence[Fact], flt: SearchFilter
) -> list[RepairCandidate]:
    """Facts stated in the same turns as the path's facts (at the root: as the failed candidates) are likely related."""
    seeds = [index.facts[f] for f in parent.fact_ids] or list(failed)
    turns = [t for f in seeds for t in f.turn_ids]
    on_path = {entity_key(n) for n in parent.nodes}
    out = []
    for fact in index.sharing_turns(turns):
        if flt.admits(fact, parent.intent):
            direction: Literal["out", "in"] = "in" if entity_key(fact.tail) in on_path else "out"
            out.append(RepairCandidate(fact, direction, f"co-occurrence: turns {', '.join(fact.turn_ids)}"))
    return out


# The rule table: each hypothesis becomes a constrained traversal from the frontier entity. These are the
# implicit logical relations REAL's counterfactual repair reasons with: relation inversion (symmetry),
# entity substitution by kind or instance (hyponymy), a shift to another version in time (temporal
# succession), a cause behind the state (causality), and facts stated together (co-occurrence). A path
# gets at most max(0, m - |relevant expansions|) of them (``graphs/strategies/real.py``), marked as repairs.
REPAIR_RULES: dict[str, RepairRule] = {
    "symmetry": _symmetry,
    "hyponymy": _hyponymy,
    "temporal_succession": _temporal_succession,
    "causality": _causality,
    "co_occurrence": _co_occurrence,
}


def repair_candidates(
    index: FactIndex,
    parent: FactPath,
    failed: Sequence[Fact],
    flt: SearchFilter,
    *,
    exclude: set[str],
    rules: Sequence[str] | None = None,
) -> list[RepairCandidate]:
    """Hypotheses from the rule table, first rule first, without facts already on or tried from ``parent``."""
    # A failed fact is not re-proposed: a repair must bring something the plain expansion did not.
    seen: set[str] = set(exclude) | set(parent.fact_ids) | {f.id for f in failed}
    nodes = {entity_key(n) for n in parent.nodes}
    out = []
    for name in rules or list(REPAIR_RULES):
        for cand in REPAIR_RULES[name](index, parent, failed, flt):
            target = cand.fact.tail if cand.direction == "out" else cand.fact.head
            if cand.fact.id in seen or entity_key(target) in nodes:
                continue
            seen.add(cand.fact.id)
            out.append(cand)
    return out


# -- answering ------------------------------------------------------------------------------------


def heuristic_answer(question: str, paths: Sequence[FactPath], index: FactIndex, *, passing: bool = True) -> PathAnswer:
    """Read the answer off the best path: the fact that matches the question best, its far end (its date
    for "when", the reason for "why"); several values when top paths give the same kind of fact."""
    if not paths or not passing:
        return PathAnswer(answer=NO_ANSWER, path_ids=[])
    q = question.lower()
    _, content = _question_parts(question, index)
    best = paths[0]
    if re.search(r"\bwhy\b", q):
        for fact_id in best.fact_ids:
            fact = index.facts[fact_id]
            if fact.intent == "CAUSAL" or fact.relation in CAUSAL_RELATIONS:
                return PathAnswer(answer=fact.tail, path_ids=[best.id])
    steps = list(zip(best.fact_ids, best.nodes[1:], strict=True))
    # The fact whose relation the question names best (the earliest on a tie); the last one when none does.
    overlaps = [len(_relation_stems(index.facts[f].relation) & content) for f, _ in steps]
    fact_id, value = steps[overlaps.index(max(overlaps))] if max(overlaps) else steps[-1]
    fact = index.facts[fact_id]
    asked = _stems(question)
    if _stems(value) <= asked:  # the end we reached is named in the question: the answer is the other end
        other = fact.head if entity_key(value) == entity_key(fact.tail) else fact.tail
        value = other if not _stems(other) <= asked else value
    if re.search(r"\bwhen\b", q) and fact.valid_from is not None:
        return PathAnswer(answer=date_text(fact.valid_from, fact.from_precision), path_ids=[best.id])
    values, used = [value], [best.id]
    wanted = _relation_stems(fact.relation) & content
    # "Which foods ..." asks for several values: similar-kind paths further down the ranking count too.
    plural = any(
        len(w) > 3 and w.endswith("s") and not w.endswith("ss") and stem(w) in content for w in re.findall(r"[a-z]+", q)
    )
    floor = (0.6 if plural else 0.8) * (best.score or 0)
    for path in paths[1:]:
        last = index.facts[path.fact_ids[-1]]
        if (path.score or 0) < floor or not (_relation_stems(last.relation) & wanted):
            continue
        if entity_key(path.end) not in {entity_key(v) for v in values}:
            values.append(path.end)
            used.append(path.id)
    return PathAnswer(answer=", ".join(values), path_ids=used)


def answer_from_paths(
    llm: BaseChatModel | None,
    question: str,
    paths: Sequence[FactPath],
    index: FactIndex,
    *,
    reference_time: str | None = None,
    passing: bool = True,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[PathAnswer]:
    """The answer from the kept paths only; the fallback reads it off the best path."""
    labels = [p.id for p in paths]
    return run_role(
        llm,
        role="real_answerer",
        messages=real_answer.build_messages(question, render_paths(paths, index, labels) or "(none)", reference_time),
        schema=PathAnswer,
        validate=lambda a: [] if a.answer.strip() else ["empty answer"],
        fallback=lambda: heuristic_answer(question, paths, index, passing=passing),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": real_answer.VERSION},
    )


def cosine_to(query: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row to the query."""
    if vectors.size == 0:
        return np.zeros(0, dtype=np.float32)
    similarity: np.ndarray = normalize(np.atleast_2d(vectors)) @ normalize(query)
    return similarity
