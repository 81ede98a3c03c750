"""Layering: which layer may import which, and no import cycles between modules.

Every module of the ``logicmap`` package is parsed with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

import logicmap

ROOT = Path(logicmap.__file__).resolve().parent
PACKAGE = "logicmap"

# Layer -> the layers it must not import (memory knows nothing of agents/graphs and has no LLM; agents use
# memory and prompts; graphs compose agents; tools use memory only; evals sits on top and nothing below imports it).
FORBIDDEN: dict[str, frozenset[str]] = {
    "memory": frozenset({"agents", "graphs", "tools", "evals", "prompts"}),
    "agents": frozenset({"graphs", "tools", "evals"}),
    "tools": frozenset({"agents", "graphs", "evals"}),
    "graphs": frozenset({"evals"}),
    "prompts": frozenset({"agents", "graphs", "tools", "evals"}),
}

# The program (``python -m logicmap``, the ``logicmap`` script) sits above every layer: no module of the package imports
# it (a benchmark that runs the command line imports ``evals.cli.main``, the program's one definition).
PROGRAM = "logicmap.__main__"

# Known violations, as (importing module, imported module). Empty now: when one has to be tolerated for a while,
# list it here with a comment saying why, and shrink the list as it gets fixed (a stale entry fails the test).
KNOWN_VIOLATIONS: frozenset[tuple[str, str]] = frozenset()


def _package_dirs(root: Path) -> Iterator[Path]:
    """The package's folders: the root and every folder below it with an ``__init__.py`` (not tests, data, venvs)."""
    yield root
    for child in sorted(root.iterdir()):
        if child.is_dir() and (child / "__init__.py").exists():
            yield from _package_dirs(child)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in _package_dirs(ROOT):
        for path in sorted(folder.glob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([PACKAGE, *parts])] = path
    return found


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in MODULES.items()}
ROOT_LAYERS = {path.name for path in _package_dirs(ROOT) if path != ROOT}


def _resolve(name: str) -> str | None:
    """The module of ours a dotted name lands in (``logicmap.a.b.Name`` -> ``logicmap.a.b``); None if not ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> list[str]:
    """The modules of ours an import statement loads (``from pkg import sub`` names the submodule)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = importer.split(".")
            if MODULES[importer].name != "__init__.py":
                anchor = anchor[:-1]
            anchor = anchor[: len(anchor) - node.level + 1]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
    return [t for t in (_resolve(n) for n in names) if t is not None and t != importer]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(body: list[ast.stmt], importer: str) -> Iterator[str]:
    """Imports that run when the module is imported: not inside functions or classes, not under ``TYPE_CHECKING``."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _targets(node, importer)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body, importer)
            yield from _module_level_imports(node.orelse, importer)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level_imports(block, importer)
        elif isinstance(node, ast.With):
            yield from _module_level_imports(node.body, importer)


def _all_imports(importer: str) -> Iterator[tuple[int, str]]:
    """Every import statement anywhere in the module (lazy ones in functions and ``TYPE_CHECKING`` ones too)."""
    for node in ast.walk(TREES[importer]):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(node, importer):
                yield node.lineno, target


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOT_LAYERS else None


def _cycles(graph: nx.DiGraph) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module, as a readable path."""
    found = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            edges = nx.find_cycle(graph.subgraph(component))
            found.append([a for a, _ in edges] + [edges[0][0]])
    return sorted(found)


def test_the_package_was_found() -> None:
    assert {
        "logicmap",
        PROGRAM,
        "logicmap.memory.store",
        "logicmap.graphs.surfaces.cli",
        "logicmap.evals.runner",
    } <= set(MODULES)
    assert set(FORBIDDEN) <= ROOT_LAYERS


def layer_violations() -> set[tuple[str, str, int]]:
    """(importer, imported, line) for every import a layer must not make.

    Lazy imports inside functions count too: a function-level ``import logicmap.evals`` in graphs still makes graphs
    depend on evals (the one such import, graphs.cli's eval commands, moved to evals.cli). Importing ``PROGRAM``
    is an arrow up from any layer (the last one, a benchmark's, now imports ``evals.cli.main``).
    """
    found = set()
    for module in MODULES:
        banned = FORBIDDEN.get(_layer(module) or "", frozenset())
        for line, target in _all_imports(module):
            if _layer(target) in banned or target == PROGRAM:
                found.add((module, target, line))
    return found


