"""The context budget: windows of a long session, their merge, clipped turns, and facts and cues run concurrently."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from logicmap.agents.relations import relate_session
from logicmap.agents.segmenter import render_turns, segment_session
from logicmap.agents.windowing import ContextBudget, clip_line, fit_lines, plan_windows
from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.memory.records.records import Turn
from logicmap.prompts import segment as segment_prompt
from tests.unit.session_models import SessionModel, long_conversation

SMALL = ContextBudget(2048)  # 6144 characters of context: a few dozen turns per window


def _turns(n: int, chars: int = 120, session: str = "S1") -> list[Turn]:
    conv = long_conversation(n, chars=chars)
    return [
        Turn(
            namespace="ns",
            session_id=session,
            dia_id=t.dia_id,
            speaker=t.speaker,
            text=t.text,
            position=i,
            session_time=conv.sessions[0].timestamp,
        )
        for i, t in enumerate(conv.sessions[0].turns)
    ]


# -- planning ---------------------------------------------------------------------------------------


def test_everything_that_fits_is_one_window_and_windows_cover_items_in_order() -> None:
    sizes = [10] * 30
    assert plan_windows(30, lambda s, e: sum(sizes[s:e]), 300) == [(0, 30)]
    windows = plan_windows(30, lambda s, e: sum(sizes[s:e]), 95)
    assert windows == [(0, 9), (9, 18), (18, 27), (27, 30)]
    assert all(sum(sizes[s:e]) <= 95 for s, e in windows)
    assert plan_windows(0, lambda s, e: 0, 10) == []


def test_an_item_larger_than_the_room_is_a_window_alone() -> None:
    sizes = [10, 10, 500, 10, 10]
    assert plan_windows(5, lambda s, e: sum(sizes[s:e]), 50) == [(0, 2), (2, 3), (3, 5)]


def test_overlap_repeats_the_boundary_items_and_always_progresses() -> None:
    sizes = [10] * 20
    windows = plan_windows(20, lambda s, e: sum(sizes[s:e]), 60, overlap=2)
    assert windows[0] == (0, 6) and windows[1][0] == 4  # two boundary items open the next window
    assert windows[-1][1] == 20 and all(b[0] > a[0] for a, b in zip(windows, windows[1:]))
    tiny = plan_windows(5, lambda s, e: sum(sizes[s:e]), 20, overlap=2)  # windows of 2: no room to overlap
    assert tiny == [(0, 2), (2, 4), (4, 5)]


def test_a_window_does_not_end_between_a_question_and_its_answer() -> None:
    sizes = [10] * 10
    answers = {5}  # item 5 answers item 4: a window may not start at 5
    windows = plan_windows(10, lambda s, e: sum(sizes[s:e]), 50, cut_ok=lambda i: i not in answers)
    assert windows[0] == (0, 4) and windows[1][0] == 4


def test_a_huge_line_is_clipped_with_a_note_and_the_rest_is_kept() -> None:
    lines = ["[D1:1] Maya: hi", "[D1:2] Leo: " + "x" * 50_000, "[D1:3] Maya: bye"]
    fitted, notes = fit_lines(lines, lambda ls: sum(len(line) for line in ls), 5000, labels=["a", "b", "c"], role="r")
    assert fitted[0] == lines[0] and fitted[2] == lines[2] and fitted[1].startswith("[D1:2] Leo: xxx")
    assert sum(len(line) for line in fitted) <= 5000 and "more characters not shown" in fitted[1]
    assert len(notes) == 1 and "r: b (50012 characters)" in notes[0]
    assert clip_line("short", 10) == "short" and len(clip_line("y" * 1000, 100)) == 100


def test_the_budget_leaves_room_for_the_reply_and_one_retry() -> None:
    budget = ContextBudget(8192)
    assert budget.total_chars == 8192 * 3
    assert budget.prompt_chars + budget.reply_chars + 3072 == budget.total_chars
    assert ContextBudget(128_000).prompt_chars > 300_000


# -- roles -------------------------------------------------------------------------------------------


def test_a_short_session_sends_exactly_the_unwindowed_prompt() -> None:
    turns = _turns(8)
    model = SessionModel()
    outcome = segment_session(model, turns, np.ones((8, 4)), session_time=turns[0].session_time)
    assert len(model.calls) == 1 and outcome.windows == 1 and not outcome.notes
    expected = segment_prompt.build_messages(render_turns(turns), turns[0].session_time.isoformat())
    assert [m.content for m in model.calls[0]] == [m.content for m in expected]


def test_a_long_session_is_segmented_in_windows_that_fit_and_merged_in_order() -> None:
    turns = _turns(120)
    model = SessionModel(limit=SMALL.prompt_chars)
    outcome = segment_session(model, turns, np.ones((120, 4)), session_time=None, budget=SMALL)
    assert outcome.windows == len(model.calls) > 2 and outcome.fallback is None
    assert max(model.prompt_sizes["segmenter"]) <= SMALL.prompt_chars
    cited = [t for e in outcome.output.events for t in e.turn_ids]
    assert cited == [t.dia_id for t in turns]  # every turn once, in conversation order


def test_relations_cross_window_boundaries_and_keep_session_keys() -> None:
    turns = _turns(120)
    events = [[t.dia_id for t in turns[i : i + 3]] for i in range(0, 120, 3)]
    model = SessionModel(limit=SMALL.prompt_chars)
    outcome = relate_session(model, [f"event {i}" for i in range(len(events))], events, turns, budget=SMALL)
    assert outcome.windows > 2 and outcome.fallback is None
    pairs = {(r.source, r.target) for r in outcome.output.relations}
    # The scripted model chains the events it is shown: with shared boundary events the chain is unbroken.
    assert pairs == {(f"E{i}", f"E{i + 1}") for i in range(1, len(events))}


def test_one_turn_larger_than_the_context_is_clipped_not_failed(resources) -> None:
    conv = long_conversation(6, chars=200)
    conv.sessions[0].turns[2].text = "I wrote a very long letter. " * 4000  # about 112k characters
    model = SessionModel(limit=SMALL.total_chars)
    resources.llm_ = model
    context = IngestContext(policy="llm", context_tokens=SMALL.context_tokens)
    report = ingest_conversation(conv, "huge", resources=resources, context=context)
    session = report.sessions[0]
    assert not session.fallbacks and not report.fallbacks
    assert any("turn D1:3" in note and "segmenter" in note for note in session.notes)
    info = resources.store.snapshot("huge").manifest.sessions["S1"]
    assert not info.fallbacks and info.notes
    events = resources.store.snapshot("huge").events.values()
    assert {"D1:3"} <= {t for e in events for t in e.turn_ids}


# -- the ingest graph --------------------------------------------------------------------------------


def test_a_300_turn_session_is_built_by_the_model_in_windows_without_fallback(resources) -> None:
    conv = long_conversation(300)
    budget = ContextBudget(8192)
    model = SessionModel(limit=budget.total_chars)
    resources.llm_ = model
    report = ingest_conversation(conv, "long", resources=resources, context=IngestContext(policy="llm"))
    session = report.sessions[0]
    assert not session.fallbacks and not report.fallbacks, session.fallbacks
    for role in ("segmenter", "relations", "facts", "cues"):
        assert model.role_calls[role] > 1, role
        assert max(model.prompt_sizes[role]) <= budget.prompt_chars, role
    snap = resources.store.snapshot("long")
    assert {e.source for e in snap.events.values()} == {"llm"}
    covered = {t for e in snap.events.values() for t in e.turn_ids}
    assert covered == set(snap.turns)
    order = list(snap.events)  # graph order
    linked = {(r.source, r.target) for r in snap.relations.values()}
    assert set(zip(order, order[1:])) <= linked  # one unbroken chain across the relation windows
    assert snap.facts and snap.tags


def test_facts_and_cues_are_extracted_concurrently(resources) -> None:
    """Both extractors wait on one barrier: the ingest finishes without fallback only if they overlap (with one
    call per role; the combined call extracts both in the segment node)."""
    conv = long_conversation(6, chars=120)
    model = SessionModel(barrier=threading.Barrier(2, timeout=20))
    resources.llm_ = model
    context = IngestContext(policy="llm", combined_extraction=False)
    report = ingest_conversation(conv, "par", resources=resources, context=context)
    assert not report.fallbacks and model.role_calls["facts"] == 1 and model.role_calls["cues"] == 1
    snap = resources.store.snapshot("par")
    assert snap.facts and snap.tags


@pytest.mark.parametrize("extract_facts, extract_cues", [(True, False), (False, True), (False, False)])
def test_either_enricher_alone_still_commits(resources, extract_facts, extract_cues) -> None:
    conv = long_conversation(4, chars=120)
    resources.llm_ = SessionModel()
    context = IngestContext(policy="llm", extract_facts=extract_facts, extract_cues=extract_cues)
    report = ingest_conversation(conv, "one", resources=resources, context=context)
    snap = resources.store.snapshot("one")
    assert not report.fallbacks and list(snap.manifest.sessions) == ["S1"]
    assert bool(snap.facts) == extract_facts and bool(snap.tags) == extract_cues
