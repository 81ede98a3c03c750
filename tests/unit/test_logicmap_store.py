"""What ``LogicMapStore`` adds to the ``BaseStore`` interface: memory the strategies navigate, forgetting through
``forget``, untrusted namespaces and keys, and LangGraph's ways to reach a store (``compile(store=...)``,
``get_store()``, ``runtime.store`` in a tool). The interface itself is ``test_store_conformance.py``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.store.base import PutOp
from typing_extensions import TypedDict

import logicmap
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import answer
from logicmap.graphs.surfaces.basestore import LogicMapStore
from logicmap.graphs.writes.forget import UnknownMemoryError, forget
from logicmap.memory.records.items import InvalidItemError, item_session_id
from tests.conftest import SAMPLE

ALICE, BOB = ("memories", "alice"), ("memories", "bob")


@pytest.fixture
def store(resources: Resources) -> LogicMapStore:
    return LogicMapStore(resources=resources, policy="heuristic", consolidation="sync")


def test_the_store_is_exported_lazily_from_the_package() -> None:
    assert logicmap.LogicMapStore is LogicMapStore


@pytest.mark.parametrize(
    "namespace",
    [("memories", "a.b"), ("memories", ""), ("mem ories",), ("x" * 200,), (), ("memories", "al/ice"), ("memories", 3)],
)
def test_a_namespace_that_cannot_map_is_one_clear_error(store: LogicMapStore, namespace: Any) -> None:
    with pytest.raises((InvalidItemError, ValueError)) as err:
        store.put(namespace, "k", {"content": "x"})
    assert "namespace" in str(err.value).lower()
    assert store.list_namespaces() == []  # nothing was written


@pytest.mark.parametrize("key", ["", "a\nb", "x" * 2000])
def test_a_key_the_store_cannot_hold_is_refused_before_anything_is_written(store: LogicMapStore, key: Any) -> None:
    with pytest.raises(InvalidItemError, match="key"):
        store.put(ALICE, key, {"content": "x"})
    assert store.list_namespaces() == []


def test_a_value_that_is_not_json_is_refused(store: LogicMapStore) -> None:
    with pytest.raises(InvalidItemError, match="JSON"):
        store.put(ALICE, "k", {"content": "x", "when": object()})
    with pytest.raises(InvalidItemError, match="JSON"):
        store.put(ALICE, "k", {"n": float("nan")})
    assert store.list_namespaces() == []


def _nested(levels: int, kind: str = "dict") -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value} if kind == "dict" else [value]
    return value


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: {"content": "x", "deep": _nested(3_000)}, "nested more than 100 levels deep"),
        (lambda: {"deep": _nested(100_000, "list")}, "nested more than 100 levels deep"),
        (lambda: {"content": "x", "deep": _nested(150)}, "nested more than 100 levels deep"),
        (lambda: {"content": "x" * 16_000_001}, "larger than 16,000,000 characters"),
        (lambda: {"content": "x", "many": ["ab"] * 4_000_001}, "larger than 16,000,000 characters"),
    ],
    ids=["dict-3000", "list-100000", "dict-150", "long-string", "wide-list"],
)
def test_a_value_too_deep_or_too_large_is_one_line_naming_the_limit(
    store: LogicMapStore, make: Any, problem: str
) -> None:
    value = make()
    with pytest.raises(InvalidItemError, match=problem) as err:
        store.put(ALICE, "k", value)
    assert "\n" not in str(err.value) and "logicmap.memory.runtime.input_limits" in str(err.value)
    assert store.list_namespaces() == []
    with pytest.raises(InvalidItemError, match=problem):  # a batch refuses it before any write as well
        store.batch([PutOp(ALICE, "k", value)])
    assert store.list_namespaces() == []


def test_a_value_at_the_depth_limit_is_stored_and_read_back_whole(store: LogicMapStore) -> None:
    value = {"content": "the deepest note I keep", "deep": _nested(99, "list")}  # 100 levels with the value itself
    store.put(ALICE, "deep", value)
    assert store.get(ALICE, "deep").value == value
    assert [i.key for i in store.search(ALICE, query="deepest note")] == ["deep"]


def test_keys_are_untrusted_and_never_cross_tenants(store: LogicMapStore, resources: Resources) -> None:
    hostile = ["../bob", "memories.bob", "kv-" + item_session_id("k")[3:], "turn:D1:1", "k", "ключ", "*"]
    for key in hostile:
        store.put(ALICE, key, {"content": f"alice secret under {key}"})
    store.put(BOB, "k", {"content": "bob's own note"})
    for key in hostile:
        assert store.get(ALICE, key).value == {"content": f"alice secret under {key}"}
    assert store.get(BOB, "k").value == {"content": "bob's own note"}
    assert [i.key for i in store.search(BOB, query="alice secret", limit=20)] == ["k"]
    store.delete(BOB, "k")
    assert store.get(ALICE, "k").value == {"content": "alice secret under k"}  # bob's delete stays in bob's memory
    assert all("alice" not in str(t.text) for t in resources.store.snapshot("memories.bob").turns.values())


def test_a_text_value_becomes_memory_the_strategies_navigate(store: LogicMapStore, resources: Resources) -> None:
    store.put(ALICE, "dog", {"content": "My golden retriever is called Biscuit and she loves the beach."})
    store.put(ALICE, "job", {"content": "I started a new job as a nurse at the city hospital."})
    snap = resources.store.snapshot("memories.alice")
    assert len(snap.events) >= 2  # built by the ingest graph: events cite the item's turn
    cited = {t for e in snap.events.values() for t in e.turn_ids}
    assert any(t.startswith(item_session_id("dog")) for t in cited)
    result = answer("rerank", "What is the name of my dog?", "memories.alice", resources=resources, policy="heuristic")
    assert "Biscuit" in result.answer or any("Biscuit" in e.text for e in result.evidence[:2])


def test_messages_become_one_turn_each_with_their_roles(store: LogicMapStore, resources: Resources) -> None:
    store.put(
        ALICE,
        "chat-1",
        {
            "messages": [
                HumanMessage("I moved to Porto in May."),
                AIMessage("Porto is lovely!"),
                {"role": "user", "content": "My sister lives there too."},
            ]
        },
    )
    turns = sorted(resources.store.snapshot("memories.alice").turns.values(), key=lambda t: t.position)
    assert [(t.speaker, t.text) for t in turns] == [
        ("user", "I moved to Porto in May."),
        ("assistant", "Porto is lovely!"),
        ("user", "My sister lives there too."),
    ]
    value = store.get(ALICE, "chat-1").value
    assert value["messages"][1] == {"role": "assistant", "content": "Porto is lovely!"}
    assert store.search(ALICE, query="sister Porto")[0].key == "chat-1"


def test_a_replacing_put_forgets_everything_derived_from_the_old_value(
    store: LogicMapStore, resources: Resources
) -> None:
    store.put(ALICE, "home", {"content": "I live on Quokka Street in Lisbon."})
    store.put(ALICE, "other", {"content": "I play the cello on Sundays."})
    store.put(ALICE, "home", {"content": "I live in Porto now."})
    snap = resources.store.snapshot("memories.alice")
    texts = [t.text for t in snap.turns.values()] + [e.summary for e in snap.events.values()]
    texts += [f.text for f in getattr(snap, "facts", {}).values() if hasattr(f, "text")]
    assert not [t for t in texts if "Quokka" in t]
    assert any("Porto" in t for t in texts) and any("cello" in t for t in texts)
    audit = snap.manifest.forgets[-1]
    assert audit.surface == "store" and audit.removed.get("turns") == 1


def test_delete_calls_forget_and_forget_takes_store_keys(store: LogicMapStore, resources: Resources) -> None:
    store.put(ALICE, "a", {"content": "I keep bees on my roof."})
    store.put(ALICE, "b", {"content": "I collect vinyl records."})
    report = forget("memories.alice", keys=["a"], resources=resources)
    assert report.removed.get("turns") == 1
    assert store.get(ALICE, "a") is None and store.get(ALICE, "b") is not None
    with pytest.raises(UnknownMemoryError) as err:
        forget("memories.alice", keys=["a"], resources=resources)
    assert str(err.value) == "namespace 'memories.alice' holds no such key; nothing was changed"
    store.put(BOB, "secret", {"content": "bob's"})
    with pytest.raises(UnknownMemoryError):  # another tenant's key reads exactly like an unknown one
        forget("memories.alice", keys=["secret"], resources=resources)
    store.delete(ALICE, "b")
    assert [a.surface for a in resources.store.snapshot("memories.alice").manifest.forgets] == ["python", "store"]


def test_the_command_line_forgets_a_store_key(
    store: LogicMapStore, resources: Resources, capsys: pytest.CaptureFixture[str]
) -> None:
    from logicmap.__main__ import main

    store.put(ALICE, "bees", {"content": "I keep bees on my roof."})
    store.put(ALICE, "vinyl", {"content": "I collect vinyl records."})
    store.put(BOB, "bees", {"content": "Bob keeps bees too."})
    resources.store.close()  # the CLI opens the data directory itself
    resources.store_ = None
    base = ["--data-dir", str(resources.settings.data_dir), "--embeddings", "hashing"]
    assert main([*base, "forget", "-n", "memories.alice", "--key", "bees", "--purge", "--yes"]) == 0
    assert "1 turns" in capsys.readouterr().out
    assert (
        main([*base, "forget", "-n", "memories.alice", "--key", "bees", "--yes"]) == 2
    )  # gone: nothing more to forget
    assert "no such key" in capsys.readouterr().err
    assert store.get(ALICE, "bees") is None and store.get(ALICE, "vinyl") is not None
    assert store.get(BOB, "bees") is not None  # the same key in another tenant is not touched
    assert [a.surface for a in resources.store.snapshot("memories.alice").manifest.forgets] == ["cli"]


def test_an_item_put_without_index_is_kept_but_not_ranked(store: LogicMapStore) -> None:
    store.put(ALICE, "shown", {"content": "Notes about the garden."})
    store.put(ALICE, "hidden", {"content": "Notes about the garden."}, index=False)
    found = store.search(ALICE, query="garden notes")
    assert [i.key for i in found] == ["shown", "hidden"] and found[1].score is None


def test_indexed_fields_are_what_a_value_is_searched_by(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic", index={"fields": ["title"]})
    store.put(ALICE, "a", {"title": "Sourdough starter feeding schedule", "body": "volcano"})
    store.put(ALICE, "b", {"title": "Volcano hiking gear list", "body": "sourdough"})
    store.put(ALICE, "c", {"title": "Tax forms", "body": "x"}, index=["body"])  # per put, like LangGraph
    assert store.search(ALICE, query="volcano hiking")[0].key == "b"
    assert store.search(ALICE, query="sourdough starter")[0].key == "a"
    store.flush()  # the committed turns (the background consolidator may not have reached them yet)
    texts = {t.text for t in resources.store.snapshot("memories.alice").turns.values()}
    assert texts == {"Sourdough starter feeding schedule", "Volcano hiking gear list", "x"}


def test_a_strategy_from_the_settings_ranks_search(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic", strategy="bm25")
    store.put(ALICE, "a", {"content": "The plumber fixed the kitchen sink."})
    store.put(ALICE, "b", {"content": "We hiked the volcano trail at dawn."})
    assert store.search(ALICE, query="volcano trail hike")[0].key == "b"
    with pytest.raises(ValueError, match="unknown strategy"):
        LogicMapStore(resources=resources, strategy="psychic")


class _State(TypedDict):
    messages: list[Any]
    recalled: list[str]


def test_compile_with_the_store_reaches_nodes_and_tools(store: LogicMapStore) -> None:
    """``compile(store=...)``: a node reads it through ``get_store()``, a tool through ``runtime.store``."""

    @tool
    def remember(text: str, runtime: ToolRuntime) -> str:
        """Remember a text."""
        user = runtime.config["configurable"]["user_id"]
        runtime.store.put(("memories", user), "t1", {"content": text})
        return "saved"

    def recall(state: _State) -> dict[str, Any]:
        found = get_store().search(("memories", "alice"), query="bicycle")
        return {"recalled": [i.value["content"] for i in found]}

    builder = StateGraph(_State)
    builder.add_node("tools", ToolNode([remember]))
    builder.add_node("recall", recall)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)
    call = AIMessage("", tool_calls=[{"name": "remember", "args": {"text": "I ride a red bicycle."}, "id": "c1"}])
    final = graph.invoke({"messages": [call], "recalled": []}, {"configurable": {"user_id": "alice"}})
    assert final["recalled"] == ["I ride a red bicycle."]
    again = asyncio.run(graph.ainvoke({"messages": [call], "recalled": []}, {"configurable": {"user_id": "alice"}}))
    assert again["recalled"] == ["I ride a red bicycle."]
    assert store.get(("memories", "bob"), "t1") is None


def test_search_without_memory_and_get_of_an_unknown_namespace_are_empty(store: LogicMapStore, tmp_path: Path) -> None:
    assert store.get(ALICE, "k") is None
    assert store.search(ALICE, query="anything") == []
    assert store.list_namespaces() == []
    store.delete(ALICE, "k")  # nothing to forget: no error, nothing created
    assert store.list_namespaces() == []


def test_the_array_filter_agrees_with_matches_on_every_item() -> None:
    """``ItemIndex.mask`` (a field at a time, numbers as arrays) against ``matches`` (one item at a time)."""
    from datetime import UTC, datetime

    import numpy as np

    from logicmap.memory.records.items import ItemIndex, StoredItem, matches

    values = [
        {"n": 3},
        {"n": 3.5},
        {"n": "4"},
        {"n": True},
        {"n": None},
        {},
        {"n": "x"},
        {"n": [1, 2]},
        {"n": {"a": 1}},
        {"n": -2, "t": "red"},
        {"n": 10, "t": "blue", "m": {"a": 1, "b": 2}},
    ]
    now = datetime.now(UTC)
    items = [StoredItem("ns", f"k{i}", v, now, now, "s", (f"t{i}",)) for i, v in enumerate(values)]
    index = ItemIndex(
        items=items,
        updated=np.zeros(len(items)),
        indexed=np.ones(len(items), dtype=bool),
        flat_turns=[f"t{i}" for i in range(len(items))],
        flat_items=np.arange(len(items)),
    )
    filters = [
        {"n": 3},
        {"n": {"$gt": 3}},
        {"n": {"$gte": "3.5"}},
        {"n": {"$lt": 0}},
        {"n": {"$lte": 4, "$gt": 1}},
        {"n": {"$ne": 3}},
        {"n": {"$eq": None}},
        {"n": [1, 2]},
        {"n": {"a": 1}},
        {"m": {"a": 1}},
        {"t": "red", "n": {"$lt": 0}},
        {"n": {"$gt": "x"}},
        {"missing": None},
        {},
    ]
    for f in filters:
        assert index.mask(f).tolist() == [matches(v, f) for v in values], f
    with pytest.raises(InvalidItemError, match="operator"):
        index.mask({"n": {"$in": [3]}})


def test_a_replacing_value_ingest_would_refuse_fails_before_the_old_item_is_forgotten(store: LogicMapStore) -> None:
    store.put(ALICE, "k", {"content": "I like tea."})
    with pytest.raises(ValueError, match="surrogate"):
        store.put(ALICE, "k", {"content": "broken \ud800 text"})
    assert store.get(ALICE, "k").value == {"content": "I like tea."}


# -- a messages value is a chat: add_messages' rules (issue 37 item 5) --------------------------------------

DISTRICT = [
    {"role": "user", "content": "Which district do I live in?"},
    {"role": "assistant", "content": "You probably live in Kreuzberg, the district by the canal."},
    {"role": "user", "content": "I adopted a cat named Pixel."},
]


def _chat_kinds(resources: Resources, namespace: str) -> list[tuple[str, str | None, bool, bool]]:
    turns = sorted(resources.store.snapshot(namespace).turns.values(), key=lambda t: t.position)
    return [(t.text, t.role, t.model_written, t.evidence) for t in turns]


def _district(store: LogicMapStore, resources: Resources, *, trusted: bool) -> None:
    store.put(ALICE, "chat", {"messages": DISTRICT})
    logicmap.add_messages("memories.carol", DISTRICT, resources=resources, policy="heuristic", trust_assistant=trusted)
    for strategy in ("rerank", "dense", "bm25"):
        result = answer(
            strategy, "Which district do I live in?", "memories.alice", resources=resources, policy="heuristic"
        )
        recalled = [e.text for e in result.evidence]
        assert any("Kreuzberg" in t for t in recalled) is trusted, (strategy, recalled)
        assert not [t for t in recalled if "Which district" in t], (strategy, recalled)  # a question is context
    kinds = _chat_kinds(resources, "memories.alice")
    assert kinds == _chat_kinds(resources, "memories.carol")  # one rule for both ways in
    assert [k[1:] for k in kinds] == [("user", False, False), ("assistant", True, trusted), ("user", False, True)]
    assert store.get(ALICE, "chat").value["messages"] == DISTRICT


def test_a_messages_value_keeps_the_rules_add_messages_keeps(store: LogicMapStore, resources: Resources) -> None:
    _district(store, resources, trusted=False)


def test_a_store_that_trusts_the_assistant_keeps_its_replies_as_evidence(resources: Resources) -> None:
    _district(LogicMapStore(resources=resources, policy="heuristic", trust_assistant=True), resources, trusted=True)


def test_a_messages_value_is_checked_like_add_messages(store: LogicMapStore, resources: Resources) -> None:
    with pytest.raises(InvalidItemError) as err:
        store.put(
            ALICE,
            "k",
            {"messages": [{"role": "user", "content": "I like tea."}, {"role": "narrator", "content": "She smiled."}]},
        )
    assert "\n" not in str(err.value) and "message 1: unknown role 'narrator'" in str(err.value)
    assert store.list_namespaces() == []  # nothing was written
    store.put(
        ALICE,
        "k",
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "I like tea."}]},
    )
    assert [k[0] for k in _chat_kinds(resources, "memories.alice")] == ["I like tea."]  # system: not conversation
    thread = [
        HumanMessage("I moved to Oslo."),
        AIMessage("", tool_calls=[{"name": "save", "args": {}, "id": "c1"}]),
        ToolMessage("saved", tool_call_id="c1"),
        AIMessage("Noted: Oslo."),
    ]  # an agent's thread
    store.put(ALICE, "thread", {"messages": thread})
    texts = [k[0] for k in _chat_kinds(resources, "memories.alice")]
    assert texts == ["I like tea.", "I moved to Oslo.", "Noted: Oslo."]  # the tool call and its result left out


# -- items and conversations in one namespace (issue 37 item 4; the generated mixes are ------------------
# -- tests/reliability/test_store_shared_namespace.py) ------------------------------------------------------


def test_an_item_an_older_put_left_under_a_tagged_id_is_read_replaced_and_deleted(
    store: LogicMapStore, resources: Resources
) -> None:
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import Conversation, RawTurn, Session
    from logicmap.memory.records.records import stable_hash

    logicmap.add_messages(
        "memories.alice", [{"role": "user", "content": "I live in Lisbon."}], resources=resources, policy="heuristic"
    )
    # What a put into this chat-made namespace stored before the fix: the key's session under a source tag.
    sid = item_session_id("home")
    item = {
        "key": "home",
        "value": {"content": "I keep bees in Sintra."},
        "created_at": "2026-01-02T00:00:00+00:00",
        "updated_at": "2026-01-02T00:00:00+00:00",
        "indexed": True,
    }
    old = Session(
        session_id=f"{sid}@{stable_hash('store', length=8)}",
        turns=[RawTurn(dia_id=f"{sid}:1", speaker="user", text="I keep bees in Sintra.", item=item)],
    )
    ingest_conversation(
        Conversation(conversation_id="old", sessions=[old]),
        "memories.alice",
        resources=resources,
        policy="heuristic",
        source="chat",
        append=True,
    )
    assert store.get(ALICE, "home").value == {"content": "I keep bees in Sintra."}
    store.put(ALICE, "home", {"content": "I keep goats in Porto."})
    texts = [t.text for t in resources.store.snapshot("memories.alice").turns.values()]
    assert "I keep bees in Sintra." not in texts and "I keep goats in Porto." in texts
    assert store.get(ALICE, "home").created_at.isoformat().startswith("2026-01-02")  # the item's, kept
    assert [i.key for i in store.search(ALICE)] == ["home"]
    store.delete(ALICE, "home")
    assert store.get(ALICE, "home") is None
    assert [t.text for t in resources.store.snapshot("memories.alice").turns.values()] == ["I live in Lisbon."]


def test_a_put_whose_id_a_session_without_its_item_holds_is_refused_in_one_line(
    store: LogicMapStore, resources: Resources
) -> None:
    store.put(
        ALICE,
        "m",
        {"messages": [{"role": "user", "content": "I like tea."}, {"role": "user", "content": "I like jazz."}]},
    )
    forget("memories.alice", turn_ids=[f"{item_session_id('m')}:1"], resources=resources)  # the item's own turn
    generation = resources.store.snapshot("memories.alice").generation
    with pytest.raises(InvalidItemError) as err:
        store.put(ALICE, "m", {"content": "I like coffee."})
    assert "\n" not in str(err.value) and "without its item" in str(err.value)
    assert resources.store.snapshot("memories.alice").generation == generation
    forget("memories.alice", session_ids=[item_session_id("m")], resources=resources)  # the way out it names
    store.put(ALICE, "m", {"content": "I like coffee."})
    assert store.get(ALICE, "m").value == {"content": "I like coffee."}


def test_a_replacing_put_keeps_the_cues_the_new_value_tags_again(store: LogicMapStore, resources: Resources) -> None:
    store.put(ALICE, "home", {"content": "My sister moved to Oslo last year."})
    store.put(ALICE, "home", {"content": "My sister moved to Rome last year."})
    snap = resources.store.snapshot("memories.alice")
    dangling = [(gid, tag.cue_id) for gid, tag in snap.tags.items() if tag.cue_id not in snap.cues]
    assert dangling == []  # before: the old value's cues were retired under the new value's tags
    assert "cue:rome" in snap.cues and not [c for c in snap.cues.values() if "oslo" in c.text.lower()]


def test_list_namespaces_shows_the_namespaces_that_hold_items_only(resources: Resources) -> None:
    """Issue 43 item 2: a conversation ingested from a file is not a store namespace (InMemoryStore lists only the
    namespaces its puts created); once an item is put there, it is."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    ingest_conversation(SAMPLE, "maya", resources=resources, policy="heuristic")
    store = LogicMapStore(resources=resources, policy="heuristic")
    store.put(("memories", "alice"), "home", {"content": "Alice lives in Porto."})
    assert store.list_namespaces() == [("memories", "alice")]
    store.put(("maya",), "note", {"content": "Maya's note."})
    assert store.list_namespaces() == [("maya",), ("memories", "alice")]
    assert resources.store.namespaces() == ["maya", "memories.alice"]


def test_the_stock_studio_config_serves_the_logicmap_store() -> None:
    config = json.loads((Path(__file__).resolve().parents[2] / "studio" / "langgraph.json").read_text())
    assert config["store"] == {"path": "logicmap.studio.store.generate_store"}