def test_no_layer_imports_a_layer_above_it() -> None:
    found = {v for v in layer_violations() if (v[0], v[1]) not in KNOWN_VIOLATIONS}
    assert not found, "layer rule broken:\n" + "\n".join(f"{a}:{n} imports {b}" for a, b, n in sorted(found))


def test_the_known_violations_still_exist() -> None:
    """A fixed violation leaves the allowlist, so the list only shrinks."""
    current = {(a, b) for a, b, _ in layer_violations()}
    assert not KNOWN_VIOLATIONS - current, f"fixed, remove from KNOWN_VIOLATIONS: {sorted(KNOWN_VIOLATIONS - current)}"


def test_no_import_cycles_between_modules() -> None:
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module in MODULES:
        graph.add_edges_from((module, target) for target in _module_level_imports(TREES[module].body, module))
    assert not _cycles(graph), "module-level import cycles:\n" + "\n".join(" -> ".join(c) for c in _cycles(graph))


def test_training_and_loco_do_not_reach_into_the_bench_scripts() -> None:
    """The bench scripts print numbers; what training (evals.train) and evals.loco share with them (the machine line,
    fresh resources, tables) lives in ``evals.common``, so they import nothing from ``evals.bench``."""
    users = [m for m in MODULES if m.startswith(("logicmap.evals.train", "logicmap.evals.loco"))]
    assert "logicmap.evals.loco" in users and "logicmap.evals.train.turn_ranker" in users
    found = sorted(
        f"{m}:{n} imports {t}" for m in users for n, t in _all_imports(m) if t.startswith("logicmap.evals.bench")
    )
    assert not found, "\n".join(found)


def test_evals_modules_form_no_cycle_even_through_lazy_imports() -> None:
    """evals is layered by job (specs, judge, records, runner, report, cli): report reads records, runner calls report."""
    graph = nx.DiGraph()
    evals = [m for m in MODULES if _layer(m) == "evals"]
    graph.add_nodes_from(evals)
    for module in evals:
        graph.add_edges_from((module, t) for _, t in _all_imports(module) if _layer(t) == "evals")
    assert not _cycles(graph), "import cycles in evals:\n" + "\n".join(" -> ".join(c) for c in _cycles(graph))


# Cycles that close only through an import inside a function (run when the function is called, not when the module
# is imported), as (importing module, imported module) of the lazy edge, each with why it stays lazy. A stale entry
# (no such lazy edge, or one no longer on a cycle) fails the test.
KNOWN_LAZY_CYCLE_EDGES: dict[tuple[str, str], str] = {}


def _lazy_cycle_graph() -> nx.DiGraph:
    """Every import of every module, lazy ones inside functions included, ``TYPE_CHECKING`` ones left out."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module in MODULES:
        eager = set(_module_level_imports(TREES[module].body, module))
        graph.add_edges_from((module, t, {"lazy": t not in eager}) for t in _runtime_imports(module))
    return graph


def _runtime_imports(importer: str) -> Iterator[str]:
    """The modules an import statement anywhere in the module loads when it runs (not under ``TYPE_CHECKING``),
    and those ``importlib.import_module("logicmap....")`` loads by a literal name."""
    skipped = {
        id(n)
        for node in ast.walk(TREES[importer])
        if isinstance(node, ast.If) and _is_type_checking(node.test)
        for n in ast.walk(node)
    }
    for node in ast.walk(TREES[importer]):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped:
            yield from _targets(node, importer)
        elif isinstance(node, ast.Call) and id(node) not in skipped and (name := _import_module_name(node)):
            target = _resolve(name)
            if target is not None and target != importer:
                yield target


def _import_module_name(call: ast.Call) -> str | None:
    """The literal module name of an ``importlib.import_module(...)`` / ``import_module(...)`` call, else None."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called != "import_module" or not call.args:
        return None
    first = call.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def test_no_import_cycles_even_through_lazy_imports() -> None:
    """A lazy import (inside a function) that closes a cycle hides it from the module-level check: two modules
    that need each other. Only the listed, deliberate ones may remain."""
    graph = _lazy_cycle_graph()
    allowed = set(KNOWN_LAZY_CYCLE_EDGES)
    graph.remove_edges_from(e for e in allowed if graph.has_edge(*e) and graph.edges[e]["lazy"])
    assert not _cycles(graph), "import cycles (lazy imports included):\n" + "\n".join(
        " -> ".join(c) for c in _cycles(graph)
    )
    full = _lazy_cycle_graph()
    on_cycle = {e for e in allowed if full.has_edge(*e) and nx.has_path(full, e[1], e[0])}
    assert on_cycle == allowed, f"stale, remove from KNOWN_LAZY_CYCLE_EDGES: {sorted(allowed - on_cycle)}"


