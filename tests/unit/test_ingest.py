"""The ingest graph with scripted models: segmentation, relations, fusion, fallbacks, crash recovery."""

from __future__ import annotations

import pytest

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.ingest import IngestContext, SessionConflictError, ingest_conversation
from logicmap.memory.files.loaders import Conversation
from tests import chroma_internals as chroma
from tests.conftest import make_resources

SEGMENT = "split one session"
RELATE = "logical relations"
JUDGE = "numbered pair"
CORE_ONLY = IngestContext(policy="llm", extract_facts=False, extract_cues=False)


def _first_sessions(sample: Conversation, n: int) -> Conversation:
    conv = sample.model_copy(deep=True)
    conv.sessions = conv.sessions[:n]
    return conv


def _s1_segments() -> dict:
    return {
        "events": [
            {
                "summary": "Maya adopted Biscuit, a golden retriever puppy, last month.",
                "turn_ids": ["D1:1", "D1:2"],
                "participants": ["Maya", "Leo"],
                "time_phrase": "last month",
            },
            {
                "summary": "Maya works night shifts as a nurse at Santo Antonio hospital in Porto.",
                "turn_ids": ["D1:3"],
                "participants": ["Maya"],
            },
            {
                "summary": "Leo trains for the Lisbon half marathon and loves sushi; Maya prefers ramen.",
                "turn_ids": ["D1:4", "D1:5", "D1:6", "D1:7", "D1:8"],
                "participants": ["Leo", "Maya"],
            },
        ]
    }


def test_segmentation_relations_and_relative_time(resources, sample) -> None:
    llm = ScriptedChatModel(
        routes={
            SEGMENT: [_s1_segments()],
            RELATE: [
                {"relations": [{"source": "E2", "target": "E3", "label": "Contrast", "turn_ids": ["D1:3", "D1:4"]}]}
            ],
        }
    )
    resources.llm_ = llm
    report = ingest_conversation(_first_sessions(sample, 1), "ns", resources=resources, context=CORE_ONLY)
    snap = resources.store.snapshot("ns")
    assert list(snap.events) == ["S1-E1", "S1-E2", "S1-E3"]
    first = snap.events["S1-E1"]
    assert first.time == "2023-02" and first.time_phrase == "last month"  # session of 4 March 2023
    assert first.participants == ["Maya", "Leo"] and first.source == "llm"
    assert snap.relations["S1-E2|contrast|S1-E3"].turn_ids == ["D1:3", "D1:4"]
    session = report.sessions[0]
    assert session.cost.llm_calls == 2 and not session.fallbacks
    assert session.cost.prompt_tokens > 0 and session.cost.wall_time_s > 0


def test_invalid_relation_is_retried_with_the_error(resources, sample) -> None:
    bad = {"relations": [{"source": "E1", "target": "E9", "label": "causal"}]}
    good = {"relations": [{"source": "E1", "target": "E2", "label": "causal", "turn_ids": ["D1:1"]}]}
    llm = ScriptedChatModel(routes={SEGMENT: [_s1_segments()], RELATE: [bad, good]})
    resources.llm_ = llm
    report = ingest_conversation(_first_sessions(sample, 1), "ns", resources=resources, context=CORE_ONLY)
    assert "S1-E1|causal|S1-E2" in resources.store.snapshot("ns").relations
    assert report.sessions[0].cost.llm_calls == 3 and not report.fallbacks
    retry_prompt = llm.calls[-1][-1].content
    assert "E9" in retry_prompt and "endpoints must be events of this session" in retry_prompt


