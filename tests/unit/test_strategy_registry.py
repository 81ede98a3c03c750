"""The strategy registry (graphs.strategies): every list of strategies derives from it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import get_args, get_type_hints

from logicmap.graphs.chat.chatbot import StrategyName
from logicmap.graphs.strategies.forward import FORWARD_STRATEGIES
from logicmap.graphs.strategies.registry import GRAPH_STRATEGIES, STRATEGIES, strategy_function, studio_config_problems
from logicmap.graphs.strategies.strategy import AnswerOutput, QuestionInput, StrategyContext

STUDIO = Path(__file__).resolve().parents[2] / "studio" / "langgraph.json"
LIFECYCLE_GRAPHS = ("forget", "list_memories", "delete_namespace")  # graphs.lifecycle: not strategies


def test_studio_lists_every_graph_strategy_of_the_registry() -> None:
    config = json.loads(STUDIO.read_text())
    graphs = config["graphs"]
    listed = {
        name: entry["path"] for name, entry in graphs.items() if name not in ("ingest", "chatbot", *LIFECYCLE_GRAPHS)
    }
    expected = {name: f"logicmap.graphs.strategies.{name}:graph" for name, s in GRAPH_STRATEGIES.items()}
    assert listed == expected
    assert studio_config_problems(config) == []
    del graphs["real"]
    assert studio_config_problems(config) == [
        "graphs.real: expected path 'logicmap.graphs.strategies.real:graph', found None"
    ]


def test_importing_the_registry_loads_no_strategy_module() -> None:
    import subprocess
    import sys

    probe = (
        "import sys; import logicmap.graphs.strategies.registry as s; "
        "print(sorted(m for m in sys.modules if m in ('logicmap.graphs.strategies.compass', 'logicmap.graphs.strategies.goalmem', "
        "'logicmap.graphs.strategies.real', 'logicmap.graphs.strategies.reconstruct'))); s.STRATEGIES['real']; "
        "print('logicmap.graphs.strategies.real' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["[]", "True"], out.stdout


def test_the_chatbot_and_forward_lists_are_the_registry() -> None:
    assert list(get_args(StrategyName)) == list(STRATEGIES)
    assert all(STRATEGIES[name] is s for name, s in FORWARD_STRATEGIES.items())
    assert set(FORWARD_STRATEGIES) == {n for n in STRATEGIES if n.startswith("forward_")}


def test_graph_strategies_share_the_base_schemas() -> None:
    for name, s in GRAPH_STRATEGIES.items():
        assert issubclass(s.context, StrategyContext), name
        base = {f.name for f in dataclasses.fields(StrategyContext)}
        assert base <= {f.name for f in dataclasses.fields(s.context)}, name
        assert set(get_type_hints(AnswerOutput)) <= set(get_type_hints(s.output_schema)), name
        assert "question" in get_type_hints(s.input_schema), name
        assert s.graph.get_graph() is not None
        assert strategy_function(name) is s.run
    assert set(get_type_hints(QuestionInput)) == {"question", "question_date"}
    assert STRATEGIES["compass"].variants == (
        "traversal",
        "similarity",
        "faithful",
        "no-readings",
        "no-step-cap",
        "no-plan-starts",
        "dense",
    )
    assert STRATEGIES["goalmem"].variants == ("bm25", "dense", "events", "faithful")
    # every method of the papers has its paper's configuration (docs/fidelity.md)
    assert all("faithful" in STRATEGIES[name].variants for name in ("compass", "goalmem", "real", "reconstruct", "r2"))


def test_the_cli_names_are_the_registry() -> None:
    from logicmap.graphs.strategies.names import STRATEGY_NAMES

    assert STRATEGY_NAMES == tuple(STRATEGIES)
