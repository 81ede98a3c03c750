"""The eval runner end to end on the sample conversation: results, aggregates, report, plots, ingest cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logicmap.agents.testing import ScriptedChatModel
from logicmap.evals.metrics import evidence_recall
from logicmap.evals.runner import eval_namespace, run_eval, select_questions
from logicmap.graphs.strategies.baselines import answer_bm25
from logicmap.graphs.strategies.registry import STRATEGIES
from logicmap.memory.files.loaders import load_conversations

GRAPH_STRATEGIES = ["compass", "goalmem:bm25", "real", "reconstruct"]
PNG = b"\x89PNG\r\n\x1a\n"


def _module_exists(strategy: str) -> bool:
    return strategy.split(":")[0] in STRATEGIES


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory):
    from conftest import make_resources

    res = make_resources(tmp_path_factory.mktemp("eval-memory"))
    yield res
    if res.store_ is not None:
        res.store_.close()


def test_run_eval_end_to_end_writes_report_and_reuses_ingest(tmp_path: Path, sample_path: Path) -> None:
    from conftest import make_resources

    resources = make_resources(tmp_path / "memory")
    strategies = ["bm25", "dense", *GRAPH_STRATEGIES]
    landed = ["bm25", "dense", *[s for s in GRAPH_STRATEGIES if _module_exists(s)]]

    # Every strategy on the multi-hop and open-domain questions (6), to keep the test fast.
    run = run_eval(
        sample_path,
        strategies,
        categories=["1", "3"],
        policy="heuristic",
        out_dir=tmp_path / "out1",
        resources=resources,
        progress=False,
        langsmith=False,
    )

    assert run.strategies == landed
    assert set(run.unavailable) == set(strategies) - set(landed)
    assert len(run.results) == 6 * len(landed)
    assert {r.category for r in run.results} == {1, 3}
    assert "1 multi-hop" in run.category_mapping and "5 adversarial" in run.category_mapping
    bm25 = run.aggregates["bm25"]
    assert list(bm25) == ["1 multi-hop", "3 open-domain", "overall"]
    assert [bm25[c].questions for c in bm25] == [5, 1, 6]
    assert bm25["overall"].recall_questions == 6 and set(bm25["overall"].recall) == {"5", "10", "20"}
    assert bm25["overall"].judge_accuracy is None and run.judge.startswith("not run")

    # Per-question scores are the metrics of what the strategy itself returns.
    namespace = run.ingests[0].namespace
    row = next(r for r in run.results if r.strategy == "bm25")
    direct = answer_bm25(row.question, namespace, resources=resources, policy="heuristic")
    assert row.answer == direct.answer and row.gold_evidence
    assert row.recall["10"] == evidence_recall(direct.cited_turns(10), row.gold_evidence, 10)
    assert row.cited_turns[:10] == direct.cited_turns(10)
    for strategy in landed:
        rows = [r for r in run.results if r.strategy == strategy]
        assert len(rows) == 6
        if strategy in ("bm25", "dense"):
            assert not [r.error for r in rows if r.error]
        # A failing graph strategy is recorded per question (its recall counts as 0), never fatal.
        assert run.aggregates[strategy]["overall"].errors == sum(1 for r in rows if r.error)
        expected = sum(r.recall["10"] for r in rows) / len(rows)
        assert run.aggregates[strategy]["overall"].recall["10"] == pytest.approx(expected)

    # Ingest: one namespace per conversation, per-session cost measured.
    ingest = run.ingests[0]
    assert not ingest.cached and len(ingest.sessions) == 5
    assert all(s.wall_time_s > 0 and s.turns > 0 for s in ingest.sessions)
    assert sum(s.turns for s in ingest.sessions) == 38

    out = tmp_path / "out1"
    results = json.loads((out / "results.json").read_text())
    assert len(results) == len(run.results) and results[0]["question"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["aggregates"]["dense"]["overall"]["questions"] == 6
    for png in ("quality_by_category.png", "cost_vs_quality.png"):
        data = (out / png).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
    report = (out / "report.md").read_text()
    assert "LoCoMo categories: 1 multi-hop" in report
    assert "| `bm25` | 6 |" in report and "LLM judge: not run" in report
    assert "## evidence recall@10 per category" in report and "## Ingest cost" in report
    for label in run.unavailable:
        assert f"strategy `{label}` unavailable" in report

    # Second run, every question but the adversarial one: the same memory is reused, answers are the same.
    again = run_eval(
        sample_path,
        ["bm25", "dense"],
        policy="heuristic",
        out_dir=tmp_path / "out2",
        resources=resources,
        progress=False,
        langsmith=False,
    )
    assert again.ingests[0].namespace == namespace and again.ingests[0].cached
    assert len(again.results) == 30 and all(r.category != 5 for r in again.results)
    bm25 = again.aggregates["bm25"]
    assert list(bm25) == ["1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop", "overall"]
    assert [bm25[c].questions for c in bm25] == [5, 3, 1, 6, 15]
    # The cost reported for reused memory is the one measured at first ingest.
    assert [s.wall_time_s for s in again.ingests[0].sessions] == [s.wall_time_s for s in ingest.sessions]
    assert [n for n in resources.store.namespaces() if n.startswith("eval.")] == [namespace]
    first = {(r.question_id, r.strategy): r.answer for r in run.results if r.strategy in ("bm25", "dense")}
    assert {
        (r.question_id, r.strategy): r.answer for r in again.results if (r.question_id, r.strategy) in first
    } == first
    assert "| yes |" in (tmp_path / "out2" / "report.md").read_text()


def test_namespace_depends_on_file_policy_and_embedder() -> None:
    base = eval_namespace("a" * 64, "heuristic", "hashing", "conv 26/x")
    assert base == eval_namespace("a" * 64, "heuristic", "hashing", "conv 26/x")
    assert base.startswith("eval.") and base.endswith(".heuristic.conv-26-x")
    assert base != eval_namespace("b" * 64, "heuristic", "hashing", "conv 26/x")
    assert base != eval_namespace("a" * 64, "llm", "hashing", "conv 26/x")
    assert base != eval_namespace("a" * 64, "heuristic", "minilm:all-MiniLM-L6-v2", "conv 26/x")


def test_select_questions_filters_categories_and_limits(sample_path: Path) -> None:
    conversations = load_conversations(sample_path)
    assert len(select_questions(conversations)) == 15
    assert [qa.category for _, qa in select_questions(conversations, categories=["2"])] == [2, 2, 2]
    assert {qa.category for _, qa in select_questions(conversations, categories=[1, 5])} == {1, 5}
    limited = select_questions(conversations, categories=["1", "4"], limit=4)
    assert [qa.question_id for _, qa in limited] == ["maya-leo-q0", "maya-leo-q1", "maya-leo-q2", "maya-leo-q3"]


def test_judge_scores_when_a_judge_model_is_given(shared_memory, sample_path: Path, tmp_path: Path) -> None:
    def verdict(messages):  # scripted judge: correct when the gold answer's first word appears
        text = str(messages[-1].content)
        gold = text.split("Gold answer: ")[1].split("\n")[0].split()[0].lower()
        answer = text.split("Generated answer: ")[1].lower()
        return {"reasoning": "compared", "label": "CORRECT" if gold in answer else "WRONG"}

    judge = ScriptedChatModel(respond=verdict)
    run = run_eval(
        sample_path,
        ["bm25"],
        limit=5,
        policy="heuristic",
        out_dir=tmp_path / "judged",
        resources=shared_memory,
        judge=judge,
        progress=False,
        langsmith=False,
    )
    assert len(judge.calls) == 5 and run.judge == "run"
    expected = [float(r.gold.split()[0].lower() in r.answer.lower()) for r in run.results]
    assert [r.judge.score for r in run.results] == expected
    assert run.aggregates["bm25"]["overall"].judge_accuracy == pytest.approx(sum(expected) / 5)
    assert "## judge accuracy per category" in (tmp_path / "judged" / "report.md").read_text()


def test_failing_and_missing_strategies_are_reported_not_fatal(
    shared_memory, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from logicmap.graphs.strategies.strategy import Strategy

    def answer(question: str, namespace: str, **_: object):
        raise RuntimeError("exploded")

    monkeypatch.setitem(STRATEGIES, "broken", Strategy("broken", answer))
    run = run_eval(
        sample_path,
        ["broken", "bm25"],
        limit=3,
        policy="heuristic",
        resources=shared_memory,
        progress=False,
        langsmith=False,
    )
    assert run.strategies == ["broken", "bm25"] and not run.unavailable
    rows = [r for r in run.results if r.strategy == "broken"]
    assert len(rows) == 3 and all("exploded" in (r.error or "") and r.f1 == 0.0 for r in rows)
    assert run.aggregates["broken"]["overall"].errors == 3
    with pytest.raises(ValueError, match="unknown strategy"):
        run_eval(sample_path, ["nonsense"], resources=shared_memory, progress=False, langsmith=False)


def test_longmemeval_file_uses_question_type_as_category(tmp_path: Path) -> None:
    from conftest import make_resources

    def item(qid: str, qtype: str, needle: str) -> dict:
        return {
            "question_id": qid,
            "question_type": qtype,
            "question": "Which city did I move to?",
            "answer": needle,
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_session_ids": ["a", "b"],
            "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/20 (Sat) 09:00"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": "I like green tea in the morning."},
                    {"role": "assistant", "content": "Green tea is a nice habit."},
                ],
                [
                    {"role": "user", "content": f"I finally moved to {needle} last week!", "has_answer": True},
                    {"role": "assistant", "content": f"Congratulations on the move to {needle}."},
                ],
            ],
            "answer_session_ids": ["b"],
        }

    path = tmp_path / "lme.json"
    path.write_text(
        json.dumps([item("q1", "single-session-user", "Lisbon"), item("q2", "temporal-reasoning", "Porto")])
    )
    resources = make_resources(tmp_path / "memory")
    run = run_eval(
        path,
        ["bm25"],
        policy="heuristic",
        out_dir=tmp_path / "out",
        resources=resources,
        progress=False,
        langsmith=False,
    )
    assert run.source_format == "longmemeval" and "question_type" in run.category_mapping
    assert {r.category_label for r in run.results} == {"single-session-user", "temporal-reasoning"}
    assert len({i.namespace for i in run.ingests}) == 2
    assert all(r.gold_evidence == ["D2:1"] and r.recall["5"] == 1.0 for r in run.results)
    assert "temporal-reasoning" in (tmp_path / "out" / "report.md").read_text()


def test_cli_eval_writes_report(tmp_path: Path, sample_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from logicmap.__main__ import main

    out = tmp_path / "report"
    code = main(
        [
            "--data-dir",
            str(tmp_path / "memory"),
            "--embeddings",
            "hashing",
            "eval",
            str(sample_path),
            "-s",
            "bm25",
            "-s",
            "dense",
            "--limit",
            "4",
            "--categories",
            "1,4",
            "--policy",
            "heuristic",
            "--out",
            str(out),
            "--quiet",
            "--no-langsmith",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "bm25: 4 q, F1=" in printed and "dense: 4 q" in printed and "judge not run" in printed
    rows = json.loads((out / "results.json").read_text())
    assert len(rows) == 8 and {r["category"] for r in rows} <= {1, 4}
    assert (out / "report.md").exists() and (out / "quality_by_category.png").exists()
    assert main(["--data-dir", str(tmp_path / "memory"), "eval", str(sample_path), "-s", "nope"]) == 2


def test_a_variant_after_the_colon_sets_the_strategy_option_it_names() -> None:
    from logicmap.evals.specs import parse_strategy

    assert parse_strategy("goalmem:bm25").options == {"backbone": "bm25"}
    assert parse_strategy("compass:similarity").options == {"ranker": "similarity"}
    assert parse_strategy(" compass ").options == {} and parse_strategy("compass").label == "compass"
    with pytest.raises(ValueError, match="choose from compass:learned, compass:similarity"):
        parse_strategy("compass:nearest")


def test_the_logicmap_program_offers_the_core_and_the_eval_commands() -> None:
    import argparse

    from logicmap.evals.cli import add_eval_commands
    from logicmap.graphs.surfaces.cli import build_parser

    def commands(parser: argparse.ArgumentParser) -> set[str]:
        return {name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}

    core = {
        "ingest",
        "ask",
        "graph",
        "stats",
        "namespaces",
        "local-llm",
        "chat",
        "facts",
        "export",
        "import",
        "forget",
        "purge",
        "consolidate",
        "delete-namespace",
        "list",
        "get",
        "mcp",
    }
    assert commands(build_parser()) == core  # graphs.cli alone: no eval command, no import of evals
    assert commands(build_parser(add_eval_commands)) == core | {"demo", "train-data", "train-r2", "eval"}
