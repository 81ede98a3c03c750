"""Do the no-LLM answers quote the answer? The share of questions whose returned text contains the gold answer,
against the ceiling (the share whose cited turns contain it), and LoCoMo token F1, per category, before and after
the answer-slot extractor (``memory.retrieval.answer_slots``), in one run.

One memory per conversation (heuristic ingest), each strategy answers every question of categories 1-4 with the
no-LLM policy. The evidence each strategy hands its responder is recorded (``agents.responder``'s extractive
fallback is wrapped, not changed) and answered twice: by the rule before issue 41 (``best_sentence``: the evidence
sentence sharing the most idf-weighted words with the question, a "when" question's time phrase resolved to a
date) and by the strategy itself (the extractor). Both see the same evidence, so only the answer rule differs.

- contains: the normalised gold answer (``evals.metrics.normalize_answer``) is a run of whole words of the
  normalised returned text.
- ceiling: the same test on the cited top-``--turns`` turns (``AnswerResult.cited_turns``), each turn's text with
  the dates it states or implies (its session's date, each time phrase resolved on that date), since an extractive
  answer can say no more than that.
- of ceiling: contains / ceiling.

Usage (CPU-light: no LLM, one thread, nice)::

    OMP_NUM_THREADS=1 LOGICMAP_THREADS=1 nice -n 10 python -m logicmap.evals.bench.bench_answers \\
        ../shared/data/locomo-dev5.json data/sample_conversation.json

``--record FILE`` writes every question's evidence, cited turns and answer as JSON lines while it runs;
``--replay FILE`` scores the current rule on a recorded file in seconds (the no-LLM answer is a function of the
evidence, and the evidence does not depend on the answer rule), to choose rules and read the failures.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from logicmap.evals.common import fresh_resources, machine_line, print_table

__all__ = ["contains_answer", "main", "previous_rule_answer", "turn_answer_text"]

ANSWERING = ["compass"]


def contains_answer(text: str, gold: str) -> bool:
    """Whether the normalised ``gold`` is a run of whole words of the normalised ``text`` (an empty gold never is)."""
    from logicmap.evals.metrics import normalize_answer

    wanted = normalize_answer(gold)
    return bool(wanted) and f" {wanted} " in f" {normalize_answer(text)} "


def turn_answer_text(text: str, session_time: Any) -> str:
    """A turn's text with the dates it states or implies: its session's date and each time phrase's date."""
    from logicmap.memory.language.timeparse import date_text, find_time_phrases, resolve_relative

    if session_time is None:
        return text
    dates = [date_text(session_time)]
    dates += [date_text(d) for p in find_time_phrases(text) if (d := resolve_relative(p, session_time))]
    return " | ".join([text, *dates])


def previous_rule_answer(question: str, evidence: Sequence[Any]) -> str:
    """The answer the extractive responder gave before issue 41 (``answerers.answer_from_evidence`` at 2c3c0eb,
    verbatim): ``best_sentence`` over the evidence sentences (speaker prefixes and dates stripped, a summary's
    repeat of its turns kept once), a "when" question's time phrase resolved on the day the sentence was said."""
    from logicmap.agents import answerers as a
    from logicmap.memory.language.text import NO_ANSWER, best_sentence, content_stems, split_sentences
    from logicmap.memory.language.timeparse import date_text, find_time_phrases, parse_timestamp, resolve_relative

    lines = [a._LEAD.sub("", line.strip()) for item in evidence for line in item.text.splitlines()]
    speakers = [m.group(0) for line in lines if (m := a._SPEAKER.match(line))]
    sentences: list[tuple[str, str, datetime | None]] = []
    seen: dict[str, int] = {}
    for item in evidence:
        for line in item.text.splitlines():
            said = a._LINE_DATE.search(line)
            anchor = parse_timestamp(said.group(1) if said else (item.time or "")[:10])
            for sentence in split_sentences(a._SPEAKER.sub("", a._LEAD.sub("", line.strip()))):
                sentence = a._TRAIL.sub("", a._SPEAKER.sub("", sentence))
                if not content_stems(sentence):
                    continue
                if sentence in seen:
                    if said:
                        i = seen[sentence]
                        sentences[i] = (*sentences[i][:2], anchor)
                    continue
                seen[sentence] = len(sentences)
                sentences.append((sentence, item.id, anchor))
    best = best_sentence(question, [s for s, _, _ in sentences], ignore=speakers)
    if best is None:
        return NO_ANSWER
    sentence, _, anchor = sentences[best]
    if _OLD_WHEN.search(question):
        for phrase in find_time_phrases(sentence):
            resolved = resolve_relative(phrase, anchor)
            if resolved:
                return date_text(resolved)
    return sentence


