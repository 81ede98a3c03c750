"""Generated edge inputs: dates at the edges of the calendar and pathological text for every user-text pattern.

Dates: relative phrases with huge counts ("99999999 days ago", "in 99999 months"), every unit and direction, said
in sessions dated at the edges (year 1, 31 December 9999, undated), are resolved against an independent
integer oracle, then ingested (no-LLM policy, hashing embedder) and asked through compass, dense, BM25 and
REAL: nothing raises, every turn is stored, and a phrase that names no date in years 1-9999 is dropped with
a ``dates`` note naming its turn. Session dates at the edges also come from LoCoMo, LongMemEval and JSONL files.

Slow patterns: long runs of capitalised words, digits, punctuation and whitespace go through every function
that runs a pattern on user text. Nothing here is timed: the tests assert that the per-turn cap is applied
(a 1 MB and a 2 MB turn give the same output and the same number of Python steps), that long sentences
reach the patterns in bounded pieces, and that the Python steps grow linearly below the cap (two sizes,
counted with ``sys.settrace``). ``evals/bench/bench_big_turn.py`` gives the wall-clock figures.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.files.loaders import Conversation, DataFormatError, RawTurn, Session, load_conversations
from logicmap.memory.language.text import PATTERN_SENTENCE_LIMIT, PATTERN_TEXT_LIMIT, pattern_sentences, pattern_text
from logicmap.memory.language.timeparse import (
    date_text,
    out_of_range_phrases,
    parse_date,
    parse_timestamp,
    resolve_relative,
)
from logicmap.memory.records.records import Turn
from tests.reliability.support import ROOT, available_strategy, memory_problems

SEED = 20240517
ASKED = ("compass", "dense", "bm25", "real")
UNITS = ("day", "days", "week", "weeks", "weekend", "month", "months", "year", "years")
COUNTS = (
    0,
    1,
    2,
    7,
    12,
    30,
    365,
    1000,
    9998,
    9999,
    10000,
    99999,
    120000,
    3652058,
    3652059,
    9999999,
    99999999,
    10**12,
    10**30,
)
FIXED = (
    "yesterday",
    "tomorrow",
    "the day before yesterday",
    "today",
    "tonight",
    "this morning",
    "last week",
    "next week",
    "this week",
    "last weekend",
    "next weekend",
    "last month",
    "next month",
    "this month",
    "last year",
    "next year",
    "this year",
    "past year",
    "last summer",
    "this winter",
    "next spring",
    "last monday",
    "next sunday",
    "this friday",
    "last saturday",
    "next wednesday",
)
ANCHORS: tuple[datetime | None, ...] = (
    datetime(1, 1, 1),
    datetime(1, 1, 1, 23, 59),
    datetime(1, 1, 6),
    datetime(1, 12, 31),
    datetime(2023, 5, 8, 13, 56),
    datetime(9999, 1, 1),
    datetime(9999, 12, 25),
    datetime(9999, 12, 31),
    datetime(9999, 12, 31, 23, 59, 59, 999999),
    None,
)
HUGE = "9" * 5000  # more digits than int() converts by default


# -- the oracle: integer date arithmetic, written apart from timeparse ------------------------------
_MAX_ORDINAL = date(9999, 12, 31).toordinal()


def _days(anchor: date, shift: int) -> str | None:
    ordinal = anchor.toordinal() + shift
    return date.fromordinal(ordinal).isoformat() if 1 <= ordinal <= _MAX_ORDINAL else None


def _months(anchor: date, shift: int) -> str | None:
    year, month = divmod(anchor.year * 12 + anchor.month - 1 + shift, 12)
    return f"{year:04d}-{month + 1:02d}" if 1 <= year <= 9999 else None


def _years(anchor: date, shift: int) -> str | None:
    year = anchor.year + shift
    return f"{year:04d}" if 1 <= year <= 9999 else None


def counted_phrase(count: int | str, unit: str, direction: str) -> str:
    return f"{count} {unit} ago" if direction == "ago" else f"in {count} {unit}"


def oracle(count: int, unit: str, direction: str, anchor: date) -> str | None:
    """What a counted phrase means at ``anchor``; ``None`` when that is outside years 1-9999."""
    sign = -1 if direction == "ago" else 1
    base = unit.rstrip("s") if unit != "weekend" else "week"
    if base in ("day", "week"):
        return _days(anchor, sign * count * (7 if base == "week" else 1))
    if base == "month":
        return _months(anchor, sign * count)
    return _years(anchor, sign * count)


FIXED_ORACLE: dict[str, Callable[[date], str | None]] = {
    "yesterday": lambda d: _days(d, -1),
    "tomorrow": lambda d: _days(d, 1),
    "the day before yesterday": lambda d: _days(d, -2),
    "today": lambda d: d.isoformat(),
    "last week": lambda d: _days(d, -7),
    "next week": lambda d: _days(d, 7),
    "this week": lambda d: d.isoformat(),
    "last month": lambda d: _months(d, -1),
    "next month": lambda d: _months(d, 1),
    "last year": lambda d: _years(d, -1),
    "next year": lambda d: _years(d, 1),
    "past year": lambda d: _years(d, -1),
    "last summer": lambda d: _years(d, -1),
}


def generated_cases() -> list[tuple[str, datetime | None, str | None | bool]]:
    """Every (phrase, anchor, expected) the date tests use; expected ``True`` means "some valid date"."""
    cases: list[tuple[str, datetime | None, str | None | bool]] = []
    for anchor in ANCHORS:
        day = anchor.date() if anchor else None
        for count in COUNTS:
            for unit in UNITS:
                for direction in ("ago", "in"):
                    expected = oracle(count, unit, direction, day) if day else None
                    cases.append((counted_phrase(count, unit, direction), anchor, expected))
        for unit in ("days", "months", "years"):
            cases.append((counted_phrase(HUGE, unit, "ago"), anchor, None))
            cases.append((counted_phrase(HUGE, unit, "in"), anchor, None))
        for phrase in FIXED:
            if day is None:
                cases.append((phrase, anchor, None))
            elif phrase in FIXED_ORACLE:
                cases.append((phrase, anchor, FIXED_ORACLE[phrase](day)))
            else:
                cases.append((phrase, anchor, True))
    return cases


CASES = generated_cases()


def _valid_iso(value: str) -> bool:
    parsed = parse_date(value)
    return parsed is not None and parsed.iso() == value and 1 <= parsed.start.year <= 9999


# -- unit level: resolution against the oracle -------------------------------------------------------
def test_generated_phrases_resolve_as_the_oracle_says_or_are_named_as_dropped() -> None:
    assert len(CASES) >= 3000
    wrong = []
    dropped = 0
    for phrase, anchor, expected in CASES:
        got = resolve_relative(phrase, anchor)
        named = out_of_range_phrases(phrase, anchor)
        if expected is True:
            ok = (got is not None and _valid_iso(got) and not named) or (got is None and named == [phrase])
        elif expected is None:
            ok = got is None and (named == [phrase] if anchor is not None else named == [])
        else:
            ok = got == expected and not named
        if got is None and anchor is not None:
            dropped += 1
        if got is not None:
            ok = ok and _valid_iso(got) and bool(date_text(got))
        if not ok:
            wrong.append((phrase[:40], anchor, expected, got, named[:1]))
    assert not wrong, f"{len(wrong)} of {len(CASES)} wrong, e.g. {wrong[:5]}"
    assert dropped > 400  # the edges are really exercised: many phrases fall outside the calendar


@pytest.mark.parametrize(
    "text",
    [
        "9999",
        "9999-12",
        "9999-12-31",
        "0001",
        "0001-01",
        "0001-01-01",
        "2023-02",
        "May 9999",
        "31 December 9999",
        "1 January 0001",
        "0001-01-01T00:00:00",
    ],
)
def test_partial_dates_at_the_calendar_edges_have_an_end_and_a_last_day(text: str) -> None:
    parsed = parse_date(text)
    if parsed is None:
        return
    assert parsed.start < parsed.end and parsed.start.date() <= parsed.last_day <= date.max
    assert parsed.last_day <= parsed.end.date()
    assert date_text(parsed.iso())


@pytest.mark.parametrize("value", [datetime.max, datetime.min, date.max, date.min])
def test_partial_dates_of_extreme_datetimes(value: date) -> None:
    parsed = parse_date(value)
    assert parsed is not None and parsed.end >= parsed.start and parsed.last_day == parsed.start.date()


@pytest.mark.parametrize("text", ["0000", "2023-13", "2023-02-30", "10000", "0000-00-00", "9" * 40, "-5", ""])
def test_date_text_says_what_is_no_calendar_date_as_given(text: str) -> None:
    assert date_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "9" * 30,
        "9" * 5000,
        "1:56 pm on 8 May, 99999",
        "0000-01-01",
        "10000-01-01",
        "2023-05-08 99:99",
        "x" * 10**6,
        "2023 " * 100_000,
    ],
)
def test_unreadable_dates_are_none_not_errors(text: str) -> None:
    assert parse_date(text) is None or _valid_iso(parse_date(text).iso())
    assert parse_timestamp(text) is None or 1 <= parse_timestamp(text).year <= 9999


def test_a_year_written_with_four_digits_is_that_year() -> None:
    assert parse_timestamp("12:00 am on 1 January, 0001") == datetime(1, 1, 1)
    assert parse_timestamp("11:59 pm on 31 December, 9999") == datetime(9999, 12, 31, 23, 59)
    assert parse_timestamp("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)


# -- ingest and ask: generated sessions at the edges -------------------------------------------------
def _sampled_sessions() -> dict[str, tuple[datetime | None, list[tuple[str, str | None | bool]]]]:
    """Namespaces of one session each (one anchor), 24+ sampled phrases per anchor, seeded."""
    rng = random.Random(SEED)
    by_anchor: dict[datetime | None, list[tuple[str, str | None | bool]]] = {}
    for phrase, anchor, expected in CASES:
        by_anchor.setdefault(anchor, []).append((phrase, expected))
    out = {}
    for i, (anchor, cases) in enumerate(by_anchor.items()):
        out[f"edge-{i}"] = (anchor, rng.sample(cases, 24))
    return out


SESSIONS = _sampled_sessions()


def _conversation(anchor: datetime | None, phrases: list[tuple[str, Any]]) -> Conversation:
    people = ["Ana", "Rui"]
    turns = [
        RawTurn(
            dia_id=f"D1:{k + 1}",
            speaker=people[k % 2],
            text=f"I moved to Porto {phrase} and adopted a cat named Nata{k}.",
        )
        for k, (phrase, _) in enumerate(phrases)
    ]
    stamp_text = anchor.isoformat() if anchor else None
    return Conversation(
        conversation_id="edges",
        speakers=people,
        sessions=[Session(session_id="S1", timestamp=anchor, timestamp_text=stamp_text, turns=turns)],
    )


@pytest.fixture(scope="module")
def edge_memory(module_resources: Resources) -> dict[str, Any]:
    """Every sampled session ingested by the heuristic policy; the reports by namespace."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    reports = {}
    for ns, (anchor, phrases) in SESSIONS.items():
        reports[ns] = ingest_conversation(
            _conversation(anchor, phrases), ns, resources=module_resources, policy="heuristic"
        )
    return reports


