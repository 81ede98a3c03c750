"""Paper trace of CompassMem (arXiv, "CompassMem"; ``../shared/papers/004_*.txt``): the Appendix D case study
("What kinds of artworks did the speaker mention creating after moving to the new city?") run with scripted
planner, localizer, explorers, refiner and responder, and the construction prompts of Appendix F.1.

Each script is chosen so that one of the paper's rules changes the outcome:

* one global priority queue (4.3.2 Coordination, Eq. 11): every explorer takes the globally best queued
  event; a path's own low-priority child waits (the old scheduler moved each path to its own child first);
* the round runs until the queue is empty or every subgoal is satisfied, with the paper's budget (three
  explorers, one refinement round, no step cap): a path longer than six steps is walked to its end;
* the responder follows Appendix F.2: no "insufficient information" answer;
* construction: the segmenter's Appendix F.1 guidance (aggressive combining) reaches the separate segmenter
  and the merged session analyst alike, relations are asked over ALL pairs with open labels, and the
  cross-session links the paper does not have are an option.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import PrivateAttr

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.graphs.strategies.compass import CompassContext, build_compass_graph
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.memory.indexes.embeddings import normalize
from tests.unit.session_models import SessionModel
from tests.unit.test_compass import EXPLORER, LOCALIZER, PLANNER, REFINER, RESPONDER, build_namespace

SKIP: dict[str, Any] = {"action": "SKIP"}
QUESTION = "What kinds of artworks did the speaker mention creating after moving to the new city?"
# The Planner's three subgoals of the case study (Appendix D), h1..h3.
SUBGOALS = [
    "identify the event describing the speaker's move to a new city",
    "find events mentioning artistic or creative activities after the move",
    "extract the specific types of artworks mentioned",
]
REFINED = "What specific forms of art did the speaker create after moving to the new city?"
PAPER_EXPLORER = "You are an expert information evaluator"  # Appendix F.2, Action Decision Prompt
PAPER_REFINER = "generate a refined search query to find missing information"  # Appendix F.2, Refinement Query


class Explorers:
    """The explorers' script: a decision per event; every call recorded with the prompt it saw."""

    def __init__(self, decisions: dict[str, dict]) -> None:
        self.decisions = decisions
        self.seen: list[str] = []

    def __call__(self, messages) -> dict:
        assert EXPLORER in str(messages[0].content) or PAPER_EXPLORER in str(messages[0].content)
        eid = re.search(r"(?:Current event|CURRENT NODE INFORMATION):\n\((\S+?),", messages[-1].content).group(1)
        self.seen.append(eid)
        return self.decisions.get(eid, SKIP)


def _run(resources, namespace: str, llm: ScriptedChatModel, **settings):
    compiled = build_compass_graph().compile()
    ctx = CompassContext(namespace=namespace, resources=resources, **settings)
    resources.llm_ = llm
    nodes, updates, final = [], [], {}
    for mode, chunk in compiled.stream(
        {"question": QUESTION}, context=ctx, stream_mode=["updates", "values"], config={"recursion_limit": 500}
    ):
        if mode == "updates":
            for node, update in chunk.items():
                nodes.append(node)
                updates.append((node, update))
        else:
            final = chunk
    return nodes, updates, final


def _supersteps(updates) -> list[list[str]]:
    return [sorted(d["event_id"] for d in u["log"][0]["decisions"]) for node, u in updates if node == "merge"]


def _sim(resources, text: str, goal: str) -> float:
    emb = resources.embeddings
    return float(normalize(np.asarray(emb.embed_query(text))) @ normalize(np.asarray(emb.embed_query(goal))))


CASE_EVENTS = {
    "M": "moved to chicago last summer for a new job",
    "U": "spending weekends exploring art museums after the move",
    "Q": "visited an art supply store in the new city, creating kinds of plans",
    "J": "the job in chicago has long hours",
    "P": "started painting landscapes in the apartment: creative activities after the move",
    "V": "artistic activities: sketching at the museums after the move",
    "X": "bought brushes at the art supply store for future artworks",
    "S": "experimented with stained glass designs: specific types of artworks",
}
CASE_EDGES = [("M", "follow_up", "J"), ("U", "motivation", "P"), ("U", "elaboration", "V"), ("Q", "follow_up", "X")]