_OLD_WHEN = re.compile(r"^\s*when\b|\bwhat (?:date|day|month|year)\b", re.IGNORECASE)


@contextlib.contextmanager
def _recorded_evidence() -> Iterator[list[tuple[str, list[Any]]]]:
    """Record (question, evidence) of every extractive answer given inside the block: the modules that answer
    with ``answers.answer_from_evidence`` (the responder, CompassMem's policy) call a wrapper, restored after."""
    from logicmap.agents import answerers, compass_policy, responder

    seen: list[tuple[str, list[Any]]] = []
    original = answerers.answer_from_evidence

    def recording(question: str, evidence: Sequence[Any]) -> Any:
        seen.append((question, list(evidence)))
        return original(question, evidence)

    holders = [m for m in (responder, compass_policy) if getattr(m, "answer_from_evidence", None) is original]
    for module in holders:
        setattr(module, "answer_from_evidence", recording)  # noqa: B010  # same signature, records its inputs
    try:
        yield seen
    finally:
        for module in holders:
            setattr(module, "answer_from_evidence", original)  # noqa: B010  # restored


Table = dict[str, dict[str, list[float]]]


def record_answers(
    path: Path, resources: Any, strategy: str, *, turns: int = 10, limit: int | None = None, out: Any = None
) -> Iterator[dict[str, Any]]:
    """Ask every question of ``path`` (categories 1-4) with ``strategy``'s no-LLM policy; yield a record per
    question (the question, gold answer, category, the evidence the responder got, the cited turns with their
    session times, the strategy's answer), written as a JSON line to ``out`` when given."""
    from logicmap.evals.runner import eval_namespace, select_questions
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.strategies.registry import answer
    from logicmap.memory.files.loaders import load_conversations

    conversations = load_conversations(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    namespaces: dict[str, str] = {}
    for conv, qa in select_questions(conversations, None, limit):
        if conv.conversation_id not in namespaces:
            ns = eval_namespace(digest, "heuristic", resources.settings.embedding_provider, conv.conversation_id)
            ingest_conversation(conv, ns, resources=resources, policy="heuristic")
            namespaces[conv.conversation_id] = ns
        namespace = namespaces[conv.conversation_id]
        with _recorded_evidence() as seen:
            result = answer(strategy, qa.question, namespace, resources=resources, policy="heuristic")
        snapshot = resources.store.snapshot(namespace)
        cited = [snapshot.turns[t] for t in result.cited_turns(turns) if t in snapshot.turns]
        record = {
            "file": path.name,
            "strategy": strategy,
            "conversation": conv.conversation_id,
            "question": qa.question,
            "gold": qa.answer,
            "category": qa.category,
            "answer": result.answer,
            "evidence": [{"id": e.id, "text": e.text, "time": e.time} for e in (seen[-1][1] if seen else [])],
            "cited": [
                {"id": t.dia_id, "text": t.text, "time": t.session_time.isoformat() if t.session_time else None}
                for t in cited
            ],
        }
        if out is not None:
            out.write(json.dumps(record) + "\n")
            out.flush()
        yield record


def score(records: Iterable[dict[str, Any]], *, replay: bool = False) -> Table:
    """Per category: contains before / after, ceiling, F1 before / after (one value per question). ``replay``:
    the answer after is the current rule's on the recorded evidence (``answerers.answer_from_evidence``, which
    is what the no-LLM responder returns), not the recorded one."""
    from logicmap.agents.answerers import answer_from_evidence
    from logicmap.agents.responder import EvidenceText
    from logicmap.evals.metrics import category_label, token_f1
    from logicmap.memory.language.timeparse import parse_timestamp

    table: Table = {}
    for r in records:
        evidence = [EvidenceText(e["id"], e["text"], e["time"]) for e in r["evidence"]]
        before = previous_rule_answer(r["question"], evidence)
        after = answer_from_evidence(r["question"], evidence).answer if replay else r["answer"]
        ceiling_text = "\n".join(turn_answer_text(t["text"], parse_timestamp(t["time"])) for t in r["cited"])
        row = table.setdefault(
            category_label(r["category"]), {k: [] for k in ("ceiling", "before", "after", "f1_before", "f1_after")}
        )
        row["ceiling"].append(float(contains_answer(ceiling_text, r["gold"])))
        row["before"].append(float(contains_answer(before, r["gold"])))
        row["after"].append(float(contains_answer(after, r["gold"])))
        row["f1_before"].append(token_f1(before, r["gold"], r["category"]))
        row["f1_after"].append(token_f1(after, r["gold"], r["category"]))
    return table


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def print_answer_table(name: str, strategy: str, table: Table) -> None:
    """One markdown table: a row per category and one for all."""
    from logicmap.evals.bench.bench_nollm_answers import _category_order

    rows = []
    every = {
        k: [v for row in table.values() for v in row[k]]
        for k in ("ceiling", "before", "after", "f1_before", "f1_after")
    }
    for label, row in [*sorted(table.items(), key=lambda kv: _category_order(kv[0])), ("all", every)]:
        ceiling, after = _mean(row["ceiling"]), _mean(row["after"])
        rows.append(
            [
                label,
                len(row["ceiling"]),
                f"{ceiling:.3f}",
                f"{_mean(row['before']):.3f}",
                f"{after:.3f}",
                f"{after / ceiling:.0%}" if ceiling else "-",
                f"{_mean(row['f1_before']):.3f}",
                f"{_mean(row['f1_after']):.3f}",
            ]
        )
    print(f"## {name}, `{strategy}`\n")
    print_table(
        [
            "category",
            "questions",
            "ceiling",
            "contains before",
            "contains after",
            "after of ceiling",
            "F1 before",
            "F1 after",
        ],
        rows,
    )
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="LoCoMo-format conversation files (with --replay: recorded files)")
    parser.add_argument(
        "--strategies",
        default=",".join(ANSWERING),
        help="comma-separated strategies whose responder is extractive (compass, rerank, dense, bm25)",
    )
    parser.add_argument("--embeddings", default="minilm", choices=["minilm", "hashing"])
    parser.add_argument("--turns", type=int, default=10, help="cited turns the ceiling reads (default 10)")
    parser.add_argument("--limit", type=int, help="at most N questions per file (in file order)")
    parser.add_argument(
        "--record",
        type=Path,
        help="write every question's evidence, cited turns and answer to this JSON-lines file, as it is answered",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="the files are --record outputs: score the current "
        "rule on their evidence, without ingesting or searching again",
    )
    args = parser.parse_args(argv)
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        print(f"error: no such file: {missing[0]}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if args.replay:
        for file in args.files:
            try:
                records = [json.loads(line) for line in Path(file).read_text().splitlines() if line.strip()]
            except json.JSONDecodeError as exc:
                print(f"error: {file} is not a --record file: {exc}", file=sys.stderr)
                return 2
            groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for r in records:
                groups.setdefault((r["file"], r["strategy"]), []).append(r)
            for (name, strategy), group in groups.items():
                print_answer_table(f"{name} (replayed from {Path(file).name})", strategy, score(group, replay=True))
        print(f"{time.perf_counter() - started:.0f} s")
        return 0
    os.environ.setdefault("LOGICMAP_THREADS", "1")
    print(machine_line())
    print(
        f"embedder: {args.embeddings}; heuristic ingest, no-LLM answers; categories 1-4; ceiling: cited top-"
        f"{args.turns} turns\n"
    )
    directory = Path(tempfile.mkdtemp(prefix="logicmap-answers-"))
    resources = fresh_resources(directory, embeddings=args.embeddings)
    out = args.record.open("w") if args.record else None
    try:
        for file in args.files:
            for strategy in [s.strip() for s in args.strategies.split(",") if s.strip()]:
                records = list(
                    record_answers(Path(file), resources, strategy, turns=args.turns, limit=args.limit, out=out)
                )
                print_answer_table(Path(file).name, strategy, score(records))
    finally:
        if out is not None:
            out.close()
        if resources.store_ is not None:
            resources.store_.close()
        shutil.rmtree(directory, ignore_errors=True)
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
