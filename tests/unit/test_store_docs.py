"""The Python snippets of docs/store.md run as written (on a temporary directory, offline)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "store.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_page_has_a_snippet() -> None:
    assert SNIPPETS


@pytest.mark.parametrize("code", SNIPPETS)
def test_each_python_snippet_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(DOC), "exec"), {"__name__": "__docs__"})  # noqa: S102 - the page's own code