def test_case_study_global_queue_refinement_and_responder(resources) -> None:
    build_namespace(
        resources, "case", CASE_EVENTS, CASE_EDGES, {"T0": ["M", "J"], "T1": ["U", "P", "V", "Q", "X"], "T2": ["S"]}
    )
    # After h1 is satisfied, M's own child J is the worst queued event for the open subgoals (Eq. 11).
    for other in ("P", "V", "X"):
        assert max(_sim(resources, CASE_EVENTS["J"], g) for g in SUBGOALS[1:]) < max(
            _sim(resources, CASE_EVENTS[other], g) for g in SUBGOALS[1:]
        )
    explorers = Explorers(
        {
            "M": {"action": "EXPAND", "next_events": ["J"], "satisfied_subgoals": [0]},
            "U": {"action": "SKIP", "next_events": ["P", "V"], "satisfied_subgoals": []},
            "Q": {"action": "SKIP", "next_events": ["X"], "satisfied_subgoals": []},
            "P": {"action": "EXPAND", "next_events": [], "satisfied_subgoals": [1]},
            "S": {"action": "ANSWER", "next_events": [], "satisfied_subgoals": [2]},
        }
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS}],
            LOCALIZER: [{"event_ids": ["M", "U", "Q"]}, {"event_ids": ["S"]}],
            REFINER: [{"query": REFINED}],
            RESPONDER: [{"answer": "paintings and stained glass artworks", "cited_ids": ["M", "P", "S"]}],
        },
        respond=explorers,
    )
    nodes, updates, final = _run(resources, "case", llm, explorers=3, plan_starts=False)  # the paper's Psi_start

    # Localization: three starting nodes, explored by the three explorers in parallel.
    steps = _supersteps(updates)
    assert steps[0] == ["M", "Q", "U"]
    # ONE global queue: J (queued by M's path), P, V (by U), X (by Q). The three explorers take the three
    # globally best, P, V and X; M's path does not move to its own child J first.
    assert steps[1] == ["P", "V", "X"]
    assert steps[2] == ["J"]  # J's turn comes when it is the best left
    # Round 1 ends with the queue empty and h3 unsatisfied: one refinement (the paper's 76.4% case), then the
    # second round from the refined query finds the stained glass, which satisfies every subgoal.
    assert nodes.count("refine") == 1 and steps[3] == ["S"]
    refine_calls = [c for c in llm.calls if REFINER in str(c[0].content)]
    assert len(refine_calls) == 1
    # The refinement is aimed at the unsatisfied subgoals (4.3.3): the refiner is shown h3 as missing, not the
    # satisfied h1 and h2 (a refiner asked about every subgoal would search for the move again).
    missing = str(refine_calls[0][1].content).split("Still missing:\n", 1)[1].split("\nFound so far:", 1)[0]
    assert missing == f"- {SUBGOALS[2]}"
    assert [e["missing"] for _, u in updates for e in u.get("log", []) if e.get("node") == "refine"] == [[SUBGOALS[2]]]
    merges = [u for node, u in updates if node == "merge"]
    assert merges[2]["queue"] == {} and merges[2]["satisfied"] == [True, True, False]
    assert merges[-1]["satisfied"] == [True, True, True] and merges[-1]["log"][0]["stop"] == "satisfied"
    # The evidence of the case study: the move, the landscapes, the stained glass.
    assert final["kept"] == ["M", "P", "S"] and final["support"] == {"M": [0], "P": [1], "S": [2]}
    assert final["answer"] == "paintings and stained glass artworks"
    # The responder is the paper's (Appendix F.2): it never answers that the information is insufficient.
    system = next(str(c[0].content) for c in llm.calls if RESPONDER in str(c[0].content))
    assert "do not state that the information is insufficient" in system and "Not mentioned" not in system