def test_enough_generated_phrases_are_ingested() -> None:
    assert sum(len(p) for _, p in SESSIONS.values()) >= 200
    assert sum(1 for a, p in SESSIONS.values() for _, e in p if a is not None and e is None) >= 50  # dropped ones
    assert any(a is not None and a.year == 1 for a, _ in SESSIONS.values())
    assert any(a is not None and a.year == 9999 for a, _ in SESSIONS.values())


@pytest.mark.parametrize("ns", sorted(SESSIONS))
def test_edge_sessions_ingest_whole_with_a_note_per_dropped_phrase(
    ns: str, edge_memory: dict[str, Any], module_resources: Resources
) -> None:
    anchor, phrases = SESSIONS[ns]
    report = edge_memory[ns].sessions[0]
    assert not report.skipped and report.turns == len(phrases)
    snapshot = module_resources.store.snapshot(ns)
    assert len(snapshot.turns) == len(phrases) and memory_problems(snapshot) == []
    notes = [f for f in report.notes if f.startswith("dates: ")]
    for k, (phrase, expected) in enumerate(phrases):
        if expected is True:  # weekdays and seasons have no oracle: the note must agree with the resolver
            dropped = anchor is not None and resolve_relative(phrase, anchor) is None
        else:
            dropped = anchor is not None and expected is None
        named = [n for n in notes if f"turn D1:{k + 1}:" in n]
        assert bool(named) == dropped, (phrase[:40], anchor, named)
    for event in snapshot.events.values():
        assert event.time is None or parse_date(event.time) is not None
    for fact in snapshot.facts.values():
        for moment in (fact.valid_from, fact.valid_to):
            assert moment is None or 1 <= moment.year <= 9999


