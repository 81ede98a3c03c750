"""No merge-conflict markers in any file git tracks.

Markers once sat inside ``graphs/__init__.py``'s docstring, where Python, ruff and mypy all read them as text. A
marker is a line that starts with ``<<<<<<< `` or ``>>>>>>> ``, or is ``=======`` alone (a Markdown or reST heading
underline must therefore not be exactly seven ``=``). Binary files (a NUL byte, or not UTF-8) are not read. The test
is skipped where the package is not a git checkout (an installed copy has no ``git ls-files``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import logicmap

ROOT = Path(logicmap.__file__).resolve().parent
MARKER = re.compile(r"^(?:<{7} |>{7} |={7}$)")


def conflict_lines(text: str) -> list[int]:
    """The 1-based numbers of the lines of ``text`` that are merge-conflict markers."""
    return [number for number, line in enumerate(text.splitlines(), start=1) if MARKER.match(line)]


def _tracked_files() -> list[Path]:
    """The files git tracks in the repository whose root is the package's folder (skips the test otherwise)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    top = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != ROOT:
        pytest.skip(f"{ROOT} is not a git checkout")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
    return [ROOT / name for name in listed.stdout.decode().split("\0") if name]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file (or one deleted but not yet staged)."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_tracked_file_holds_a_merge_conflict_marker() -> None:
    files = _tracked_files()
    assert files, "git ls-files listed nothing"
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in files
        if (text := _text(path)) is not None
        for line in conflict_lines(text)
    ]
    assert not found, "merge-conflict markers (resolve the conflict):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\n" + "<" * 7 + " HEAD\nours\n" + "=" * 7 + "\ntheirs\n" + ">" * 7 + " main\n", [2, 4, 6]),
        ("Title\n" + "=" * 5 + "\n" + "=" * 8 + "\n", []),  # heading underlines of another length
        ("x = '" + "<" * 7 + " '\n    " + "=" * 7 + "\n" + "=" * 7 + " x\n", []),  # not at a line's start, or not alone
        ("CRLF\r\n" + "=" * 7 + "\r\n", [2]),
    ],
    ids=["conflict", "headings", "not-markers", "crlf"],
)
def test_conflict_lines_finds_the_three_markers_only(text: str, expected: list[int]) -> None:
    assert conflict_lines(text) == expected