def test_faithful_search_asks_with_the_papers_action_decision_and_refinement_prompts(resources) -> None:
    """``faithful``: the explorers get the Action Decision Prompt and the refiner the Refinement Query Prompt
    (Appendix F.2), each with a typed reply; the case study runs to the same evidence. The default keeps the
    project's prompts (``test_case_study_global_queue_refinement_and_responder``)."""
    build_namespace(
        resources,
        "case-paper",
        CASE_EVENTS,
        CASE_EDGES,
        {"T0": ["M", "J"], "T1": ["U", "P", "V", "Q", "X"], "T2": ["S"]},
    )
    reason = {"reasoning": "(1) info (2) satisfied (3) remaining (4) next"}
    explorers = Explorers(
        {
            "M": {"action": "EXPAND", "next_events": ["J"], "satisfied_subgoals": [0], **reason},
            "U": {"action": "SKIP", "next_events": ["P", "V"], "satisfied_subgoals": [], **reason},
            "Q": {"action": "SKIP", "next_events": ["X"], "satisfied_subgoals": [], **reason},
            "P": {"action": "EXPAND", "next_events": [], "satisfied_subgoals": [1], **reason},
            "S": {"action": "ANSWER", "next_events": [], "satisfied_subgoals": [2], **reason},
        }
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS}],
            LOCALIZER: [{"event_ids": ["M", "U", "Q"]}, {"event_ids": ["S"]}],
            PAPER_REFINER: [{"query": REFINED, "target_subgoals": [3]}],
            RESPONDER: [{"answer": "paintings and stained glass artworks", "cited_ids": ["M", "P", "S"]}],
        },
        respond=explorers,
    )
    _, _, final = _run(resources, "case-paper", llm, faithful=True)
    assert final["kept"] == ["M", "P", "S"] and final["support"] == {"M": [0], "P": [1], "S": [2]}
    explore_calls = [c for c in llm.calls if PAPER_EXPLORER in str(c[0].content)]
    assert explore_calls and not [c for c in llm.calls if EXPLORER in str(c[0].content)]
    system = str(explore_calls[0][0].content)
    for rule in (
        "3. ANSWER: Use ONLY when ALL sub-goals are SATISFIED (or nearly all).",
        "Be conservative: If ANY sub-goal remains unsatisfied, use EXPAND instead.",
        "Only mark a sub-goal as satisfied if you have DIRECT evidence.",
        "(3) Only include sub-goals with DIRECT evidence; (4) Do NOT speculate.",
        "Multi-node selection rules: Maximum 3 nodes, only select HIGHLY relevant ones.",
        '"reasoning"',
    ):
        assert rule in system, rule
    shown = str(explore_calls[0][1].content)
    assert "QUESTION: " in shown and "PREVIOUSLY KEPT INFORMATION:" in shown and "NEIGHBOR NODES" in shown
    (refine_call,) = [c for c in llm.calls if PAPER_REFINER in str(c[0].content)]
    asked = str(refine_call[1].content)
    assert f"Satisfied sub-goals:\n1. {SUBGOALS[0]}\n2. {SUBGOALS[1]}\n" in asked
    assert f"Unsatisfied sub-goals:\n3. {SUBGOALS[2]}\n" in asked
    for rule in (
        "3. Use different keywords or phrases than the original question.",
        "5. NOT repeat the original question.",
        '"target_subgoals"',
    ):
        assert rule in asked, rule
    assert not [c for c in llm.calls if REFINER in str(c[0].content)]


def test_faithful_budget_runs_a_round_until_the_queue_is_empty(resources) -> None:
    # A path of eight events (Table 5: paths up to 11 steps): each EXPAND leads to the next; only the last
    # one satisfies the second subgoal.
    chain = {f"C{i}": f"step {i} of the long project" for i in range(1, 9)}
    chain["C8"] = "finished the stained glass window"
    edges = [(f"C{i}", "follow_up", f"C{i + 1}") for i in range(1, 8)]
    build_namespace(resources, "chain", chain, edges, {"T0": list(chain)})
    decisions = {
        f"C{i}": {"action": "EXPAND", "next_events": [f"C{i + 1}"], "satisfied_subgoals": [0] if i == 1 else []}
        for i in range(1, 8)
    }
    decisions["C8"] = {"action": "EXPAND", "next_events": [], "satisfied_subgoals": [1]}
    routes = {
        PLANNER: [{"subgoals": ["the long project", "the stained glass window"]}],
        LOCALIZER: [{"event_ids": ["C1"]}],
        REFINER: [{"query": "stained glass window"}],
        RESPONDER: [{"answer": "a stained glass window", "cited_ids": ["C8"]}],
    }
    # The paper's configuration: the search is not cut at six supersteps; it walks the whole path.
    nodes, updates, final = _run(
        resources,
        "chain",
        ScriptedChatModel(routes=routes, respond=Explorers(decisions)),
        faithful=True,
        max_refinements=0,
    )
    assert _supersteps(updates) == [[f"C{i}"] for i in range(1, 9)]
    assert final["satisfied"] == [True, True] and "C8" in final["kept"]
    assert [u for n, u in updates if n == "merge"][-1]["log"][0]["stop"] == "satisfied"
    # The project's cost cap (max_steps=6, an extension) would stop with C7 still queued.
    _, capped, _ = _run(
        resources,
        "chain",
        ScriptedChatModel(routes=routes, respond=Explorers(decisions)),
        max_steps=6,
        max_refinements=0,
    )
    last = [u for n, u in capped if n == "merge"][-1]
    assert len(_supersteps(capped)) == 6 and last["log"][0]["stop"] == "budget" and "C7" in last["queue"]
    # Every extension is off in the faithful configuration.
    from logicmap.graphs.strategies.compass import FAITHFUL_OVERRIDES

    assert FAITHFUL_OVERRIDES["name_free_readings"] is False and FAITHFUL_OVERRIDES["max_steps"] is None
    assert FAITHFUL_OVERRIDES["plan_starts"] is False and FAITHFUL_OVERRIDES["recipe"] == "dense"


