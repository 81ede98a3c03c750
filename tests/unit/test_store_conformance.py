"""One set of ``BaseStore`` assertions, run against LangGraph's ``InMemoryStore`` and ``LogicMapStore``.

Every test runs four times: each store, through the sync methods and through their async twins. What is asserted
is the interface (what is stored, found, filtered, paged, replaced, deleted and listed), not the ranking: a query
test asserts that the expected item comes back first among clearly different items, never its score.
InMemoryStore is given an index over the same hashing embedder LogicMap uses, so both answer queries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from logicmap.graphs.surfaces.basestore import LogicMapStore
from logicmap.memory.indexes.embeddings import make_embeddings
from tests.conftest import make_resources

ALICE, BOB = ("memories", "alice"), ("memories", "bob")


class Calls:
    """The store's methods, called sync or through their async twins (``asyncio.run`` per call)."""

    def __init__(self, store: BaseStore, mode: str) -> None:
        self.store, self.mode = store, mode

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.store, name)(*args, **kwargs)
        return asyncio.run(getattr(self.store, "a" + name)(*args, **kwargs))

    def put(self, *args: Any, **kwargs: Any) -> None:
        self._call("put", *args, **kwargs)

    def get(self, *args: Any) -> Any:
        return self._call("get", *args)

    def delete(self, *args: Any) -> None:
        self._call("delete", *args)

    def search(self, *args: Any, **kwargs: Any) -> list[Any]:
        return self._call("search", *args, **kwargs)

    def list_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        return self._call("list_namespaces", **kwargs)

    def batch(self, ops: list[Any]) -> list[Any]:
        return self.store.batch(ops) if self.mode == "sync" else asyncio.run(self.store.abatch(ops))


