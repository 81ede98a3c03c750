"""The installed distribution is one package, ``logicmap``: an application with its own ``tools.py``,
``graphs/`` and ``memory.py`` imports and runs LogicMap without a name clash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SAMPLE_PATH = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"

APP = textwrap.dedent(
    """
    import json
    import sys

    import graphs.orders          # the application's own package
    import memory                 # the application's own module
    import tools                  # the application's own module

    assert tools.WHOSE == "app" and memory.WHOSE == "app" and graphs.orders.WHOSE == "app"

    import logicmap
    from logicmap import LogicMapSettings, Resources, answer, create_memory_toolkit, ingest_conversation
    from logicmap.graphs.strategies.compass import graph as compass_graph

    assert tools.WHOSE == "app", "importing logicmap replaced the application's tools module"
    resources = Resources(settings=LogicMapSettings(data_dir=sys.argv[2], embedding_provider="hashing"))
    report = ingest_conversation(sys.argv[1], "app-user", resources=resources, policy="heuristic")
    result = answer("compass", "What is the name of Maya's dog?", "app-user", resources=resources, policy="heuristic")
    toolkit = create_memory_toolkit("app-user", store=resources.store, embeddings=resources.embeddings)
    found = next(t for t in toolkit if t.name == "search_events").invoke({"query": "dog"})
    print(json.dumps({
        "sessions": len(report.sessions),
        "answer": result.answer,
        "cited": result.cited_turns(10),
        "tools": sorted(t.name for t in toolkit),
        "found": str(found)[:200],
        "compass_nodes": sorted(compass_graph.get_graph().nodes),
        "package": logicmap.__file__,
    }))
    """
)


def _make_app(root: Path) -> Path:
    app = root / "app"
    (app / "graphs").mkdir(parents=True)
    (app / "graphs" / "__init__.py").write_text('WHOSE = "app"\n')
    (app / "graphs" / "orders.py").write_text('WHOSE = "app"\n')
    (app / "tools.py").write_text('WHOSE = "app"\n')
    (app / "memory.py").write_text('WHOSE = "app"\n')
    (app / "main.py").write_text(APP)
    return app


def test_an_application_with_its_own_tools_graphs_and_memory_uses_logicmap(tmp_path: Path) -> None:
    app = _make_app(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGICMAP_")}
    done = subprocess.run(
        [sys.executable, "main.py", str(SAMPLE_PATH), str(tmp_path / "memory")],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["sessions"] == 5
    assert out["answer"].strip()
    assert "D1:1" in out["cited"], "the answer does not cite the turn that names Maya's dog"
    assert {"search_events", "get_event", "get_neighbors"} <= set(out["tools"])
    assert "Biscuit" in out["found"] or "dog" in out["found"].lower()
    assert {"planner", "localize", "merge", "respond"} <= set(out["compass_nodes"])
    assert not out["package"].startswith(str(app))


@pytest.mark.parametrize("generic", ["graphs", "agents", "tools", "memory", "prompts", "studio", "evals"])
def test_nothing_generic_is_importable_at_top_level(tmp_path: Path, generic: str) -> None:
    """Outside the repository (no checkout on sys.path), only ``logicmap`` is installed."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import importlib.util, sys; sys.exit(importlib.util.find_spec({generic!r}) is not None)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONSAFEPATH": "1"},
    )
    assert done.returncode == 0, f"{generic!r} is importable at top level: {done.stdout}{done.stderr}"


def test_the_public_api_is_short_and_lazy() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, logicmap; print(sorted(logicmap.__all__)); "
            "print('logicmap.graphs.strategies.compass' in sys.modules, 'torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    names, loaded = done.stdout.strip().splitlines()
    for name in (
        "ingest_conversation",
        "answer",
        "create_memory_toolkit",
        "build_chatbot_graph",
        "LogicMapSettings",
        "AnswerResult",
        "Resources",
    ):
        assert name in names
    assert loaded == "False False", "import logicmap loaded graphs or a model"