def test_three_explorers_by_default(resources) -> None:
    """The paper's three parallel explorers (4.3.2, App. B) are the default: four starting nodes take two
    supersteps, three events in the first, the fourth (the least promising) in the next."""
    build_namespace(
        resources, "four", CASE_EVENTS, CASE_EDGES, {"T0": ["M", "J"], "T1": ["U", "P", "V", "Q", "X"], "T2": ["S"]}
    )
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS}],
            LOCALIZER: [{"event_ids": ["M", "U", "Q", "S"]}],
            RESPONDER: [{"answer": "paintings", "cited_ids": ["M"]}],
        },
        respond=Explorers({}),  # every event skipped: the four starts are all there is to explore
    )
    _, updates, _ = _run(resources, "four", llm, plan_starts=False, max_refinements=0)
    steps = _supersteps(updates)
    assert [len(s) for s in steps] == [3, 1] and sorted(steps[0] + steps[1]) == ["M", "Q", "S", "U"]


class FirstTooMany:
    """An explorer that names four next events for the move, then (sent back) three."""

    def __init__(self) -> None:
        self.replies = [
            {"action": "EXPAND", "next_events": ["A", "B", "C", "D"], "satisfied_subgoals": [0]},
            {"action": "EXPAND", "next_events": ["B", "C", "D"], "satisfied_subgoals": [0]},
        ]
        self.retries: list[str] = []

    def __call__(self, messages) -> dict:
        assert EXPLORER in str(messages[0].content)
        if re.search(r"Current event:\n\((\S+?),", str(messages[1].content)).group(1) != "M":
            return SKIP
        if len(messages) > 2:
            self.retries.append(str(messages[-1].content))
        return self.replies.pop(0) if self.replies else SKIP


def test_an_expand_names_at_most_three_next_events(resources) -> None:
    """Eq. 9-10 and F.2: an EXPAND names at most 3 next nodes. A reply naming four is sent back; the three of
    the retry are queued (a cap of four would queue the first reply's A, or all four)."""
    events = {
        "M": CASE_EVENTS["M"],
        "A": "a colleague at the chicago job",
        "B": "the chicago apartment",
        "C": "the neighbourhood cafe",
        "D": "the commute by train",
    }
    build_namespace(resources, "fan", events, [("M", "follow_up", n) for n in "ABCD"], {"T0": list(events)})
    explorer = FirstTooMany()
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS}],
            LOCALIZER: [{"event_ids": ["M"]}],
            RESPONDER: [{"answer": "paintings", "cited_ids": ["M"]}],
        },
        respond=explorer,
    )
    _, updates, _ = _run(resources, "fan", llm, plan_starts=False, max_refinements=0)
    # The three explorers take the three queued events in the next superstep; A is never read.
    assert _supersteps(updates) == [["M"], ["B", "C", "D"]]
    assert len(explorer.retries) == 1 and "at most 3 next_events" in explorer.retries[0]


