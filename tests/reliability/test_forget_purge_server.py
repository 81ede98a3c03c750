"""Forget and purge against a Chroma server (``LOGICMAP_CHROMA_HOST``): what the API can reach is gone.

Server mode cannot compact the server's own files (``memory/store/purge.py`` says so and the purge report names
the limit). What it does guarantee, proved here with a canary on a real ``chroma run`` on a loopback port: no row
the server returns (documents, metadatas, embeddings of every collection, read with Chroma's own client) holds the
canary's text or its vector; no strategy, export, list or snapshot shows it; a second store process opened on the
server after the purge reads the namespace without it; the other tenant reads exactly as before; and no file of
the local data directory holds it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import STRATEGIES, answer
from logicmap.graphs.writes.forget import delete_namespace, forget, list_memories
from logicmap.memory.files.backup import export_namespace
from logicmap.memory.files.loaders import Conversation, load_conversations
from tests.reliability.support import SAMPLE, ChromaServer, memory_problems, with_session

CANARY = "QWJX-server-canary-5521-vault"
QUESTION = "What is the vault code?"


def _with_canary(conv: Conversation) -> Conversation:
    return with_session(
        conv,
        98,
        [
            (0, "I rented a small vault at the bank downtown."),
            (0, f"The vault code is {CANARY}, keep it quiet."),
            (-1, "A vault downtown sounds safe enough."),
        ],
    )


def _server_rows(server: ChromaServer) -> list[tuple[str, Any, Any, Any]]:
    """Every row of every collection on the server, read with Chroma's own HTTP client (not through LogicMap)."""
    import chromadb

    client = chromadb.HttpClient(host="127.0.0.1", port=server.port)
    rows = []
    for listed in client.list_collections():
        collection = client.get_collection(listed if isinstance(listed, str) else listed.name)
        got = collection.get(include=["documents", "metadatas", "embeddings"])
        embeddings = got.get("embeddings")
        for i, row_id in enumerate(got["ids"]):
            vector = None if embeddings is None else np.asarray(embeddings[i], dtype=np.float32)
            rows.append(
                (
                    row_id,
                    (got.get("documents") or [None] * (i + 1))[i],
                    (got.get("metadatas") or [None] * (i + 1))[i],
                    vector,
                )
            )
    return rows


def _holding(rows: list[tuple[str, Any, Any, Any]], vector: np.ndarray) -> list[str]:
    found = []
    for row_id, document, metadata, embedding in rows:
        text = json.dumps([document, metadata], default=str)
        if CANARY in text:
            found.append(f"{row_id}: text")
        if embedding is not None and embedding.shape == vector.shape and np.allclose(embedding, vector, atol=1e-6):
            found.append(f"{row_id}: vector")
    return found


def _local_files_holding(directory: Path) -> list[str]:
    return [
        str(Path(root, name))
        for root, _, files in os.walk(directory)
        for name in files
        if CANARY.encode() in (Path(root) / name).read_bytes()
    ]


def _answers(res: Resources, namespace: str) -> dict[str, str]:
    return {
        s: answer(s, QUESTION, namespace, resources=res, policy="heuristic").model_dump_json(
            exclude={"cost", "timings", "trace"}
        )
        for s in STRATEGIES
    }


def _resources(server: ChromaServer, data_dir: Path) -> Resources:
    return Resources(settings=server.settings(data_dir=data_dir))


