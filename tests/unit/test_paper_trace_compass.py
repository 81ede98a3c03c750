"""Paper trace of CompassMem's search: a scripted planner, localizer and explorers make the paper's decisions on a
small hand-built event graph; the assertions are on the control flow (which events each explorer walked, in which
superstep, which nodes ran, what was kept and which subgoals each kept event supports)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.compass import CompassContext, answer, build_compass_graph
from logicmap.memory.embeddings import normalize
from tests.unit.test_compass import EXPLORER, LOCALIZER, PLANNER, REFINER, RESPONDER, build_namespace

ANSWER_ONE = {"action": "ANSWER"}
SKIP = {"action": "SKIP"}


def _current_event(messages) -> str:
    return re.search(r"Current event:\n\((\S+?),", messages[-1].content).group(1)


class Explorers:
    """The explorers' script: a decision per event; every call is recorded with the prompt it saw."""

    def __init__(self, decisions: dict[str, dict]) -> None:
        self.decisions = decisions
        self.seen: list[str] = []
        self.prompts: dict[str, str] = {}

    def __call__(self, messages) -> dict:
        assert EXPLORER in str(messages[0].content)
        eid = _current_event(messages)
        self.seen.append(eid)
        self.prompts[eid] = str(messages[-1].content)
        return self.decisions.get(eid, SKIP)


def _run(resources, namespace: str, llm: ScriptedChatModel, question: str, **settings):
    """The compass graph streamed: the nodes in the order they ran, every node's update, the final values."""
    compiled = build_compass_graph().compile()
    ctx = CompassContext(namespace=namespace, resources=resources, **settings)
    resources.llm_ = llm
    nodes, updates, final = [], [], {}
    for mode, chunk in compiled.stream({"question": question}, context=ctx, stream_mode=["updates", "values"]):
        if mode == "updates":
            for node, update in chunk.items():
                nodes.append(node)
                updates.append((node, update))
        else:
            final = chunk
    return nodes, updates, final


def _paths(updates) -> list[dict]:
    """The explorers' paths as the last node that scheduled or ended them left them."""
    return [u["paths"] for _, u in updates if "paths" in u][-1]


def _supersteps(updates) -> list[list[str]]:
    """The events each superstep's explorers decided on, superstep by superstep (from the merge logs)."""
    return [sorted(d["event_id"] for d in u["log"][0]["decisions"]) for node, u in updates if node == "merge"]


def _sim(resources, text: str, goal: str) -> float:
    emb = resources.embeddings
    return float(normalize(np.asarray(emb.embed_query(text))) @ normalize(np.asarray(emb.embed_query(goal))))


