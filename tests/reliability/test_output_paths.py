"""Output paths the CLI cannot write (an existing directory, a path under a file, a full device, a name too long):
one line naming the path and the problem, exit 2, never a traceback.

The cases are generated (seeded) over the commands that write a file the user names (``graph --out``, HTML and
PNG, and ``export``) and the kinds of unwritable path; the file system errors are real.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.cli import main

SEED = 3209
CASES = 24
KINDS = ("existing-directory", "directory-with-slash", "under-a-file", "full-device", "name-too-long")
# export writes beside its path and renames over it: it gets a FIFO of its own, never the machine's /dev/full


def _path(kind: str, tmp: Path, rng: random.Random, suffix: str) -> tuple[str, str]:
    """The path to give, and the part of it the error must name."""
    stem = "".join(rng.choice("abcdefghij-_") for _ in range(rng.randint(1, 12)))
    if kind in ("existing-directory", "directory-with-slash"):
        directory = tmp / f"{stem}{suffix}"
        directory.mkdir(exist_ok=True)
        (directory / "keep.txt").write_text("kept")
        return (f"{directory}/" if kind == "directory-with-slash" else str(directory)), str(directory)
    if kind == "under-a-file":
        blocker = tmp / f"{stem}.txt"
        blocker.write_text("a file, not a directory")
        return str(blocker / f"graph{suffix}"), str(blocker)
    if kind == "full-device" and suffix != ".jsonl":
        return "/dev/full", "/dev/full"  # a real ENOSPC on write
    if kind == "full-device":  # export: a special file it must not replace
        fifo = tmp / f"{stem}.fifo"
        os.mkfifo(fifo)
        return str(fifo), str(fifo)
    name = "n" * rng.randint(256, 400) + suffix
    return str(tmp / name), name[:40]


@pytest.mark.slow
def test_unwritable_output_paths_are_one_line_errors(
    sample_memory: Resources, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(SEED)
    data_dir = str(sample_memory.settings.data_dir)
    counts: Counter[str] = Counter()
    failures = []
    for i in range(CASES):
        kind = KINDS[i % len(KINDS)]
        command = rng.choice(["graph-html", "graph-html", "graph-png", "export"])
        suffix = {"graph-html": ".html", "graph-png": ".png", "export": ".jsonl"}[command]
        (tmp_path / f"case-{i}").mkdir()
        path, named = _path(kind, tmp_path / f"case-{i}", rng, suffix)
        argv = (
            ["graph", "-n", "sample", "--out", path]
            if command.startswith("graph")
            else ["export", "-n", "sample", path, "--quiet"]
        )
        code = main(["--data-dir", data_dir, "--embeddings", "hashing", *argv])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        counts["tried"] += 1
        if (
            code == 2
            and len(err) == 1
            and err[0].startswith("error: ")
            and named in err[0]
            and "Traceback" not in err[0]
        ):
            counts["passed"] += 1
        else:
            failures.append(f"{command} {kind} {path[:80]}: exit {code}, stderr {err[-3:]}")
        if kind in ("existing-directory", "directory-with-slash"):
            assert (Path(named) / "keep.txt").read_text() == "kept"  # the directory's content is untouched
        assert Path("/dev/full").is_char_device()
    print(f"unwritable output paths: {dict(counts)}")
    assert not failures, "\n".join(failures)
