"""Fallbacks are recorded per session, shown by ``stats``, and repaired by ``ingest --redo-fallbacks``."""

from __future__ import annotations

import json
import re

import pytest

from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.graphs.ingest.redo import NoModelForRedoError
from logicmap.graphs.surfaces.cli import main
from logicmap.memory.records.records import SessionInfo
from tests.reliability.support import memory_problems
from tests.unit.session_models import ANALYZE, SessionModel, long_conversation

# The rebuild runs in combined mode, with a context where S2 is one window (events are the model's chunks of it).
REDO = IngestContext(policy="llm", context_tokens=32768)


def _others(snapshot, session_id: str) -> dict:
    """Everything of the other sessions a rebuild of ``session_id`` must leave alone."""
    own = {e.id for e in snapshot.events.values() if e.session_id == session_id}
    turns = {t for t, turn in snapshot.turns.items() if turn.session_id == session_id}
    return {
        "turns": {k: v.model_dump(exclude={"created_at"}) for k, v in snapshot.turns.items()},
        "events": {
            k: v.model_dump(exclude={"created_at", "order"})
            for k, v in snapshot.events.items()
            if v.session_id != session_id
        },
        "relations": {
            k: v.model_dump()
            for k, v in snapshot.relations.items()
            if v.session_id != session_id and not {v.source, v.target} & own
        },
        "facts": {k: v.model_dump() for k, v in snapshot.facts.items() if not set(v.turn_ids) & turns},
        "tags": {k: v.model_dump() for k, v in snapshot.tags.items() if v.target_id not in own},
        "sessions": {k: v.model_dump() for k, v in snapshot.manifest.sessions.items() if k != session_id},
    }


@pytest.fixture
def broken_s2(resources):
    """Three sessions ingested with a model whose segmenter replies garbage for session S2 only (one call per
    role, so the segmenter's whole reply is the garbage)."""
    conv = long_conversation(9, sessions=3)
    resources.llm_ = SessionModel(garbage={"segmenter"}, garbage_when="[D2:1]")
    context = IngestContext(policy="llm", combined_extraction=False)
    report = ingest_conversation(conv, "ns", resources=resources, context=context)
    assert [s.session_id for s in report.sessions if s.fallbacks] == ["S2"]
    return conv


def test_a_fallback_is_recorded_with_the_error_and_shown_by_stats(resources, broken_s2, capsys) -> None:
    info = resources.store.snapshot("ns").manifest.sessions["S2"]
    assert [f.role for f in info.fallbacks] == ["segmenter"] and info.fallbacks[0].calls == 1
    assert info.fallbacks[0].reason == "invalid model output after one retry"
    assert "no JSON object in reply" in info.fallbacks[0].first_error  # the model's error, not a generic reason
    assert all(f.source == "fallback" for f in resources.store.snapshot("ns").events.values() if f.session_id == "S2")
    data_dir = str(resources.settings.data_dir)
    assert main(["--data-dir", data_dir, "--embeddings", "hashing", "stats", "-n", "ns"]) == 0
    shown = json.loads(capsys.readouterr().out)["fallbacks"]
    assert shown["total"] == 1 and list(shown["sessions"]) == ["S2"]
    assert shown["sessions"]["S2"]["roles"][0]["role"] == "segmenter"
    assert "no JSON object" in shown["sessions"]["S2"]["roles"][0]["error"]


