"""Tests use the storage port; only ``tests/chroma_internals.py`` knows the Chroma backend's internals.

A test reads and writes memory through ``StoragePort`` (snapshot, manifest, commit, purge, drop, query), so it runs
on any backend. The Chroma backend's own tests that must look at its collections or inject a fault between two of
its collection writes go through ``tests/chroma_internals.py``, the one module that names them. Here every other
test file is read (code, and Python scripts a test runs from a string) for what would reach past that module: a
private name of the Chroma store (``_collection``, ``_registry``, ``_snapshots``, ``_write``...: every one its class and
an opened store have), its Chroma ``client``, and the backend's base ``StoreCore``.
Tests open their stores through ``tests/store_seam.py`` (not by patching ``StoreCore``), which closes those a test
opened under its ``tmp_path`` when it ends.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.store_seam import close_stores_under, held_by_a_store, make_resources

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "chroma_internals.py"
PRIVATE = {"_collection", "_collections", "_registry"}  # the Chroma backend's collections and namespace registry
OWN = {"self", "cls"}  # a test's own object may have a ``client`` (a LangSmith client, say)


def chroma_private(directory: Path) -> frozenset[str]:
    """The Chroma store's private names: its methods' and those of the attributes of a store opened in
    ``directory`` (``_snapshots``, ``_write``, ``_kept``...), with ``PRIVATE``."""
    store = make_resources(directory).store
    try:
        names = set(dir(type(store))) | set(vars(store))
    finally:
        store.close()
    return frozenset(PRIVATE | {n for n in names if n.startswith("_") and not n.startswith("__")})


def reaches(source: str, where: str = "<test>", private: frozenset[str] = frozenset(PRIVATE)) -> list[str]:
    """Where ``source`` reaches into the Chroma backend's internals (``private``: the names that are):
    ``where:line: what``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [f"{where}:{node.lineno}: in a script: {hit}" for hit in _in_script(node.value, private)]
        elif (what := _private(node, private)) is not None:
            found.append(f"{where}:{getattr(node, 'lineno', '?')}: {what}")
    return found


def _private(node: ast.AST, private: frozenset[str]) -> str | None:
    """What of the Chroma backend's internals ``node`` names, if any."""
    if isinstance(node, ast.Attribute) and node.attr in private:
        own = isinstance(node.value, ast.Name) and node.value.id in OWN and node.attr not in PRIVATE
        return None if own else f"the store's {node.attr}"
    if isinstance(node, ast.Attribute) and node.attr == "client":
        own = isinstance(node.value, ast.Name) and node.value.id in OWN
        return None if own else "the store's Chroma client (.client)"
    named = (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else node.name.rsplit(".", 1)[-1]
        if isinstance(node, ast.alias)
        else None
    )
    if named == "StoreCore":
        return "StoreCore"
    if isinstance(node, ast.ImportFrom) and node.module == "logicmap.memory.store.core":
        return "logicmap.memory.store.core"
    return None


def _in_script(text: str, private: frozenset[str]) -> list[str]:
    """What a Python script held in a string (run by a test with ``python -c``) reaches into; prose is skipped."""
    if "\n" not in text.strip():
        return []
    try:
        return reaches(text, "script", private)
    except SyntaxError:
        return []


def test_no_test_file_but_the_helper_reaches_into_the_chroma_backend(tmp_path: Path) -> None:
    private = chroma_private(tmp_path / "memory")
    assert {"_snapshots", "_write", "_kept", "_collection"} <= private  # the store's own names were read
    files = sorted(p for p in TESTS.rglob("*.py") if p not in (HELPER, Path(__file__).resolve()))
    assert len(files) > 100  # the walk found the suite
    found = [hit for p in files for hit in reaches(p.read_text(encoding="utf-8"), str(p.relative_to(TESTS)), private)]
    assert not found, (
        "tests reach into the Chroma backend; use the storage port, or tests/chroma_internals.py "
        "for a Chroma-specific test:\n" + "\n".join(found)
    )


def test_the_check_sees_each_way_in_and_spares_what_is_not_the_store() -> None:
    caught = {
        'store._collection("ns", "meta").get()': "the store's _collection",
        "res.store._collections[key] = col": "the store's _collections",
        "store._registry().add(ids=[name])": "the store's _registry",
        "store.client.list_collections()": "the store's Chroma client (.client)",
        "from logicmap.memory.store.core import StoreCore": "StoreCore",
        "import logicmap.memory.store.core as core\ncore.StoreCore.__init__ = f": "StoreCore",
        'SCRIPT = """\nimport sys\nstore._collection(sys.argv[1], "meta")\n"""': "in a script: script:3: the store's",
    }
    for source, what in caught.items():
        hits = reaches(source)
        assert hits and any(what in hit for hit in hits), (source, hits)
    spared = [
        "self.client = langsmith.Client()\nrun(client=self.client)",
        "from mcp.client.streamable_http import streamable_http_client",
        "client = chromadb.HttpClient()\nclient.get_collection(name)",
        "def test_delete_namespace_removes_its_collections(): ...",
        'chroma.collection(store, "ns", "meta")',
        '"""A store keeps each _collection of a namespace (prose, not a script)."""',
    ]
    for source in spared:
        assert reaches(source) == [], source


def test_the_seam_closes_the_stores_opened_under_a_directory_and_only_those(tmp_path: Path) -> None:
    inside, outside = make_resources(tmp_path / "test" / "memory"), make_resources(tmp_path / "other")
    lazy = make_resources(tmp_path / "test" / "lazy")  # its store is never opened: nothing to close
    assert inside.store.namespaces() == [] and outside.store.namespaces() == []
    assert held_by_a_store(tmp_path / "test" / "memory") and held_by_a_store(tmp_path / "other")
    closed = close_stores_under((tmp_path / "test").resolve())
    assert closed == [inside.store_] and lazy.store_ is None
    assert not held_by_a_store(tmp_path / "test" / "memory")  # closed: its files and lock are released
    assert held_by_a_store(tmp_path / "other")
    assert close_stores_under(tmp_path.resolve()) == []  # what the seam remembers ends with the test
    outside.store.close()
