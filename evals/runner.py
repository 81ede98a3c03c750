"""The eval run loop: ingest a LoCoMo / LongMemEval file once per policy, answer every question with every strategy.

Scores each answer into a record (evals.records), aggregates per category with cost, then writes the report (evals.report).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from logicmap.agents.base import Cost
from logicmap.agents.provider import ProviderError
from logicmap.evals.metrics import (
    ADVERSARIAL_CATEGORY,
    LOCOMO_CATEGORIES,
    JudgeScore,
    bleu1,
    category_label,
    evidence_recall,
    llm_judge,
    locomo_category,
    normalize_evidence_ids,
    session_recall,
    token_f1,
)
from logicmap.evals.records import DEFAULT_BUDGETS, EvalRun, IngestSummary, QuestionResult, SessionCost, aggregate
from logicmap.evals.report import langsmith_configured, push_langsmith_experiment, write_report
from logicmap.evals.specs import StrategySpec, resolve_strategies
from logicmap.graphs.runtime.resources import Resources, default_resources
from logicmap.memory.files.loaders import Conversation, QAItem, conversation_namespace, load_conversations

__all__ = [
    "category_mapping",
    "eval_namespace",
    "run_eval",
    "select_questions",
]

CITED_TURNS_KEPT = 50


# ---------------------------------------------------------------- helpers


def category_mapping(source_format: str) -> str:
    """The category mapping a report states."""
    if source_format == "longmemeval":
        return "LongMemEval: the category is the question_type field (e.g. temporal-reasoning, multi-session)."
    names = ", ".join(f"{k} {v}" for k, v in LOCOMO_CATEGORIES.items())
    return f"LoCoMo categories: {names}; category {ADVERSARIAL_CATEGORY} is excluded unless asked for."


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def eval_namespace(
    file_sha256: str, policy: str, embeddings: str, conversation_id: str, memory_manager: str | None = None
) -> str:
    """The namespace a conversation of a file is ingested into: the same file, policy, embedder (and memory
    manager: a run with the ``r2`` strategy ingests with Memory-R2's) reuse it."""
    manager = f"|{memory_manager}" if memory_manager else ""
    key = hashlib.sha256(f"{file_sha256}|{policy}|{embeddings}{manager}".encode()).hexdigest()[:12]
    return conversation_namespace(f"eval.{key}.{policy}", conversation_id)


def _embedder_label(resources: Resources) -> str:
    """Which embedder wrote the vectors: memory ingested with another embedder is not reused."""
    settings = resources.settings
    if settings.embedding_provider == "hashing":
        return "hashing"
    return f"{settings.embedding_provider}:{settings.embedding_model}"


def _wanted_categories(categories: Sequence[int | str] | None) -> set[str] | None:
    if categories is None:
        return None
    return {str(c).strip() for c in categories if str(c).strip()}


def select_questions(
    conversations: Sequence[Conversation], categories: Sequence[int | str] | None = None, limit: int | None = None
) -> list[tuple[Conversation, QAItem]]:
    """The questions to ask, in file order: filtered by category (adversarial left out unless listed), at most ``limit``."""
    wanted = _wanted_categories(categories)
    chosen: list[tuple[Conversation, QAItem]] = []
    for conv in conversations:
        for qa in conv.qa:
            if wanted is not None:
                if str(qa.category) not in wanted:
                    continue
            elif conv.source_format == "locomo" and locomo_category(qa.category) == ADVERSARIAL_CATEGORY:
                continue
            chosen.append((conv, qa))
            if limit is not None and len(chosen) >= limit:
                return chosen
    return chosen


def _resolve_policy(policy: str, resources: Resources) -> str:
    if policy == "auto":
        return "llm" if resources.settings.chat_model else "heuristic"
    if policy not in ("llm", "heuristic"):
        raise ValueError(f"policy must be auto, llm or heuristic, not {policy!r}")
    return policy


def _cache_file(resources: Resources, namespace: str) -> Path:
    return Path(resources.settings.data_dir) / "eval-ingest" / f"{namespace}.json"


def _ingest(
    conv: Conversation,
    namespace: str,
    policy: str,
    resources: Resources,
    progress: bool,
    memory_manager: str | None = None,
) -> IngestSummary:
    """Ingest (idempotent: committed sessions are skipped) and keep the first run's per-session cost beside memory."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    cache = _cache_file(resources, namespace)
    known: dict[str, SessionCost] = {}
    if cache.exists():
        try:
            stored = IngestSummary.model_validate_json(cache.read_text())
            known = {s.session_id: s for s in stored.sessions}
        except ValueError:
            known = {}
    report = ingest_conversation(
        conv,
        namespace,
        resources=resources,
        policy=policy,  # type: ignore[arg-type]  # names from argparse choices
        progress=progress,
        memory_manager=memory_manager,  # type: ignore[arg-type]  # names from argparse choices
    )
    sessions: list[SessionCost] = []
    for s in report.sessions:
        if s.skipped and s.session_id in known:
            sessions.append(known[s.session_id])
        elif s.skipped:
            sessions.append(SessionCost(session_id=s.session_id))
        else:
            sessions.append(
                SessionCost(
                    session_id=s.session_id,
                    turns=s.turns,
                    events=s.events,
                    llm_calls=s.cost.llm_calls,
                    prompt_tokens=s.cost.prompt_tokens,
                    completion_tokens=s.cost.completion_tokens,
                    wall_time_s=s.cost.wall_time_s,
                    fallbacks=s.fallbacks,
                )
            )
    summary = IngestSummary(
        conversation_id=conv.conversation_id,
        namespace=namespace,
        policy=policy,
        cached=all(s.skipped for s in report.sessions),
        sessions=sessions,
        wall_time_s=report.wall_time_s,
    )
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(summary.model_copy(update={"cached": False}).model_dump_json(indent=1))
    return summary


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether a strategy takes a keyword (LongMemEval's question date goes only to those that do)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _answer_one(
    spec: StrategySpec,
    fn: Callable[..., Any],
    conv: Conversation,
    qa: QAItem,
    namespace: str,
    *,
    policy: str,
    resources: Resources,
    budgets: Sequence[int],
    judge: Any,
    judge_method: str,
) -> QuestionResult:
    gold_evidence = normalize_evidence_ids(qa.evidence)
    record = QuestionResult(
        question_id=qa.question_id,
        conversation_id=conv.conversation_id,
        namespace=namespace,
        strategy=spec.label,
        category=qa.category,
        category_label=category_label(qa.category),
        question=qa.question,
        gold=qa.answer,
        gold_evidence=gold_evidence,
    )
    options = dict(spec.options)
    if qa.question_date is not None and _accepts(fn, "question_date"):
        options["question_date"] = qa.question_date.isoformat()
    started = time.perf_counter()
    try:
        result = fn(qa.question, namespace, resources=resources, policy=policy, **options)
    except ProviderError:
        raise  # a bad key or an unreachable server would fail every question: stop the run
    except Exception as exc:  # one failing question is recorded and scored 0, the run goes on
        record.wall_time_s = time.perf_counter() - started
        record.error = f"{type(exc).__name__}: {str(exc)[:500]}"
        record.recall = {str(b): evidence_recall([], gold_evidence, b) for b in budgets}
        record.session_recall = {str(b): session_recall([], gold_evidence, b) for b in budgets}
        return record
    record.wall_time_s = time.perf_counter() - started
    cost: Cost = result.cost
    record.answer = result.answer
    record.llm_calls, record.prompt_tokens, record.completion_tokens = (
        cost.llm_calls,
        cost.prompt_tokens,
        cost.completion_tokens,
    )
    record.steps, record.fallbacks = result.steps, len(result.fallbacks)
    record.cited_turns = result.cited_turns(max([CITED_TURNS_KEPT, *budgets]))
    record.f1 = token_f1(result.answer, qa.answer, qa.category)
    record.bleu1 = bleu1(result.answer, qa.answer)
    record.recall = {str(b): evidence_recall(record.cited_turns, gold_evidence, b) for b in budgets}
    record.session_recall = {str(b): session_recall(record.cited_turns, gold_evidence, b) for b in budgets}
    if judge is not None:
        record.judge = llm_judge(judge, qa.question, qa.answer, result.answer, method=judge_method)
    else:
        record.judge = JudgeScore(reason_not_run="no judge model configured")
    return record


# ---------------------------------------------------------------- the run


def run_eval(
    path: str | Path,
    strategies: Sequence[str],
    limit: int | None = None,
    categories: Sequence[int | str] | None = None,
    policy: str = "auto",
    out_dir: str | Path | None = None,
    *,
    resources: Resources | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    judge: Any = None,
    judge_method: str | None = None,
    progress: bool = True,
    langsmith: bool | None = None,
) -> EvalRun:
    """Evaluate ``strategies`` on the questions of a LoCoMo or LongMemEval file.

    Each conversation is ingested once into a namespace derived from the file's content, the policy and
    the embedder, so later runs (and every strategy of this run) share that memory. ``policy`` is used
    both for ingest and for answering ("auto": llm when a chat model is configured). ``judge`` is a chat
    model for the LLM judge; without one the judge is reported as not run. With ``out_dir`` the results,
    the summary and the report with plots are written there. ``langsmith=None`` pushes the run as a
    LangSmith experiment only when LangSmith is configured.
    """
    started = time.perf_counter()
    path = Path(path)
    resources = resources or default_resources()
    policy = _resolve_policy(policy, resources)
    budgets = sorted({int(b) for b in budgets})
    available, unavailable = resolve_strategies(strategies)
    for label, reason in unavailable.items():
        print(f"note: strategy {label!r} is unavailable ({reason}); skipped", file=sys.stderr)
    conversations = load_conversations(path)
    digest = _file_digest(path)
    embeddings = _embedder_label(resources)
    source_format = conversations[0].source_format
    chosen = select_questions(conversations, categories, limit)
    needed = list(dict.fromkeys(conv.conversation_id for conv, _ in chosen))
    by_id = {conv.conversation_id: conv for conv in conversations}

    # The r2 strategy reads the fact memory only an ingest with the Memory-R2 manager writes.
    manager = "r2" if any(spec.name == "r2" for spec, _ in available) else None
    ingests: dict[str, IngestSummary] = {}
    for conv_id in needed:
        namespace = eval_namespace(digest, policy, embeddings, conv_id, manager)
        ingests[conv_id] = _ingest(by_id[conv_id], namespace, policy, resources, progress, manager)

    judge_method = judge_method or resources.method
    results: list[QuestionResult] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(chosen) * len(available), desc=f"eval {path.name}", unit="answer")
    for conv, qa in chosen:
        namespace = ingests[conv.conversation_id].namespace
        for spec, fn in available:
            row = _answer_one(
                spec,
                fn,
                conv,
                qa,
                namespace,
                policy=policy,
                resources=resources,
                budgets=budgets,
                judge=judge,
                judge_method=judge_method,
            )
            results.append(row)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(strategy=spec.label, f1=f"{row.f1:.2f}")
    if bar is not None:
        bar.close()

    run = EvalRun(
        file=str(path),
        file_sha256=digest,
        source_format=source_format,
        policy=policy,
        embeddings=embeddings,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        category_mapping=category_mapping(source_format),
        budgets=budgets,
        strategies=[spec.label for spec, _ in available],
        unavailable=unavailable,
        judge=("run" if judge is not None else "not run (no judge model configured)"),
        ingests=list(ingests.values()),
        results=results,
        aggregates=aggregate(results, budgets),
    )
    run.wall_time_s = time.perf_counter() - started
    if out_dir is not None:
        write_report(run, out_dir)
    if langsmith or (langsmith is None and langsmith_configured()):
        try:
            url = push_langsmith_experiment(run)
            print(f"pushed to LangSmith: {url}", file=sys.stderr)
        except Exception as exc:  # the local report is the result; a failed upload is only reported
            print(f"warning: LangSmith push failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    return run
