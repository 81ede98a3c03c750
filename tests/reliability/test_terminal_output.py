"""Terminal output: control characters stored in memory never reach the terminal; ``--budgets`` is validated.

Generated cases (seeded): texts mixing words with ANSI escape sequences and C0/C1/bidi controls through
``printable``; a conversation file whose turns and speakers carry them, ingested and read back through the
CLI (``ask`` with every strategy, ``ask --json``, ``facts``, ``stats``, ``chat`` with ``/evidence``); recall
budgets, good and bad, through ``logicmap eval``'s parser.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from logicmap.__main__ import main
from logicmap.memory.language.text import printable, printable_json
from tests.conftest import make_resources
from tests.reliability.support import strategy_names

SEED = 1111
# What a terminal acts on: C0 controls but tab and newline (ESC among them), DEL, C1, bidi controls, separators.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SEQUENCES = [
    "\x1b[31m",
    "\x1b[0m",
    "\x1b[2J",
    "\x1b[H",
    "\x1b[1;1H",
    "\x1b[2K",
    "\x1b[?25l",
    "\x1b[38;5;196m",
    "\x1b[A",
    "\x1b]0;pwned\x07",
    "\x1b]52;c;ZWNobyBwd25lZA==\x07",
    "\x1b]8;;http://127.0.0.1/\x1b\\link\x1b]8;;\x1b\\",
    "\x1bP+q\x1b\\",
    "\x1bc",
    "\x1b7",
    "\x1b8",
    "\x9b31m",
    "\x9d0;title\x9c",
    "\x1b",
    "\x1b[",
    "\x1b]0;unterminated",
]
CONTROLS = [
    "\x00",
    "\x07",
    "\x08",
    "\r",
    "\x0b",
    "\x0c",
    "\x7f",
    "\x85",
    "\x9b",
    "\u202e",
    "\u2066",
    "\u2028",
    "\t",
    "\n",
]
WORDS = ["maya", "zebra", "market", "ramen", "museum", "Lisbon", "café", "東京", "🙂", "naïve", "street", "bike"]


# Sequences a terminal reads to their end: the words after them are shown (an ESC alone, "ESC [", an
# unterminated title or an 8-bit CSI swallow what follows, on a terminal as here).
COMPLETE = [q for q in SEQUENCES if q not in ("\x1b", "\x1b[", "\x1b]0;unterminated", "\x9b31m")]


def hostile_text(rng: random.Random, words: int = 8, pool: list[str] | None = None) -> str:
    parts = []
    for _ in range(words):
        parts.append(rng.choice(WORDS))
        if rng.random() < 0.6:
            parts.append(rng.choice(pool or SEQUENCES + CONTROLS))
    return " ".join(parts) if rng.random() < 0.5 else "".join(parts)


def test_printable_removes_every_control_from_generated_texts() -> None:
    rng = random.Random(SEED)
    texts = [hostile_text(rng, rng.randrange(1, 15)) for _ in range(300)]
    assert sum(bool(UNSAFE.search(t)) for t in texts) > 250  # the generator does make hostile texts
    for text in texts:
        shown = printable(text)
        assert not UNSAFE.search(shown), repr(shown)
        assert not re.search(r"[\t\n]", printable(text, one_line=True)), repr(text)
        decoded = json.loads(printable_json(json.dumps({"t": text}, ensure_ascii=False)))
        assert decoded == {"t": text}  # the JSON form is the same JSON
        assert not UNSAFE.search(printable_json(json.dumps({"t": text}, ensure_ascii=False)))
    pool = COMPLETE + [c for c in CONTROLS if c != "\x9b"]
    for _ in range(100):
        words = [w for w in WORDS if rng.random() < 0.4] or ["zebra"]
        text = " ".join(f"{w} {rng.choice(pool)}" for w in words)
        shown = printable(text)
        assert all(w in shown for w in words), (text, shown)  # the words around a sequence survive


def test_printable_leaves_ordinary_text_alone() -> None:
    rng = random.Random(SEED + 1)
    for _ in range(200):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 12)))
        text += rng.choice(["", "\n  - next line", "\ttabbed", "?", " (2023-05-08)"])
        assert printable(text) == text
    assert printable("a\x1b[31mred\x1b[0m b") == "ared b"
    assert printable("x\ry") == "x\\ry" and printable("bell\x07") == "bell\\x07" and printable("\u202e") == "\\u202e"
    assert printable("x\x1b]0;title\x07y") == "xy" and printable("two\nlines", one_line=True) == "two lines"


def _hostile_conversation(rng: random.Random, sessions: int, turns: int) -> list[dict]:
    body: dict = {"speaker_a": "Ana\x1b[31m", "speaker_b": "Rui\u202e"}
    for s in range(1, sessions + 1):
        body[f"session_{s}_date_time"] = f"1:56 pm on {s} May, 2023"
        body[f"session_{s}"] = [
            {
                "speaker": body["speaker_a"] if t % 2 else body["speaker_b"],
                "dia_id": f"D{s}:{t}",
                "text": f"zebra note {s}.{t}: {hostile_text(rng)} at the market",
            }
            for t in range(1, turns + 1)
        ]
    return [{"sample_id": "hostile", "conversation": body, "qa": []}]


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A memory ingested through ``logicmap ingest`` from a file whose turns carry escape sequences and controls."""
    root = tmp_path_factory.mktemp("terminal")
    document = _hostile_conversation(random.Random(SEED + 2), sessions=3, turns=6)
    path = root / "hostile.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    data_dir = root / "memory"
    assert (
        main(
            [
                "--data-dir",
                str(data_dir),
                "--embeddings",
                "hashing",
                "ingest",
                str(path),
                "-n",
                "ansi",
                "--policy",
                "heuristic",
                "--quiet",
                "--memory-manager",
                "r2",
            ]
        )
        == 0
    )  # r2 strategy's memory too
    return data_dir, document