@pytest.mark.parametrize("chunk", [3, 1, 9], ids=["as-many-events", "more-events", "one-event"])
def test_redo_rebuilds_exactly_the_sessions_that_fell_back(resources, broken_s2, chunk) -> None:
    before = resources.store.snapshot("ns")
    untouched = _others(before, "S2")
    good = SessionModel(chunk=chunk)
    resources.llm_ = good
    report = ingest_conversation(broken_s2, "ns", resources=resources, context=REDO, redo_fallbacks=True)
    assert [(s.session_id, s.skipped) for s in report.sessions] == [("S1", True), ("S3", True), ("S2", False)]
    # No separate facts or cues call; the topics holding rebuilt events are labelled again, as ingest labels them.
    assert not report.fallbacks and set(good.role_calls) <= {"analysis", "relations", "topics"}
    shown = {
        m.split(":")[0]
        for c in good.calls
        if ANALYZE in str(c[0].content)
        for m in re.findall(r"^\[(D\d+:\d+)\]", str(c[-1].content), re.MULTILINE)
    }
    assert shown == {"D2"}  # S2 alone was segmented again
    after = resources.store.snapshot("ns")
    assert after.generation == before.generation + 1  # one commit
    assert not after.manifest.sessions["S2"].fallbacks
    s2 = [e for e in after.events.values() if e.session_id == "S2"]
    assert len(s2) == 9 // chunk and {e.source for e in s2} == {"llm"}
    assert all(e.summary.startswith("Model event") for e in s2)
    assert {t for e in s2 for t in e.turn_ids} == {f"D2:{i}" for i in range(1, 10)}
    assert _others(after, "S2") == untouched
    assert memory_problems(after) == []  # nothing dangles: relations, topics and tags point at live events
    order = list(after.events)
    assert order.index(s2[0].id) > max(order.index(e.id) for e in after.events.values() if e.session_id == "S1")
    assert order.index(s2[-1].id) < min(order.index(e.id) for e in after.events.values() if e.session_id == "S3")
    ends = {(r.source, r.target) for r in after.relations.values() if r.label == "temporal_before"}
    s1_last = [e.id for e in after.events.values() if e.session_id == "S1"][-1]
    s3_first = [e.id for e in after.events.values() if e.session_id == "S3"][0]
    assert (s1_last, s2[0].id) in ends and (s2[-1].id, s3_first) in ends  # continuity kept across the rebuild
    again = ingest_conversation(broken_s2, "ns", resources=resources, context=REDO, redo_fallbacks=True)
    assert all(s.skipped for s in again.sessions) and again.cost.llm_calls == 0


def test_redo_while_the_model_still_fails_keeps_the_fallback_recorded(resources, broken_s2) -> None:
    resources.llm_ = SessionModel(garbage={"segmenter"}, garbage_when="[D2:1]")
    ingest_conversation(broken_s2, "ns", resources=resources, context=IngestContext(policy="llm"), redo_fallbacks=True)
    after = resources.store.snapshot("ns")
    assert [f.role for f in after.manifest.sessions["S2"].fallbacks] == ["segmenter"]
    assert memory_problems(after) == []


