"""logicmap.graphs.runtime.tracing: run names, tags and metadata for graph runs; nothing traced when tracing is off."""

from __future__ import annotations

from dataclasses import dataclass, field

from logicmap.agents.base import Cost
from logicmap.graphs.runtime.tracing import cost_metadata, role_trace, run_config, traced_run, tracing_enabled


@dataclass
class Budgets:
    max_steps: int = 3
    top_k: int = 5
    policy: str = "llm"
    weights: list[float] = field(default_factory=lambda: [0.5, 0.5])


def test_run_config_names_tags_and_flattens_budgets() -> None:
    config = run_config(
        "compass",
        namespace="alice",
        policy="heuristic",
        budgets=Budgets(),
        tags=["explorers:batch"],
        metadata={"question_len": 12},
        recursion_limit=40,
    )
    assert config["run_name"] == "compass"
    assert config["tags"] == ["strategy:compass", "policy:heuristic", "explorers:batch"]
    meta = config["metadata"]
    assert meta["strategy"] == "compass" and meta["namespace"] == "alice" and meta["question_len"] == 12
    assert meta["max_steps"] == 3 and meta["top_k"] == 5
    assert meta["weights"] == "[0.5, 0.5]"  # nested values become short strings
    assert config["recursion_limit"] == 40
    assert role_trace(config) == {"tags": config["tags"], "metadata": meta}


def test_the_hidden_resources_field_stays_out_of_the_metadata() -> None:
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.graphs.strategies.compass import CompassContext

    meta = run_config("compass", namespace="n", policy="llm", budgets=CompassContext(resources=Resources()))["metadata"]
    assert "resources" not in meta and meta["top_k"] == 5


def test_cost_metadata_is_flat_numbers() -> None:
    figures = cost_metadata(Cost(llm_calls=3, prompt_tokens=100, completion_tokens=20, wall_time_s=1.23456))
    assert figures == {
        "llm_calls": 3,
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "tokens_estimated": False,
        "wall_time_s": 1.235,
    }
    assert cost_metadata(None)["llm_calls"] == 0


def test_traced_run_with_tracing_off_creates_no_run() -> None:
    assert not tracing_enabled()  # tests/conftest.py unsets LANGSMITH_TRACING
    with traced_run("goalmem", namespace="n", policy="llm", inputs={"question": "q"}, budgets={"max_depth": 5}) as run:
        assert run.run_tree is None and run.run_id is None
        assert run.config["run_name"] == "goalmem" and run.config["metadata"]["max_depth"] == 5
        run.finish({"answer": "a"}, cost=Cost(llm_calls=1))  # a no-op, never raises