@pytest.mark.parametrize(
    "segment_replies",
    [
        ["not json at all", "{broken"],
        [{"events": [{"summary": "x", "turn_ids": ["D9:9"]}]}, {"events": []}],
        ["", ""],
        [{"wrong": "schema"}, {"events": "nope"}],
    ],
)
def test_garbage_replies_end_in_recorded_fallbacks_and_the_session_is_kept(resources, sample, segment_replies) -> None:
    llm = ScriptedChatModel(routes={SEGMENT: list(segment_replies), RELATE: ["??", "[]"]})
    resources.llm_ = llm
    report = ingest_conversation(_first_sessions(sample, 1), "ns", resources=resources, context=CORE_ONLY)
    roles = {f.role for f in report.fallbacks}
    assert {"segmenter", "relation_extractor"} <= roles
    snap = resources.store.snapshot("ns")
    assert len(snap.turns) == 8
    assert snap.events and all(e.source == "fallback" for e in snap.events.values())
    covered = sorted(t for e in snap.events.values() for t in e.turn_ids)
    assert covered == sorted(snap.turns)  # every turn is cited by a fallback event
    assert all(r.label == "temporal_before" for r in snap.relations.values())
    assert snap.manifest.sessions["S1"].fallbacks


def test_fusion_merges_links_and_inserts_with_one_judge_call(resources, sample) -> None:
    s1 = _s1_segments()
    resources.llm_ = ScriptedChatModel(routes={SEGMENT: [s1], RELATE: [{"relations": []}]})
    ingest_conversation(_first_sessions(sample, 1), "ns", resources=resources, context=CORE_ONLY)

    second = _first_sessions(sample, 2)
    second.sessions = second.sessions[1:]
    s2 = {
        "events": [
            {"summary": s1["events"][0]["summary"], "turn_ids": ["D2:1", "D2:2"], "participants": ["Maya"]},
            {"summary": s1["events"][1]["summary"], "turn_ids": ["D2:3", "D2:4"], "participants": ["Maya"]},
            {
                "summary": "Ana, Maya's sister, visits next month with her kids.",
                "turn_ids": ["D2:5", "D2:6", "D2:7"],
                "participants": ["Maya", "Ana"],
            },
        ]
    }
    judge = {
        "verdicts": [
            {"pair": 0, "same_event": True},
            {"pair": 1, "same_event": False, "has_overlap": True, "relation_type": "elaboration"},
        ]
    }
    llm = ScriptedChatModel(routes={SEGMENT: [s2], RELATE: [{"relations": []}], JUDGE: [judge]})
    resources.llm_ = llm
    report = ingest_conversation(second, "ns", resources=resources, context=CORE_ONLY, append=True)
    snap = resources.store.snapshot("ns")
    merged = snap.events["S1-E1"]
    assert "S2-E1" not in snap.events
    assert merged.turn_ids == ["D1:1", "D1:2", "D2:1", "D2:2"] and merged.sessions == ["S1", "S2"]
    assert "S2-E2|elaboration|S1-E2" in snap.relations and "S2-E2" in snap.events
    assert "S2-E3" in snap.events
    judge_calls = [c for c in llm.calls if JUDGE in str(c[0].content)]
    assert len(judge_calls) == 1 and "Pair 1" in judge_calls[0][1].content
    assert report.sessions[0].cost.llm_calls == 3  # segment + relate + one batched judge
    assert report.sessions[0].merged == 1 and report.sessions[0].linked == 1


def test_no_chat_model_falls_back_to_the_heuristic_policy_and_says_so(resources, sample) -> None:
    report = ingest_conversation(_first_sessions(sample, 1), "ns", resources=resources, policy="llm")
    assert report.sessions[0].policy == "heuristic"
    assert any("no chat model" in f.reason for f in report.fallbacks)


def test_changed_session_under_the_same_id_is_refused_before_anything_is_written(resources, sample) -> None:
    conv = _first_sessions(sample, 1)
    ingest_conversation(conv, "ns", resources=resources, policy="heuristic")
    before = resources.store.snapshot("ns").fingerprint()
    changed = conv.model_copy(deep=True)
    changed.sessions[0].turns[0].text = "something else"
    with pytest.raises(SessionConflictError, match="already holds a different session 'S1'"):
        ingest_conversation(changed, "ns", resources=resources, policy="heuristic")
    assert resources.store.snapshot("ns").fingerprint() == before


