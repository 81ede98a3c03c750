"""The ``AnswerResult`` is built by a final node of each strategy graph (``finish``): the graph's output ``result``,
as Studio and the API server show it, is exactly what Python's ``answer()`` returns (the wall time aside, each run
having its own), with the run's wall time stamped on its cost."""

from __future__ import annotations

from typing import Any

import pytest

from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import GRAPH_STRATEGIES, answer

QUESTION = "What is the name of Maya's dog?"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, sample: Any) -> Any:
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from tests.conftest import make_resources

    res = make_resources(tmp_path_factory.mktemp("result-node"))
    three = sample.model_copy(update={"sessions": sample.sessions[:3]})
    ingest_conversation(three, "maya", resources=res, policy="heuristic")
    ingest_conversation(three, "maya-r2", resources=res, policy="heuristic", memory_manager="r2")
    yield res
    res.store.close()


def _without_wall_time(result: Any) -> dict[str, Any]:
    found = result.model_dump(mode="json")
    found["cost"].pop("wall_time_s")
    return found


@pytest.mark.parametrize("name", sorted(GRAPH_STRATEGIES))
def test_the_graph_output_is_the_answer_result(memory: Resources, name: str) -> None:
    strategy = GRAPH_STRATEGIES[name]
    namespace = "maya-r2" if name == "r2" else "maya"
    python = answer(name, QUESTION, namespace, resources=memory, policy="heuristic")
    context = strategy.context(policy="heuristic", namespace=namespace, resources=memory)
    output = strategy.graph.invoke({"question": QUESTION}, context=context)  # as Studio runs it: the output schema
    assert set(output) <= set(strategy.output_schema.__annotations__)
    studio = output["result"]
    assert _without_wall_time(studio) == _without_wall_time(python)
    assert studio.answer == output["answer"] and studio.strategy == name and studio.namespace == namespace
    assert studio.cost.wall_time_s > 0 and python.cost.wall_time_s > 0  # the run's own, stamped as it ends