@pytest.fixture(params=["inmemory", "logicmap"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sync", "async"])
def calls(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Iterator[Calls]:
    res = make_resources(tmp_path / "memory")
    if kind == "inmemory":
        embedder = make_embeddings(res.settings)
        store: BaseStore = InMemoryStore(index={"dims": len(embedder.embed_query("x")), "embed": embedder})
    else:
        store = LogicMapStore(resources=res, policy="heuristic")
    yield Calls(store, str(request.param))
    if res.store_ is not None:
        res.store_.close()


def _keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


def test_put_then_get_returns_the_value_under_its_namespace(calls: Calls) -> None:
    calls.put(ALICE, "home", {"content": "Alice lives in Lisbon with her dog Biscuit."})
    item = calls.get(ALICE, "home")
    assert item is not None
    assert item.value == {"content": "Alice lives in Lisbon with her dog Biscuit."}
    assert tuple(item.namespace) == ALICE and item.key == "home"
    assert item.created_at is not None and item.updated_at is not None
    assert calls.get(ALICE, "missing") is None
    assert calls.get(BOB, "home") is None  # the same key in another namespace is another item


def test_a_json_value_without_text_round_trips_exactly(calls: Calls) -> None:
    value = {
        "name": "Alice",
        "age": 31,
        "tags": ["nurse", "runner"],
        "address": {"city": "Lisbon", "zip": "1100"},
        "active": True,
        "score": 0.5,
    }
    calls.put(ALICE, "profile", value)
    assert calls.get(ALICE, "profile").value == value


def test_put_on_an_existing_key_replaces_the_item_everywhere(calls: Calls) -> None:
    calls.put(ALICE, "home", {"content": "Alice lives in Lisbon near the zanzibar bakery."})
    calls.put(ALICE, "work", {"content": "Alice works night shifts at the hospital."})
    calls.put(ALICE, "home", {"content": "Alice moved to Porto last spring."})
    assert calls.get(ALICE, "home").value == {"content": "Alice moved to Porto last spring."}
    found = calls.search(ALICE, query="zanzibar bakery Lisbon", limit=10)
    assert sorted(_keys(found)) == ["home", "work"]  # one item per key
    assert all("zanzibar" not in str(i.value) for i in found)  # no stale copy is searchable
    assert all("zanzibar" not in str(i.value) for i in calls.search(ALICE, limit=10))


def test_delete_forgets_the_item(calls: Calls) -> None:
    calls.put(ALICE, "home", {"content": "Alice lives in Lisbon."})
    calls.put(ALICE, "work", {"content": "Alice is a nurse."})
    calls.delete(ALICE, "home")
    assert calls.get(ALICE, "home") is None
    assert _keys(calls.search(ALICE, limit=10)) == ["work"]
    assert _keys(calls.search(ALICE, query="Where does Alice live? Lisbon", limit=10)) == ["work"]
    calls.delete(ALICE, "never-stored")  # deleting a missing key is a no-op
    calls.put(ALICE, "home", {"content": "Alice lives in Faro now."})  # a deleted key can be used again
    assert calls.get(ALICE, "home").value == {"content": "Alice lives in Faro now."}


def test_search_with_a_query_finds_the_matching_item_first(calls: Calls) -> None:
    calls.put(ALICE, "home", {"content": "Alice lives in Lisbon with her dog Biscuit."})
    calls.put(ALICE, "bikes", {"content": "The shop repairs bicycles and sells helmets."})
    calls.put(ALICE, "report", {"content": "The quarterly budget report is due on Friday."})
    found = calls.search(ALICE, query="bicycles repairs helmets", limit=3)
    assert found and found[0].key == "bikes"
    assert {i.key for i in found} == {"home", "bikes", "report"}
    assert all(i.score is not None for i in found)
    assert calls.search(ALICE, query="budget report due Friday", limit=1)[0].key == "report"


def test_search_spans_the_namespaces_under_the_prefix_only(calls: Calls) -> None:
    calls.put(ALICE, "a", {"content": "Alice likes tea."})
    calls.put(BOB, "b", {"content": "Bob likes coffee."})
    calls.put(("notes", "alice"), "c", {"content": "A note about tea."})
    assert sorted(_keys(calls.search(("memories",), limit=10))) == ["a", "b"]
    assert _keys(calls.search(ALICE, limit=10)) == ["a"]
    assert _keys(calls.search(BOB, query="tea", limit=10)) == ["b"]
    assert sorted(_keys(calls.search((), limit=10))) == ["a", "b", "c"]
    assert [tuple(i.namespace) for i in calls.search(("notes",), limit=10)] == [("notes", "alice")]


def test_filters_compare_value_fields_like_langgraph(calls: Calls) -> None:
    people = {
        "ann": {"name": "Ann", "age": 25, "team": "red", "meta": {"level": 1}},
        "ben": {"name": "Ben", "age": 31, "team": "blue", "meta": {"level": 2}},
        "cy": {"name": "Cy", "age": 40, "team": "red", "meta": {"level": 3}},
    }
    for key, value in people.items():
        calls.put(ALICE, key, value)

    def keys(**filter_: Any) -> list[str]:
        return sorted(_keys(calls.search(ALICE, filter=filter_, limit=10)))

    assert keys(team="red") == ["ann", "cy"]
    assert keys(team={"$eq": "blue"}) == ["ben"]
    assert keys(team={"$ne": "red"}) == ["ben"]
    assert keys(age={"$gt": 31}) == ["cy"]
    assert keys(age={"$gte": 31}) == ["ben", "cy"]
    assert keys(age={"$lt": 31}) == ["ann"]
    assert keys(age={"$lte": 31}) == ["ann", "ben"]
    assert keys(age={"$gt": 24, "$lt": 40}) == ["ann", "ben"]
    assert keys(team="red", age={"$gt": 30}) == ["cy"]
    assert keys(meta={"level": 2}) == ["ben"]
    assert keys(team="green") == []
    found = calls.search(ALICE, query="Cy red", filter={"team": "red"}, limit=10)
    assert sorted(_keys(found)) == ["ann", "cy"]


def test_limit_and_offset_page_through_every_item_once(calls: Calls) -> None:
    for n in range(5):
        calls.put(ALICE, f"k{n}", {"content": f"Note number {n} about the garden.", "n": n})
    pages = [_keys(calls.search(ALICE, limit=2, offset=offset)) for offset in (0, 2, 4)]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sorted(k for p in pages for k in p) == [f"k{n}" for n in range(5)]
    assert calls.search(ALICE, limit=2, offset=10) == []
    queried = [_keys(calls.search(ALICE, query="garden note", limit=2, offset=o)) for o in (0, 2, 4)]
    assert sorted(k for p in queried for k in p) == [f"k{n}" for n in range(5)]


def test_list_namespaces_honours_prefix_suffix_depth_limit_and_offset(calls: Calls) -> None:
    for ns in [("memories", "alice"), ("memories", "bob"), ("memories", "bob", "notes"), ("docs", "alice", "notes")]:
        calls.put(ns, "k", {"content": f"something in {'/'.join(ns)}"})
    assert calls.list_namespaces() == sorted(
        [("docs", "alice", "notes"), ("memories", "alice"), ("memories", "bob"), ("memories", "bob", "notes")]
    )
    assert calls.list_namespaces(prefix=("memories",)) == [
        ("memories", "alice"),
        ("memories", "bob"),
        ("memories", "bob", "notes"),
    ]
    assert calls.list_namespaces(suffix=("notes",)) == [("docs", "alice", "notes"), ("memories", "bob", "notes")]
    assert calls.list_namespaces(prefix=("*", "alice")) == [("docs", "alice", "notes"), ("memories", "alice")]
    assert calls.list_namespaces(max_depth=1) == [("docs",), ("memories",)]
    assert calls.list_namespaces(prefix=("memories",), max_depth=2) == [("memories", "alice"), ("memories", "bob")]
    assert calls.list_namespaces(limit=2) == [("docs", "alice", "notes"), ("memories", "alice")]
    assert calls.list_namespaces(limit=2, offset=2) == [("memories", "bob"), ("memories", "bob", "notes")]


def test_batch_reads_see_memory_as_before_the_batch_writes(calls: Calls) -> None:
    calls.put(ALICE, "old", {"content": "Alice's old note."})
    results = calls.batch(
        [
            PutOp(ALICE, "new", {"content": "Alice's new note."}),
            GetOp(ALICE, "old"),
            SearchOp(ALICE, limit=10),
            PutOp(ALICE, "old", None),
        ]
    )
    assert results[0] is None and results[3] is None
    assert results[1].value == {"content": "Alice's old note."}
    assert _keys(results[2]) == ["old"]
    assert calls.get(ALICE, "old") is None
    assert calls.get(ALICE, "new").value == {"content": "Alice's new note."}