def test_the_no_llm_explorer_expands_to_at_most_three_neighbours() -> None:
    from logicmap.agents.explorer import similarity_decision

    goal = np.eye(4)[0].astype(np.float32)
    near = np.vstack([goal] * 4)  # four neighbours, each as close to the open subgoal as can be
    decision = similarity_decision(
        goal[None, :],
        [goal[None, :]],
        [False],
        ["A", "B", "C", "D"],
        near,
        keep_threshold=0.1,
        satisfy_threshold=2.0,
        expand_threshold=0.1,
    )
    assert decision.action == "EXPAND" and decision.next_events == ["A", "B", "C"]


# -- construction (Appendix F.1) -----------------------------------------------------------------------

_TURN = re.compile(r"^\[(?P<id>[^\]]+)\] (?P<speaker>[^:]+):", re.MULTILINE)
_EVENT = re.compile(r"^(E\d+): ", re.MULTILINE)


class GuidedModel(SessionModel):
    """A model that does what its instructions say: it combines related turns (two per event here) only when
    told to AGGRESSIVELY COMBINE, and relates every pair of events only when told to consider ALL pairs
    (else adjacent ones), with the open label the paper's examples start with."""

    _system: str = PrivateAttr(default="")

    def _next(self, messages):
        self._system = str(messages[0].content)
        return super()._next(messages)

    def _segmenter(self, text: str) -> dict:
        ids = [m.group("id") for m in _TURN.finditer(text)]
        size = 2 if "AGGRESSIVELY COMBINE" in self._system else 1
        chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
        return {"events": [{"summary": f"Event over {c[0]} to {c[-1]}.", "turn_ids": c} for c in chunks]}

    def _relations(self, text: str) -> dict:
        keys = _EVENT.findall(text.split("\n\nTurns:")[0])
        if "ALL unordered pairs" in self._system:
            pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :]]
        else:
            pairs = list(zip(keys, keys[1:]))
        return {"relations": [{"source": a, "target": b, "label": "follow_up"} for a, b in pairs]}


CASE_DIALOG = [
    ("Sam", "I moved to Chicago last summer for a new job."),
    ("Ana", "How is the new city treating you?"),
    ("Sam", "I have been spending weekends exploring art museums."),
    ("Ana", "Which one is your favourite so far?"),
    ("Sam", "I started painting landscapes in my apartment."),
    ("Ana", "Oil or watercolour?"),
    ("Sam", "I also experimented with stained glass designs."),
    ("Ana", "That sounds beautiful, send me a photo."),
]


def _case_conversation(sessions: int = 1) -> Conversation:
    out = []
    for s in range(1, sessions + 1):
        turns = [RawTurn(dia_id=f"D{s}:{i + 1}", speaker=who, text=text) for i, (who, text) in enumerate(CASE_DIALOG)]
        stamp = datetime(2023, 5, 4 + 7 * (s - 1), 10, 0)
        out.append(
            Session(
                session_id=f"S{s}",
                timestamp=stamp,
                timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"),
                turns=turns,
            )
        )
    return Conversation(conversation_id="case", speakers=["Sam", "Ana"], sessions=out)


def _layer(resources, namespace: str) -> tuple[list, list]:
    snap = resources.store.snapshot(namespace)
    turns_of = {e.id: tuple(e.turn_ids) for e in snap.events.values()}
    events = sorted(turns_of.values())
    relations = sorted((turns_of[r.source], r.label, turns_of[r.target]) for r in snap.relations.values())
    return events, relations


def test_merged_analyst_yields_the_separate_roles_events_and_relations(resources) -> None:
    conv = _case_conversation()
    layers = {}
    for combined in (True, False):
        model = GuidedModel()
        resources.llm_ = model
        ns = f"case-{'merged' if combined else 'separate'}"
        ingest_conversation(
            conv, ns, resources=resources, context=IngestContext(policy="llm", combined_extraction=combined)
        )
        assert ("analysis" in model.role_calls) is combined and ("segmenter" in model.role_calls) is not combined
        layers[combined] = _layer(resources, ns)
    events, relations = layers[True]
    # Both were told to combine (the paper's guidance): four events of two turns, not eight of one.
    assert events == [(f"D1:{i}", f"D1:{i + 1}") for i in (1, 3, 5, 7)]
    # Relations over ALL pairs of the session's events (6 for 4 events), with the open label.
    assert len(relations) == 6 and {label for _, label, _ in relations} == {"follow_up"}
    assert layers[True] == layers[False]  # the merged single call yields the separate roles' memory