@pytest.mark.parametrize("strategy", ASKED)
def test_every_strategy_answers_over_the_edge_sessions(
    strategy: str, edge_memory: dict[str, Any], module_resources: Resources
) -> None:
    answer = available_strategy(strategy)
    for ns, (_, phrases) in SESSIONS.items():
        for question in (
            "When did Ana move to Porto?",
            f"What happened {phrases[0][0][:60]}?",
            "What did Rui adopt yesterday?",
            "Where did Ana live in 9999?",
        ):
            result = answer(question, ns, resources=module_resources, policy="heuristic")
            assert isinstance(result.answer, str) and result.namespace == ns


# -- session dates at the edges from files -------------------------------------------------------
EDGE_STAMPS = [
    ("locomo", "11:59 pm on 31 December, 9999"),
    ("locomo", "12:00 am on 1 January, 0001"),
    ("longmemeval", "9999/12/31 (Fri) 23:59"),
    ("longmemeval", "0001/01/01 (Mon) 00:00"),
    ("jsonl", "0001-01-01T00:00:00"),
    ("jsonl", "9999-12-31T23:59:59.999999"),
    ("jsonl", "9999-12-31T23:59:59+14:00"),
    ("jsonl", "0001-01-01T00:00:00-14:00"),
    ("jsonl", 253402300800),
    ("jsonl", -62135596800),
    ("jsonl", 10**20),
    ("jsonl", "253402300800"),
    ("jsonl", 1e308),
]
EDGE_TEXTS = [
    "See you tomorrow!",
    "That was yesterday, and the day before yesterday.",
    "I moved in 99999 months ago; next week I leave in 99999999 days.",
]


