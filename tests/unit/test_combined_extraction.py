"""Combined extraction: the session analyst segments a session and extracts its facts and cue units in one call.

Checked: at most four calls per session (against five or more with one call per role; the fourth is MRAgent's
topic abstraction, which needs the session's clustered events and so cannot be folded into the analyst's call), one part's bad reply
falls back alone under its own role while the reply's other parts are kept, the separate mode still works
(context field and ``LOGICMAP_COMBINED_EXTRACTION``), both modes build the same layers from the same model
answers, windows of a long session fit the combined budget, and a part's fallback is shown and rebuilt as
any role's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from logicmap.agents.base import run_role_parts
from logicmap.agents.fact_extractor import facts_from_extraction, pattern_extraction
from logicmap.agents.session_analyst import (
    MIN_TURN_ROOM,
    CueWindow,
    SessionLayers,
    analysis_windows,
    analyze_session,
    combined_pays,
)
from logicmap.agents.testing import ScriptedChatModel
from logicmap.agents.windowing import ContextBudget
from logicmap.evals.bench.scripted import make_scripted_model
from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.memory.records.facts import apply_fact_updates
from logicmap.memory.records.records import Turn
from logicmap.prompts import analyze as analyze_prompt
from logicmap.prompts.cues import CueExtraction, MemoryUnit
from logicmap.prompts.real_extract import ExtractedFact, FactExtraction
from tests.conftest import make_resources
from tests.unit.session_models import ANALYZE, RELATE, SessionModel, long_conversation

COMBINED = IngestContext(policy="llm", combined_extraction=True)
SEPARATE = IngestContext(policy="llm", combined_extraction=False)


def _first(sample, n: int = 1):
    return sample.model_copy(update={"sessions": sample.sessions[:n]})


def _layers(snapshot) -> dict:
    """Everything the ingest built, without creation times (the records themselves, ids and contents)."""
    drop = {"created_at"}
    return {
        kind: {k: v.model_dump(exclude=drop) for k, v in getattr(snapshot, kind).items()}
        for kind in ("turns", "events", "relations", "topics", "facts", "cues", "tags")
    }


# -- calls per session ------------------------------------------------------------------------------


def test_combined_mode_makes_at_most_four_calls_per_session(resources, sample) -> None:
    model = SessionModel()
    resources.llm_ = model
    report = ingest_conversation(sample, "combined", resources=resources, context=COMBINED)
    assert not report.fallbacks
    # analysis, relations, the coreference judge when needed, the topic abstraction (one batched call per session)
    assert all(s.cost.llm_calls <= 4 for s in report.sessions), [s.cost.llm_calls for s in report.sessions]
    assert set(model.role_calls) <= {"analysis", "relations", "topics", "other"}  # no segmenter, facts or cues call
    assert model.role_calls["analysis"] == len(sample.sessions)  # one window each
    assert model.role_calls["topics"] == len(sample.sessions)  # one call per session, not one per topic
    snap = resources.store.snapshot("combined")
    assert snap.facts and snap.tags and {e.source for e in snap.events.values()} == {"llm"}
    assert any(t.content and "marathon training" in t.content for t in snap.tags.values())  # the model's units


def test_separate_mode_makes_one_call_per_role(resources, sample) -> None:
    model = SessionModel()
    resources.llm_ = model
    report = ingest_conversation(_first(sample, 2), "separate", resources=resources, context=SEPARATE)
    assert not report.fallbacks and [s.cost.llm_calls for s in report.sessions] == [5, 5]
    assert "analysis" not in model.role_calls
    assert all(model.role_calls[r] == 2 for r in ("segmenter", "relations", "facts", "cues", "topics"))


def test_the_setting_turns_combined_extraction_off(tmp_path, sample, monkeypatch) -> None:
    monkeypatch.setenv("LOGICMAP_COMBINED_EXTRACTION", "0")
    resources = make_resources(tmp_path / "memory", llm=SessionModel())
    report = ingest_conversation(_first(sample), "env", resources=resources, policy="llm")
    assert report.sessions[0].cost.llm_calls == 5 and "analysis" not in resources.llm_.role_calls  # 4 roles + topics
    resources.store.close()


def test_with_one_layer_the_combined_call_asks_for_that_part_only(resources, sample) -> None:
    model = SessionModel()
    resources.llm_ = model
    context = IngestContext(policy="llm", extract_cues=False)
    report = ingest_conversation(_first(sample), "facts-only", resources=resources, context=context)
    assert report.sessions[0].cost.llm_calls == 2 and not report.fallbacks
    system = str(next(c for c in model.calls if ANALYZE in str(c[0].content))[0].content)
    assert "SegmentationWithFacts" in system and "person_facts" not in system
    snap = resources.store.snapshot("facts-only")
    assert snap.facts and not snap.tags


# -- one part falls back, the others are kept ----------------------------------------------------------


def _s1_reply(facts: object) -> dict:
    return {
        "events": [
            {
                "summary": "Maya adopted Biscuit, a golden retriever puppy, last month.",
                "turn_ids": ["D1:1", "D1:2"],
                "participants": ["Maya", "Leo"],
                "time_phrase": "last month",
            },
            {
                "summary": "Maya works night shifts as a nurse in Porto; Leo trains for the Lisbon half marathon.",
                "turn_ids": ["D1:3", "D1:4", "D1:5"],
            },
            {"summary": "Leo loves sushi; Maya prefers ramen.", "turn_ids": ["D1:6", "D1:7", "D1:8"]},
        ],
        "facts": facts,
        "units": [
            {
                "turn_id": "D1:1",
                "content": "Maya adopted a dog named Biscuit last month.",
                "tags": ["dog's name"],
                "cues": [{"cue": "Biscuit", "kind": "entity"}],
            }
        ],
        "person_facts": [
            {
                "person": "Leo",
                "aspect": "food preference",
                "content": "Leo's favourite food is sushi",
                "cues": ["Sushi"],
                "turn_id": "D1:6",
            }
        ],
    }


def test_an_invalid_facts_part_falls_back_alone_and_the_other_parts_are_kept(resources, sample) -> None:
    bad_facts = [{"head": "it", "relation": "likes", "tail": "ramen", "turn_ids": ["D9:9"]}]
    # The retry's events are junk: the first reply's valid events are kept, only the facts are asked again.
    retry = {**_s1_reply(bad_facts), "events": "junk"}
    relations = {"relations": [{"source": "E1", "target": "E2", "label": "causal", "turn_ids": ["D1:1"]}]}
    model = ScriptedChatModel(routes={ANALYZE: [_s1_reply(bad_facts), retry], RELATE: [relations]})
    resources.llm_ = model
    no_topics = dataclasses.replace(COMBINED, abstract_topics=False)  # the analyst's calls only
    report = ingest_conversation(_first(sample), "part", resources=resources, context=no_topics)
    session = report.sessions[0]
    assert session.cost.llm_calls == 3  # the combined call, its retry, the relations
    assert [f.role for f in report.fallbacks] == ["fact_extractor"]
    assert "D9:9" in " ".join(report.fallbacks[0].errors) and "pronoun" in " ".join(report.fallbacks[0].errors)
    retry_prompt = str(model.calls[1][-1].content)
    assert (
        "- fact_extractor:" in retry_prompt and "segmenter" not in retry_prompt and "cue_extractor" not in retry_prompt
    )

    snap = resources.store.snapshot("part")
    assert [e.summary for e in snap.events.values()] == [e["summary"] for e in _s1_reply([])["events"]]
    assert {e.source for e in snap.events.values()} == {"llm"}  # the segmenter part did not fall back
    assert "S1-E1|causal|S1-E2" in snap.relations
    tags = {(t.cue_id, t.tag, t.content) for t in snap.tags.values()}
    assert ("cue:biscuit", "dog's name", "Maya adopted a dog named Biscuit last month.") in tags  # the model's unit
    assert any(t.tag == "food preference" and t.person == "Leo" for t in snap.tags.values())
    # The facts are the pattern extractor's, exactly as the separate role's fallback would give them.
    turns = [t for t in snap.turns.values()]
    patterns = facts_from_extraction(pattern_extraction(turns, ["Maya", "Leo"]), turns, "part")
    assert set(snap.facts) == {f.id for f in apply_fact_updates({}, patterns).facts}
    info = snap.manifest.sessions["S1"]
    assert [f.role for f in info.fallbacks] == ["fact_extractor"] and "pronoun" in info.fallbacks[0].first_error


def test_a_reply_that_is_not_json_falls_back_in_every_part(sample) -> None:
    model = ScriptedChatModel(default="no JSON here")
    turns = [
        Turn(
            namespace="n",
            session_id="S1",
            dia_id=r.dia_id,
            speaker=r.speaker,
            text=r.text,
            session_time=sample.sessions[0].timestamp,
        )
        for r in sample.sessions[0].turns
    ]
    segmentation, layers = analyze_session(model, turns, np.ones((len(turns), 4)), session_time=turns[0].session_time)
    assert len(model.calls) == 2 and segmentation.cost.llm_calls == 2
    assert [f.role for f in segmentation.fallbacks] == ["segmenter"]
    assert [f.role for f in layers.fact_fallbacks] == ["fact_extractor"]
    assert [f.role for f in layers.cue_fallbacks] == ["cue_extractor"]
    assert layers.cue_windows == [CueWindow(start=0, end=len(turns), extraction=None)]  # the lexical builder's
    assert layers.facts == pattern_extraction(turns, ["Maya", "Leo"])
    assert sorted(t for e in segmentation.output.events for t in e.turn_ids) == sorted(t.dia_id for t in turns)


def test_parts_runner_reads_each_part_and_keeps_the_first_valid_one() -> None:
    from logicmap.agents.base import RolePart
    from logicmap.prompts.segment import Segmentation

    first = {"events": [{"summary": "a", "turn_ids": ["D1:1"]}], "facts": "nope"}
    second = {
        "events": [{"summary": "b", "turn_ids": ["D1:1"]}],
        "facts": [{"head": "Maya", "relation": "likes", "tail": "ramen", "turn_ids": ["D1:1"]}],
    }
    model = ScriptedChatModel(replies=[first, second])
    parts = [
        RolePart("segmenter", Segmentation, lambda: Segmentation(events=[])),
        RolePart("fact_extractor", FactExtraction, lambda: FactExtraction(facts=[])),
    ]
    outcome = run_role_parts(
        model,
        role="analyst",
        messages=analyze_prompt.build_messages("[D1:1] Maya: hi", None, ["Maya"]),
        schema=analyze_prompt.SessionAnalysis,
        parts=parts,
    )
    assert outcome.attempts == 2 and not outcome.fallbacks and outcome.cost.usable_replies == 2
    assert outcome.outputs["segmenter"].events[0].summary == "a"  # kept from the first reply
    assert outcome.outputs["fact_extractor"].facts[0].tail == "ramen"  # asked again, given by the second


# -- the same layers in both modes ---------------------------------------------------------------------


def test_both_modes_build_the_same_layers_from_the_same_answers(tmp_path, sample) -> None:
    """The benchmark's scripted model answers each part as the separate role would: same records either way."""
    built = {}
    for name, context in (("combined", COMBINED), ("separate", SEPARATE)):
        model = make_scripted_model(0.0)
        resources = make_resources(tmp_path / name, llm=model)
        report = ingest_conversation(sample, "same", resources=resources, context=context)
        assert not report.fallbacks
        built[name] = (_layers(resources.store.snapshot("same")), report)
        resources.store.close()
    (combined, fewer), (separate, more) = built["combined"], built["separate"]
    assert combined["facts"] and combined["cues"] and combined["tags"] and combined["relations"]
    assert combined == separate
    assert fewer.cost.llm_calls < more.cost.llm_calls and fewer.llm_calls_per_session <= 4  # with the topic call
    assert fewer.cost.prompt_tokens < more.cost.prompt_tokens


