"""Answer and evidence metrics: LoCoMo token F1 (with its per-category rules), BLEU-1, evidence recall.

Also the LLM-judge metric, which runs only with a judge model and is otherwise reported as not run.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from nltk.stem import PorterStemmer
from pydantic import BaseModel

__all__ = [
    "ADVERSARIAL_CATEGORY",
    "JudgeScore",
    "LOCOMO_CATEGORIES",
    "bleu1",
    "category_label",
    "evidence_recall",
    "session_recall",
    "f1_score",
    "llm_judge",
    "locomo_category",
    "normalize_answer",
    "normalize_evidence_ids",
    "stem_tokens",
    "token_f1",
]

# LoCoMo's category numbers as its released data uses them.
LOCOMO_CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL_CATEGORY = 5

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_ABSTAIN = ("no information available", "not mentioned")
_WORD = re.compile(r"\w+|[^\w\s]")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_PORTER = PorterStemmer()  # LoCoMo's scorer: nltk.stem.PorterStemmer(), default mode


def locomo_category(category: Any) -> int | None:
    """The LoCoMo category number of ``category`` (int or numeric string), else ``None``."""
    if isinstance(category, bool):
        return None
    if isinstance(category, int):
        return category
    if isinstance(category, str) and category.strip().isdigit():
        return int(category.strip())
    return None


def category_label(category: Any) -> str:
    """A readable name: ``"1 multi-hop"`` for LoCoMo numbers, the text itself for LongMemEval types."""
    number = locomo_category(category)
    if number is not None:
        return f"{number} {LOCOMO_CATEGORIES.get(number, 'unknown')}"
    return str(category) if category not in (None, "") else "uncategorized"


def normalize_answer(text: str) -> str:
    """LoCoMo's normalization: drop commas, lowercase, strip punctuation, drop a/an/the/and, squeeze spaces."""
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def stem_tokens(text: str) -> list[str]:
    """Normalized tokens of ``text``, stemmed by NLTK's Porter stemmer as LoCoMo's scorer does."""
    return [_PORTER.stem(word) for word in normalize_answer(text).split()]


def f1_score(prediction: str, gold: str) -> float:
    """Multiset token F1 between one prediction and one gold answer, after normalization and stemming."""
    predicted = stem_tokens(prediction)
    expected = stem_tokens(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision = same / len(predicted)
    recall = same / len(expected)
    return 2 * precision * recall / (precision + recall)


def _multi_answer_f1(prediction: str, gold: str) -> float:
    """LoCoMo's multi-hop rule: each comma-separated gold part scores its best prediction part; mean over gold parts."""
    predictions = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(f1_score(p, g) for p in predictions) for g in golds) / len(golds)


def token_f1(prediction: str, gold: str, category: Any = None) -> float:
    """Token F1 as LoCoMo's scorer computes it, per category.

    1 (multi-hop): comma-split parts, best prediction part per gold part, averaged.
    3 (open-domain): the gold answer is cut at the first ``;``.
    2, 4 and anything else (LongMemEval types, ``None``): plain token F1.
    5 (adversarial): 1.0 when the prediction abstains ("not mentioned", "no information available").
    """
    number = locomo_category(category)
    prediction = "" if prediction is None else str(prediction)
    gold = "" if gold is None else str(gold)
    if number == ADVERSARIAL_CATEGORY:
        lowered = prediction.lower()
        return 1.0 if any(phrase in lowered for phrase in _ABSTAIN) else 0.0
    if number == 3:
        gold = gold.split(";")[0].strip()
    if number == 1:
        return _multi_answer_f1(prediction, gold)
    return f1_score(prediction, gold)


def bleu1(prediction: str, gold: str) -> float:
    """BLEU-1 as NLTK's ``sentence_bleu(weights=(1,0,0,0))`` gives it on lowercased word tokens.

    Clipped unigram precision times the brevity penalty; 0 when no unigram matches.
    """
    predicted = _WORD.findall(str(prediction or "").lower())
    expected = _WORD.findall(str(gold or "").lower())
    if not predicted or not expected:
        return 0.0
    matches = sum((Counter(predicted) & Counter(expected)).values())
    if matches == 0:
        return 0.0
    precision = matches / len(predicted)
    c, r = len(predicted), len(expected)
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return brevity * precision


def normalize_evidence_ids(ids: Iterable[str]) -> list[str]:
    """Gold evidence ids as turn ids: LoCoMo sometimes packs several in one string (``"D8:6; D9:17"``)."""
    out: list[str] = []
    for raw in ids:
        for part in _EVIDENCE_SPLIT.split(str(raw)):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out


def evidence_recall(cited: Sequence[str], gold: Iterable[str], budget: int | None = None) -> float | None:
    """Share of the gold evidence turns among the first ``budget`` distinct cited turns.

    ``None`` when the question has no gold evidence (such questions are left out of averages).
    """
    expected = set(normalize_evidence_ids(gold))
    if not expected:
        return None
    return len(expected & set(_first_distinct(cited, budget))) / len(expected)


def _first_distinct(cited: Sequence[str], budget: int | None) -> list[str]:
    """The first ``budget`` distinct cited turns (every one when ``budget`` is None), in citation order."""
    kept: list[str] = []
    for tid in cited:
        if tid not in kept:
            kept.append(tid)
            if budget is not None and len(kept) >= budget:
                break
    return kept


def _session(turn_id: str) -> str:
    """The session a dia id names (``D3:12`` -> ``D3``; an id without a ``:`` is its own session)."""
    return turn_id.split(":", 1)[0]


def session_recall(cited: Sequence[str], gold: Iterable[str], budget: int | None = None) -> float | None:
    """1.0 when any gold evidence turn's session is among the sessions of the first ``budget`` distinct cited turns,
    else 0.0: the any-gold-session metric some peers report as LoCoMo "R@k" (a chunk's session counting for all its
    turns), reported beside ``evidence_recall`` so a public comparison is like for like. ``None`` without gold."""
    expected = {_session(t) for t in normalize_evidence_ids(gold)}
    if not expected:
        return None
    return 1.0 if expected & {_session(t) for t in _first_distinct(cited, budget)} else 0.0


class JudgeScore(BaseModel):
    """An LLM judge's verdict; ``ran`` is False without a judge model or when the judge gave no valid verdict."""

    ran: bool = False
    correct: bool | None = None
    reasoning: str = ""
    reason_not_run: str | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def score(self) -> float | None:
        return None if not self.ran or self.correct is None else float(self.correct)


def llm_judge(llm: Any, question: str, gold: str, prediction: str, *, method: str = "function_calling") -> JudgeScore:
    """Ask the judge model whether ``prediction`` answers ``question`` as ``gold`` does.

    Without a model, or when the model gives no valid verdict after its retry, the judge has not run:
    no score is invented.
    """
    if llm is None:
        return JudgeScore(reason_not_run="no judge model configured")
    from logicmap.agents.judge import judge_answer

    outcome = judge_answer(llm, question, gold, prediction, method=method)
    cost = outcome.cost
    if outcome.fallback is not None:
        return JudgeScore(
            reason_not_run=f"judge gave no valid verdict: {outcome.fallback.reason}",
            llm_calls=cost.llm_calls,
            prompt_tokens=cost.prompt_tokens,
            completion_tokens=cost.completion_tokens,
        )
    verdict = outcome.output
    return JudgeScore(
        ran=True,
        correct=verdict.label == "CORRECT",
        reasoning=verdict.reasoning,
        llm_calls=cost.llm_calls,
        prompt_tokens=cost.prompt_tokens,
        completion_tokens=cost.completion_tokens,
    )
