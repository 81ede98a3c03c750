"""A run's namespace comes from its context or config, never from a silent default, and lands only there.

Generated cases: runs of every graph that name no namespace (typed error, nothing written anywhere), and
template/config combinations whose writes and reads stay in the resolved tenant; the toolkit per call.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from logicmap.graphs.ingest import ingest
from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.graphs.strategies import compass, goalmem, real, reconstruct
from logicmap.graphs.surfaces.cli import main as cli_main
from logicmap.memory.files.loaders import DataFormatError
from logicmap.memory.runtime.tenancy import NamespaceRequiredError
from logicmap.tools import ToolNamespaceError, ToolNamespaceRequiredError, create_memory_toolkit
from tests.conftest import make_resources
from tests.reliability.support import marked_conversation

ANSWERING = {"compass": compass, "goalmem": goalmem, "real": real, "reconstruct": reconstruct}
N_MISSING = 30
N_TEMPLATES = 12


def _missing_namespace_runs(rng: random.Random, n: int) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(graph, context without a usable namespace, configurable without the values it needs)."""
    cases = []
    for i in range(n):
        graph = rng.choice([*ANSWERING, "ingest"])
        configurable: dict[str, Any] = rng.choice([{}, {"thread_id": f"t{i}"}, {"namespace": ""}, {"user": "x"}])
        context: dict[str, Any] = rng.choice(
            [{}, {"namespace": None}, {"namespace": ""}, {"namespace": "{user_id}"}, {"namespace": "acme-{org}"}]
        )
        cases.append((graph, context, configurable))
    return cases


def test_runs_without_a_namespace_fail_typed_and_write_nowhere(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "memory")
    ingest_conversation(marked_conversation("kiwi", sessions=1), "kiwi", resources=res, policy="heuristic")
    before = sorted(res.store.namespaces())
    conv = marked_conversation("plum", sessions=1)
    failures = 0
    for graph, context, configurable in _missing_namespace_runs(random.Random(18), N_MISSING):
        module = ingest if graph == "ingest" else ANSWERING[graph]
        inputs = {"sessions": conv.sessions} if graph == "ingest" else {"question": "what did kiwi adopt?"}
        with pytest.raises(NamespaceRequiredError):
            module.graph.invoke(
                inputs, {"configurable": configurable}, context={**context, "policy": "heuristic", "resources": res}
            )
        failures += 1
    assert failures == N_MISSING
    assert sorted(res.store.namespaces()) == before == ["kiwi"], "a run without a namespace wrote somewhere"
    assert res.store.manifest("default").generation == 0


def _tenant_cases(rng: random.Random, n: int) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """(context, configurable, the namespace they resolve to): templates, fixed names, configurable alone."""
    cases = []
    for i in range(n):
        user = f"u{rng.randint(0, 10**6)}-{i}"
        kind = i % 3
        if kind == 0:
            cases.append(({"namespace": "{user_id}"}, {"user_id": user, "namespace": "decoy"}, user))
        elif kind == 1:
            cases.append(({"namespace": "acme-{user_id}"}, {"user_id": user, "thread_id": "t"}, f"acme-{user}"))
        else:
            cases.append(({}, {"namespace": user, "user_id": "decoy"}, user))
    return cases


def test_template_and_config_runs_land_only_in_the_resolved_tenant(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "memory")
    cases = _tenant_cases(random.Random(7), N_TEMPLATES)
    for i, (context, configurable, expected) in enumerate(cases):
        conv = marked_conversation(f"m{i}x", sessions=1, turns_per_session=3)
        out = ingest.graph.invoke(
            {"sessions": conv.sessions, "namespace": "decoy"},
            {"configurable": configurable},
            context={**context, "policy": "heuristic", "resources": res},
        )
        assert out["namespace"] == expected and [r.session_id for r in out["reports"]] == ["S1"]
    expected_all = sorted(expected for _, _, expected in cases)
    assert sorted(res.store.namespaces()) == expected_all, "an input or configurable decoy received writes"
    for i, (context, configurable, expected) in enumerate(cases):
        marker = f"m{i}x"
        out = compass.graph.invoke(
            {"question": f"what did {marker} adopt or visit?"},
            {"configurable": configurable},
            context={**context, "policy": "heuristic", "resources": res},
        )
        turns = {t for item in out["evidence"] for t in item.turn_ids}
        texts = [res.store.snapshot(expected).turns[t].text for t in turns]
        assert texts and all(marker in text for text in texts), "a read crossed into another tenant"


