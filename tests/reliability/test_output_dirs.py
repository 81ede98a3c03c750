"""``graph``, ``export``, ``eval`` and ``demo`` write only into directories that exist: a missing (or non-directory)
parent is refused with one line, exit 2, and nothing is created anywhere.

Generated cases (seeded): output paths whose parent is missing at a random depth, or is a regular file, for each
command; then the same file names in an existing directory are written.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from logicmap.__main__ import main
from logicmap.graphs.runtime.resources import Resources
from tests.reliability.support import SAMPLE

CASES = 24
TALLY: Counter[str] = Counter()


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _command(kind: str, out: Path, data_dir: str) -> list[str]:
    common = ["--data-dir", data_dir, "--embeddings", "hashing"]
    return {
        "graph": [*common, "graph", "-n", "sample", "--out", str(out)],
        "graph png": [*common, "graph", "-n", "sample", "--out", str(out.with_suffix(".png"))],
        "export": [*common, "export", "-n", "sample", str(out), "--quiet"],
        "eval": [
            *common,
            "eval",
            str(SAMPLE),
            "-s",
            "bm25",
            "--limit",
            "1",
            "--policy",
            "heuristic",
            "--out",
            str(out),
            "--quiet",
            "--no-langsmith",
        ],
        "demo": [*common, "demo", "--policy", "heuristic", "--limit", "1", "--out-dir", str(out)],
    }[kind]


@pytest.mark.parametrize("seed", range(CASES))
def test_an_output_into_a_missing_directory_is_refused_and_nothing_is_created(
    seed: int, sample_memory: Resources, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"outputs-{seed}")
    kind = rng.choice(["graph", "graph png", "export", "eval", "demo"])
    root = tmp_path / "area"
    root.mkdir()
    if rng.random() < 0.25:
        (root / "a-file").write_text("not a directory")
        parent, why = root / "a-file", "is not a directory"
    else:
        parent, why = root.joinpath(*[f"missing{i}" for i in range(rng.randint(1, 4))]), "does not exist"
    before = _tree(root)
    code = main(_command(kind, parent / "out.html", str(sample_memory.settings.data_dir)))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and why in err[0], err
    assert "nothing was written" in err[0]
    assert _tree(root) == before  # no directory made, no file written
    TALLY[f"{kind}: {why}"] += 1


@pytest.mark.parametrize("kind", ["graph", "export"])
def test_an_output_into_an_existing_directory_is_written(kind: str, sample_memory: Resources, tmp_path: Path) -> None:
    out = tmp_path / "out.html"
    assert main(_command(kind, out, str(sample_memory.settings.data_dir))) == 0
    assert out.stat().st_size > 0


def test_the_generated_cases_covered_every_command(request: pytest.FixtureRequest) -> None:
    if request.config.option.keyword or sum(TALLY.values()) < CASES:
        pytest.skip("only meaningful after the whole module ran")
    print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.items())))
    assert {k.split(":")[0] for k in TALLY} == {"graph", "graph png", "export", "eval", "demo"}