def test_cross_session_links_are_an_option_off_in_the_faithful_construction(resources) -> None:
    conv = _case_conversation(sessions=2)

    def crossing(namespace: str) -> list:
        snap = resources.store.snapshot(namespace)
        session = {e.id: e.session_id for e in snap.events.values()}
        return [r for r in snap.relations.values() if session[r.source] != session[r.target]]

    for links, ns in ((True, "links-on"), (False, "links-off")):
        ingest_conversation(
            conv, ns, resources=resources, context=IngestContext(policy="heuristic", cross_session_links=links)
        )
    assert any(r.label == "temporal_before" for r in crossing("links-on"))  # the project's extension
    assert crossing("links-off") == []  # the paper's: relations within a session (and fusion links)


def test_the_responder_never_answers_that_the_information_is_insufficient(resources) -> None:
    build_namespace(resources, "resp", {"M": CASE_EVENTS["M"]}, [], {"T0": ["M"]})
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": SUBGOALS}],
            REFINER: [{"query": REFINED}],
            RESPONDER: [{"answer": "paintings", "cited_ids": ["M"]}],
        },
        respond=Explorers({"M": {"action": "EXPAND", "next_events": [], "satisfied_subgoals": [0]}}),
    )
    _, _, final = _run(resources, "resp", llm, max_refinements=0)
    # Appendix F.2: "If you are uncertain or lack sufficient information, do not state that the information is
    # insufficient. Instead, provide a reasonable and well-justified answer" (the old prompt said "Not mentioned").
    system = next(str(c[0].content) for c in llm.calls if RESPONDER in str(c[0].content))
    assert "do not state that the information is insufficient" in system and "Not mentioned" not in system
    assert final["answer"] == "paintings"


def test_the_planner_gives_two_to_five_subgoals(resources) -> None:
    """Eq. 7 and App. B: the Planner decomposes the question into 2-5 subgoals. A plan of one subgoal is sent back
    with the rule, and the retry's three subgoals are the plan."""
    build_namespace(resources, "plan", {"M": CASE_EVENTS["M"]}, [], {"T0": ["M"]})
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": [QUESTION]}, {"subgoals": SUBGOALS}],
            RESPONDER: [{"answer": "paintings", "cited_ids": ["M"]}],
        },
        respond=Explorers({}),
    )
    _, _, final = _run(resources, "plan", llm, plan_starts=False, max_refinements=0)
    plans = [c for c in llm.calls if PLANNER in str(c[0].content)]
    assert len(plans) == 2 and "give 2 to 5 non-empty subgoals, got 1" in str(plans[1][-1].content)
    assert final["subgoals"] == SUBGOALS and [f.role for f in final["fallbacks"]] == ["responder"]  # not the planner


def test_the_batched_explorer_asks_with_the_action_decision_prompt_in_faithful() -> None:
    from logicmap.agents.explorer import ExplorerView, explore_batch

    views = [
        ExplorerView("E1", "(E1) moved to Chicago", [("E2", "follow_up", "(E2) the new job")]),
        ExplorerView("E2", "(E2) the new job", []),
    ]
    model = ScriptedChatModel(
        routes={
            PAPER_EXPLORER: [
                {
                    "decisions": [
                        {
                            "event_id": "E1",
                            "action": "EXPAND",
                            "next_events": ["E2"],
                            "satisfied_subgoals": [0],
                            "reasoning": "move",
                        },
                        {
                            "event_id": "E2",
                            "action": "SKIP",
                            "next_events": [],
                            "satisfied_subgoals": [],
                            "reasoning": "job",
                        },
                    ]
                }
            ]
        }
    )
    outcome = explore_batch(
        model, "Question: q\nSubgoals:\n  0. [ ] the move\nKept evidence: (none yet)", views, 1, paper=True
    )
    assert [(d.event_id, d.action, d.next_events) for d in outcome.output.decisions] == [
        ("E1", "EXPAND", ["E2"]),
        ("E2", "SKIP", []),
    ]
    system, shown = str(model.calls[0][0].content), str(model.calls[0][1].content)
    assert "Be conservative: If ANY sub-goal remains unsatisfied, use EXPAND instead." in system
    assert "one decision per event id" in system and "PREVIOUSLY KEPT INFORMATION: (none yet)" in shown