def test_the_python_api_passes_its_namespace_through_the_context(ingested_sample) -> None:
    for name, module in ANSWERING.items():
        result = module.answer("What is the name of Maya's dog?", "sample", resources=ingested_sample)
        assert result.namespace == "sample" and result.cost.llm_calls == 0 and not result.fallbacks, name
    context = IngestContext(namespace="{user_id}")  # the positional namespace wins over a context's template
    report = ingest_conversation(
        marked_conversation("fig", sessions=1),
        "fig",
        resources=make_resources(Path(ingested_sample.settings.data_dir).parent / "api"),
        context=context,
    )
    assert report.namespace == "fig" and report.sessions[0].events > 0


def test_toolkit_for_a_brand_new_user_with_writes_allowed(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "memory")

    def store_session(session, namespace):
        conv = marked_conversation("zz", sessions=0).model_copy(update={"sessions": [session]})
        return ingest_conversation(conv, namespace, resources=res, policy="heuristic")

    tools = {
        t.name: t
        for t in create_memory_toolkit("newbie", store=res.store, embeddings=res.embeddings, ingest=store_session)
    }
    found = tools["search_events"].invoke(
        {"type": "tool_call", "name": "search_events", "id": "1", "args": {"query": "bicycle"}}
    )
    assert isinstance(found, ToolMessage) and found.status != "error" and not found.artifact
    tools["remember"].invoke({"text": "I bought a red bicycle from Velo Cycles.", "when": "2024-05-02"})
    assert res.store.manifest("newbie").generation > 0
    found = tools["search_events"].invoke(
        {"type": "tool_call", "name": "search_events", "id": "2", "args": {"query": "red bicycle"}}
    )
    assert found.artifact and "bicycle" in found.content
    # Without writes an unknown namespace stays a clear error naming only itself.
    with pytest.raises(ToolNamespaceError) as err:
        create_memory_toolkit("ghost", store=res.store)
    assert "ghost" in str(err.value) and "newbie" not in str(err.value)


def test_toolkit_namespace_template_resolved_per_call(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "memory")
    for user in ("ana", "rui"):
        ingest_conversation(marked_conversation(user, sessions=1), f"team-{user}", resources=res, policy="heuristic")
    tools = {t.name: t for t in create_memory_toolkit("team-{user_id}", store=res.store, embeddings=res.embeddings)}
    rng = random.Random(3)
    for i in range(20):
        user = rng.choice(["ana", "rui"])
        out = tools["search_events"].invoke(
            {"type": "tool_call", "name": "search_events", "id": f"c{i}", "args": {"query": "note friend"}},
            {"configurable": {"user_id": user}},
        )
        other = "rui" if user == "ana" else "ana"
        assert out.artifact and user in out.content and other not in out.content
    with pytest.raises(ToolNamespaceRequiredError):
        tools["search_events"].invoke({"query": "x"}, {"configurable": {"thread_id": "t"}})
    with pytest.raises(ToolNamespaceError) as err:
        tools["search_events"].invoke({"query": "x"}, {"configurable": {"user_id": "nobody"}})
    assert "ana" not in str(err.value) and "rui" not in str(err.value)


def test_a_relative_input_path_names_the_directory_it_was_resolved_against(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    res = make_resources(tmp_path / "memory")
    with pytest.raises(DataFormatError, match=f"resolved against {tmp_path}"):
        ingest.graph.invoke({"path": "missing.json"}, context={"namespace": "n", "resources": res})
    assert cli_main(["--data-dir", str(tmp_path / "memory"), "ingest", "missing.json", "-n", "n"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"resolved against {tmp_path}" in err