def _write(tmp: Path, kind: str, stamp: Any) -> Path:
    if kind == "locomo":
        body: dict[str, Any] = {
            "speaker_a": "Ana",
            "speaker_b": "Rui",
            "session_1_date_time": stamp,
            "session_1": [
                {"speaker": ["Ana", "Rui"][i % 2], "dia_id": f"D1:{i + 1}", "text": t} for i, t in enumerate(EDGE_TEXTS)
            ],
        }
        path = tmp / "edge.json"
        path.write_text(json.dumps([{"sample_id": "edge", "conversation": body, "qa": []}]))
    elif kind == "longmemeval":
        path = tmp / "edge.json"
        path.write_text(
            json.dumps(
                [
                    {
                        "question_id": "q1",
                        "question_type": "temporal-reasoning",
                        "question": "When did I move?",
                        "answer": "never",
                        "question_date": stamp,
                        "haystack_session_ids": ["s1"],
                        "haystack_dates": [stamp],
                        "haystack_sessions": [
                            [{"role": ["user", "assistant"][i % 2], "content": t} for i, t in enumerate(EDGE_TEXTS)]
                        ],
                        "answer_session_ids": ["s1"],
                    }
                ]
            )
        )
    else:
        path = tmp / "edge.jsonl"
        path.write_text(
            "\n".join(
                json.dumps({"speaker": ["Ana", "Rui"][i % 2], "text": t, "timestamp": stamp})
                for i, t in enumerate(EDGE_TEXTS)
            )
        )
    return path


@pytest.mark.parametrize(("kind", "stamp"), EDGE_STAMPS)
def test_session_dates_at_the_edges_from_files(
    kind: str, stamp: Any, tmp_path: Path, module_resources: Resources
) -> None:
    from logicmap.graphs.ingest.ingest import ingest_conversation

    try:
        conversations = load_conversations(_write(tmp_path, kind, stamp))
    except DataFormatError as exc:  # a number or an unreadable stamp: refused with the file and field named
        assert "edge" in str(exc)
        return
    ns = f"file-{EDGE_STAMPS.index((kind, stamp))}"
    session = conversations[0].sessions[0]
    assert session.timestamp is not None and session.timestamp.year in (1, 9999)
    report = ingest_conversation(conversations[0], ns, resources=module_resources, policy="heuristic")
    assert report.sessions[0].turns == len(EDGE_TEXTS)
    notes = [f for f in report.sessions[0].notes if f.startswith("dates: ")]
    assert notes, "a session at the edge with 'tomorrow', 'yesterday' or a huge count drops one phrase at least"
    for strategy in ASKED:
        result = available_strategy(strategy)("When did I move?", ns, resources=module_resources, policy="heuristic")
        assert isinstance(result.answer, str)


