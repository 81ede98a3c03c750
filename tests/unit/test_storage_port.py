"""The storage port's conformance suite (``memory.store.port``): one set of assertions, run against every backend.

``backend`` names a way to open a ``StoragePort`` on a private location: embedded Chroma (``MemoryStore``) and the
in-process store (``InProcessStore``) here; ``tests/reliability/test_storage_port_server.py`` runs the same
functions against a Chroma server. What every backend owes: a commit is all or nothing and only on its base
generation; readers see committed generations only, a pinned generation stays readable as it was; purge removes
retired versions and drop a namespace; every record kind round-trips; concurrent writers lose nothing.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from logicmap.memory.files.backup import export_namespace, import_namespace
from logicmap.memory.records.kinds import RECORD_KINDS
from logicmap.memory.records.records import SessionInfo, Turn
from logicmap.memory.store import (
    ChangeSet,
    GenerationConflict,
    InProcessStore,
    MemoryStore,
    StoragePort,
    TurnIdConflictError,
    UnknownNamespaceError,
    open_store,
)
from logicmap.settings import LogicMapSettings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ALL_KINDS = FIXTURES / "backup-v1-all-kinds.jsonl"
Opener = Callable[[], StoragePort]


def _chroma(tmp_path: Path) -> Opener:
    settings = LogicMapSettings(data_dir=tmp_path / "chroma", embedding_provider="hashing")
    return lambda: MemoryStore(settings)


def _in_process(tmp_path: Path) -> Opener:
    settings = LogicMapSettings(store_url=f"memory://{uuid.uuid4().hex}", embedding_provider="hashing")
    return lambda: open_store(settings)


BACKENDS: dict[str, Callable[[Path], Opener]] = {"chroma": _chroma, "in-process": _in_process}


@pytest.fixture(params=sorted(BACKENDS))
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[StoragePort] = []
    make = BACKENDS[request.param](tmp_path)

    def open_one() -> StoragePort:
        if opened and isinstance(opened[0], MemoryStore):
            return opened[0]  # one process holds an embedded directory: its stores are the one store
        opened.append(make())
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()


def _turn(namespace: str, session: str, n: int, text: str) -> Turn:
    return Turn(
        namespace=namespace,
        dia_id=f"{session}:{n}",
        session_id=session,
        speaker="Ana",
        text=text,
        position=n,
        session_time=datetime(2024, 5, n % 28 + 1, 10, 0),
    )


def _vector(text: str) -> list[float]:
    rng = np.random.default_rng(abs(hash(text)) % (2**32))
    return [float(x) for x in rng.normal(size=8)]


def _session_change(namespace: str, base: int, session: str, texts: list[str], **extra: Any) -> ChangeSet:
    turns = [_turn(namespace, session, i + 1, text) for i, text in enumerate(texts)]
    info = SessionInfo(session_id=session, content_hash=f"h-{session}-{len(texts)}", generation=0, policy="heuristic")
    return ChangeSet(
        namespace=namespace,
        base_generation=base,
        session=info,
        turns=turns,
        turn_vectors=[_vector(t.text) for t in turns],
        embedder="hashing",
        **extra,
    )


def _texts(store: StoragePort, namespace: str, generation: int | None = None) -> list[str]:
    snap = store.snapshot(namespace) if generation is None else store.snapshot_at(namespace, generation)
    return [t.text for t in snap.turns.values()]


# -- the suite (each takes a store opener; the Chroma-server module calls them too) --------------------------------


def check_commit_and_read(open_store_: Opener) -> None:
    store = open_store_()
    assert not store.has_namespace("conf.a") and store.manifest("conf.a").generation == 0
    with pytest.raises(UnknownNamespaceError):
        store.require_namespace("conf.a")
    manifest = store.commit(_session_change("conf.a", 0, "S1", ["one", "two"]))
    assert manifest.generation == 1 and set(manifest.sessions) == {"S1"}
    assert store.require_namespace("conf.a").generation == 1
    assert _texts(store, "conf.a") == ["one", "two"]
    assert store.namespaces() == ["conf.a"] and store.namespaces("conf") == ["conf.a"]
    assert store.namespaces("con") == [] and store.namespaces("conf.a") == ["conf.a"]
    hits = store.query("conf.a", "turns", _vector("two"), 1)
    assert hits[0][0] == "S1:2" and hits[0][1] == pytest.approx(1.0, abs=1e-5)


def check_generation_conflicts(open_store_: Opener) -> None:
    store = open_store_()
    store.commit(_session_change("conf.b", 0, "S1", ["first"]))
    with pytest.raises(GenerationConflict):
        store.commit(_session_change("conf.b", 0, "S2", ["stale writer"]))
    assert _texts(store, "conf.b") == ["first"] and store.manifest("conf.b").generation == 1
    store.commit(_session_change("conf.b", 1, "S2", ["second"]))
    assert store.manifest("conf.b").generation == 2


def check_atomicity(open_store_: Opener) -> None:
    """A commit refused for any reason leaves nothing: not one of its records, not its session."""
    store = open_store_()
    store.commit(_session_change("conf.c", 0, "S1", ["kept"]))
    clash = _session_change("conf.c", 1, "S2", ["fresh turn", "clashing turn"])
    clash.turns[1] = clash.turns[1].model_copy(update={"dia_id": "S1:1"})  # another session's stored turn id
    with pytest.raises(TurnIdConflictError):
        store.commit(clash)
    assert _texts(store, "conf.c") == ["kept"] and set(store.manifest("conf.c").sessions) == {"S1"}
    assert store.manifest("conf.c").generation == 1


def check_snapshot_isolation(open_store_: Opener) -> None:
    store = open_store_()
    store.commit(_session_change("conf.d", 0, "S1", ["v1"]))
    held = store.snapshot("conf.d")
    replaced = _session_change("conf.d", 1, "S1", ["v2"])
    store.commit(replaced)
    assert [t.text for t in held.turns.values()] == ["v1"]  # a snapshot never changes under its reader
    assert _texts(store, "conf.d") == ["v2"]
    assert _texts(store, "conf.d", 1) == ["v1"]  # a pinned generation reads as it was committed
    with pytest.raises(ValueError):
        store.snapshot_at("conf.d", 7)


def check_retire_and_purge(open_store_: Opener) -> None:
    store = open_store_()
    store.commit(_session_change("conf.e", 0, "S1", ["canary-7731 lives here", "ordinary"]))
    store.commit(ChangeSet(namespace="conf.e", base_generation=1, retire={"turns": ["S1:1"]}, embedder="hashing"))
    assert _texts(store, "conf.e") == ["ordinary"]
    assert _texts(store, "conf.e", 1) == ["canary-7731 lives here", "ordinary"]  # retired, not yet purged
    report = store.purge("conf.e")
    assert report.versions_removed.get("turns") == 1
    assert _texts(store, "conf.e") == ["ordinary"]
    try:  # what was purged is not served to a pinned run either: gone from it, or the generation refused
        pinned = _texts(store, "conf.e", 1)
    except ValueError:
        pinned = []
    assert not any("canary-7731" in text for text in pinned)


def check_drop(open_store_: Opener) -> None:
    store = open_store_()
    store.commit(_session_change("conf.f", 0, "S1", ["gone"]))
    store.commit(_session_change("conf.f.child", 0, "S1", ["stays"]))
    dropped = store.drop_namespace("conf.f")
    assert dropped["namespace"] == "conf.f" and dropped["generation"] == 1
    assert not store.has_namespace("conf.f") and store.namespaces("conf.f") == ["conf.f.child"]
    with pytest.raises(UnknownNamespaceError):
        store.drop_namespace("conf.f")


def check_every_kind_round_trips(open_store_: Opener, tmp_path: Path) -> None:
    """The fixture holds every record kind (with vectors): imported, read and exported again unchanged."""
    store = open_store_()
    header = json.loads(ALL_KINDS.read_bytes().split(b"\n", 1)[0])
    report = import_namespace(store, ALL_KINDS)
    want = json.loads(ALL_KINDS.with_suffix(".fingerprint.json").read_text())
    assert json.loads(json.dumps(store.snapshot(report.namespace).fingerprint(), default=str)) == want
    again = tmp_path / f"again-{uuid.uuid4().hex}.jsonl"
    export_namespace(store, report.namespace, again)
    assert json.loads(again.read_bytes().split(b"\n", 1)[0])["counts"] == header["counts"]
    kinds = {json.loads(line)["kind"] for line in again.read_bytes().splitlines()[1:]}
    assert {kind.name for kind in RECORD_KINDS if header["counts"].get(kind.field)} <= kinds


def check_concurrent_writers(open_store_: Opener) -> None:
    """Writers that retry on a conflict, as the ingest does: every session lands once, generations in a row."""
    stores = [open_store_() for _ in range(4)]
    failures: list[BaseException] = []

    def write(worker: int) -> None:
        store = stores[worker]
        for n in range(3):
            while True:
                base = store.manifest("conf.g").generation
                try:
                    store.commit(_session_change("conf.g", base, f"W{worker}N{n}", [f"w{worker} n{n}"]))
                    break
                except GenerationConflict:
                    continue
                except BaseException as exc:  # reported below
                    failures.append(exc)
                    return

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    manifest = stores[0].manifest("conf.g")
    assert manifest.generation == 12 and len(manifest.sessions) == 12
    assert sorted(_texts(stores[0], "conf.g")) == sorted(f"w{w} n{n}" for w in range(4) for n in range(3))


def _namespace_operations(store: Any, bad: Any) -> dict[str, Callable[[], object]]:
    """Each port operation that takes a namespace, called with ``bad``."""
    return {
        "manifest": lambda: store.manifest(bad),
        "has_namespace": lambda: store.has_namespace(bad),
        "require_namespace": lambda: store.require_namespace(bad),
        "snapshot": lambda: store.snapshot(bad),
        "snapshot_at": lambda: store.snapshot_at(bad, 1),
        "query": lambda: store.query(bad, "turns", [1.0] * 8, 1),
        "commit": lambda: store.commit(ChangeSet.model_construct(namespace=bad, base_generation=0)),
        "purge": lambda: store.purge(bad),
        "drop_namespace": lambda: store.drop_namespace(bad),
        "pending_writes": lambda: store.pending_writes(bad, after=0),
        "pending_heads": lambda: store.pending_heads(bad, after=0),
    }


def check_invalid_namespaces_are_refused(open_store_: Opener) -> None:
    """Every operation that takes a namespace refuses one that is no valid name before it reads or writes: callers
    (``answer()``'s strategies, the lifecycle functions) hand a caller's namespace to the store as it came."""
    store = open_store_()
    for bad in ("bad name!", "acme\n", "", "-lead", ("memories", "alice"), None):
        for name, operation in _namespace_operations(store, bad).items():
            with pytest.raises(ValueError, match="invalid namespace"):
                operation()
                pytest.fail(f"{name} took the namespace {bad!r}")
    assert store.namespaces() == []


SUITE = [
    check_commit_and_read,
    check_generation_conflicts,
    check_atomicity,
    check_snapshot_isolation,
    check_retire_and_purge,
    check_drop,
    check_concurrent_writers,
    check_invalid_namespaces_are_refused,
]


@pytest.mark.parametrize("check", SUITE, ids=lambda c: c.__name__)
def test_the_port(opener: Opener, check: Callable[[Opener], None]) -> None:
    check(opener)


def test_every_kind_round_trips(opener: Opener, tmp_path: Path) -> None:
    check_every_kind_round_trips(opener, tmp_path)


def test_each_backend_is_a_storage_port_and_the_url_picks_it(tmp_path: Path) -> None:
    assert isinstance(open_store(LogicMapSettings(store_url="memory://x")), InProcessStore)
    chroma = open_store(LogicMapSettings(data_dir=tmp_path / "c", embedding_provider="hashing"))
    try:
        assert isinstance(chroma, MemoryStore) and isinstance(chroma, StoragePort)
    finally:
        chroma.close()
    with pytest.raises(ValueError, match="unknown store 'redis'; this version knows memory://"):
        open_store(LogicMapSettings(store_url="redis://localhost"))
