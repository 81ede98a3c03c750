"""memory.forgetting: what forgetting turns retires or rewrites, followed through the record-kind registry."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from logicmap.memory.records.forgetting import UnknownMemoryError, forget_change, plan_forget, turns_to_forget
from logicmap.memory.records.r2 import FactRecord, FactRevision
from logicmap.memory.records.records import Cue, Event, Fact, Relation, Tag, Topic, Turn
from logicmap.memory.store import Manifest, NamespaceSnapshot

NS = "n"


def _snapshot() -> NamespaceSnapshot:
    def turn(tid: str, sid: str, day: int) -> Turn:
        return Turn(
            namespace=NS,
            session_id=sid,
            dia_id=tid,
            speaker="A",
            text=f"text {tid}",
            session_time=datetime(2023, 1, day, tzinfo=UTC),
        )

    snap = NamespaceSnapshot(namespace=NS, manifest=Manifest(namespace=NS, generation=3))
    snap.turns = {t.dia_id: t for t in (turn("D1:1", "S1", 1), turn("D1:2", "S1", 1), turn("D2:1", "S2", 9))}
    snap.events = {
        "e1": Event(id="e1", namespace=NS, session_id="S1", summary="only D1:1", turn_ids=["D1:1"]),
        "e2": Event(id="e2", namespace=NS, session_id="S1", summary="both", turn_ids=["D1:1", "D1:2"]),
        "e3": Event(id="e3", namespace=NS, session_id="S2", summary="kept", turn_ids=["D2:1"]),
    }
    snap.event_vectors = {"e1": [1.0, 0.0], "e2": [0.0, 1.0], "e3": [1.0, 1.0]}
    snap.relations = {
        "r1": Relation(id="r1", namespace=NS, source="e1", target="e3", label="causes"),
        "r2": Relation(id="r2", namespace=NS, source="e2", target="e3", label="then"),
    }
    snap.topics = {
        "t1": Topic(id="t1", namespace=NS, centroid=[0.5, 0.5], members=["e1", "e3"]),
        "t2": Topic(id="t2", namespace=NS, centroid=[1.0, 0.0], members=["e1"]),
    }
    snap.facts = {
        "f1": Fact(id="f1", namespace=NS, head="A", relation="lives", tail="X", turn_ids=["D1:1"]),
        "f2": Fact(
            id="f2",
            namespace=NS,
            head="A",
            relation="likes",
            tail="Y",
            turn_ids=["D1:1", "D2:1"],
            history=[{"action": "add", "turn_ids": ["D1:1"]}, {"action": "add", "turn_ids": ["D2:1"]}],
        ),
    }
    snap.fact_vectors = {"f1": [1.0, 0.0], "f2": [0.0, 1.0]}
    snap.cues = {"c1": Cue(id="c1", namespace=NS, text="secret"), "c2": Cue(id="c2", namespace=NS, text="kept")}
    snap.cue_vectors = {"c1": [1.0, 0.0], "c2": [0.0, 1.0]}
    snap.tags = {
        "g1": Tag(id="g1", namespace=NS, cue_id="c1", tag="x", target_id="e1"),
        "g2": Tag(id="g2", namespace=NS, cue_id="c2", tag="x", target_id="e3"),
    }
    snap.r2_facts = {
        "F1": FactRecord(id="F1", text="a", turn_ids=("D1:1",)),
        "F2": FactRecord(
            id="F2",
            text="b",
            turn_ids=("D1:2", "D1:1"),
            history=(FactRevision(text="old", turn_ids=("D1:1",), step=1, replaced_at=2),),
        ),
    }
    snap.r2_fact_vectors = {"F1": [1.0, 0.0], "F2": [0.0, 1.0]}
    return snap


def test_forgetting_a_turn_follows_every_link() -> None:
    snap = _snapshot()
    plan = plan_forget(snap, {"D1:1"})
    assert {k: sorted(v) for k, v in plan.retire.items() if v} == {
        "turns": ["D1:1"],
        "events": ["e1"],
        "relations": ["r1"],
        "topics": ["t2"],
        "facts": ["f1"],
        "tags": ["g1"],
        "cues": ["c1"],
        "r2_facts": ["F1"],
    }
    assert plan.rebuild_events == {"e2": ["D1:2"]}
    assert plan.rewritten["topics"]["t1"].members == ["e3"]
    f2 = plan.rewritten["facts"]["f2"]
    assert f2.turn_ids == ["D2:1"] and f2.history == [{"action": "add", "turn_ids": ["D2:1"]}]
    assert plan.rewritten["r2_facts"]["F2"].turn_ids == ("D1:2",) and plan.rewritten["r2_facts"]["F2"].history == ()
    change = forget_change(snap, plan, surface="cli")
    assert change.retire["turns"] == ["D1:1"] and change.topics[0].centroid == [1.0, 1.0]
    assert change.forget is not None and change.forget.removed["turns"] == 1 and change.drop_sessions == []
    assert len(change.facts) == len(change.fact_vectors) == 1


def test_sessions_dates_and_unknown_ids() -> None:
    snap = _snapshot()
    assert turns_to_forget(snap, session_ids=["S1"]) == {"D1:1", "D1:2"}
    assert turns_to_forget(snap, before="2023-01-05") == {"D1:1", "D1:2"}
    assert plan_forget(snap, {"D1:1", "D1:2"}).sessions_emptied == ["S1"]
    for bad in ({"turn_ids": ["D9:9"]}, {"session_ids": ["S9"]}):
        with pytest.raises(UnknownMemoryError, match="^namespace 'n' holds no such"):
            turns_to_forget(snap, **bad)
    with pytest.raises(ValueError):
        turns_to_forget(snap)
