"""Fewer compass calls per question, the paper's control flow kept: the planner picks the first round's starts in
its own call, a forced pick costs no call, and a refinement round is skipped only when it could add nothing."""

from __future__ import annotations

import re

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.strategies.compass import CompassContext, build_compass_graph
from tests.unit.test_compass import EXPLORER, LOCALIZER, PLANNER, REFINER, RESPONDER, build_namespace

EVENTS = {
    "A": "maya visited the blue finch cafe",
    "B": "the blue finch had a long queue",
    "C": "maya drank an iced matcha latte",
    "D": "the latte came with oat milk",
    "Z": "the bus was late",
}
EDGES = [("A", "elaboration", "B"), ("C", "elaboration", "D")]
TOPICS = {"T0": ["A", "B"], "T1": ["C", "D"], "T2": ["Z"]}
SUBGOALS = ["which cafe maya visited", "what maya drank"]
QUESTION = "Which cafe did maya visit and what did she drink?"


class Explorers:
    """A decision per event (SKIP otherwise); records the events in the order they were explored."""

    def __init__(self, decisions: dict[str, dict]) -> None:
        self.decisions = decisions
        self.seen: list[str] = []

    def __call__(self, messages) -> dict:
        assert EXPLORER in str(messages[0].content)
        eid = re.search(r"Current event:\n\((\S+?),", messages[-1].content).group(1)
        self.seen.append(eid)
        return self.decisions.get(eid, {"action": "SKIP"})


def _run(resources, llm: ScriptedChatModel, **settings):
    """The graph streamed: the nodes in the order they ran, the final values."""
    resources.llm_ = llm
    ctx = CompassContext(namespace="calls", resources=resources, **settings)
    nodes, final = [], {}
    for mode, chunk in (
        build_compass_graph().compile().stream({"question": QUESTION}, context=ctx, stream_mode=["updates", "values"])
    ):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            final = chunk
    return nodes, final


def _roles(llm: ScriptedChatModel) -> list[str]:
    keys = {PLANNER: "planner", LOCALIZER: "localizer", REFINER: "refiner", RESPONDER: "responder"}
    return [next((name for key, name in keys.items() if key in str(c[0].content)), "explorer") for c in llm.calls]


def test_the_planner_picks_the_first_rounds_starts_in_its_own_call(resources) -> None:
    build_namespace(resources, "calls", EVENTS, EDGES, TOPICS)
    explorers = Explorers({"C": {"action": "ANSWER", "satisfied_subgoals": [0, 1]}})
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS, "start_ids": ["C", "Z"]}],
            RESPONDER: [{"answer": "a latte", "cited_ids": ["C"]}],
        },
        respond=explorers,
    )
    nodes, final = _run(resources, llm, explorers=2, max_refinements=0)

    # One call planned and picked: the localizer was never asked; the planner saw every candidate.
    assert _roles(llm) == ["planner", "explorer", "explorer", "responder"]
    planner_prompt = str(llm.calls[0][-1].content)
    assert all(f"{e}: " in planner_prompt for e in EVENTS)
    # The picked starts are the ones explored, and only them (A, the best match, was not picked).
    assert sorted(explorers.seen) == ["C", "Z"] and "A" not in final["visited"]
    assert nodes[:2] == ["planner", "localize"] and final["subgoals"] == SUBGOALS


def test_a_planner_that_picks_no_start_leaves_the_pick_to_the_localizer(resources) -> None:
    build_namespace(resources, "calls", EVENTS, EDGES, TOPICS)
    explorers = Explorers({"C": {"action": "ANSWER", "satisfied_subgoals": [0, 1]}})
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS}],
            LOCALIZER: [{"event_ids": ["C"]}],
            RESPONDER: [{"answer": "a latte", "cited_ids": ["C"]}],
        },
        respond=explorers,
    )
    _run(resources, llm, explorers=2, max_refinements=0)
    assert _roles(llm) == ["planner", "localizer", "explorer", "responder"] and explorers.seen == ["C"]

    # With plan_starts off the planner is the paper's plain planner: subgoals only, no candidates shown.
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS}],
            LOCALIZER: [{"event_ids": ["C"]}],
            RESPONDER: [{"answer": "a latte", "cited_ids": ["C"]}],
        },
        respond=Explorers({"C": {"action": "ANSWER", "satisfied_subgoals": [0, 1]}}),
    )
    _run(resources, llm, explorers=2, max_refinements=0, plan_starts=False)
    assert _roles(llm) == ["planner", "localizer", "explorer", "responder"]
    assert "Candidates:" not in str(llm.calls[0][-1].content)


