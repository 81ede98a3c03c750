"""Resolve once, pin once (graphs/runtime/pin.py): a run reads the snapshot generation its first node pinned, so a writer
committing a new session between two nodes of a running compass, goalmem, real or reconstruct run changes neither
its evidence nor its answer; ``MemoryStore.snapshot_at`` serves a superseded generation, kept or read again.

Real parts: a Chroma store on a temp dir, the sample's sessions ingested without an LLM, the commit made by the
chatbot's own ``ingest_session`` while the run is suspended between two supersteps of ``graph.stream``.
"""

from __future__ import annotations

import importlib
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logicmap.graphs.chat.ingestion import chat_turn_session, ingest_session
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from tests import chroma_internals as chroma
from tests.conftest import make_resources

STRATEGIES = ("compass", "goalmem", "real", "reconstruct")
QUESTION = "What is the name of Maya's dog?"
# A session that answers the question differently: a run that read it would find other evidence.
NEW_TURNS = [
    ("Maya", "I adopted a second dog last week. Her name is Pretzel and she is a beagle puppy."),
    ("Leo", "Pretzel the beagle! Congratulations Maya."),
]


@pytest.fixture
def memory(tmp_path: Path, sample: Any) -> Any:
    res = make_resources(tmp_path / "memory")
    yield res
    res.store.close()


def _ingest(res: Resources, sample: Any, namespace: str) -> None:
    ingest_conversation(
        sample.model_copy(update={"sessions": sample.sessions[:3]}), namespace, resources=res, policy="heuristic"
    )


def _commit_new_session(res: Resources, namespace: str) -> int:
    # Dated before the pinned memory's latest session: REAL admits only facts up to its current time, so a later
    # date would keep the new facts out of a run that read the latest snapshot, and the REAL case would not test
    # the pin (a run without pinning reads them and finds other paths).
    session = chat_turn_session(namespace, "writer", NEW_TURNS, datetime(2023, 4, 1, 10, 0))
    ingest_session(session, namespace, resources=res, policy="heuristic")
    return res.store.snapshot(namespace).generation


def _seen(final: dict[str, Any]) -> dict[str, Any]:
    """What a run found: its answer and evidence (ids, cited turns, texts)."""
    evidence = [(e.kind, e.id, list(e.turn_ids), e.text) for e in final.get("evidence") or []]
    return {"answer": final.get("answer"), "evidence": evidence, "generation": final.get("generation")}


def _run(strategy: str, res: Resources, namespace: str, commit_after: str | None = None) -> dict[str, Any]:
    """The graph run through ``stream``; with ``commit_after``, a writer commits a new session to the namespace
    right after that node's step (the run is suspended between two supersteps meanwhile)."""
    module = importlib.import_module(f"logicmap.graphs.strategies.{strategy}")
    context = module.graph.builder.context_schema(policy="heuristic", namespace=namespace, resources=res)
    state_keys = list(module.graph.builder.schemas[module.graph.builder.state_schema])
    final: dict[str, Any] = {}
    committed = False
    for mode, chunk in module.graph.stream(
        {"question": QUESTION}, context=context, stream_mode=["updates", "values"], output_keys=state_keys
    ):
        if mode == "values":
            final = chunk
        elif commit_after in chunk and not committed:
            before = res.store.snapshot(namespace).generation
            assert _commit_new_session(res, namespace) > before  # the commit landed mid-run
            committed = True
    assert committed or commit_after is None
    return final


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_commit_between_two_nodes_changes_nothing_the_run_sees(memory: Resources, sample: Any, strategy: str) -> None:
    first = {"compass": "planner", "goalmem": "parse_goal", "real": "roots", "reconstruct": "seed"}[strategy]
    _ingest(memory, sample, "busy")
    quiet = _seen(_run(strategy, memory, "busy"))  # the same namespace, no commit during the run
    busy = _seen(_run(strategy, memory, "busy", commit_after=first))
    assert busy["generation"] == quiet["generation"]  # pinned by the first node, before the commit
    assert busy == quiet
    # The commit mattered: a run that starts after it reads the new generation and finds other evidence.
    after = _seen(_run(strategy, memory, "busy"))
    assert after["generation"] == memory.store.snapshot("busy").generation > busy["generation"]
    assert (after["answer"], after["evidence"]) != (busy["answer"], busy["evidence"])