# -- windows ---------------------------------------------------------------------------------------------


def test_a_long_session_is_analysed_in_windows_that_fit_the_combined_budget(resources) -> None:
    conv = long_conversation(80, chars=250)
    budget = ContextBudget(16384)
    combined_room = ContextBudget(16384, reply_parts=3).prompt_chars
    model = SessionModel(limit=budget.total_chars)
    resources.llm_ = model
    context = IngestContext(policy="llm", context_tokens=16384, combined_extraction=True)
    report = ingest_conversation(conv, "long", resources=resources, context=context)
    assert not report.fallbacks
    assert model.role_calls["analysis"] > 1 and set(model.role_calls) <= {"analysis", "relations", "topics"}
    assert max(model.prompt_sizes["analysis"]) <= combined_room < budget.prompt_chars
    snap = resources.store.snapshot("long")
    assert {t for e in snap.events.values() for t in e.turn_ids} == set(snap.turns)
    turns = sorted(snap.turns.values(), key=lambda t: t.position)
    windows = analysis_windows(turns, conv.sessions[0].timestamp.isoformat(), budget, facts=True, cues=True)
    assert len(windows) == model.role_calls["analysis"]
    cited = {t for f in snap.facts.values() for t in f.turn_ids}
    assert all(cited & {t.dia_id for t in turns[start:end]} for start, end in windows)  # facts from every window
    tagged = {t.target_id for t in snap.tags.values()}
    assert tagged == set(snap.events)  # every window's units linked to its events


