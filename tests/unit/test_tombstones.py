"""Tombstones: a forgotten memory does not come back through a re-sent thread, a file of the same content or an old
backup, unless the caller says ``allow_forgotten``; the tombstone keeps hashes only (a canary proves no byte of the
text is in it, nor anywhere on disk after the purge), survives the purge and stays in its namespace. Real Chroma on a
temp directory, no LLM."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from logicmap import add_messages
from logicmap.agents.segmenter import turns_summary
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.surfaces.basestore import LogicMapStore
from logicmap.graphs.surfaces.cli import main
from logicmap.graphs.writes.forget import forget
from logicmap.memory.files.backup import export_namespace, import_namespace
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.memory.records.records import Turn
from logicmap.memory.records.tombstones import content_hash, said_summary
from tests.conftest import make_resources
from tests.reliability.support import memory_problems

CANARY = "QZJX-tomb-5531-vault"
SECRET = f"My vault combination is {CANARY} and nobody else knows it."
T0 = datetime(2025, 5, 1, 9, 0)


def _thread(with_ids: bool = True) -> list[object]:
    def ids(i: str) -> dict[str, str]:
        return {"id": i} if with_ids else {}

    return [
        {"role": "user", "content": "I moved to Lisbon last spring.", "timestamp": T0.isoformat(), **ids("m1")},
        {"role": "assistant", "content": "Lisbon is lovely.", "timestamp": T0.isoformat(), **ids("m2")},
        {"role": "user", "content": SECRET, "timestamp": T0.isoformat(), **ids("m3")},
    ]


def _turn_of(res: Resources, namespace: str, text: str) -> Turn | None:
    return next((t for t in res.store.snapshot(namespace).turns.values() if t.text == text), None)


def _files_holding(directory: Path, needle: bytes) -> list[str]:
    found = []
    for root, _, files in os.walk(directory):
        for name in files:
            if needle in (Path(root) / name).read_bytes():
                found.append(str(Path(root) / name))
    return found


def _conversation(conversation_id: str, session_id: str, texts: list[str]) -> Conversation:
    turns = [
        RawTurn(dia_id=f"D{session_id}:{i}", speaker="Maya" if i % 2 else "Leo", text=text)
        for i, text in enumerate(texts, start=1)
    ]
    session = Session(session_id=session_id, timestamp=T0, timestamp_text="9:00 am on 1 May, 2025", turns=turns)
    return Conversation(
        conversation_id=conversation_id, speakers=["Maya", "Leo"], sessions=[session], source_format="jsonl"
    )


def test_a_thread_sent_again_after_a_forget_does_not_store_the_forgotten_message(resources: Resources) -> None:
    for with_ids, namespace in ((True, "ann"), (False, "ben")):
        add_messages(namespace, _thread(with_ids), resources=resources, policy="heuristic")
        secret = _turn_of(resources, namespace, SECRET)
        assert secret is not None
        forget(namespace, turn_ids=[secret.dia_id], purge=True, resources=resources)

        again = add_messages(namespace, _thread(with_ids), resources=resources, policy="heuristic")

        assert _turn_of(resources, namespace, SECRET) is None, namespace
        assert (again.added, again.already_stored, again.forgotten) == (0, 2, 1), namespace
    # The same text under a new message id, or with other spacing and case, is the same forgotten content.
    other = [HumanMessage(f"  {SECRET.upper()} ", id="m9"), AIMessage("Noted.", id="m10")]
    report = add_messages("ann", other, resources=resources, policy="heuristic")
    assert (report.added, report.forgotten) == (1, 1) and _turn_of(resources, "ann", "Noted.") is not None


def test_allow_forgotten_stores_it_again_and_lifts_its_tombstone(resources: Resources) -> None:
    add_messages("ann", _thread(), resources=resources, policy="heuristic")
    secret = _turn_of(resources, "ann", SECRET)
    assert secret is not None
    forget("ann", turn_ids=[secret.dia_id], resources=resources)
    assert len(resources.store.snapshot("ann").tombstones) == 1

    report = add_messages("ann", _thread(), resources=resources, policy="heuristic", allow_forgotten=True)

    assert (report.added, report.forgotten) == (1, 0)
    snap = resources.store.snapshot("ann")
    assert _turn_of(resources, "ann", SECRET) is not None and snap.tombstones == {}
    assert add_messages("ann", _thread(), resources=resources, policy="heuristic").already_stored == 3


def test_the_tombstone_holds_no_byte_of_the_text_and_survives_the_purge(resources: Resources) -> None:
    add_messages("ann", _thread(), resources=resources, policy="heuristic")
    add_messages("ann.bob", _thread(), resources=resources, policy="heuristic")
    secret = _turn_of(resources, "ann", SECRET)
    assert secret is not None

    report = forget("ann", turn_ids=[secret.dia_id], purge=True, resources=resources)

    assert report.purge is not None and report.purge.versions_removed["turns"] >= 1
    (stone,) = resources.store.snapshot("ann").tombstones.values()
    body = stone.model_dump_json()
    assert stone.content == content_hash(SECRET) and stone.message == secret.dia_id
    words = {w for w in re.findall(r"[\w-]{4,}", SECRET)}
    assert CANARY not in body and not [w for w in words if w.lower() in body.lower()]
    # No file under the data directory holds the canary but ann.bob's own copy of it (another tenant).
    forget("ann.bob", turn_ids=[secret.dia_id], purge=True, resources=resources)
    assert _files_holding(Path(resources.settings.data_dir), CANARY.encode()) == []
    # A purge removes text, not tombstones: a reopened store still refuses the thread.
    resources.store.purge("ann")
    resources.store.close()
    again = make_resources(Path(resources.settings.data_dir))
    try:
        assert list(again.store.snapshot("ann").tombstones) == [stone.id]
        assert add_messages("ann", _thread(), resources=again, policy="heuristic").forgotten == 1
    finally:
        again.store.close()


def test_tombstones_stay_in_their_namespace(resources: Resources) -> None:
    add_messages("acme.ann", _thread(), resources=resources, policy="heuristic")
    secret = _turn_of(resources, "acme.ann", SECRET)
    assert secret is not None
    forget("acme.ann", turn_ids=[secret.dia_id], resources=resources)

    other = add_messages("acme.bob", _thread(), resources=resources, policy="heuristic")

    assert (other.added, other.forgotten) == (3, 0) and resources.store.snapshot("acme.bob").tombstones == {}
    assert _turn_of(resources, "acme.bob", SECRET) is not None


def test_an_old_backup_leaves_the_forgotten_turn_out_unless_allowed(resources: Resources, tmp_path: Path) -> None:
    texts = ["I got a new bike.", "What colour?", SECRET, "Red, with a basket.", "Nice."]
    ingest_conversation(_conversation("c1", "1", texts), "acme", resources=resources, policy="heuristic")
    export_namespace(resources.store, "acme", tmp_path / "old.jsonl")
    forget("acme", turn_ids=["D1:3"], purge=True, resources=resources)

    report = import_namespace(resources.store, tmp_path / "old.jsonl", "acme-copy")

    snap = resources.store.snapshot("acme-copy")
    assert "D1:3" not in snap.turns and not memory_problems(snap) and report.forgotten == 1
    assert all(
        CANARY not in r.model_dump_json()
        for kind in ("turns", "events", "facts", "cues", "tags")
        for r in getattr(snap, kind).values()
    )
    assert [t.content for t in snap.tombstones.values()] == [content_hash(SECRET)]
    assert snap.manifest.forgets[-1].surface == "import" and report.counts["turn"] == len(texts) - 1
    # The copy refuses the content too; the override restores the file as it is.
    again = ingest_conversation(
        _conversation("c2", "7", [SECRET]), "acme-copy", resources=resources, policy="heuristic"
    )
    assert again.sessions[0].skipped and CANARY not in str(resources.store.snapshot("acme-copy").turns)
    whole = import_namespace(resources.store, tmp_path / "old.jsonl", "acme-whole", allow_forgotten=True)
    assert whole.forgotten == 0 and resources.store.snapshot("acme-whole").turns["D1:3"].text == SECRET


def test_the_cli_import_says_what_it_left_out(resources: Resources, tmp_path: Path, capsys, monkeypatch) -> None:
    ingest_conversation(_conversation("c1", "1", ["Hello.", SECRET]), "acme", resources=resources, policy="heuristic")
    export_namespace(resources.store, "acme", tmp_path / "old.jsonl")
    forget("acme", turn_ids=["D1:2"], resources=resources)
    resources.store.close()
    monkeypatch.setenv("LOGICMAP_DATA_DIR", str(resources.settings.data_dir))
    monkeypatch.setenv("LOGICMAP_EMBEDDING_PROVIDER", "hashing")

    assert main(["import", str(tmp_path / "old.jsonl"), "-n", "acme-copy", "--quiet"]) == 0
    said = capsys.readouterr().err
    again = make_resources(Path(resources.settings.data_dir))
    try:
        assert "D1:2" not in again.store.snapshot("acme-copy").turns
    finally:
        again.store.close()
    assert "1 turns of the file were forgotten in acme" in said
    assert main(["import", str(tmp_path / "old.jsonl"), "-n", "acme-all", "--quiet", "--allow-forgotten"]) == 0
    again = make_resources(Path(resources.settings.data_dir))
    try:
        assert again.store.snapshot("acme-all").turns["D1:2"].text == SECRET
    finally:
        again.store.close()


def test_a_file_of_the_same_content_leaves_the_forgotten_turn_out(resources: Resources) -> None:
    ingest_conversation(
        _conversation("c1", "1", ["I got a new bike.", SECRET]), "acme", resources=resources, policy="heuristic"
    )
    forget("acme", turn_ids=["D1:2"], resources=resources)

    report = ingest_conversation(
        _conversation("c2", "5", ["Back from the trip.", SECRET, "See you."]),
        "acme",
        resources=resources,
        policy="heuristic",
    )

    texts = [t.text for t in resources.store.snapshot("acme").turns.values()]
    assert SECRET not in texts and "Back from the trip." in texts and "See you." in texts
    assert any("tombstone" in note for note in report.sessions[0].notes)
    # A session all of whose turns were forgotten is skipped whole (nothing committed), and so is a re-run.
    forget("acme", session_ids=["1"], resources=resources)
    rerun = ingest_conversation(
        _conversation("c1", "1", ["I got a new bike.", SECRET]), "acme", resources=resources, policy="heuristic"
    )
    assert rerun.sessions[0].skipped and "1" not in resources.store.manifest("acme").sessions
    allowed = ingest_conversation(
        _conversation("c3", "9", [SECRET]), "acme", resources=resources, policy="heuristic", allow_forgotten=True
    )
    assert not allowed.sessions[0].skipped and SECRET in [
        t.text for t in resources.store.snapshot("acme").turns.values()
    ]


def test_a_store_put_after_a_delete_stores_the_value_again(resources: Resources) -> None:
    store = LogicMapStore(resources=resources, policy="heuristic")
    store.put(("memories", "ann"), "vault", {"text": SECRET})
    store.delete(("memories", "ann"), "vault")
    assert store.get(("memories", "ann"), "vault") is None

    store.put(("memories", "ann"), "vault", {"text": SECRET})

    item = store.get(("memories", "ann"), "vault")
    assert item is not None and item.value == {"text": SECRET}


def test_the_import_summary_is_the_no_llm_policys() -> None:
    turns = [
        Turn(namespace="n", session_id="S1", dia_id="D1:1", speaker="A", text="hi", image_caption="a dog"),
        Turn(namespace="n", session_id="S1", dia_id="D1:2", speaker="B", text="hello"),
    ]
    assert said_summary(turns) == turns_summary(turns)


def test_a_backup_taken_after_the_forget_carries_its_tombstones(resources: Resources, tmp_path: Path) -> None:
    add_messages("ann", _thread(), resources=resources, policy="heuristic")
    secret = _turn_of(resources, "ann", SECRET)
    assert secret is not None
    forget("ann", turn_ids=[secret.dia_id], purge=True, resources=resources)

    exported = export_namespace(resources.store, "ann", tmp_path / "new.jsonl")

    assert exported.counts["tombstone"] == 1 and CANARY not in (tmp_path / "new.jsonl").read_text()
    import_namespace(resources.store, tmp_path / "new.jsonl", "ann-copy")
    assert resources.store.snapshot("ann-copy").tombstones == {
        k: v.model_copy(update={"namespace": "ann-copy"}) for k, v in resources.store.snapshot("ann").tombstones.items()
    }
    assert add_messages("ann-copy", _thread(), resources=resources, policy="heuristic").forgotten == 1
