"""Each layer package's docstring names every module of its layer, and no file cites a document the repository
does not have (issue 30: docs drift)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("memory", "agents", "graphs", "tools", "prompts", "evals", "studio")


def _packages() -> list[str]:
    """Every layer, and every room of ``graphs`` and ``memory`` (issue 38: their sub-packages), as a path relative to
    the root. ``memory/store`` is the storage port's package, with its own table."""
    rooms = [
        f"{layer}/{p.parent.name}"
        for layer in ("graphs", "memory")
        for p in sorted((ROOT / layer).glob("*/__init__.py"))
    ]
    return [*LAYERS, *(r for r in rooms if r != "memory/store")]


@pytest.mark.parametrize("layer", _packages())
def test_a_layer_docstring_lists_every_module(layer: str) -> None:
    package = ROOT / layer
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    modules = [f.stem for f in package.glob("*.py") if f.stem != "__init__"]
    modules += [d.name for d in package.iterdir() if d.is_dir() and (d / "__init__.py").exists()]
    missing = [m for m in modules if not re.search(rf"\b{re.escape(m)}\b", doc)]
    assert not missing, f"{layer}/__init__.py's docstring does not name: {missing}"


def test_no_file_cites_a_document_the_repository_lacks() -> None:
    cited: list[str] = []
    for path in [*ROOT.glob("*.md"), *ROOT.glob("*/**/*.py"), *ROOT.glob("*/**/*.md"), *ROOT.glob("*.py")]:
        if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        for name in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", path.read_text(encoding="utf-8", errors="replace")):
            if not any(ROOT.rglob(name)):
                cited.append(f"{path.relative_to(ROOT)}: {name}")
    assert not cited, cited