def test_one_explorers_answer_ends_its_path_only_and_the_search_runs_until_every_subgoal_is_satisfied(
    resources,
) -> None:
    events = {
        "A": "maya visited the blue finch cafe",
        "B": "maya met her sister ana downtown",
        "C": "at the cafe maya drank an iced matcha latte",
        "G": "ana bought a new bicycle",
        "E": "the cafe menu listed pastries",
        "F": "maya paid with a card",
    }
    edges = [
        ("A", "elaboration", "E"),
        ("B", "causal", "C"),
        ("B", "temporal_before", "G"),
        ("C", "temporal_before", "F"),
    ]
    build_namespace(resources, "trace", events, edges, {"T0": list(events)})
    subgoals = ["which cafe maya visited", "what maya drank there"]
    explorers = Explorers(
        {
            "A": {"action": "ANSWER", "next_events": ["E"], "satisfied_subgoals": [0]},
            "B": {"action": "EXPAND", "next_events": ["C", "G"], "satisfied_subgoals": []},
            "C": {"action": "EXPAND", "next_events": ["F"], "satisfied_subgoals": [1]},
            "G": SKIP,
        }
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": subgoals}],
            LOCALIZER: [{"event_ids": ["A", "B"]}],
            REFINER: [{"query": "unused"}],
            RESPONDER: [{"answer": "an iced matcha latte at the blue finch", "cited_ids": ["A", "C"]}],
        },
        respond=explorers,
    )
    nodes, updates, final = _run(
        resources, "trace", llm, "Which cafe did maya visit and what did she drink there?", explorers=2, max_steps=6
    )

    # A's ANSWER (superstep 0) ended A's path only: B's explorer went on along B's relation to C in superstep 1,
    # and with both subgoals satisfied there was no refinement.
    assert not [c for c in llm.calls if REFINER in str(c[0].content)], "A's ANSWER stopped the whole search"
    assert _supersteps(updates) == [["A", "B"], ["C", "G"]]
    assert nodes == ["planner", "localize", "explore", "explore", "merge", "explore", "explore", "merge", "respond", "finish"]
    # An ANSWER's next events are not followed; the search stopped once every subgoal was satisfied, with F queued.
    assert "E" not in explorers.seen and "F" not in explorers.seen
    merges = [u for node, u in updates if node == "merge"]
    assert "E" not in merges[0]["queue"] and merges[-1]["log"][0]["stop"] == "satisfied" and "F" in merges[-1]["queue"]

    # Progress tracking: each kept event is annotated with the subgoals it supports; the vector derives from them.
    assert merges[0]["support"] == {"A": [0], "B": []} and merges[0]["satisfied"] == [True, False]
    assert final["support"] == {"A": [0], "B": [], "C": [1]}
    assert merges[-1]["satisfied"] == [True, True]
    assert "(supports subgoals: 0)" in explorers.prompts["C"]  # the explorers see the annotations

    # Paths: B's explorer walked B -[causal]-> C; the freed explorer took G, left by B in the global queue.
    paths = {tuple(p["nodes"]): p for p in _paths(updates)}
    assert set(paths) == {("A",), ("B", "C"), ("G",)}
    assert paths[("A",)]["end"] == "ANSWER" and paths[("B", "C")]["end"] == "satisfied"
    assert paths[("A",)]["origin"] is None and paths[("B", "C")]["origin"] is None and paths[("G",)]["origin"] == "B"
    assert paths[("G",)]["explorer"] == paths[("A",)]["explorer"] != paths[("B", "C")]["explorer"]
    assert "this path reached it from B by [causal]" in explorers.prompts["C"]
    assert "reached it from" not in explorers.prompts["A"]  # a start node
    # C and G both came from B; the path continued to the better one for the open subgoal (the global priority).
    assert merges[0]["log"][0]["priorities"]["C"] > merges[0]["log"][0]["priorities"]["G"]
    assert final["kept"] == ["A", "B", "C"]  # the responder read the kept evidence only


def test_an_explorer_follows_the_relations_of_the_node_it_is_on_before_a_better_queued_start(resources) -> None:
    events = {
        "A": "maya visited the blue finch cafe",
        "B": "the blue finch had a long queue",
        "D": "maya had a drink",
    }
    build_namespace(resources, "path", events, [("A", "elaboration", "B")], {"T0": ["A", "B"], "T1": ["D"]})
    subgoals = ["maya visited the blue finch cafe", "what drink maya had"]
    # D, the other start, matches the open subgoal better than A's neighbour B: a global best-first pick jumps to it.
    assert _sim(resources, events["D"], subgoals[1]) > _sim(resources, events["B"], subgoals[1])
    assert _sim(resources, events["A"], subgoals[0]) > _sim(resources, events["D"], subgoals[1])
    explorers = Explorers(
        {
            "A": {"action": "EXPAND", "next_events": ["B"], "satisfied_subgoals": [0]},
            "B": SKIP,
            "D": {"action": "ANSWER", "satisfied_subgoals": [1]},
        }
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": subgoals}],
            LOCALIZER: [{"event_ids": ["A", "D"]}],
            RESPONDER: [{"answer": "a drink", "cited_ids": ["D"]}],
        },
        respond=explorers,
    )
    resources.llm_ = llm
    result = answer(
        "Which cafe did maya visit and what did she drink?",
        "path",
        resources=resources,
        context=CompassContext(explorers=1, max_steps=6, max_refinements=0),
    )

    # The one explorer walks A -> B (the relation of the node it is on); B is a dead end, so the explorer takes
    # the best event left in the global queue, the start D.
    assert explorers.seen == ["A", "B", "D"]
    assert [(p["nodes"], p["origin"], p["end"]) for p in result.details["paths"]] == [
        (["A", "B"], None, "no candidates"),
        (["D"], None, "ANSWER"),
    ]
    assert result.details["support"] == {"A": [0], "D": [1]} and result.details["satisfied"] == [True, True]
    assert [e.id for e in result.evidence] == ["A", "D"] and result.steps == 3