def test_a_context_too_small_for_the_combined_prompt_calls_the_roles_separately(resources) -> None:
    conv = long_conversation(6, chars=120)
    small = ContextBudget(2048)
    overhead = len(str(analyze_prompt.build_messages("", None, ["Maya", "Leo"])[0].content))
    assert overhead + MIN_TURN_ROOM > ContextBudget(2048, reply_parts=3).prompt_chars
    model = SessionModel(limit=small.total_chars)
    resources.llm_ = model
    context = IngestContext(policy="llm", context_tokens=2048, combined_extraction=True)
    report = ingest_conversation(conv, "small", resources=resources, context=context)
    assert not report.fallbacks and "analysis" not in model.role_calls
    assert any("session_analyst" in note and "separately" in note for note in report.sessions[0].notes)


def test_the_combined_mode_is_kept_while_it_costs_no_more_calls() -> None:
    turns = [
        Turn(namespace="n", session_id="S1", dia_id=t.dia_id, speaker=t.speaker, text=t.text)
        for t in long_conversation(300).sessions[0].turns
    ]
    budget = ContextBudget(8192)
    assert combined_pays(turns[:4], None, budget, facts=True, cues=True)
    assert len(analysis_windows(turns[:4], None, budget, facts=True, cues=True)) == 1
    assert len(analysis_windows(turns[:10], None, budget, facts=True, cues=True)) > 1  # smaller windows than
    assert combined_pays(turns[:10], None, budget, facts=True, cues=True)  # the segmenter's, still fewer calls
    assert not combined_pays(turns, None, budget, facts=True, cues=True)  # 300 long turns: separate is cheaper


