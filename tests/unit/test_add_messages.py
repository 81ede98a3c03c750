"""Chat messages in: ``add_messages`` appends to the open chat session, starts a new one after an idle gap or when
named, takes times from the messages, makes a re-send a no-op, and refuses bad input whole; a JSONL file follows
the same session rule and a second file into a namespace adds its sessions. Real Chroma on a temp directory."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from logicmap import MessageFormatError, aadd_messages, add_messages
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.runtime.input_limits import InputTooLargeError

T0 = datetime(2025, 5, 1, 9, 0)


def _at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def _sessions(resources, namespace: str = "ann") -> dict[str, list[str]]:
    """Chat session -> its turns' texts, in order."""
    turns = sorted(resources.store.snapshot(namespace).turns.values(), key=lambda t: t.position)
    out: dict[str, list[str]] = {}
    for turn in turns:
        out.setdefault(turn.session_id.rpartition("#")[0], []).append(turn.text)
    return out


def test_calls_append_to_the_open_session_and_a_resend_is_a_no_op(resources) -> None:
    first = [
        HumanMessage("I adopted a cat named Miso.", id="a1", additional_kwargs={"timestamp": _at(0)}),
        AIMessage("Congratulations!", id="a2", response_metadata={"timestamp": _at(1)}),
    ]
    report = add_messages("ann", first, resources=resources, policy="heuristic")
    assert report.added == 2 and report.already_stored == 0
    # The whole thread sent again with one more message: only the new one is stored, in the same session.
    thread = [*first, HumanMessage("Miso likes tuna.", id="a3", additional_kwargs={"timestamp": _at(5)})]
    again = add_messages("ann", thread, resources=resources, policy="heuristic")
    assert (again.added, again.already_stored) == (1, 2) and again.sessions == report.sessions
    assert add_messages("ann", thread, resources=resources, policy="heuristic").added == 0
    assert list(_sessions(resources).values()) == [
        ["I adopted a cat named Miso.", "Congratulations!", "Miso likes tuna."]
    ]
    said = {t.text: t.said_at for t in resources.store.snapshot("ann").turns.values()}
    assert said["Miso likes tuna."] == T0 + timedelta(minutes=5)  # the message's time, not the clock


def test_an_idle_gap_or_a_named_session_starts_a_new_session(resources) -> None:
    add_messages(
        "ann",
        [{"role": "user", "content": "Morning run done.", "timestamp": _at(0)}],
        resources=resources,
        policy="heuristic",
        idle_gap_s=600,
    )
    add_messages(
        "ann",
        [
            {"role": "user", "content": "Lunch was ramen.", "timestamp": _at(5)},
            {"role": "user", "content": "Evening: read a novel.", "timestamp": _at(300)},
        ],
        resources=resources,
        policy="heuristic",
        idle_gap_s=600,
    )
    add_messages(
        "ann",
        [{"role": "user", "content": "Planning the trip to Oslo."}],
        session="trip",
        resources=resources,
        policy="heuristic",
    )
    add_messages(
        "ann",
        [{"role": "user", "content": "Booked the flights."}],
        session="trip",
        resources=resources,
        policy="heuristic",
    )
    sessions = _sessions(resources)
    assert list(sessions.values()) == [
        ["Morning run done.", "Lunch was ramen."],
        ["Evening: read a novel."],
        ["Planning the trip to Oslo.", "Booked the flights."],
    ]
    assert list(sessions)[2] == "trip"


def test_ids_dicts_pairs_and_what_is_left_out(resources) -> None:
    messages = [
        SystemMessage("You are helpful."),
        ("user", "I play the cello."),
        AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "c1"}]),
        ToolMessage("found nothing", tool_call_id="c1"),
        {"role": "assistant", "content": "Lovely!"},
        {"role": "human", "content": [{"type": "text", "text": "Since 2019."}]},
    ]
    report = add_messages("ann", messages, resources=resources, policy="heuristic")
    assert (report.added, report.not_conversation) == (3, 3)
    turns = sorted(resources.store.snapshot("ann").turns.values(), key=lambda t: t.position)
    assert [(t.role, t.speaker, t.text) for t in turns] == [
        ("user", "user", "I play the cello."),
        ("assistant", "assistant", "Lovely!"),
        ("user", "user", "Since 2019."),
    ]
    # Two messages of one id in a call: the second is the same message.
    twice = add_messages(
        "ann",
        [HumanMessage("x y z", id="same"), HumanMessage("x y z", id="same")],
        resources=resources,
        policy="heuristic",
    )
    assert (twice.added, twice.already_stored) == (1, 1)