def test_the_chatbot_keeps_a_turn_with_an_edge_phrase(module_resources: Resources) -> None:
    """The chatbot said it remembered; its background ingest must not lose the turn on a date overflow."""
    from tests.reliability.support import require_module

    chatbot = require_module("logicmap.graphs.chat.chatbot")
    from langgraph.checkpoint.memory import InMemorySaver

    work = chatbot.IngestionQueue()
    bot = chatbot.build_chatbot_graph().compile(checkpointer=InMemorySaver())
    context = chatbot.ChatContext(
        namespace="chat-edge", strategy="compass", policy="heuristic", ingestion=work, resources=module_resources
    )
    said = "I moved here 99999999 days ago and I will leave in 99999 months."
    bot.invoke({"messages": [("user", said)]}, {"configurable": {"thread_id": "edge"}}, context=context)
    assert work.flush(timeout=120) and not work.errors, work.errors
    texts = [t.text for t in module_resources.store.snapshot("chat-edge").turns.values()]
    assert said in texts


# -- slow patterns: pathological text through every user-text pattern --------------------------------
def python_steps(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, Any]:
    """Line events in LogicMap's own code while ``fn`` runs, and its result: a deterministic count of work.

    ``fn`` runs once untraced first, so the word caches (``stem``, ``entity_key``) are warm in every count."""
    fn(*args, **kwargs)
    package = str(ROOT)
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return (
            local if frame.f_code.co_filename.startswith(package) or "/logicmap/" in frame.f_code.co_filename else None
        )

    sys.settrace(calls)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(None)
    return count, result


def _turns(text: str) -> list[Turn]:
    """A three-turn session with ``text`` as its middle turn."""
    said = [("Ana", "I moved to Lisbon last month."), ("Rui", text), ("Ana", "How is life in Porto?")]
    return [
        Turn(
            namespace="t",
            session_id="S1",
            dia_id=f"D1:{i + 1}",
            speaker=s,
            text=t,
            session_time=datetime(2023, 5, 8),
            position=i,
        )
        for i, (s, t) in enumerate(said)
    ]


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


# Shapes that made a pattern superlinear: long name runs, digits, punctuation, whitespace, repeated anchors.
SHAPES: dict[str, Callable[[int], str]] = {
    "capitalised run": lambda n: "I live in " + _repeat("Maya Oak de Ridge ", n),
    "capitalised run before an anchor": lambda n: _repeat("Ana Silva ", n) + " is my favourite singer",
    "capitals I": lambda n: _repeat("I ", n),
    "digits": lambda n: _repeat("9", n) + " days ago",
    "digit words": lambda n: _repeat("in 99999 months ", n),
    "punctuation": lambda n: "Hi " + _repeat("!?,.;:-'", n) + " x",
    "whitespace": lambda n: "I love" + " " * n + "cats so I" + " " * n + "left (2023)",
    "newlines": lambda n: "Maya had" + "\n" * n + "a dog because" + "\t" * n + "x",
    "repeated statements": lambda n: _repeat("I adopted a dog, so I visited Porto, the Oak Ridge because ", n),
    "no sentence end": lambda n: _repeat("my sister Ana had a latte and ", n),
}
BIG = 1_000_000


def _pattern_functions() -> dict[str, Callable[[str], Any]]:
    from logicmap.agents.fact_extractor import is_hedged, pattern_extraction
    from logicmap.agents.segmenter import time_phrase_notes
    from logicmap.memory.indexes.cue_extraction import extract_cues, extract_personal_facts, heuristic_links

    return {
        "fact patterns": lambda text: pattern_extraction(_turns(text)).facts,
        "cue patterns": lambda text: extract_cues(text, people=["Ana", "Rui"]),
        "personal facts": lambda text: extract_personal_facts(_turns(text)[1]),
        "cue links": lambda text: heuristic_links(_turns(text), []),
        "hedges": lambda text: is_hedged(pattern_text(text)),
        "time notes": lambda text: [n for n in time_phrase_notes(_turns(text), datetime(9999, 12, 31))],
    }


