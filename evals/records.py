"""Eval result records: one answered question, per-category statistics, ingest cost, a whole run.

Also their aggregation (``aggregate``), which the runner stores in the run and the report renders.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from logicmap.evals.metrics import JudgeScore, locomo_category

__all__ = [
    "DEFAULT_BUDGETS",
    "OVERALL",
    "CategoryStats",
    "EvalRun",
    "IngestSummary",
    "QuestionResult",
    "SessionCost",
    "aggregate",
]

DEFAULT_BUDGETS: tuple[int, ...] = (5, 10, 20)
# The aggregate key of a strategy's statistics over all its questions.
OVERALL = "overall"


class QuestionResult(BaseModel):
    """One question answered by one strategy, with its scores and cost."""

    question_id: str
    conversation_id: str
    namespace: str
    strategy: str
    category: int | str | None
    category_label: str
    question: str
    gold: str
    answer: str = ""
    f1: float = 0.0
    bleu1: float = 0.0
    judge: JudgeScore = Field(default_factory=JudgeScore)
    recall: dict[str, float | None] = Field(default_factory=dict)
    session_recall: dict[str, float | None] = Field(
        default_factory=dict, description="budget -> 1 when any gold session is among the first N cited turns' sessions"
    )
    gold_evidence: list[str] = Field(default_factory=list)
    cited_turns: list[str] = Field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    steps: int = 0
    fallbacks: int = 0
    error: str | None = None


class CategoryStats(BaseModel):
    """Means over the questions of one category (or ``overall``) for one strategy."""

    questions: int = 0
    f1: float = 0.0
    bleu1: float = 0.0
    judge_accuracy: float | None = None
    judged: int = 0
    recall: dict[str, float | None] = Field(default_factory=dict)
    session_recall: dict[str, float | None] = Field(default_factory=dict)
    recall_questions: int = 0
    llm_calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    wall_time_s: float = 0.0
    fallbacks: int = 0
    errors: int = 0


class SessionCost(BaseModel):
    """What ingesting one session cost (measured when it was first ingested)."""

    session_id: str
    turns: int = 0
    events: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    fallbacks: list[str] = Field(default_factory=list)


class IngestSummary(BaseModel):
    """How one conversation got into memory: this run, or reused from an earlier run (``cached``)."""

    conversation_id: str
    namespace: str
    policy: str
    cached: bool = False
    sessions: list[SessionCost] = Field(default_factory=list)
    wall_time_s: float = 0.0

    def per_session(self) -> dict[str, float]:
        n = max(1, len(self.sessions))
        return {
            "llm_calls": sum(s.llm_calls for s in self.sessions) / n,
            "prompt_tokens": sum(s.prompt_tokens for s in self.sessions) / n,
            "completion_tokens": sum(s.completion_tokens for s in self.sessions) / n,
            "wall_time_s": sum(s.wall_time_s for s in self.sessions) / n,
        }


class EvalRun(BaseModel):
    """Everything one ``run_eval`` call produced."""

    file: str
    file_sha256: str
    source_format: str
    policy: str
    embeddings: str
    started_at: str
    category_mapping: str
    budgets: list[int]
    strategies: list[str]
    unavailable: dict[str, str] = Field(default_factory=dict)
    judge: str = "not run"
    ingests: list[IngestSummary] = Field(default_factory=list)
    results: list[QuestionResult] = Field(default_factory=list)
    aggregates: dict[str, dict[str, CategoryStats]] = Field(default_factory=dict)
    wall_time_s: float = 0.0
    out_dir: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _stats(rows: Sequence[QuestionResult], budgets: Sequence[int]) -> CategoryStats:
    judged = [r.judge.score for r in rows if r.judge.score is not None]
    recall: dict[str, float | None] = {}
    sessions: dict[str, float | None] = {}
    with_gold = [r for r in rows if r.gold_evidence]
    for b in budgets:
        for into, field in ((recall, "recall"), (sessions, "session_recall")):
            present = [v for r in with_gold if (v := getattr(r, field).get(str(b))) is not None]
            into[str(b)] = _mean(present) if present else None
    return CategoryStats(
        questions=len(rows),
        f1=_mean([r.f1 for r in rows]),
        bleu1=_mean([r.bleu1 for r in rows]),
        judge_accuracy=_mean(judged) if judged else None,
        judged=len(judged),
        recall=recall,
        session_recall=sessions,
        recall_questions=len(with_gold),
        llm_calls=_mean([r.llm_calls for r in rows]),
        prompt_tokens=_mean([r.prompt_tokens for r in rows]),
        completion_tokens=_mean([r.completion_tokens for r in rows]),
        wall_time_s=_mean([r.wall_time_s for r in rows]),
        fallbacks=sum(r.fallbacks for r in rows),
        errors=sum(1 for r in rows if r.error),
    )


def _category_key(row: QuestionResult) -> tuple[int, str]:
    number = locomo_category(row.category)
    return (number if number is not None else 100, row.category_label)


def aggregate(
    results: Sequence[QuestionResult], budgets: Sequence[int] = DEFAULT_BUDGETS
) -> dict[str, dict[str, CategoryStats]]:
    """Per strategy: one ``CategoryStats`` per category label (in category order) and one for ``overall``."""
    out: dict[str, dict[str, CategoryStats]] = {}
    for strategy in dict.fromkeys(r.strategy for r in results):
        rows = [r for r in results if r.strategy == strategy]
        by_category: dict[str, list[QuestionResult]] = {}
        for row in sorted(rows, key=_category_key):
            by_category.setdefault(row.category_label, []).append(row)
        stats = {label: _stats(group, budgets) for label, group in by_category.items()}
        stats[OVERALL] = _stats(rows, budgets)
        out[strategy] = stats
    return out