def test_one_id_on_two_messages_of_different_content_is_refused_naming_the_id(resources) -> None:
    add_messages("ann", [("user", "Already here.")], resources=resources, policy="heuristic")
    before = resources.store.snapshot("ann").fingerprint()
    messages = [
        HumanMessage("DUPFIRST I live in Turin", id="dup-7"),
        AIMessage("Nice.", id="r1"),
        HumanMessage("DUPSECOND I work in Milan", id="dup-7"),
    ]
    with pytest.raises(MessageFormatError, match="message 2: id 'dup-7' is also message 0's") as caught:
        add_messages("ann", messages, resources=resources, policy="heuristic")
    assert "\n" not in str(caught.value) and "nothing was written" in str(caught.value)
    assert resources.store.snapshot("ann").fingerprint() == before


def test_an_edited_message_resent_with_its_id_updates_the_stored_turn(resources) -> None:
    thread = [
        HumanMessage("I live in Porto.", id="u1"),
        AIMessage("Porto is lovely.", id="a1"),
        HumanMessage("My sister is called Ines.", id="u2"),
    ]
    add_messages("ann", thread, resources=resources, policy="heuristic")
    before = resources.store.snapshot("ann")
    edited = [HumanMessage("I live in Braga.", id="u1"), *thread[1:], HumanMessage("She is a nurse.", id="u3")]
    report = add_messages("ann", edited, resources=resources, policy="heuristic")
    after = resources.store.snapshot("ann")
    texts = [t.text for t in sorted(after.turns.values(), key=lambda t: t.position)]
    assert texts == ["I live in Braga.", "Porto is lovely.", "My sister is called Ines.", "She is a nurse."]
    assert (report.added, report.updated, report.already_stored) == (1, 1, 2)
    old_id = next(t for t, turn in before.turns.items() if turn.text == "I live in Porto.")
    assert after.turns[old_id].text == "I live in Braga."  # the same turn (id, session, place), its new text
    assert any("I live in Porto." in e.summary for e in before.events.values())
    assert not any("I live in Porto." in e.summary for e in after.events.values())  # its event rebuilt from the edit
    edit = next(f for f in after.manifest.forgets if f.surface == "chat")  # the old text retired in the edit's commit
    assert edit.generation == before.generation + 1 and edit.removed
    again = add_messages("ann", edited, resources=resources, policy="heuristic")  # the edited thread: a no-op now
    assert (again.added, again.updated, again.already_stored) == (0, 0, 4)
    assert resources.store.snapshot("ann").generation == after.generation


def _nested(levels: int) -> object:
    value: object = "x"
    for _ in range(levels):
        value = [value]
    return value


DEEP = [
    ("timestamp", [{"role": "user", "content": "hi", "timestamp": _nested(100_000)}]),
    ("role", [{"role": _nested(100_000), "content": "hi"}]),
    ("content", [{"role": "user", "content": [{"type": "text", "text": "hi"}, _nested(3_000)]}]),
    ("metadata", [HumanMessage("hi", additional_kwargs={"trace": _nested(3_000)})]),
    ("pair", [("user", _nested(100_000))]),
]


@pytest.mark.parametrize(("case", "messages"), DEEP, ids=[d[0] for d in DEEP])
def test_a_message_nested_too_deep_is_one_line_naming_the_limit(resources, case: str, messages) -> None:
    with pytest.raises(MessageFormatError, match="message 0: the message is nested more than 100 levels deep") as err:
        add_messages("ann", messages, resources=resources, policy="heuristic")
    assert "\n" not in str(err.value) and "MAX_VALUE_DEPTH" in str(err.value)
    assert resources.store.namespaces() == []


