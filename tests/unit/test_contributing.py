"""docs/contributing.md's strategy recipe, followed as written: its toy strategy, saved as a module of a temporary
package and named in ``LOGICMAP_STRATEGIES``, runs through ``answer()``, the CLI and Studio's config check."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "contributing.md"
SAMPLE = ROOT / "data" / "sample_conversation.json"


def _toy_module() -> str:
    [block] = re.findall(r"^```python toy-strategy\n(.*?)^```", DOC.read_text(), flags=re.DOTALL | re.MULTILINE)
    return block


def test_the_toy_strategy_of_the_recipe_runs_through_answer_the_cli_and_studios_check(tmp_path: Path) -> None:
    package = tmp_path / "pkgs" / "toystrat"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "latest.py").write_text(_toy_module())
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGICMAP_")}
    env |= {
        "LOGICMAP_STRATEGIES": "latest=toystrat.latest:STRATEGY",
        "LOGICMAP_DATA_DIR": str(tmp_path / "memory"),
        "LOGICMAP_EMBEDDING_PROVIDER": "hashing",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path / "pkgs"), env.get("PYTHONPATH")) if p),
    }
    studio = json.loads((ROOT / "studio" / "langgraph.json").read_text())
    program = f"""
import json
from logicmap import answer, ingest_conversation
from logicmap.graphs.strategies.registry import STRATEGIES, studio_config_problems
from logicmap.graphs.chat.chatbot import StrategyName
from typing import get_args
ingest_conversation({str(SAMPLE)!r}, "maya", policy="heuristic")
result = answer("latest", "What did Maya say last?", "maya", policy="heuristic")
config = json.loads({json.dumps(json.dumps(studio))})
missing = studio_config_problems(config)
config["graphs"]["latest"] = {{"path": "toystrat.latest:graph"}}
from logicmap.memory.files.loaders import load_conversations
last = load_conversations({str(SAMPLE)!r})[0].sessions[-1].turns[-1]
print(json.dumps({{"last": [last.text, last.dia_id], "answer": result.answer, "cited": result.cited_turns(), "chatbot": "latest" in get_args(StrategyName),
                  "missing": missing, "served": studio_config_problems(config)}}))
"""
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert [out["answer"], out["cited"]] == [out["last"][0], [out["last"][1]]]  # the namespace's last turn
    assert out["chatbot"] is True
    assert out["missing"] == ["graphs.latest: expected path 'toystrat.latest:graph', found None"]
    assert out["served"] == []
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "logicmap",
            "ask",
            "What did Maya say last?",
            "-n",
            "maya",
            "-s",
            "latest",
            "--policy",
            "heuristic",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert out["answer"] in cli.stdout
