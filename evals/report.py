"""Eval outputs: per-question JSON, a summary, a markdown report and PNG plots (quality per category, cost vs quality).

Also the optional upload of a run to LangSmith as one experiment per strategy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from logicmap.evals.records import OVERALL, CategoryStats, EvalRun

__all__ = [
    "langsmith_configured",
    "plot_cost_quality",
    "plot_quality",
    "push_langsmith_experiment",
    "render_markdown",
    "write_report",
]


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _recall_budget(run: EvalRun) -> int | None:
    """The budget shown in single-budget views: 10 turns when measured (the issue's target), else the first."""
    if not run.budgets:
        return None
    return 10 if 10 in run.budgets else run.budgets[0]


def _categories(run: EvalRun) -> list[str]:
    labels: list[str] = []
    for stats in run.aggregates.values():
        for label in stats:
            if label != OVERALL and label not in labels:
                labels.append(label)
    return labels


def render_markdown(run: EvalRun, plots: dict[str, str] | None = None) -> str:
    """The report: setup, overall table, per-category tables, ingest cost, plots."""
    budgets = run.budgets
    lines = [
        f"# LogicMap eval: {Path(run.file).name}",
        "",
        f"- file: `{run.file}` (sha256 {run.file_sha256[:12]}, format {run.source_format})",
        f"- policy: {run.policy}; embeddings: {run.embeddings}; started {run.started_at}; wall {run.wall_time_s:.1f}s",
        f"- category mapping: {run.category_mapping}",
        f"- LLM judge: {run.judge}",
        f"- evidence recall@N: share of gold evidence turns among the first N distinct turns cited by the evidence "
        f"handed to the responder (N = {', '.join(map(str, budgets))})",
        "- any-gold-session recall S@N: share of questions with any gold evidence turn's session among the sessions of "
        "those N turns (the metric some peers report as LoCoMo R@k; beside R@N so a comparison is like for like)",
    ]
    for label, reason in run.unavailable.items():
        lines.append(f"- strategy `{label}` unavailable: {reason}")
    lines += ["", "## Overall", ""]
    header = [
        "strategy",
        "questions",
        "F1",
        "BLEU-1",
        "judge",
        *[f"R@{b}" for b in budgets],
        *[f"S@{b}" for b in budgets],
        "LLM calls/q",
        "prompt tok/q",
        "completion tok/q",
        "wall s/q",
        "fallbacks",
        "errors",
    ]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for strategy, stats in run.aggregates.items():
        s = stats[OVERALL]
        judge = "not run" if s.judge_accuracy is None else f"{s.judge_accuracy:.3f} ({s.judged})"
        row = [
            f"`{strategy}`",
            str(s.questions),
            _fmt(s.f1),
            _fmt(s.bleu1),
            judge,
            *[_fmt(s.recall.get(str(b))) for b in budgets],
            *[_fmt(s.session_recall.get(str(b))) for b in budgets],
            f"{s.llm_calls:.2f}",
            f"{s.prompt_tokens:.0f}",
            f"{s.completion_tokens:.0f}",
            f"{s.wall_time_s:.3f}",
            str(s.fallbacks),
            str(s.errors),
        ]
        lines.append("| " + " | ".join(row) + " |")
    categories = _categories(run)
    budget = _recall_budget(run)
    metric_views: list[tuple[str, Any]] = [("F1", lambda s: s.f1), ("BLEU-1", lambda s: s.bleu1)]
    if budget is not None:
        metric_views.append((f"evidence recall@{budget}", lambda s: s.recall.get(str(budget))))
    if any(stats[OVERALL].judge_accuracy is not None for stats in run.aggregates.values()):
        metric_views.append(("judge accuracy", lambda s: s.judge_accuracy))
    for title, getter in metric_views:
        lines += ["", f"## {title} per category", ""]
        lines += ["| strategy | " + " | ".join(categories) + " | overall |", "|---|" + "---|" * (len(categories) + 1)]
        for strategy, stats in run.aggregates.items():
            cells = [_fmt(getter(stats[c])) if c in stats else "-" for c in categories]
            lines.append(f"| `{strategy}` | " + " | ".join(cells) + f" | {_fmt(getter(stats[OVERALL]))} |")
        counts = [str(next((st[c].questions for st in run.aggregates.values() if c in st), 0)) for c in categories]
        lines.append("| questions | " + " | ".join(counts) + " | |")
    lines += [
        "",
        "## Ingest cost",
        "",
        "| conversation | namespace | sessions | reused | LLM calls/session | prompt tok/session | completion tok/session | wall s/session |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ingest in run.ingests:
        per = ingest.per_session()
        lines.append(
            f"| {ingest.conversation_id} | `{ingest.namespace}` | {len(ingest.sessions)} | {'yes' if ingest.cached else 'no'} | "
            f"{per['llm_calls']:.2f} | {per['prompt_tokens']:.0f} | {per['completion_tokens']:.0f} | {per['wall_time_s']:.3f} |"
        )
    if any(i.cached for i in run.ingests):
        lines.append("\nReused memory shows the cost measured when it was first ingested.")
    if plots:
        lines += ["", "## Plots", ""]
        for name, file in plots.items():
            lines.append(f"![{name}]({file})")
    return "\n".join(lines) + "\n"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_quality(run: EvalRun, out: Path) -> Path:
    """Grouped bars: F1 and evidence recall per category, one bar per strategy."""
    plt = _pyplot()
    categories = [*_categories(run), OVERALL]
    strategies = list(run.aggregates)
    budget = _recall_budget(run)
    panels: list[tuple[str, Any]] = [("token F1", lambda s: s.f1)]
    if budget is not None:
        panels.append((f"evidence recall@{budget}", lambda s: s.recall.get(str(budget))))
    if any(stats[OVERALL].judge_accuracy is not None for stats in run.aggregates.values()):
        panels.append(("judge accuracy", lambda s: s.judge_accuracy))
    width_in = min(14.0, max(7.0, 0.35 * len(categories) * max(1, len(strategies)) + 2))
    fig, axes = plt.subplots(len(panels), 1, figsize=(width_in, 3.6 * len(panels)), squeeze=False)
    width = 0.8 / max(1, len(strategies))
    for ax, (title, getter) in zip(axes[:, 0], panels, strict=True):
        for i, strategy in enumerate(strategies):
            stats = run.aggregates[strategy]
            values = [getter(stats[c]) if c in stats and getter(stats[c]) is not None else 0.0 for c in categories]
            xs = [x + (i - (len(strategies) - 1) / 2) * width for x in range(len(categories))]
            ax.bar(xs, values, width=width, label=strategy)
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, rotation=15, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=min(4, max(1, len(strategies))))
    axes[0, 0].set_title(f"{Path(run.file).name}: quality per category (policy {run.policy})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_cost_quality(run: EvalRun, out: Path) -> Path:
    """Scatter per strategy: tokens per question against F1, wall time per question against evidence recall."""
    plt = _pyplot()
    budget = _recall_budget(run)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for strategy, stats in run.aggregates.items():
        s = stats[OVERALL]
        tokens = s.prompt_tokens + s.completion_tokens
        left.scatter([tokens], [s.f1], s=60)
        left.annotate(strategy, (tokens, s.f1), fontsize=8, xytext=(4, 4), textcoords="offset points")
        recall = s.recall.get(str(budget)) if budget is not None else None
        right.scatter([s.wall_time_s], [recall or 0.0], s=60)
        right.annotate(strategy, (s.wall_time_s, recall or 0.0), fontsize=8, xytext=(4, 4), textcoords="offset points")
    left.set_xlabel("LLM tokens per question (prompt + completion)")
    left.set_ylabel("token F1")
    right.set_xlabel("wall time per question (s)")
    right.set_ylabel(f"evidence recall@{budget}" if budget is not None else "evidence recall")
    for ax in (left, right):
        ax.set_ylim(0, 1.05)
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{Path(run.file).name}: cost against quality (policy {run.policy})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_report(run: EvalRun, out_dir: str | Path) -> dict[str, str]:
    """Write ``results.json`` (per question), ``summary.json``, ``report.md`` and the PNG plots into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "results": str(out / "results.json"),
        "summary": str(out / "summary.json"),
        "report": str(out / "report.md"),
        "quality_plot": str(out / "quality_by_category.png"),
        "cost_plot": str(out / "cost_vs_quality.png"),
    }
    run.out_dir, run.files = str(out), files
    Path(files["results"]).write_text(
        json.dumps([r.model_dump(mode="json") for r in run.results], indent=1, ensure_ascii=False)
    )
    Path(files["summary"]).write_text(run.model_dump_json(indent=1, exclude={"results"}))
    plots: dict[str, str] = {}
    if run.aggregates:
        plot_quality(run, Path(files["quality_plot"]))
        plot_cost_quality(run, Path(files["cost_plot"]))
        plots = {"quality per category": "quality_by_category.png", "cost against quality": "cost_vs_quality.png"}
    else:
        files.pop("quality_plot")
        files.pop("cost_plot")
    Path(files["report"]).write_text(render_markdown(run, plots))
    return files


# ---------------------------------------------------------------- LangSmith


def langsmith_configured() -> bool:
    """LangSmith is used only when an API key is set and tracing is switched on."""
    key = os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGCHAIN_API_KEY")
    tracing = (os.environ.get("LANGSMITH_TRACING") or os.environ.get("LANGCHAIN_TRACING_V2") or "").lower()
    return bool(key) and tracing in ("true", "1", "yes")


def _stat_feedback(stats: CategoryStats) -> dict[str, Any]:
    return {"f1": stats.f1, "bleu1": stats.bleu1, **{f"recall@{b}": v for b, v in stats.recall.items()}}


def push_langsmith_experiment(run: EvalRun, *, dataset_name: str | None = None) -> str:
    """Upload the questions as a LangSmith dataset (once) and each strategy's answers as an experiment.

    The answers are the ones this run already computed: the experiment replays them and attaches the
    scores as feedback, so nothing is answered twice. Returns the dataset name.
    """
    from langsmith import Client, evaluate

    client = Client()
    name = dataset_name or f"logicmap-{Path(run.file).stem}-{run.file_sha256[:8]}"
    questions: dict[str, Any] = {}
    for r in run.results:
        questions.setdefault(r.question_id, r)
    if not client.has_dataset(dataset_name=name):
        dataset = client.create_dataset(name, description=f"LogicMap eval questions from {Path(run.file).name}")
        client.create_examples(
            dataset_id=dataset.id,
            examples=[
                {
                    "inputs": {"question_id": qid, "question": r.question, "conversation_id": r.conversation_id},
                    "outputs": {"answer": r.gold, "evidence": r.gold_evidence},
                    "metadata": {"category": r.category_label},
                }
                for qid, r in questions.items()
            ],
        )
    for strategy in run.strategies:
        rows = {r.question_id: r for r in run.results if r.strategy == strategy}

        def target(inputs: dict[str, Any], rows: dict[str, Any] = rows) -> dict[str, Any]:
            row = rows.get(inputs["question_id"])
            return {"answer": row.answer if row else "", "cited_turns": row.cited_turns if row else []}

        def scores(
            inputs: dict[str, Any], outputs: dict[str, Any], rows: dict[str, Any] = rows
        ) -> list[dict[str, Any]]:
            row = rows.get(inputs["question_id"])
            if row is None:
                return []
            found = [
                {"key": "token_f1", "score": row.f1},
                {"key": "bleu1", "score": row.bleu1},
                {"key": "llm_calls", "score": row.llm_calls},
                {"key": "wall_time_s", "score": row.wall_time_s},
            ]
            found += [{"key": f"evidence_recall@{b}", "score": v} for b, v in row.recall.items() if v is not None]
            if row.judge.score is not None:
                found.append({"key": "judge", "score": row.judge.score})
            return found

        def evaluator(inputs: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
            return {"results": scores(inputs, outputs)}

        evaluate(
            target,
            data=name,
            evaluators=[evaluator],
            experiment_prefix=f"logicmap-{strategy}-{run.policy}",
            metadata={
                "strategy": strategy,
                "policy": run.policy,
                "embeddings": run.embeddings,
                "category_mapping": run.category_mapping,
                "overall": _stat_feedback(run.aggregates[strategy][OVERALL]),
            },
            client=client,
            max_concurrency=0,
        )
    return name