def test_the_pin_is_the_run_s_resolved_namespace_policy_and_generation(memory: Resources, sample: Any) -> None:
    from logicmap.graphs.strategies.compass import CompassContext, graph

    _ingest(memory, sample, "alice")
    final = graph.invoke(
        {"question": QUESTION},
        {"configurable": {"user_id": "alice"}},
        context=CompassContext(namespace="{user_id}", resources=memory, policy="auto"),
    )
    keys = list(graph.builder.schemas[graph.builder.state_schema])
    full = graph.invoke(
        {"question": QUESTION},
        {"configurable": {"user_id": "alice"}},
        context=CompassContext(namespace="{user_id}", resources=memory),
        output_keys=keys,
    )
    assert full["namespace"] == "alice" and full["policy"] == "heuristic"  # auto, no chat model: one rule
    assert full["generation"] == memory.store.snapshot("alice").generation
    assert final["answer"] == full["answer"]


def test_snapshot_at_serves_a_superseded_generation_kept_or_read_again(memory: Resources, sample: Any) -> None:
    _ingest(memory, sample, "gens")
    store = memory.store
    old = store.snapshot("gens")
    new_generation = _commit_new_session(memory, "gens")
    assert new_generation > old.generation
    assert store.snapshot_at("gens", old.generation) is old  # kept after the cache moved on
    chroma.forget_kept(store)  # as after many commits: read again from the versions
    again = store.snapshot_at("gens", old.generation)
    assert again is not old and again.fingerprint() == old.fingerprint()
    assert set(store.snapshot("gens").turns) > set(again.turns)
    with pytest.raises(ValueError, match="no committed generation"):
        store.snapshot_at("gens", new_generation + 5)


def test_a_pinned_store_reads_its_own_namespace_only(memory: Resources, sample: Any) -> None:
    from logicmap.memory.store import PinnedStore

    _ingest(memory, sample, "mine")
    pinned = PinnedStore(memory.store, "mine", memory.store.snapshot("mine").generation)
    assert pinned.snapshot("mine") is memory.store.snapshot("mine")
    with pytest.raises(ValueError, match="pinned to namespace 'mine'"):
        pinned.snapshot("theirs")


def test_superseded_snapshots_are_kept_within_a_vector_budget(memory: Resources) -> None:
    """Each kept snapshot owns its vector matrices: kept as eight whole copies of a large namespace, they held
    gigabytes on a long write. The budget keeps the newest ones that fit (the newest always)."""
    import numpy as np

    from logicmap.memory.indexes.snapshot_file import VectorTable
    from logicmap.memory.store.model import Manifest, NamespaceSnapshot

    def superseded(generation: int, mb: int) -> NamespaceSnapshot:
        rows = mb * 2**20 // (384 * 4)
        table = VectorTable([f"t{i}" for i in range(rows)], np.ones((rows, 384), dtype=np.float32))
        return NamespaceSnapshot(
            namespace="big", manifest=Manifest(namespace="big", generation=generation), turn_vectors=table
        )

    store = memory.store
    for generation in (1, 2, 3):
        chroma.keep(store, superseded(generation, 60))
    kept = chroma.kept_generations(store)
    assert sorted(g for _, g in kept) == [2, 3]  # 3 x 60 MB is past the 128 MB budget: the oldest goes
    chroma.keep(store, superseded(4, 200))
    kept = chroma.kept_generations(store)
    assert sorted(g for _, g in kept) == [4]  # one past the budget alone is still kept, the newest