def test_server_mode_purge_leaves_no_row_with_the_canary(server: ChromaServer, tmp_path: Path) -> None:
    res = _resources(server, tmp_path / "local")
    sample = load_conversations(SAMPLE)[0]
    ingest_conversation(_with_canary(sample), "acme", resources=res, policy="heuristic", memory_manager="r2")
    ingest_conversation(sample, "acme.bob", resources=res, policy="heuristic", memory_manager="r2")
    store = res.store
    vector = np.asarray(store.snapshot("acme").turn_vectors["D98:2"], dtype=np.float32)
    assert _holding(_server_rows(server), vector), "the canary must be on the server before the forget"
    assert any(CANARY in a for a in _answers(res, "acme").values())
    bob_answers, bob_print = _answers(res, "acme.bob"), store.snapshot("acme.bob").fingerprint()

    report = forget("acme", turn_ids=["D98:2"], purge=True, resources=res)

    assert report.purge is not None and report.purge.versions_removed["turns"] >= 1
    assert report.purge.limits and "server" in report.purge.limits and not report.purge.compacted
    assert _holding(_server_rows(server), vector) == []
    after = store.snapshot("acme")
    assert "D98:2" not in after.turns and not memory_problems(after)
    assert all(CANARY not in a for a in _answers(res, "acme").values())
    listed = list_memories("acme", kind="turns", limit=1000, resources=res)
    assert all(CANARY not in json.dumps(item, default=str) for item in listed.items)
    export_namespace(store, "acme", tmp_path / "acme.jsonl")
    assert CANARY not in (tmp_path / "acme.jsonl").read_text()
    assert _local_files_holding(tmp_path / "local") == []
    assert _answers(res, "acme.bob") == bob_answers and store.snapshot("acme.bob").fingerprint() == bob_print
    store.close()

    # Another process's store, opened on the server afterwards, has nothing cached: it reads the purged namespace.
    again = _resources(server, tmp_path / "local-2")
    try:
        snap = again.store.snapshot("acme")
        assert "D98:2" not in snap.turns and "D98:1" in snap.turns
        assert snap.fingerprint() == after.fingerprint()
        assert all(CANARY not in a for a in _answers(again, "acme").values())
    finally:
        again.store.close()


def test_server_mode_delete_namespace_removes_its_collections(server: ChromaServer, tmp_path: Path) -> None:
    res = _resources(server, tmp_path / "local")
    sample = load_conversations(SAMPLE)[0]
    ingest_conversation(_with_canary(sample), "acme", resources=res, policy="heuristic", memory_manager="r2")
    ingest_conversation(sample, "acme.bob", resources=res, policy="heuristic", memory_manager="r2")
    vector = np.asarray(res.store.snapshot("acme").turn_vectors["D98:2"], dtype=np.float32)
    bob = _answers(res, "acme.bob")

    delete_namespace("acme", resources=res)

    assert _holding(_server_rows(server), vector) == []
    assert res.store.namespaces() == ["acme.bob"] and _answers(res, "acme.bob") == bob
    res.store.close()


def test_server_mode_a_purge_its_forget_asked_for_is_finished_by_the_next_commit(
    server: ChromaServer, tmp_path: Path
) -> None:
    """The state a process killed between a purging forget's commit and its purge leaves (the commit, no purge):
    another process's next commit to the namespace finishes the purge the manifest records as owed."""
    from functools import partial

    from logicmap.graphs.writes.forget import _commit_forget, _one_turn

    res = _resources(server, tmp_path / "local")
    from logicmap.memory.files.loaders import RawTurn, Session

    turns = [
        RawTurn(dia_id=f"D1:{i}", speaker="Ana", text=text)
        for i, text in enumerate(
            [
                "I rented a small vault at the bank downtown.",
                f"The vault code is {CANARY}, keep it quiet.",
                "The bank downtown opens at nine.",
            ],
            start=1,
        )
    ]
    conv = Conversation(
        conversation_id="v",
        speakers=["Ana"],
        sessions=[Session(session_id="S1", timestamp="2024-05-01T10:00:00", timestamp_text="", turns=turns)],
    )
    ingest_conversation(conv, "acme", resources=res, policy="heuristic")
    tid = next(t for t, turn in res.store.snapshot("acme").turns.items() if CANARY in turn.text)
    vector = np.asarray(res.store.snapshot("acme").turn_vectors[tid], dtype=np.float32)
    _commit_forget(res, "acme", partial(_one_turn, memory_id=tid), surface="python", purge=True)
    assert _holding(_server_rows(server), vector), "retired, not purged yet"
    res.store.close()

    other = _resources(server, tmp_path / "local-2")  # another process's store
    try:
        kept = next(t for t in other.store.snapshot("acme").turns)
        forget("acme", turn_ids=[kept], resources=other)  # its next write, without a purge of its own
        assert _holding(_server_rows(server), vector) == []
        assert not other.store.purge_owed("acme")
    finally:
        other.store.close()