def test_crash_in_the_middle_of_a_session_then_rerun_equals_an_uninterrupted_run(tmp_path, sample, monkeypatch) -> None:
    clean = make_resources(tmp_path / "clean")
    ingest_conversation(sample, "ns", resources=clean, policy="heuristic")
    expected = clean.store.snapshot("ns").fingerprint()
    clean.store.close()

    crashed = make_resources(tmp_path / "crashed")
    original = chroma.version_writer()
    calls = {"n": 0}

    def dying_write(self, namespace, kind, records, vectors, generation, **fence):
        original(self, namespace, kind, records, vectors, generation, **fence)
        if generation == 3 and kind == "events":
            calls["n"] += 1
            raise RuntimeError("simulated crash after the events of session 3 were written")

    chroma.replace_version_writer(monkeypatch, dying_write)
    with pytest.raises(RuntimeError, match="simulated crash"):
        ingest_conversation(sample, "ns", resources=crashed, policy="heuristic")
    assert calls["n"] == 1
    chroma.forget_snapshots(crashed.store)
    visible = crashed.store.snapshot("ns")
    assert sorted(visible.manifest.sessions) == ["S1", "S2"]
    assert not any(e.session_id == "S3" for e in visible.events.values())
    assert not any(t.session_id == "S3" for t in visible.turns.values())

    chroma.replace_version_writer(monkeypatch, original)
    report = ingest_conversation(sample, "ns", resources=crashed, policy="heuristic")
    assert [s.skipped for s in report.sessions] == [True, True, False, False, False]
    assert crashed.store.snapshot("ns").fingerprint() == expected


def test_compiled_ingest_graph_diagram_matches_the_snapshot() -> None:
    from pathlib import Path

    from logicmap.graphs.ingest.ingest import build_ingest_graph

    snapshot = Path(__file__).parent / "snapshots" / "ingest.mmd"
    assert build_ingest_graph().compile().get_graph().draw_mermaid() == snapshot.read_text(encoding="utf-8")


@pytest.mark.parametrize(("asks", "together"), [("What did you get her?", True), ("Tell me about it.", False)])
def test_a_question_and_the_reply_to_it_stay_in_one_no_llm_segment(asks: str, together: bool) -> None:
    import numpy as np

    from logicmap.agents.segmenter import changepoint_segments
    from logicmap.memory.records.records import Turn

    lines = [
        ("Sam", "We had our anniversary dinner."),
        ("Priya", asks),
        ("Sam", "A vintage film camera."),
        ("Priya", "Nice."),
        ("Sam", "Work is busy."),
        ("Priya", "Same here."),
    ]
    turns = [
        Turn(namespace="n", session_id="S1", dia_id=f"D1:{i + 1}", speaker=s, text=t) for i, (s, t) in enumerate(lines)
    ]
    e = np.eye(3)
    vectors = np.vstack([e[0], e[0], e[1], e[1], e[2], e[2]])  # the similarity drops between the question and the reply
    events = changepoint_segments(turns, vectors).events
    owner = {t: i for i, event in enumerate(events) for t in event.turn_ids}
    assert (owner["D1:2"] == owner["D1:3"]) is together
    assert sorted(owner) == [t.dia_id for t in turns]


def _runtime(context: IngestContext):
    from langgraph.runtime import Runtime

    return Runtime(context=context, store=None, stream_writer=lambda _: None, previous=None)


