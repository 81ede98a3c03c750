"""Errors that point to the fix (issue 43, item 8), each held to its exact message: an email as a store label, a
namespace tuple where a name goes, chat messages in a ``.json`` file, a missing file. (A ``logicmap mcp`` that
cannot start telling its client why: ``tests/integration/test_mcp_server.py``.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from logicmap import LogicMapStore, answer
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.files.loaders import DataFormatError, load_conversations
from logicmap.memory.records.items import InvalidItemError

EMAIL_HINT = (
    "store namespace label 'alice@example.com' holds '.', which a LangGraph store refuses in a label: for a "
    "user id such as an email, replace its periods, e.g. 'alice@example:com' (user_id.replace('.', ':'))"
)


def test_an_email_as_a_store_label_is_told_how_to_write_it(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic")
    namespace = ("memories", "alice@example.com")
    for call in (
        lambda: store.put(namespace, "k", {"content": "I keep bees."}),
        lambda: store.get(namespace, "k"),
        lambda: store.search(namespace, query="bees"),
        lambda: store.delete(namespace, "k"),
        lambda: asyncio.run(store.aput(namespace, "k", {"content": "I keep bees."})),
        lambda: asyncio.run(store.asearch(namespace, query="bees")),
    ):
        with pytest.raises(InvalidItemError) as caught:
            call()
        assert str(caught.value) == EMAIL_HINT
    # the fix works: the label it suggests is one the store takes
    store.put(("memories", "alice@example:com"), "k", {"content": "I keep bees."})
    assert store.get(("memories", "alice@example:com"), "k") is not None


def test_a_namespace_tuple_passed_to_answer_is_told_its_name(ingested_sample: Resources) -> None:
    with pytest.raises(ValueError) as caught:
        answer("rerank", "Where does Maya live?", ("memories", "alice"), resources=ingested_sample)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "invalid namespace ('memories', 'alice'): a namespace is one string; pass "
        "'memories.alice' (the name LogicMapStore gives this namespace tuple)"
    )


MESSAGES_LINE = (
    "{path}: sample 'conv-0': field 'conversation': missing: this file holds chat messages "
    "({{role, content}}), not LoCoMo samples; write one message per line to a .jsonl file (logicmap "
    "ingest reads it), or pass the list to add_messages(namespace, messages) in Python"
)


@pytest.mark.parametrize(
    "content",
    [
        [{"role": "user", "content": "I moved to Porto."}, {"role": "assistant", "content": "Nice!"}],
        {"messages": [{"role": "user", "content": "I moved to Porto."}]},
    ],
)
def test_chat_messages_in_a_json_file_point_to_jsonl_and_add_messages(
    tmp_path: Path, content: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(content))
    with pytest.raises(DataFormatError) as caught:
        load_conversations(path)
    assert str(caught.value) == MESSAGES_LINE.format(path=path)
    assert main(["--data-dir", str(tmp_path / "memory"), "ingest", str(path), "-n", "ana"]) == 2
    assert capsys.readouterr().err == f"error: {MESSAGES_LINE.format(path=path)}\n"
    # what the line says works: the same messages, one per line in a .jsonl file
    jsonl = tmp_path / "chat.jsonl"
    messages = content if isinstance(content, list) else content["messages"]  # type: ignore[index]
    jsonl.write_text("".join(json.dumps(m) + "\n" for m in messages))
    assert [t.text for t in load_conversations(jsonl)[0].sessions[0].turns][0] == "I moved to Porto."


def test_a_missing_file_names_the_path_it_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataFormatError) as caught:
        load_conversations("data/sample_conversation.json")
    assert str(caught.value) == (
        f"data/sample_conversation.json: no such file: {tmp_path}/data/sample_conversation.json"
        f" (relative paths are resolved against {tmp_path})"
    )
    with pytest.raises(DataFormatError) as caught:
        load_conversations(tmp_path / "gone.json")
    assert str(caught.value) == f"{tmp_path}/gone.json: no such file"
