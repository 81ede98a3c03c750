"""Resolving a run's namespace: a name, a template filled from ``configurable``, never a silent default."""

from __future__ import annotations

import random
import string

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from logicmap.graphs.runtime.resources import run_namespace
from logicmap.memory.runtime.tenancy import NamespaceRequiredError, resolve_namespace


def test_a_plain_name_a_template_and_configurable_namespace() -> None:
    assert resolve_namespace("acme") == "acme"
    assert resolve_namespace("{user_id}", {"user_id": "bob"}) == "bob"
    assert resolve_namespace("acme-{user_id}", {"user_id": 42}) == "acme-42"
    assert resolve_namespace(None, {"namespace": "team.alpha"}) == "team.alpha"
    assert resolve_namespace("", {"namespace": "x"}) == "x"


def test_a_run_without_a_namespace_is_a_typed_error() -> None:
    with pytest.raises(NamespaceRequiredError, match="names no namespace"):
        resolve_namespace(None, {})
    with pytest.raises(NamespaceRequiredError, match="user_id"):
        resolve_namespace("{user_id}", {"thread_id": "t"})
    assert issubclass(NamespaceRequiredError, ValueError)


@pytest.mark.parametrize("bad", ["{0}", "{a.b}", "{a[0]}", "{", "x}"])
def test_templates_only_name_plain_fields(bad: str) -> None:
    with pytest.raises(ValueError):
        resolve_namespace(bad, {"a": "v", "0": "v"})


def test_untrusted_template_values_stay_one_segment() -> None:
    rng = random.Random(17)
    hostile = ["bob.evil", "../x", "a b", "x\n", "", "-x", "é", "a" * 65, True, 1.5, ["a"], "acme.bob", "a:b", "a@b"]
    hostile += ["".join(rng.choice(string.printable) for _ in range(rng.randint(1, 20))) for _ in range(60)]
    rejected = 0
    for value in hostile:
        ok = (
            isinstance(value, str | int)
            and not isinstance(value, bool)
            and value != ""
            and all(c.isascii() and (c.isalnum() or c in "_-") for c in str(value))
            and str(value)[0].isalnum()
            and len(str(value)) <= 64
        )
        if ok:
            assert resolve_namespace("t-{user_id}", {"user_id": value}) == f"t-{value}"
            continue
        rejected += 1
        with pytest.raises(ValueError):
            resolve_namespace("t-{user_id}", {"user_id": value})
    assert rejected >= 14


class _State(TypedDict, total=False):
    namespace: str


def _node(state: _State) -> dict:
    return {"namespace": run_namespace("{user_id}")}


def test_run_namespace_reads_the_running_graphs_configurable() -> None:
    builder = StateGraph(_State)
    builder.add_node("n", _node)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    graph = builder.compile()
    assert graph.invoke({}, config={"configurable": {"user_id": "carol"}})["namespace"] == "carol"
    with pytest.raises(NamespaceRequiredError):
        graph.invoke({}, config={"configurable": {}})