def test_ingest_nodes_run_alone_one_after_another(resources, sample) -> None:
    """Each node is a module-level function of (state, runtime): a session goes through them by hand."""
    from logicmap.graphs.ingest.ingest import (
        commit,
        fuse,
        prepare,
        relate,
        route_after_commit,
        route_after_prepare,
        segment,
        topics,
    )

    runtime = _runtime(
        IngestContext(policy="heuristic", extract_facts=False, extract_cues=False, namespace="ns", resources=resources)
    )
    state: dict = {"sessions": _first_sessions(sample, 2).sessions}
    state.update(prepare(state, runtime))
    assert (
        state["namespace"] == "ns"
        and state["current"].session_id == "S1"
        and [s.session_id for s in state["pending"]] == ["S2"]
    )
    assert route_after_prepare(state) == "segment"
    state.update(segment(state, runtime))
    assert state["events"] and all(e.session_id == "S1" and e.source == "heuristic" for e in state["events"])
    assert [t.position for t in state["turns"]] == list(range(len(sample.sessions[0].turns)))
    state.update(relate(state, runtime))
    state.update(fuse(state, runtime))
    assert state["change"].events and state["session_stats"]["merged"] == 0
    state.update(topics(state, runtime))
    assert state["change"].topics
    assert resources.store.snapshot("ns").generation == 0  # nothing is visible before commit
    out = commit(state, runtime)
    assert out["reports"][0].session_id == "S1" and out["current"].session_id == "S2" and out["pending"] == []
    assert route_after_commit({**state, **out}) == "segment"
    snap = resources.store.snapshot("ns")
    assert sorted(snap.manifest.sessions) == ["S1"] and len(snap.events) == len(state["change"].events)


def test_the_facts_and_cues_nodes_add_records_to_the_change(resources, sample) -> None:
    from logicmap.graphs.ingest.ingest import cues, facts, fuse, prepare, relate, segment
    from logicmap.graphs.ingest.nodes import _with_enrichments

    on = _runtime(IngestContext(policy="heuristic", namespace="ns", resources=resources))
    off = _runtime(IngestContext(policy="heuristic", extract_facts=False, extract_cues=False, resources=resources))
    state: dict = {"sessions": _first_sessions(sample, 1).sessions}
    for node in (prepare, segment, relate, fuse):
        state.update(node(state, on))
    assert facts(state, off) == {} and cues(state, off) == {}
    state["enrichments"] = cues(state, on)["enrichments"]  # parallel branches: commit merges their enrichments
    change = _with_enrichments(state)[0]
    assert change.cues and change.tags and not change.facts
    state["enrichments"] = [*facts(state, on)["enrichments"], *state["enrichments"]]
    both = _with_enrichments(state)[0]
    assert both.facts and both.cues == change.cues and not state["change"].facts  # the change itself is unchanged


PAPER_JUDGE = "determining if they refer to the same real-world occurrence"  # Appendix F.1's coreference prompt


