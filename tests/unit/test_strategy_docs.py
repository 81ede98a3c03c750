"""``docs/strategies.md`` is generated from the registry (``graphs/strategies/docs.py``): the committed page is exactly
what ``python -m logicmap.graphs.strategies.docs`` prints, and it names every strategy, variant and graph option."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from logicmap.graphs.strategies.docs import strategies_page
from logicmap.graphs.strategies.registry import STRATEGIES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "strategies.md"


def test_the_committed_page_is_what_the_command_prints() -> None:
    assert PAGE.read_text(encoding="utf-8") == strategies_page(), (
        "docs/strategies.md is stale: run `python -m logicmap.graphs.strategies.docs docs/strategies.md`"
    )


def test_the_page_names_every_strategy_variant_and_option() -> None:
    page = strategies_page()
    for strategy in STRATEGIES.values():
        assert f"| `{strategy.name}` |" in page
        assert all(f"`{strategy.name}:{v}`" in page for v in strategy.variants)
    assert "| `max_refinements` | `1` | Query refinements when subgoals stay unsatisfied. |" in page  # compass's


def test_the_command_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "strategies.md"
    done = subprocess.run(
        [sys.executable, "-m", "logicmap.graphs.strategies.docs", str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8") == strategies_page()