# The time notes read the whole turn (each dropped phrase is named, wherever it is): linear, not capped.
CAPPED = sorted(set(_pattern_functions()) - {"time notes"})


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_pattern_text_and_pieces_are_capped(shape: str) -> None:
    text = SHAPES[shape](BIG)
    assert len(pattern_text(text)) <= PATTERN_TEXT_LIMIT
    pieces = pattern_sentences(text)
    assert pieces and all(len(p) <= PATTERN_SENTENCE_LIMIT for p in pieces)
    assert sum(len(p) for p in pieces) <= PATTERN_TEXT_LIMIT


def test_a_normal_turn_is_read_whole() -> None:
    """The cap drops nothing from a normal turn: a fact in its last sentence is found."""
    from logicmap.agents.fact_extractor import pattern_extraction

    filler = " ".join(f"We talked about the weather on day {i}." for i in range(600))
    text = f"{filler} I live in Braga now."
    assert len(text) < PATTERN_TEXT_LIMIT and pattern_text(text) == text
    facts = pattern_extraction(_turns(text)).facts
    assert any(f.relation == "lives_in" and f.tail == "Braga" for f in facts)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("function", CAPPED)
def test_a_huge_turn_is_read_up_to_the_cap(function: str, shape: str) -> None:
    """A 1 MB and a 2 MB turn with the same first 32,000 characters: the same output for the same work."""
    run = _pattern_functions()[function]
    head = SHAPES[shape](BIG)
    steps_1mb, out_1mb = python_steps(run, head)
    steps_2mb, out_2mb = python_steps(run, head + SHAPES[shape](BIG))
    assert out_1mb == out_2mb
    # The same work up to a few cache misses (bounded word caches warmed by other tests): reading the
    # second megabyte would double it.
    assert abs(steps_2mb - steps_1mb) <= 0.05 * steps_1mb + 20, (steps_1mb, steps_2mb)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("function", sorted(_pattern_functions()))
def test_work_below_the_cap_grows_linearly(function: str, shape: str) -> None:
    """Python steps at 8,000 and 16,000 characters: doubling the text at most doubles the work (plus slack)."""
    run = _pattern_functions()[function]
    small, _ = python_steps(run, SHAPES[shape](8_000))
    large, _ = python_steps(run, SHAPES[shape](16_000))
    assert large <= 2.3 * small + 200, (small, large)


def test_a_long_capitalised_run_still_gives_the_favourite() -> None:
    """The favourite pattern reads its name back from "is my favourite": the name as before, after any run."""
    from logicmap.agents.fact_extractor import pattern_extraction

    for text, name in [
        ("Ana Silva is my favourite singer.", "Ana Silva"),
        ("Quinta da Regaleira is my favourite place.", "Quinta da Regaleira"),
        (_repeat("Oak ", 8_000) + "and Nora Jones is my favourite singer.", "Nora Jones"),
    ]:
        facts = pattern_extraction(_turns(text)).facts
        assert any(f.relation == "favourite_singer" or f.relation == "favourite_place" for f in facts), text[-60:]
        assert any(f.tail == name for f in facts if f.relation.startswith("favourite")), (name, facts)


def test_ask_time_patterns_over_a_huge_memory() -> None:
    """Goal-Mem's value reader and the extractive responder read a 1 MB memory line in bounded work."""
    from logicmap.agents.goalmem_heuristics import extract_value
    from logicmap.memory.records.nl_logic import parse_atom

    atom = parse_atom("Maya had (x:drink)")
    variable = next(t for t in atom.args if t.variable)
    for shape in ("no sentence end", "capitalised run", "whitespace"):
        head = SHAPES[shape](BIG)
        steps_1mb, value_1mb = python_steps(extract_value, atom, variable, head, set())
        steps_2mb, value_2mb = python_steps(extract_value, atom, variable, head + head, set())
        assert (steps_1mb, value_1mb) == (steps_2mb, value_2mb)