def test_a_rebase_renames_the_turns_the_layers_cite() -> None:
    layers = SessionLayers(
        facts=FactExtraction(facts=[ExtractedFact(head="Maya", relation="likes", tail="ramen", turn_ids=["D1:1"])]),
        cue_windows=[
            CueWindow(
                start=0,
                end=1,
                extraction=CueExtraction(units=[MemoryUnit(turn_id="D1:1", content="Maya likes ramen.")]),
            )
        ],
    )
    moved = layers.renamed({"D1:1": "D1:1~S1"})
    assert (
        moved.facts.facts[0].turn_ids == ["D1:1~S1"] and moved.cue_windows[0].extraction.units[0].turn_id == "D1:1~S1"
    )
    assert layers.facts.facts[0].turn_ids == ["D1:1"]  # the original is unchanged


# -- fallbacks of a part are any role's fallbacks: stats and --redo-fallbacks --------------------------


def test_a_part_fallback_is_recorded_per_session_and_rebuilt_by_redo(resources) -> None:
    conv = long_conversation(6, sessions=2, chars=120)
    resources.llm_ = SessionModel(garbage={"facts"}, garbage_when="[D2:1]")
    report = ingest_conversation(conv, "redo", resources=resources, context=COMBINED)
    assert [s.session_id for s in report.sessions if s.fallbacks] == ["S2"]
    before = resources.store.snapshot("redo")
    assert [f.role for f in before.manifest.sessions["S2"].fallbacks] == ["fact_extractor"]
    assert {e.source for e in before.events.values()} == {"llm"}  # the events part was kept

    good = SessionModel()
    resources.llm_ = good
    again = ingest_conversation(conv, "redo", resources=resources, context=COMBINED, redo_fallbacks=True)
    assert [(s.session_id, s.skipped) for s in again.sessions] == [("S1", True), ("S2", False)]
    after = resources.store.snapshot("redo")
    assert not after.manifest.sessions["S2"].fallbacks and good.role_calls["analysis"] == 1
    s2_facts = [f for f in after.facts.values() if any(t.startswith("D2:") for t in f.turn_ids)]
    assert s2_facts and {f.relation for f in s2_facts} == {"mentions"}  # the model's facts now