@pytest.mark.parametrize("skip_names", [[], [1]], ids=["skip", "skip-naming-a-subgoal"])
def test_the_refinement_round_gets_its_own_step_budget_and_a_skip_satisfies_nothing(resources, skip_names) -> None:
    events = {
        "A": "maya visited the blue finch cafe",
        "B": "the blue finch had a long queue",
        "X": "the bus was late",
        "C": "maya drank an iced matcha latte",
        "D": "the latte came with oat milk",
    }
    edges = [("A", "elaboration", "B"), ("B", "temporal_before", "X"), ("C", "elaboration", "D")]
    build_namespace(resources, "refine", events, edges, {"T0": ["A", "B", "X"], "T1": ["C", "D"]})
    subgoals = ["which cafe maya visited", "what maya drank"]
    explorers = Explorers(
        {
            "A": {"action": "EXPAND", "next_events": ["B"], "satisfied_subgoals": [0]},
            # A SKIP naming a subgoal: the event is not kept, so it supports nothing and satisfies nothing.
            "B": {"action": "SKIP", "next_events": ["X"], "satisfied_subgoals": skip_names},
            "C": {"action": "EXPAND", "next_events": ["D"], "satisfied_subgoals": []},
            "D": {"action": "ANSWER", "satisfied_subgoals": [1]},
        }
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": subgoals}],
            LOCALIZER: [{"event_ids": ["A"]}, {"event_ids": ["C"]}],
            REFINER: [{"query": "what maya drank"}],
            RESPONDER: [{"answer": "an iced matcha latte with oat milk", "cited_ids": ["C", "D"]}],
        },
        respond=explorers,
    )
    nodes, updates, final = _run(
        resources,
        "refine",
        llm,
        "Which cafe did maya visit and what did she drink?",
        explorers=1,
        max_steps=2,
        max_refinements=1,
    )

    # Round 1 spends its budget of two supersteps (A, then B) with subgoal 1 open: B's SKIP satisfied nothing.
    # The refinement round gets a fresh budget: two more supersteps, C then D along C's relation.
    assert _supersteps(updates) == [["A"], ["B"], ["C"], ["D"]]
    merges = [u for node, u in updates if node == "merge"]
    assert merges[1]["support"] == {"A": [0]} and merges[1]["satisfied"] == [True, False]
    assert merges[1]["log"][0]["stop"] == "budget" and "X" in merges[1]["queue"]
    assert [m["round_step"] for m in merges] == [1, 2, 1, 2]
    assert nodes == [
        "planner",
        "localize",
        "explore",
        "merge",
        "explore",
        "merge",
        "refine",
        "localize",
        "explore",
        "merge",
        "explore",
        "merge",
        "respond",
        "finish",
    ]
    assert len([c for c in llm.calls if REFINER in str(c[0].content)]) == 1
    assert final["support"] == {"A": [0], "C": [], "D": [1]} and merges[-1]["satisfied"] == [True, True]
    assert [p["nodes"] for p in _paths(updates)] == [["A", "B"], ["C", "D"]]
    assert [p["end"] for p in _paths(updates)] == ["budget", "ANSWER"]
    assert final["kept"] == ["A", "C", "D"]


def test_the_search_ends_when_the_global_queue_is_empty(resources) -> None:
    build_namespace(
        resources,
        "empty",
        {"A": "maya visited a cafe", "B": "the cafe was busy", "Z": "the bus was late"},
        [("A", "elaboration", "B")],
        {"T0": ["A", "B"], "T1": ["Z"]},
    )
    explorers = Explorers({"A": {"action": "EXPAND", "next_events": ["B"], "satisfied_subgoals": [0]}, "B": SKIP})
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": ["which cafe maya visited", "what maya drank"]}],
            LOCALIZER: [{"event_ids": ["A"]}],
            RESPONDER: [{"answer": "a cafe", "cited_ids": ["A"]}],
        },
        respond=explorers,
    )
    nodes, updates, final = _run(
        resources, "empty", llm, "Which cafe and what drink?", explorers=3, max_steps=6, max_refinements=0
    )
    assert _supersteps(updates) == [["A"], ["B"]]  # two of six supersteps: nothing was left to explore
    merges = [u for node, u in updates if node == "merge"]
    assert merges[-1]["done"] and merges[-1]["queue"] == {} and merges[-1]["log"][0]["stop"] is None
    assert [(p["nodes"], p["end"]) for p in _paths(updates)] == [(["A", "B"], "no candidates")]
    assert final["support"] == {"A": [0]} and nodes[-2:] == ["respond", "finish"]
