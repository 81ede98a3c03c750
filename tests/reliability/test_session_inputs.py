"""Sessions given directly are checked as a file's are, and JSONL splits records at "\\n" only.

Generated cases (seeded): lists of sessions with one hostile part (a duplicate, empty, blank, padded, 1 MB,
control-character or lone-surrogate session id; a hostile dia id; a session without turns) sent through
``ingest_conversation``, the ingest graph's ``sessions`` input (as dicts, like a server client) and, where a
file can say it, a JSONL file through the CLI. Each is refused with one ``DataFormatError`` line naming the
session and the field, and nothing is written. Then JSONL files whose strings hold raw U+2028, U+2029, U+0085
and other line-like characters load, and ingest with every text stored as written.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from logicmap.graphs.ingest.ingest import IngestContext, graph, ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.files.loaders import Conversation, DataFormatError, Session, load_conversations
from tests.reliability.support import marked_conversation

CASES = 36
LINE_CASES = 16
TALLY: Counter[str] = Counter()

HOSTILE_IDS: dict[str, Any] = {
    "empty": "",
    "blank": "   ",
    "padded": " S9",
    "newline": "S9\n",
    "nul": "S\x009",
    "escape": "S\x1b[2J9",
    "c1 control": "S\x859",
    "surrogate": "S\ud8009",
    "1 MB": "S" * 1_000_000,
    "129 chars": "S" * 129,
}
HOSTILE_DIA = {
    "empty": "",
    "space": "D1 1",
    "newline": "D1:1\n",
    "nul": "D\x00",
    "long": "D" * 65,
    "1 MB": "D" * 1_000_000,
}


def _mutate(rng: random.Random, conv: Conversation) -> tuple[str, list[Session]]:
    sessions = [s.model_copy(deep=True) for s in conv.sessions]
    kind = rng.choice(["duplicate", "session id", "dia id", "no turns"])
    victim = rng.randrange(len(sessions))
    if kind == "duplicate":
        other = rng.choice([i for i in range(len(sessions)) if i != victim])
        sessions[victim].session_id = sessions[other].session_id
        name = "duplicate"
    elif kind == "session id":
        name = rng.choice(sorted(HOSTILE_IDS))
        sessions[victim].session_id = HOSTILE_IDS[name]
    elif kind == "dia id":
        name = "dia " + rng.choice(sorted(HOSTILE_DIA))
        turn = rng.randrange(len(sessions[victim].turns))
        sessions[victim].turns[turn].dia_id = HOSTILE_DIA[name[4:]]
    else:
        name = "no turns"
        sessions[victim].turns = []
    return name, sessions


@pytest.mark.parametrize("seed", range(CASES))
def test_hostile_sessions_are_refused_alike_by_every_entry_point(seed: int, module_resources: Resources) -> None:
    rng = random.Random(f"sessions-{seed}")
    res, namespace = module_resources, f"hostile{seed}"
    conv = marked_conversation("quokka", sessions=rng.randint(2, 4), seed=seed)
    name, sessions = _mutate(rng, conv)
    field = "dia_id" if name.startswith("dia") else "turns" if name == "no turns" else "session_id"
    messages = []
    for path in ("python", "graph"):
        with pytest.raises(DataFormatError) as caught:
            if path == "python":
                ingest_conversation(
                    conv.model_copy(update={"sessions": sessions}), namespace, resources=res, policy="heuristic"
                )
            else:
                graph.invoke(
                    {"sessions": [s.model_dump() for s in sessions]},
                    context=IngestContext(namespace=namespace, policy="heuristic", resources=res),
                )
        message = str(caught.value)
        assert f"field {field!r}" in message and "session " in message and "\n" not in message, message
        assert len(message) < 400, message[:400]
        messages.append(message)
        TALLY[f"{path}: {name}"] += 1
    assert messages[0] == messages[1]  # one validation, one error, whichever way the sessions came
    assert res.store.manifest(namespace).generation == 0 and not res.store.has_namespace(namespace)


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    # ensure_ascii=False writes U+2028 and friends raw, as many JSON writers do.
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


LINE_LIKE = ["\u2028", "\u2029", "\u0085", "\r\u2028", "\u2028\u2029\u0085", "\u2028\n"]  # \n, \r: escaped by json


@pytest.mark.parametrize("seed", range(LINE_CASES))
def test_jsonl_strings_with_raw_line_separators_load_and_store_as_written(
    seed: int, module_resources: Resources, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"lines-{seed}")
    marks = LINE_LIKE
    records, texts = [], []
    for i in range(rng.randint(2, 6)):
        mark = rng.choice(marks)
        text = f"line {i}{mark}still the same message{rng.choice(marks)}{'' if rng.random() < 0.5 else mark}end"
        records.append({"speaker": rng.choice(["Ana", "Rui"]), "text": text, "session": str(1 + i // 3)})
        texts.append(text)
    path = _jsonl(tmp_path / f"lines{seed}.jsonl", records)
    loaded = load_conversations(path)[0]
    assert [t.text for s in loaded.sessions for t in s.turns] == texts
    namespace = f"lines{seed}"
    code = main(
        [
            "--data-dir",
            str(res_dir(module_resources)),
            "--embeddings",
            "hashing",
            "ingest",
            str(path),
            "-n",
            namespace,
            "--policy",
            "heuristic",
            "--quiet",
        ]
    )
    assert code == 0, capsys.readouterr().err
    stored = sorted(t.text for t in module_resources.store.snapshot(namespace).turns.values())
    assert stored == sorted(texts)
    TALLY["jsonl files with raw line separators"] += 1


def test_a_raw_line_break_still_ends_a_record_and_a_control_character_is_still_refused(tmp_path: Path) -> None:
    good = tmp_path / "crlf.jsonl"
    good.write_bytes(b'{"speaker": "Ana", "text": "one"}\r\n{"speaker": "Rui", "text": "two"}\r\n')
    assert [t.text for t in load_conversations(good)[0].sessions[0].turns] == ["one", "two"]
    bad = tmp_path / "vt.jsonl"
    bad.write_text('{"speaker": "Ana", "text": "a\x0bb"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 1.*malformed JSON"):
        load_conversations(bad)


def res_dir(res: Resources) -> Path:
    return Path(res.settings.data_dir)


def test_the_generated_cases_covered_every_kind(request: pytest.FixtureRequest) -> None:
    if request.config.option.keyword or sum(v for k, v in TALLY.items() if ":" in k) < 2 * CASES:
        pytest.skip("only meaningful after the whole module ran")
    print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.items())))
    kinds = {k.split(": ", 1)[1] for k in TALLY if ":" in k}
    assert {"duplicate", "no turns"} <= kinds and any(k.startswith("dia") for k in kinds)
    assert sum(1 for k in kinds if k not in ("duplicate", "no turns") and not k.startswith("dia")) >= 4