def test_the_lazy_cycle_check_sees_imports_inside_functions() -> None:
    tree = ast.parse("def f():\n    from logicmap.graphs.ingest.redo import graph\n")
    names = [
        t
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for t in _targets(node, "logicmap.graphs.ingest.ingest")
    ]
    assert names == ["logicmap.graphs.ingest.redo"]


@pytest.mark.parametrize(
    "lazy",
    [
        "def _back():\n    from logicmap.graphs.ingest import ingest\n",
        "def _back():\n    from logicmap.graphs.ingest.ingest import ingest_conversation\n",
        "def _back():\n    import importlib\n    return importlib.import_module('logicmap.graphs.ingest.ingest')\n",
    ],
    ids=["from-package", "from-module", "import_module"],
)
def test_a_lazy_import_back_from_ingest_redo_to_ingest_is_caught(monkeypatch: pytest.MonkeyPatch, lazy: str) -> None:
    """Issue 30 item 3: the ingest graph runs the redo graph (``graphs.ingest.ingest`` imports ``graphs.ingest.redo``); a
    lazy import back, which once took ingest's private names, closes a cycle only the lazy check sees."""
    redo = "logicmap.graphs.ingest.redo"
    patched = ast.parse(MODULES[redo].read_text(encoding="utf-8") + "\n\n" + lazy)
    monkeypatch.setitem(TREES, redo, patched)
    assert "logicmap.graphs.ingest.ingest" not in set(
        _module_level_imports(patched.body, redo)
    )  # invisible at module level
    cycles = _cycles(_lazy_cycle_graph())
    assert any({"logicmap.graphs.ingest.ingest", redo} <= set(c) for c in cycles), cycles


def test_ingest_and_its_redo_do_not_import_each_other() -> None:
    """The shared pieces live in ``graphs.ingest.nodes``: neither it nor the redo graph imports ``graphs.ingest.ingest``,
    lazily or not, and ``graphs.ingest.ingest`` is the one that runs the redo graph."""
    for module in ("logicmap.graphs.ingest.redo", "logicmap.graphs.ingest.nodes"):
        assert "logicmap.graphs.ingest.ingest" not in set(_runtime_imports(module)), module
    assert "logicmap.graphs.ingest.redo" in set(_runtime_imports("logicmap.graphs.ingest.ingest"))


@pytest.mark.parametrize(
    ("source", "importer", "expected"),
    [
        ("from logicmap.evals.runner import run_eval\n", "logicmap.graphs.surfaces.cli", {"logicmap.evals.runner"}),
        ("from logicmap.evals import runner\n", "logicmap.graphs.surfaces.cli", {"logicmap.evals.runner"}),
        ("from ...memory.store import MemoryStore\n", "logicmap.graphs.surfaces.cli", {"logicmap.memory.store"}),
        ("import logicmap.memory.store as s\n", "logicmap.graphs.surfaces.cli", {"logicmap.memory.store"}),
        ("if TYPE_CHECKING:\n    import logicmap.evals.runner\n", "logicmap.graphs.surfaces.cli", set()),
        ("def f():\n    import logicmap.evals.runner\n", "logicmap.graphs.surfaces.cli", set()),
    ],
)
def test_module_level_imports_are_read_as_python_runs_them(source: str, importer: str, expected: set[str]) -> None:
    assert set(_module_level_imports(ast.parse(source).body, importer)) == expected


