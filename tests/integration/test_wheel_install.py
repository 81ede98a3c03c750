"""The built wheel, installed (not editable) into a fresh virtual environment, runs where the reader is: ``logicmap
demo --no-llm`` and the README's first Python block from a temporary directory, with no repository in sight.

The fresh environment gets the wheel only (``--no-deps``, no index); its dependencies come from the project's
environment through a ``.pth`` line (a path, so the project's editable install is not loaded), which is what a
user's ``pip install logicmap`` would have put there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _first_readme_block() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.DOTALL | re.MULTILINE)
    return blocks[0]


def test_the_built_wheel_runs_the_demo_and_the_first_readme_block_from_anywhere(tmp_path: Path) -> None:
    dist, source = tmp_path / "dist", tmp_path / "source"  # built from a copy: no build/ left in the checkout
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    names = [n for n in tracked.decode().split("\0") if n and (ROOT / n).is_file()]
    if not names:
        pytest.skip("not a git checkout: the wheel is built from the tracked files")
    for name in names:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    [wheel] = list(dist.glob("logicmap-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOGICMAP_", "PYTHONPATH", "LANGSMITH_"))}
    env |= {"LOGICMAP_DATA_DIR": str(work / "memory"), "LOGICMAP_EMBEDDING_PROVIDER": "hashing", "HF_HUB_OFFLINE": "1"}
    where = subprocess.run(
        [str(python), "-c", "import logicmap; print(logicmap.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.returncode == 0 and str(venv) in where.stdout, (where.stdout, where.stderr[-1000:])
    demo = subprocess.run(
        [str(venv / "bin" / "logicmap"), "demo", "--no-llm", "--limit", "3"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "Part 1" in demo.stdout and "Traceback" not in demo.stderr
    readme = subprocess.run(
        [str(python), "-c", _first_readme_block()], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    assert readme.returncode == 0, readme.stderr[-3000:]
    assert re.search(r"\['D\d+:\d+'", readme.stdout), readme.stdout  # the answer's cited turns of the sample