@pytest.mark.parametrize("facts, cues", [(True, True), (True, False), (False, True)])
def test_the_prompt_names_the_parts_it_asks_for(facts: bool, cues: bool) -> None:
    system = str(analyze_prompt.build_messages("", "2023-05-08", ["Maya"], facts=facts, cues=cues)[0].content)
    assert ("- facts:" in system) is facts and ("- units:" in system) is cues and "- events:" in system
    assert analyze_prompt.analysis_schema(facts, cues).__name__ in system


def test_a_rebase_after_a_racing_writer_moves_the_layers_with_the_turns(resources) -> None:
    """Analysed on generation G, committed after another writer stored D1:1: the facts and cue units the
    combined call extracted for the session's D1:1 follow the turn to its distinct id."""
    from langgraph.runtime import Runtime

    from logicmap.graphs.ingest.ingest import (
        commit,
        cues,
        facts,
        fuse,
        prepare,
        rebase,
        relate,
        route_after_commit,
        segment,
    )
    from logicmap.graphs.ingest.ingest import topics as topic_step
    from logicmap.memory.files.loaders import Conversation, RawTurn, Session

    resources.llm_ = SessionModel()
    context = IngestContext(policy="llm", combined_extraction=True, namespace="race", append=True, resources=resources)
    runtime = Runtime(context=context, store=None, stream_writer=lambda _: None, previous=None)
    mine = [
        RawTurn(dia_id=d, speaker=s, text=f"{d}: marathon training by the Porto market")
        for d, s in (("D1:1", "Maya"), ("D1:2", "Leo"))
    ]
    state: dict = {"sessions": [Session(session_id="S1", turns=mine)]}
    for node in (prepare, segment, relate, fuse, topic_step):
        state.update(node(state, runtime))
    assert state["layers"].facts.facts[0].turn_ids == ["D1:1"]
    theirs = Conversation(
        conversation_id="theirs",
        sessions=[Session(session_id="S9", turns=[RawTurn(dia_id="D1:1", speaker="Rui", text="theirs: a marathon")])],
    )
    ingest_conversation(theirs, "race", resources=resources, policy="heuristic")
    state.update(commit(state, runtime))
    assert route_after_commit(state) == "rebase"
    state.update(rebase(state, runtime))
    for node in (fuse, topic_step):
        state.update(node(state, runtime))
    state["enrichments"] = [*facts(state, runtime)["enrichments"], *cues(state, runtime)["enrichments"]]
    state.update(commit(state, runtime))
    snap = resources.store.snapshot("race")
    assert sorted(snap.manifest.sessions) == ["S1", "S9"] and snap.turns["D1:1"].session_id == "S9"
    mine_ids = {t.dia_id for t in snap.turns.values() if t.session_id == "S1"}
    assert mine_ids == {"D1:1@S1", "D1:2"}
    cited = {t for f in snap.facts.values() for t in f.turn_ids}
    assert cited == mine_ids  # the model's facts, each citing the session's own turns
    mine_events = {e.id for e in snap.events.values() if e.session_id == "S1"}
    units = {t.content for t in snap.tags.values() if t.target_id in mine_events}
    # The unit of D1:1 (now D1:1@S1) is linked: one tag per (cue, tag, event), the first unit's content kept.
    assert units == {"Maya talks about marathon training."}