# A graph module reads like LangGraph's templates: module-level nodes and routers, a builder that only wires them.
MAX_GRAPH_FUNCTION_LINES = 60


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines after its signature and docstring (what the formatter's layout of a long signature, one
    parameter a line, does not change)."""
    body = function.body
    has_docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1
    first = body[1] if has_docstring else body[0]
    return int(function.end_lineno or first.lineno) - first.lineno + 1


@pytest.mark.parametrize("path", sorted((ROOT / "graphs").rglob("*.py")), ids=lambda p: p.name)
def test_graph_modules_have_short_module_level_functions(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    too_long = [
        f"{f.name} ({_body_lines(f)} lines)" for f in _functions(tree) if _body_lines(f) > MAX_GRAPH_FUNCTION_LINES
    ]
    nested = [
        f"{inner.name} in {outer.name}"
        for outer in _functions(tree)
        for inner in _functions(outer)
        if inner is not outer
    ]
    assert not too_long, f"{path.name}: functions longer than {MAX_GRAPH_FUNCTION_LINES} lines: {too_long}"
    assert not nested, f"{path.name}: nested functions (a node or helper must be module-level): {nested}"


# Rooms (sub-packages) of ``graphs`` and ``memory``: which room may not import which. In ``graphs``, ``runtime`` is
# the bottom (every run's plumbing), ingest needs nothing of the strategies, no strategy reaches for ingest, the write
# path, the chatbot or a surface, and only the surfaces sit above the chatbot. In ``memory``, ``retrieval`` is the top.
_GRAPH_ROOMS = ("graphs/strategies", "graphs/ingest", "graphs/writes", "graphs/chat", "graphs/surfaces")
_MEMORY_ROOMS = (
    "memory/store",
    "memory/records",
    "memory/indexes",
    "memory/language",
    "memory/files",
    "memory/runtime",
)
ROOM_RULES: dict[str, frozenset[str]] = {
    "graphs/runtime": frozenset(_GRAPH_ROOMS),
    "graphs/ingest": frozenset({"graphs/strategies", "graphs/chat", "graphs/surfaces"}),
    "graphs/strategies": frozenset({"graphs/ingest", "graphs/writes", "graphs/chat", "graphs/surfaces"}),
    "graphs/writes": frozenset({"graphs/strategies", "graphs/chat", "graphs/surfaces"}),
    "graphs/chat": frozenset({"graphs/surfaces"}),
    **{room: frozenset({"memory/retrieval"}) for room in _MEMORY_ROOMS},
}


def _room(module: str) -> str | None:
    parts = module.split(".")
    return f"{parts[1]}/{parts[2]}" if len(parts) > 3 and parts[1] in {"graphs", "memory"} else None


def test_rooms_import_only_the_rooms_they_may() -> None:
    """Issue 38 item 2: ``graphs`` and ``memory`` are grouped in rooms; ingest stops importing the strategies'
    plumbing (its context extends ``graphs.runtime.context.RunContext``)."""
    assert {
        "logicmap.graphs.ingest.nodes",
        "logicmap.graphs.runtime.context",
        "logicmap.memory.retrieval.query",
    } <= set(MODULES)
    assert {_room(m) for m in MODULES} - {None} == {*_GRAPH_ROOMS, "graphs/runtime", *_MEMORY_ROOMS, "memory/retrieval"}
    found = sorted(
        f"{m}:{n} imports {t}"
        for m in MODULES
        for n, t in _all_imports(m)
        if _room(t) in ROOM_RULES.get(_room(m) or "", frozenset())
    )
    assert not found, "room rule broken:\n" + "\n".join(found)


def test_graphs_and_memory_hold_rooms_not_modules() -> None:
    """Every module of ``graphs`` and ``memory`` sits in a room; the layer's folder holds only its ``__init__``."""
    flat = sorted(
        str(p.relative_to(ROOT))
        for layer in ("graphs", "memory")
        for p in (ROOT / layer).glob("*.py")
        if p.name != "__init__.py"
    )
    assert not flat, f"modules outside a room: {flat}"
