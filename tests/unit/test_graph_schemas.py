"""What a Studio user sees of each graph: an input of what they supply, an output of what a run returns, a
context form that explains every field; no internal state, no namespace in the input, policy ``auto``."""

from __future__ import annotations

from typing import Any

import pytest

from logicmap.graphs.ingest import ingest
from logicmap.graphs.strategies import compass, goalmem, r2, real, reconstruct

# graph module -> (input fields, required input fields, output fields that must be there)
GRAPHS: dict[str, tuple[Any, set[str], set[str], set[str]]] = {
    "compass": (compass, {"question", "question_date"}, {"question"}, {"answer", "evidence", "cost", "kept"}),
    "goalmem": (goalmem, {"question"}, {"question"}, {"answer", "evidence", "cost", "status"}),
    "real": (real, {"question", "question_date", "reference_time"}, {"question"}, {"answer", "evidence", "cost"}),
    "reconstruct": (reconstruct, {"question", "question_date"}, {"question"}, {"answer", "final", "active", "cost"}),
    "ingest": (ingest, {"path", "sessions"}, set(), {"namespace", "reports", "cost", "fallbacks"}),
    "r2": (r2, {"question", "question_date"}, {"question"}, {"answer", "evidence", "retrieved", "cost"}),
}


def _undescribed(schema: dict[str, Any]) -> list[str]:
    return [name for name, prop in schema.get("properties", {}).items() if not prop.get("description")]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_input_is_what_a_user_supplies_described_without_a_namespace(name: str) -> None:
    module, fields, required, _ = GRAPHS[name]
    schema = module.graph.get_input_jsonschema()
    assert set(schema["properties"]) == fields, "internal state leaks into the input"
    assert set(schema.get("required", [])) == required
    assert "namespace" not in schema["properties"], "the input must not override the run's tenant"
    assert not _undescribed(schema) and schema.get("description")


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_output_is_answer_evidence_and_cost_not_the_internal_state(name: str) -> None:
    module, _, _, wanted = GRAPHS[name]
    schema = module.graph.get_output_jsonschema()
    state_fields = set(module.builder.schemas[module.builder.state_schema])
    # A strategy's ``result``: the run's AnswerResult, built by the graph's final node (what answer() returns).
    wanted = wanted | ({"result"} if name != "ingest" else set())
    assert wanted <= set(schema["properties"]) and len(schema["properties"]) <= 8 < len(state_fields)
    assert not _undescribed(schema)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_context_form_describes_every_field_policy_auto_and_hides_objects(name: str) -> None:
    module = GRAPHS[name][0]
    schema = module.graph.get_context_jsonschema()
    props = schema["properties"]
    assert not _undescribed(schema), f"undescribed context fields: {_undescribed(schema)}"
    assert props["policy"]["default"] == "auto" and props["policy"]["enum"] == ["auto", "llm", "heuristic"]
    assert props["namespace"]["default"] is None and "{user_id}" in props["namespace"]["description"]
    assert "resources" not in props and "retriever" not in props
    # The shared fields (graphs.strategy.StrategyContext) lead the form: policy, then the tenant; resources is hidden.
    assert list(props)[:2] == ["policy", "namespace"]


@pytest.mark.parametrize("name", ["compass", "goalmem", "real", "reconstruct"])
def test_studio_runs_without_a_model_take_the_no_llm_path_with_no_fallbacks(name: str, ingested_sample) -> None:
    """A Studio run sends its context as a dict with the form's defaults: ``auto`` and no model = no LLM."""
    module = GRAPHS[name][0]
    assert ingested_sample.llm is None
    out = module.graph.invoke(
        {"question": "What is the name of Maya's dog?"}, context={"namespace": "sample", "resources": ingested_sample}
    )
    assert out["answer"] and out["cost"].llm_calls == 0
    assert not out.get("fallbacks"), [f.reason for f in out.get("fallbacks", [])]
