"""CLI words that mean what they say (issue 43, item 7): ``list --kind items`` lists the store items a
``LogicMapStore`` put, by key; Memory-R2's facts are ``--kind r2_facts``; the destructive commands (``forget``,
``delete-namespace``) ask first, take ``--yes``, and without a terminal and without ``--yes`` refuse in one line.

Real store, real CLI (``logicmap.graphs.surfaces.cli.main``); the terminal is the only thing stood in for (a stdin that says
it is one and answers the prompt).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from logicmap import LogicMapStore, ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.cli import LIST_KINDS, main
from logicmap.graphs.writes.forget import KINDS
from logicmap.memory.files.loaders import Conversation, RawTurn, Session


class Terminal(io.StringIO):
    """A stdin that is a terminal, with the user's answer typed in."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def data_dir(resources: Resources) -> Path:
    """``memories.alice`` with two store items, ``ana`` ingested with the Memory-R2 manager (no store items)."""
    store = LogicMapStore(resources=resources, policy="heuristic")
    store.put(("memories", "alice"), "bees", {"content": "I keep bees on my roof."})
    store.put(("memories", "alice"), "vinyl", {"content": "I collect vinyl records."})
    turns = [
        RawTurn(dia_id="D1:1", speaker="Ana", text="I moved to Porto for the light."),
        RawTurn(dia_id="D1:2", speaker="Ana", text="My sister keeps bees in Braga."),
    ]
    conversation = Conversation(
        conversation_id="ana",
        speakers=["Ana"],
        sessions=[Session(session_id="S1", timestamp="2024-05-01T10:00:00", turns=turns)],
    )
    ingest_conversation(conversation, "ana", resources=resources, policy="heuristic", memory_manager="r2")
    resources.store.close()  # the CLI opens the data directory itself
    resources.store_ = None
    return resources.settings.data_dir


def _cli(data_dir: Path, *args: str) -> list[str]:
    return ["--data-dir", str(data_dir), "--embeddings", "hashing", *args]


def _lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def test_list_kinds_are_what_users_call_them(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert LIST_KINDS == KINDS
    assert main(_cli(data_dir, "list", "-n", "memories.alice", "--kind", "items")) == 0
    items = _lines(capsys.readouterr().out)
    assert [(i["id"], i["key"], i["text"]) for i in items] == [
        ("bees", "bees", "I keep bees on my roof."),
        ("vinyl", "vinyl", "I collect vinyl records."),
    ]
    assert items[0]["value"] == {"content": "I keep bees on my roof."} and items[0]["kind"] == "items"
    assert main(_cli(data_dir, "get", "-n", "memories.alice", "vinyl")) == 0  # a store item by key
    assert json.loads(capsys.readouterr().out)["value"] == {"content": "I collect vinyl records."}
    assert main(_cli(data_dir, "list", "-n", "ana", "--kind", "r2_facts")) == 0
    assert [f["text"] for f in _lines(capsys.readouterr().out)] == [
        "Ana moved to Porto for the light.",
        "Ana's sister keeps bees in Braga.",
    ]
    assert main(_cli(data_dir, "list", "-n", "ana", "--kind", "items")) == 0  # what --kind items listed before
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "note: no store items here; Memory-R2 facts, which --kind items listed before, are --kind r2_facts\n"
    )


def test_destructive_commands_refuse_without_a_terminal_and_without_yes(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(data_dir, "delete-namespace", "-n", "ana")) == 2
    assert capsys.readouterr().err == (
        "error: delete-namespace: this deletes namespace ana and all its memory from disk (ana.* namespaces stay), "
        "which cannot be undone: add --yes to confirm (no terminal to ask on)\n"
    )
    assert main(_cli(data_dir, "forget", "-n", "ana", "--turn", "D1:1", "--purge")) == 2
    assert capsys.readouterr().err == (
        "error: forget: this forgets turns D1:1 in ana, with everything derived only from them and purges them from "
        "disk, which cannot be undone: add --yes to confirm (no terminal to ask on)\n"
    )
    assert main(_cli(data_dir, "list", "-n", "ana")) == 0
    assert [t["id"] for t in _lines(capsys.readouterr().out)] == ["D1:1", "D1:2"]  # nothing was touched
    assert main(_cli(data_dir, "forget", "-n", "ana", "--turn", "D1:1", "--yes")) == 0
    assert main(_cli(data_dir, "delete-namespace", "-n", "ana", "-y")) == 0
    assert "deleted namespace ana" in capsys.readouterr().out


def test_destructive_commands_ask_on_a_terminal(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(_cli(data_dir, "forget", "-n", "memories.alice", "--key", "bees")) == 1
    assert capsys.readouterr().err == (
        "forget: this forgets store keys bees in memories.alice, with everything derived only from them, which "
        "cannot be undone. Go on? [y/N] nothing was forgotten\n"
    )
    monkeypatch.setattr("sys.stdin", Terminal("\n"))  # Enter: the default, no
    assert main(_cli(data_dir, "delete-namespace", "-n", "memories.alice")) == 1
    assert main(_cli(data_dir, "namespaces")) == 0 and "memories.alice" in capsys.readouterr().out.split()
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert main(_cli(data_dir, "delete-namespace", "-n", "memories.alice")) == 0
    assert capsys.readouterr().out.startswith("deleted namespace memories.alice")
    assert main(_cli(data_dir, "namespaces")) == 0 and capsys.readouterr().out.split() == ["ana"]