BAD = [
    ("not a list", "hello", "must be a list"),
    ("a dict", {"role": "user", "content": "hi"}, "must be a list"),
    ("unknown role", [{"role": "user", "content": "ok"}, {"role": "wizard", "content": "abracadabra"}], "unknown role"),
    ("no content", [{"role": "user"}], "needs 'role' and 'content'"),
    ("empty", [{"role": "user", "content": "fine"}, {"role": "user", "content": "   "}], "empty"),
    ("wrong content type", [{"role": "user", "content": 42}], "content must be text"),
    ("wrong item type", [42], "expected a LangChain message"),
    ("bad time", [{"role": "user", "content": "hi", "timestamp": "someday soon"}], "unreadable timestamp"),
    ("bad id", [{"role": "user", "content": "hi", "id": ""}], "id must be"),
    ("surrogate", [{"role": "user", "content": "bad \ud800 text"}], "surrogate"),
]


@pytest.mark.parametrize(("case", "messages", "problem"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_clear_error_and_nothing_is_written(resources, case: str, messages, problem: str) -> None:
    add_messages("ann", [("user", "Already here.")], resources=resources, policy="heuristic")
    before = resources.store.snapshot("ann").fingerprint()
    with pytest.raises(MessageFormatError, match=problem) as caught:
        add_messages("ann", messages, resources=resources, policy="heuristic")
    assert "nothing was written" in str(caught.value) and "\n" not in str(caught.value)
    assert resources.store.snapshot("ann").fingerprint() == before


def test_huge_content_and_bad_names_are_refused_before_any_write(resources) -> None:
    huge = "x" * (resources.settings.max_message_chars + 1)
    with pytest.raises(InputTooLargeError, match="message 1"):
        add_messages("ann", [("user", "fine"), ("user", huge)], resources=resources, policy="heuristic")
    with pytest.raises(ValueError, match="invalid namespace"):
        add_messages("../bob", [("user", "hi")], resources=resources, policy="heuristic")
    with pytest.raises(MessageFormatError, match="session must be"):
        add_messages("ann", [("user", "hi")], session="a#b", resources=resources, policy="heuristic")
    assert resources.store.namespaces() == []


def test_the_async_twin(resources) -> None:
    report = asyncio.run(
        aadd_messages("ann", [("user", "I swim on Fridays.")], resources=resources, policy="heuristic")
    )
    assert report.added == 1 and _sessions(resources)


def _jsonl(path: Path, lines: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_jsonl_files_split_by_idle_gap_and_a_second_file_adds_its_sessions(resources, tmp_path, capsys) -> None:
    first = _jsonl(
        tmp_path / "monday.jsonl",
        [
            {"role": "user", "content": "I started pottery classes.", "timestamp": _at(0)},
            {"role": "assistant", "content": "Fun!", "timestamp": _at(1)},
            {"role": "user", "content": "The teacher is called Ines.", "timestamp": _at(200)},
        ],
    )
    second = _jsonl(
        tmp_path / "tuesday.jsonl",
        [
            {"role": "user", "content": "My first bowl cracked in the kiln."},
            {"role": "assistant", "content": "It happens to everyone."},
        ],
    )
    argv = ["--data-dir", str(resources.settings.data_dir), "--embeddings", "hashing", "ingest"]
    for path in (first, second, first):
        assert main([*argv, str(path), "-n", "pots", "--policy", "heuristic", "--quiet"]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert "0 sessions ingested, 2 already committed" in captured.out + captured.err  # the first file again: a no-op
    manifest = resources.store.manifest("pots")
    assert len(manifest.sessions) == 3  # monday's two sessions (a 199-minute pause) and tuesday's one
    texts = {t.text for t in resources.store.snapshot("pots").turns.values()}
    assert {"I started pottery classes.", "The teacher is called Ines.", "My first bowl cracked in the kiln."} <= texts