def _clean(captured: pytest.CaptureFixture[str] | object, what: str) -> str:
    text = captured.out + captured.err  # type: ignore[union-attr]  # a capsys/capfd result: it has out and err
    found = sorted({f"U+{ord(c):04X}" for c in UNSAFE.findall(text)})
    assert not found, f"{what}: the terminal got {found}\n{text[:2000]!r}"
    return text


def test_stored_text_keeps_its_controls(hostile_store: tuple[Path, dict]) -> None:
    data_dir, document = hostile_store
    res = make_resources(data_dir)
    try:
        turns = res.store.snapshot("ansi").turns
        expected = {
            t["dia_id"]: t["text"]
            for key, value in document[0]["conversation"].items()
            if key.startswith("session_") and isinstance(value, list)
            for t in value
        }
        assert {tid: t.text for tid, t in turns.items()} == expected  # unchanged, escapes and all
        assert sum(bool(UNSAFE.search(t)) for t in expected.values()) >= 15
    finally:
        res.store.close()


def test_ask_facts_and_stats_print_no_control_characters(hostile_store: tuple[Path, dict], capsys) -> None:
    data_dir, _ = hostile_store
    base = ["--data-dir", str(data_dir), "--embeddings", "hashing"]
    questions = [
        "What did they say about the zebra at the market?",
        "When was the museum \x1b[2J visit?",
        "Who went to Lisbon\r?",
    ]
    runs = shown = 0
    for strategy in strategy_names():
        for question in questions:
            assert main([*base, "ask", question, "-n", "ansi", "-s", strategy, "--policy", "heuristic"]) == 0, strategy
            out = _clean(capsys.readouterr(), f"ask -s {strategy}")
            shown += "zebra note" in out  # stored turns were printed (so their escapes were there to strip)
            runs += 1
    assert main([*base, "ask", questions[0], "-n", "ansi", "-s", "dense", "--policy", "heuristic", "--json"]) == 0
    raw = _clean(capsys.readouterr(), "ask --json")
    result = json.loads(raw)
    assert any(UNSAFE.search(item["text"]) for item in result["evidence"])  # the JSON still carries the real text
    for command in (["facts", "-n", "ansi"], ["stats", "-n", "ansi"], ["namespaces"]):
        assert main([*base, *command]) == 0
        _clean(capsys.readouterr(), " ".join(command))
    assert runs == 3 * len(strategy_names()) and shown >= len(strategy_names()), (runs, shown)


def test_chat_prints_no_control_characters(hostile_store: tuple[Path, dict], capsys, monkeypatch) -> None:
    data_dir, _ = hostile_store
    rng = random.Random(SEED + 3)
    said = [f"tell me about the zebra {hostile_text(rng, 3)}?" for _ in range(4)] + ["/evidence", "/quit"]
    lines = iter(said)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    assert (
        main(
            [
                "--data-dir",
                str(data_dir),
                "--embeddings",
                "hashing",
                "chat",
                "-n",
                "ansi",
                "-s",
                "dense",
                "--policy",
                "heuristic",
                "--user",
                "Eve\x1b[5m",
            ]
        )
        == 0
    )
    out = _clean(capsys.readouterr(), "chat")
    assert out.count("bot> ") == 4 and "recalled by dense" in out
    assert not re.search(r"^you> ", out, re.MULTILINE)  # no reply line forged a prompt


BAD_BUDGETS = [
    "0",
    "-5",
    "0,-5",
    "5,-5",
    "5,0",
    "5.0",
    "1e3",
    "",
    ",",
    "5,,10",
    "five",
    "５",
    "10 20",
    "5;10",
    "0x10",
    "nan",
    "inf",
    "+5",
    "-0",
    "5,\x1b[31m",
]
GOOD_BUDGETS = {"5": [5], "5,10,20": [5, 10, 20], " 5 , 10 ": [5, 10], "20,5,5": [5, 20], "1": [1], "100000": [100000]}


@pytest.mark.parametrize("budgets", BAD_BUDGETS)
def test_bad_recall_budgets_are_refused_with_one_line_and_exit_2(budgets: str, tmp_path: Path, capsys) -> None:
    sample = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"
    with pytest.raises(SystemExit) as info:
        main(
            [
                "--data-dir",
                str(tmp_path / "m"),
                "--embeddings",
                "hashing",
                "eval",
                str(sample),
                "-s",
                "dense",
                "--budgets",
                budgets,
            ]
        )
    err = capsys.readouterr().err
    assert info.value.code == 2
    message = err.strip().splitlines()[-1]
    assert "argument --budgets: recall budgets are positive whole numbers of turns" in message, err
    assert not UNSAFE.search(err) and not (tmp_path / "m").exists()  # refused before any work


def test_good_recall_budgets_parse_sorted_without_repeats() -> None:
    from logicmap.evals.cli import add_eval_commands, recall_budgets
    from logicmap.graphs.surfaces.cli import build_parser

    parser = build_parser(add_eval_commands)
    for text, expected in GOOD_BUDGETS.items():
        assert recall_budgets(text) == expected
        assert parser.parse_args(["eval", "f.json", "-s", "dense", "--budgets", text]).budgets == expected
    assert parser.parse_args(["eval", "f.json", "-s", "dense"]).budgets == [5, 10, 20]
