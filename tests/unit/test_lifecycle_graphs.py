"""The lifecycle graphs (forget, list_memories, delete_namespace) in process: the run's namespace only, audited."""

from __future__ import annotations

from typing import Any

import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.surfaces.lifecycle import LifecycleContext, delete_graph, forget_graph, list_graph
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.memory.store import UnknownMemoryError, UnknownNamespaceError


def _conversation(speaker: str, texts: list[str], prefix: str) -> Conversation:
    sessions = [
        Session(
            session_id=f"S{i}",
            timestamp=f"2024-05-0{i}T10:00:00",
            timestamp_text="",
            turns=[RawTurn(dia_id=f"{prefix}{i}:1", speaker=speaker, text=text)],
        )
        for i, text in enumerate(texts, start=1)
    ]
    return Conversation(conversation_id=speaker, speakers=[speaker], sessions=sessions)


def _ids(page: dict[str, Any]) -> list[str]:
    return [item["id"] for item in page["items"]]


def test_the_inputs_name_no_namespace() -> None:
    for graph in (forget_graph, list_graph, delete_graph):
        assert "namespace" not in graph.get_input_jsonschema()["properties"]
        assert "namespace" in graph.get_context_jsonschema()["properties"]


def test_forget_list_and_delete_act_on_the_runs_namespace_only(resources: Any) -> None:
    ingest_conversation(
        _conversation("Alice", ["My PIN is 4471.", "I like figs."], "A"),
        "alice",
        resources=resources,
        policy="heuristic",
    )
    ingest_conversation(_conversation("Bob", ["I keep bees."], "B"), "bob", resources=resources, policy="heuristic")
    alice = LifecycleContext(namespace="alice", resources=resources)
    bob = LifecycleContext(namespace="bob", resources=resources)
    assert _ids(list_graph.invoke({}, context=alice)["page"]) == ["A1:1", "A2:1"]
    # A namespace in the input is not the run's: dropped with the other unknown keys.
    out = list_graph.invoke({"namespace": "alice"}, context=bob)
    assert _ids(out["page"]) == ["B1:1"]
    with pytest.raises(UnknownMemoryError) as unknown:
        forget_graph.invoke({"turn_ids": ["A1:1"], "namespace": "alice"}, context=bob)
    assert "alice" not in str(unknown.value)
    done = forget_graph.invoke({"turn_ids": ["A1:1"], "purge": True}, context=alice)["forgotten"]
    assert done["removed"]["turns"] == 1 and done["purge"]["namespace"] == "alice"
    assert _ids(list_graph.invoke({}, context=alice)["page"]) == ["A2:1"]
    assert _ids(list_graph.invoke({}, context=bob)["page"]) == ["B1:1"]
    audit = resources.store.snapshot("alice").manifest.forgets
    assert [(a.surface, a.removed.get("turns")) for a in audit] == [("graph", 1)]
    with pytest.raises(ValueError, match="confirm"):
        delete_graph.invoke({"confirm": False}, context=bob)
    assert delete_graph.invoke({"confirm": True}, context=bob)["deleted"]["namespace"] == "bob"
    with pytest.raises(UnknownNamespaceError):
        list_graph.invoke({}, context=bob)
    assert _ids(list_graph.invoke({}, context=alice)["page"]) == ["A2:1"]


def test_on_the_server_the_deployments_template_names_the_tenant(tmp_path: Any) -> None:
    from logicmap.graphs.runtime.resources import Resources, set_default_resources, set_server_mode
    from logicmap.memory.runtime.tenancy import TenantOverrideError
    from logicmap.settings import LogicMapSettings

    res = Resources(
        settings=LogicMapSettings(
            data_dir=tmp_path / "m", embedding_provider="hashing", server_namespace="acme-{user_id}"
        )
    )
    ingest_conversation(
        _conversation("Alice", ["My PIN is 4471."], "A"), "acme-alice", resources=res, policy="heuristic"
    )
    ingest_conversation(_conversation("Bob", ["I keep bees."], "B"), "acme-bob", resources=res, policy="heuristic")
    set_default_resources(res)
    set_server_mode(True)
    try:
        alice = {"configurable": {"user_id": "alice"}}
        page = list_graph.invoke({}, config=alice, context={"resources": res})["page"]
        assert page["namespace"] == "acme-alice" and _ids(page) == ["A1:1"]
        for context in ({"namespace": "acme-bob", "resources": res}, {"namespace": "{user_id}", "resources": res}):
            with pytest.raises(TenantOverrideError):
                forget_graph.invoke({"turn_ids": ["B1:1"]}, config=alice, context=context)
        done = forget_graph.invoke({"turn_ids": ["A1:1"]}, config=alice, context={"resources": res})["forgotten"]
        assert done["namespace"] == "acme-alice"
        assert [a.surface for a in res.store.snapshot("acme-alice").manifest.forgets] == ["server"]
        assert _ids(
            list_graph.invoke({}, config={"configurable": {"user_id": "bob"}}, context={"resources": res})["page"]
        ) == ["B1:1"]
    finally:
        set_server_mode(False)
        set_default_resources(None)
        res.store.close()