def test_no_llm_sessions_are_not_fallbacks_and_redo_without_a_model_says_so(resources, capsys) -> None:
    conv = long_conversation(6, sessions=2)
    ingest_conversation(conv, "plain", resources=resources, policy="heuristic")
    manifest = resources.store.snapshot("plain").manifest
    assert all(info.policy == "heuristic" and not info.fallbacks for info in manifest.sessions.values())
    with pytest.raises(NoModelForRedoError, match="LOGICMAP_CHAT_MODEL"):
        ingest_conversation(conv, "plain", resources=resources, redo_fallbacks=True)
    path = resources.settings.data_dir.parent / "plain.json"
    from tests.reliability.support import locomo_document

    path.write_text(json.dumps(locomo_document(conv)))
    code = main(
        [
            "--data-dir",
            str(resources.settings.data_dir),
            "--embeddings",
            "hashing",
            "ingest",
            str(path),
            "-n",
            "plain",
            "--redo-fallbacks",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --redo-fallbacks") and len(err.strip().splitlines()) == 1


def test_session_records_written_before_structured_fallbacks_stay_readable() -> None:
    old = {
        "session_id": "S1",
        "content_hash": "h",
        "generation": 3,
        "policy": "llm",
        "fallbacks": ["segmenter: invalid model output after one retry", "cue_extractor: no chat model configured"],
    }
    info = SessionInfo.model_validate(old)
    assert [(f.role, f.reason, f.calls) for f in info.fallbacks] == [
        ("segmenter", "invalid model output after one retry", 1),
        ("cue_extractor", "no chat model configured", 1),
    ]
    assert info.fallbacks[0].first_error == "invalid model output after one retry"


class LabellingModel(SessionModel):
    """``SessionModel`` whose topic labels and descriptions are made from the events the prompt shows (so a
    label abstracted from a fallen-back event differs from one abstracted from the model's event)."""

    @staticmethod
    def _topics(text: str) -> dict:
        topics = []
        for block in re.finditer(r"^(T\d+) \(\d+ events\):\n((?:- .*\n?)*)", text, re.MULTILINE):
            shown = [line[2:] for line in block.group(2).splitlines()]
            label = " ".join(shown[0].split()[:6]) if shown else "empty topic"
            topics.append({"topic": block.group(1), "label": label, "description": " | ".join(shown)[:300]})
        return {"topics": topics}


def _labels(snapshot) -> dict:
    """Each topic's members with its label, description and where they came from (topic ids may differ)."""
    return {frozenset(t.members): (t.label, t.description, t.label_source) for t in snapshot.topics.values()}


def test_redo_labels_topics_as_a_fresh_ingest_with_the_same_model_does(resources) -> None:
    """Issue 29: the redo pass relabels the topics holding rebuilt events with the topic abstractor, so the rebuilt
    namespace carries the labels a fresh ingest with that model gives (every step re-clusters: same topics)."""
    conv = long_conversation(9, sessions=3)
    every_step = {"recluster_every": 1, "combined_extraction": False}
    resources.llm_ = LabellingModel(garbage={"segmenter"}, garbage_when="[D2:1]")
    ingest_conversation(conv, "ns", resources=resources, context=IngestContext(policy="llm", **every_step))
    broken = _labels(resources.store.snapshot("ns"))
    assert any("Model event" not in (label or "") for label, _, _ in broken.values())  # S2's fallback events
    resources.llm_ = LabellingModel()
    report = ingest_conversation(
        conv, "ns", resources=resources, redo_fallbacks=True, context=IngestContext(policy="llm", **every_step)
    )
    assert [s.session_id for s in report.sessions if not s.skipped] == ["S2"] and not report.fallbacks
    assert resources.llm_.role_calls.get("topics") == 1  # one abstraction call in the rebuild, as per ingested session
    ingest_conversation(conv, "fresh", resources=resources, context=IngestContext(policy="llm", **every_step))
    redone, fresh = _labels(resources.store.snapshot("ns")), _labels(resources.store.snapshot("fresh"))
    assert redone == fresh and redone != broken
    assert {source for _, _, source in redone.values()} == {"llm"}
    assert all(label and label.startswith("Model event") for label, _, _ in redone.values())


def test_redo_without_reclustering_relabels_the_topics_whose_events_it_rebuilt(resources) -> None:
    """No re-clustering: a topic keeps its members when the rebuilt events take their ids, yet its label was
    abstracted from the summaries that fell back; the redo labels it again from the rebuilt ones."""
    conv = long_conversation(9, sessions=3)
    incremental = {"recluster_every": 0, "combined_extraction": False}
    resources.llm_ = LabellingModel(garbage={"segmenter"}, garbage_when="[D2:1]")
    ingest_conversation(conv, "ns", resources=resources, context=IngestContext(policy="llm", **incremental))
    resources.llm_ = LabellingModel()
    ingest_conversation(
        conv, "ns", resources=resources, redo_fallbacks=True, context=IngestContext(policy="llm", **incremental)
    )
    after = resources.store.snapshot("ns")
    summaries = {e.summary for e in after.events.values()}
    s2 = {e.id for e in after.events.values() if e.session_id == "S2"}
    holding = [t for t in after.topics.values() if s2 & set(t.members)]
    assert holding and all(t.label_source == "llm" for t in holding)
    for topic in after.topics.values():  # every description is made of summaries the namespace holds now
        assert set((topic.description or "").split(" | ")) <= summaries, topic.id
    assert memory_problems(after) == []