def test_a_planner_pick_outside_the_candidates_is_retried(resources) -> None:
    build_namespace(resources, "calls", EVENTS, EDGES, TOPICS)
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS, "start_ids": ["NOPE"]}, {"subgoals": SUBGOALS, "start_ids": ["A"]}],
            RESPONDER: [{"answer": "the blue finch", "cited_ids": ["A"]}],
        },
        respond=Explorers({"A": {"action": "ANSWER", "satisfied_subgoals": [0, 1]}}),
    )
    _, final = _run(resources, llm, explorers=1, max_refinements=0)
    assert "unknown start ids ['NOPE']" in str(llm.calls[1][-1].content)
    assert final["visited"] == ["A"] and not final["fallbacks"]


def test_a_refinement_round_with_one_candidate_takes_it_without_a_call(resources) -> None:
    # Round 1 reads A, B, C, D; the refinement round's only unread candidate is Z: the pick is forced, no call.
    build_namespace(resources, "calls", EVENTS, EDGES, TOPICS)
    # A and C lead on to B and D (each along its path), which are skipped; nothing satisfies a subgoal.
    explorers = Explorers(
        {e: {"action": "EXPAND", "next_events": [n], "satisfied_subgoals": []} for e, n in (("A", "B"), ("C", "D"))}
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS, "start_ids": ["A", "C"]}],
            REFINER: [{"query": "the bus"}],
            RESPONDER: [{"answer": "unknown", "cited_ids": []}],
        },
        respond=explorers,
    )
    nodes, final = _run(resources, llm, explorers=2, max_refinements=1)
    assert sorted(explorers.seen[:2]) == ["A", "C"] and sorted(explorers.seen[2:4]) == ["B", "D"]
    assert explorers.seen[4:] == ["Z"]
    assert _roles(llm).count("localizer") == 0 and _roles(llm).count("refiner") == 1
    assert nodes.count("localize") == 2 and final["refinements"] == 1


def test_a_refiner_that_repeats_the_question_gets_no_refinement_round(resources) -> None:
    build_namespace(resources, "calls", EVENTS, EDGES, TOPICS)
    explorers = Explorers({"A": {"action": "EXPAND", "next_events": [], "satisfied_subgoals": [0]}})
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS, "start_ids": ["A"]}],
            REFINER: [{"query": "which cafe did Maya visit, and what did she drink"}],
            RESPONDER: [{"answer": "the blue finch", "cited_ids": ["A"]}],
        },
        respond=explorers,
    )
    nodes, final = _run(resources, llm, explorers=1, max_refinements=1)
    # Subgoal 1 stayed open and events stayed unread, so the refiner was asked; it only repeated the question.
    assert final["satisfied"] == [True, False] and _roles(llm).count("refiner") == 1
    assert nodes[-4:] == ["merge", "refine", "respond", "finish"] and nodes.count("localize") == 1
    assert explorers.seen == ["A"] and final["refinements"] == 1 and final["repeated_query"]


def test_no_refinement_when_every_event_was_read(resources) -> None:
    build_namespace(
        resources, "calls", {"A": EVENTS["A"], "B": EVENTS["B"]}, [("A", "elaboration", "B")], {"T0": ["A", "B"]}
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS, "start_ids": ["A"]}],
            REFINER: [{"query": "what maya drank"}],
            RESPONDER: [{"answer": "the blue finch", "cited_ids": ["A"]}],
        },
        respond=Explorers({"A": {"action": "EXPAND", "next_events": ["B"], "satisfied_subgoals": [0]}}),
    )
    nodes, final = _run(resources, llm, explorers=1, max_refinements=1)
    # Subgoal 1 is open, but A and B are read: a refinement round starts from unread events only.
    assert final["satisfied"] == [True, False] and sorted(final["visited"]) == ["A", "B"]
    assert "refiner" not in _roles(llm) and "refine" not in nodes and final["refinements"] == 0


def test_the_benchmarks_scripted_planner_picks_by_the_start_selection_rule() -> None:
    from logicmap.evals.bench.scripted import role_of, scripted_reply
    from logicmap.prompts import localize, plan

    candidates = "E3: a cafe visit\nE1: a bus ride\nE7: a latte\nE2: a receipt"
    folded = plan.build_plan_and_starts_messages(QUESTION, candidates, max_starts=5)
    reply = scripted_reply(folded)
    # The same decisions as the planner's and the localizer's own calls under the benchmark's rule.
    assert reply["subgoals"] == scripted_reply(plan.build_messages(QUESTION))["subgoals"]
    picks = scripted_reply(localize.build_messages(QUESTION, reply["subgoals"], candidates, 5))["event_ids"]
    assert reply["start_ids"] == picks == ["E3", "E1", "E7"]
    assert role_of(folded) == "PlanAndStarts" and role_of([]) == "other"