def test_faithful_fusion_judges_every_new_event_with_its_most_similar_stored_one(resources, sample) -> None:
    """``IngestContext.faithful``: each new event goes to the paper's Coreference & Overlap Prompt with its e*, one
    call per pair, so the "add an edge to e*" case happens below the merge threshold too (Ana's visit, far below
    0.9, is linked). The default judges only pairs at 0.9 or above (``test_fusion_merges_links_and_...``)."""
    s1 = _s1_segments()
    resources.llm_ = ScriptedChatModel(routes={SEGMENT: [s1], RELATE: [{"relations": []}]})
    ingest_conversation(_first_sessions(sample, 1), "ns", resources=resources, context=CORE_ONLY)
    second = _first_sessions(sample, 2)
    second.sessions = second.sessions[1:]
    s2 = {
        "events": [
            {"summary": s1["events"][0]["summary"], "turn_ids": ["D2:1", "D2:2"], "participants": ["Maya"]},
            {"summary": s1["events"][1]["summary"], "turn_ids": ["D2:3", "D2:4"], "participants": ["Maya"]},
            {
                "summary": "Ana, Maya's sister, visits next month with her kids.",
                "turn_ids": ["D2:5", "D2:6", "D2:7"],
                "participants": ["Maya", "Ana"],
            },
        ]
    }
    verdicts = [
        {"same_event": True, "has_overlap": True, "relation_type": None, "reasoning": "same move"},
        {"same_event": False, "has_overlap": True, "relation_type": "elaboration", "reasoning": "same job"},
        {"same_event": False, "has_overlap": True, "relation_type": "follow_up", "reasoning": "family plans"},
    ]
    llm = ScriptedChatModel(routes={SEGMENT: [s2], RELATE: [{"relations": []}], PAPER_JUDGE: verdicts})
    resources.llm_ = llm
    context = IngestContext(policy="llm", extract_facts=False, extract_cues=False, faithful=True)
    report = ingest_conversation(second, "ns", resources=resources, context=context, append=True)
    snap = resources.store.snapshot("ns")
    judge_calls = [c for c in llm.calls if PAPER_JUDGE in str(c[0].content)]
    assert len(judge_calls) == 3 and not [c for c in llm.calls if JUDGE in str(c[0].content)]
    system = str(judge_calls[0][0].content)
    for criterion in (
        "Do they involve the same people/participants?",
        "Do they describe the same actions, situations, or topics?",
        "Do they have compatible time references?",
        "Would merging their information create a more complete picture of ONE event?",
        '"reasoning"',
    ):
        assert criterion in system, criterion
    assert "S2-E1" not in snap.events and snap.events["S1-E1"].sessions == ["S1", "S2"]
    assert "S2-E2|elaboration|S1-E2" in snap.relations
    linked = [r for r in snap.relations.values() if r.source == "S2-E3" and r.label == "follow_up"]
    assert len(linked) == 1 and linked[0].target.startswith("S1-")
    assert report.sessions[0].merged == 1 and report.sessions[0].linked == 2 and not report.fallbacks


def test_faithful_fusion_merges_only_above_the_threshold() -> None:
    """App. B: events are merged "when their semantic similarity exceeds a threshold of 0.9"; ``faithful`` tests
    ``>`` (the default judges, and merges, at ``>=``), and a same-event verdict at or below it links instead."""
    from logicmap.graphs.ingest.nodes import fusion_case
    from logicmap.prompts.coref import CorefVerdict

    same = CorefVerdict(pair=0, same_event=True, has_overlap=False)
    assert fusion_case(same, 0.9, None) == "merge"  # the default: the pair was judged at >= 0.9
    assert fusion_case(same, 0.9, 0.9) == "link" and fusion_case(same, 0.95, 0.9) == "merge"
    neither = CorefVerdict(pair=0, same_event=False, has_overlap=False)
    assert fusion_case(neither, 0.95, 0.9) == "new" == fusion_case(neither, 0.95, None)


def test_faithful_fusion_without_a_model_builds_the_defaults_memory(tmp_path, sample) -> None:
    """The paper judge's rule (no model): the similarity verdicts at the threshold or above, "neither" below, so a
    no-LLM faithful ingest writes what the default writes (its pairs below 0.9 add nothing)."""
    built = []
    for name, faithful in (("default", False), ("faithful", True)):
        res = make_resources(tmp_path / name)
        ingest_conversation(sample, "ns", resources=res, context=IngestContext(policy="heuristic", faithful=faithful))
        built.append(res.store.snapshot("ns").fingerprint())
        res.store.close()
    assert built[0] == built[1]


def test_the_papers_judge_sends_back_an_overlap_without_its_relation_type() -> None:
    from logicmap.agents.coref import CandidatePair, judge_pairs_paper

    model = ScriptedChatModel(
        routes={
            PAPER_JUDGE: [
                {"same_event": False, "has_overlap": True, "relation_type": None, "reasoning": "same trip"},
                {"same_event": False, "has_overlap": True, "relation_type": "follow_up", "reasoning": "same trip"},
            ]
        }
    )
    outcome = judge_pairs_paper(model, [CandidatePair("S2-E1", "a", "S1-E1", "b", 0.4)], threshold=0.9)
    assert outcome.output.verdicts[0].relation_type == "follow_up" and outcome.fallback is None
    assert "suggest the relation_type" in str(model.calls[1][-1].content)
