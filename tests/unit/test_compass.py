"""The compass graph with scripted models: planning, localization, priorities, explorers, refine, respond."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.strategies.compass import CompassContext, CompassState, answer, build_compass_graph, graph
from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.records.records import Event, Relation, Topic, relation_id
from logicmap.memory.store import ChangeSet
from tests.store_seam import held_by_a_store

PLANNER = "You plan how to answer"
LOCALIZER = "You are selecting the most promising memory nodes"
EXPLORER = "Decide what to do with the current event"
BATCH = "Decide for EACH listed event"
REFINER = "Write one new search query"
RESPONDER = "answer the QUESTION based on the provided CONTEXT"  # the paper's Appendix F.2 prompt
SNAPSHOTS = Path(__file__).parent / "snapshots"


def build_namespace(
    resources,
    namespace: str,
    events: dict[str, str],
    edges: list[tuple[str, str, str]],
    topics: dict[str, list[str]] | None,
) -> None:
    """A hand-made event graph: summaries, typed edges and topics, committed like an ingest would."""
    records = [
        Event(
            id=eid,
            namespace=namespace,
            session_id="S1",
            summary=text,
            order=i,
            participants=["Ann"],
            turn_ids=[f"D1:{i + 1}"],
        )
        for i, (eid, text) in enumerate(events.items())
    ]
    vectors = resources.embeddings.embed_documents(list(events.values()))
    relations = [
        Relation(id=relation_id(a, label, b), namespace=namespace, source=a, target=b, label=label)
        for a, label, b in edges
    ]
    topic_records = []
    for tid, members in (topics or {}).items():
        centroid = normalize(np.mean([vectors[list(events).index(m)] for m in members], axis=0)).tolist()
        topic_records.append(Topic(id=tid, namespace=namespace, centroid=centroid, members=members))
    resources.store.commit(
        ChangeSet(
            namespace=namespace,
            base_generation=0,
            events=records,
            event_vectors=vectors,
            relations=relations,
            topics=topic_records,
        )
    )


def _current_event(messages) -> str:
    return re.search(r"Current event:\n\((\S+?),", messages[-1].content).group(1)


def _neighbours(messages) -> list[str]:
    block = messages[-1].content.split("Neighbours:", 1)[1]
    return re.findall(r"^- (\S+) \[", block, flags=re.MULTILINE)


def test_heuristic_policy_answers_the_sample_without_llm_calls(ingested_sample) -> None:
    result = answer(
        "What drink did Maya have at the Blue Finch cafe?", "sample", resources=ingested_sample, policy="heuristic"
    )
    assert result.cost.llm_calls == 0 and result.strategy == "compass"
    assert result.evidence and all(item.turn_ids for item in result.evidence)
    assert "D2:4" in result.cited_turns(10)
    # The extractive responder answers with a sentence of the kept evidence.
    assert result.answer in " ".join(result.details["turn_texts"].values())


def test_planner_subgoals_refinement_and_responder_fallback(ingested_sample) -> None:
    llm = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": ["which cafe Maya visited", "what Maya drank there", "when it was"]}],
            LOCALIZER: [{"event_ids": []}, {"event_ids": []}],
            REFINER: [{"query": "Blue Finch cafe drink"}],
            RESPONDER: [{"answer": "Not mentioned", "cited_ids": []}],
        },
        respond=lambda messages: {"action": "SKIP"},
    )
    ingested_sample.llm_ = llm
    try:
        result = answer(
            "What drink did Maya have at the cafe?",
            "sample",
            resources=ingested_sample,
            context=CompassContext(max_steps=2),
        )
    finally:
        ingested_sample.llm_ = None
    assert result.details["subgoals"] == ["which cafe Maya visited", "what Maya drank there", "when it was"]
    assert result.details["satisfied"] == [False, False, False]
    assert result.details["refinements"] == 1
    refine_calls = [c for c in llm.calls if REFINER in str(c[0].content)]
    assert len(refine_calls) == 1 and "what Maya drank there" in refine_calls[0][1].content
    reasons = [f.reason for f in result.fallbacks]
    assert any("no evidence kept" in r for r in reasons)
    assert result.evidence  # the top-k localized events stood in


def test_expand_then_answer_keeps_evidence_and_stops(resources) -> None:
    build_namespace(
        resources,
        "g",
        {
            "A": "Maya visited the Blue Finch cafe",
            "B": "At the Blue Finch Maya drank an iced matcha latte",
            "C": "Leo trains for a marathon",
            "D": "Maya's sister Ana visits",
        },
        [("A", "elaboration", "B"), ("A", "temporal_before", "C"), ("C", "temporal_before", "D")],
        {"T0": ["A", "B"], "T1": ["C", "D"]},
    )

    def explorer(messages):
        eid = _current_event(messages)
        if eid == "A":
            return {"action": "EXPAND", "next_events": ["B"], "satisfied_subgoals": [0]}
        if eid == "B":
            return {"action": "ANSWER", "satisfied_subgoals": [1]}
        return {"action": "SKIP"}

    resources.llm_ = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": ["which cafe Maya visited", "what she drank there"]}],
            LOCALIZER: [{"event_ids": ["A"]}],
            RESPONDER: [{"answer": "an iced matcha latte", "cited_ids": ["B"]}],
        },
        respond=explorer,
    )
    result = answer(
        "What did Maya drink at the cafe she visited?", "g", resources=resources, context=CompassContext(explorers=1)
    )
    assert [e.id for e in result.evidence] == ["A", "B"]
    assert result.answer == "an iced matcha latte"
    assert result.details["satisfied"] == [True, True] and result.details["refinements"] == 0
    assert result.steps == 2 and not result.fallbacks


def test_garbage_explorer_reply_is_retried_then_skip_and_recorded_never_expand(resources) -> None:
    build_namespace(
        resources,
        "g",
        {"A": "Maya visited the Blue Finch cafe", "B": "Maya drank a matcha latte"},
        [("A", "elaboration", "B")],
        {"T0": ["A", "B"]},
    )
    resources.llm_ = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": ["cafe", "drink"]}],
            LOCALIZER: [{"event_ids": ["A"]}, {"event_ids": ["A"]}],
            EXPLORER: ["EXPAND!!! go to B", '{"action": "DIVE"}'],
            REFINER: [{"query": "drink"}],
            RESPONDER: [{"answer": "unknown", "cited_ids": []}],
        },
        default="",
    )
    result = answer("What did Maya drink at the cafe?", "g", resources=resources, context=CompassContext(explorers=1))
    explorer_fallbacks = [f for f in result.fallbacks if f.role == "explorer"]
    assert explorer_fallbacks and "invalid model output" in explorer_fallbacks[0].reason
    assert len(explorer_fallbacks[0].errors) == 2
    assert "B" not in result.details["visited"][:1]
    assert any("no evidence kept" in f.reason for f in result.fallbacks)  # A was skipped, not kept


def test_next_events_must_be_real_neighbours(resources) -> None:
    build_namespace(
        resources,
        "g",
        {"A": "cafe visit", "B": "matcha latte drink", "Z": "unrelated tax form"},
        [("A", "elaboration", "B")],
        {"T0": ["A", "B"], "T1": ["Z"]},
    )
    resources.llm_ = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": ["cafe visit", "drink"]}],
            LOCALIZER: [{"event_ids": ["A"]}],
            EXPLORER: [
                {"action": "EXPAND", "next_events": ["Z"]},
                {"action": "EXPAND", "next_events": ["B"]},
                {"action": "ANSWER", "satisfied_subgoals": [0, 1]},
            ],
            RESPONDER: [{"answer": "matcha", "cited_ids": ["B"]}],
        }
    )
    result = answer("What drink at the cafe visit?", "g", resources=resources, context=CompassContext(explorers=1))
    assert not [f for f in result.fallbacks if f.role == "explorer"]
    assert result.details["visited"] == ["A", "B"] and [e.id for e in result.evidence] == ["A", "B"]


def test_localization_draws_candidates_from_distinct_topics_even_without_topics(resources) -> None:
    events = {f"P{i}": f"dog walk in the park number {i}" for i in range(6)}
    events.update({"Q": "a dog at the beach", "R": "the park bench"})
    build_namespace(resources, "g", events, [], {"T0": [f"P{i}" for i in range(6)], "T1": ["Q"], "T2": ["R"]})
    final = graph.invoke(
        {"question": "dog walk in the park"},
        output_keys=list(CompassState.__annotations__),
        context=CompassContext(policy="heuristic", top_k=3, top_p=3, max_steps=1, namespace="g", resources=resources),
    )
    candidates = next(entry for entry in final["log"] if entry["node"] == "localize")["candidates"]
    assert {"Q", "R"} <= set(candidates) and len([c for c in candidates if c.startswith("P")]) == 3

    build_namespace(resources, "flat", {"X": "dog walk", "Y": "park walk"}, [], topics=None)
    result = answer("dog walk", "flat", resources=resources, policy="heuristic")
    assert result.evidence, "a graph without topics still answers"


def test_priorities_follow_the_satisfaction_vector(resources) -> None:
    build_namespace(
        resources,
        "g",
        {"A": "Maya visited a cafe", "B": "the cafe served matcha latte drinks", "C": "the receipt showed the date"},
        [("A", "elaboration", "B"), ("A", "temporal_before", "C")],
        {"T0": ["A", "B", "C"]},
    )
    order: list[str] = []

    def explorer(messages):
        eid = _current_event(messages)
        order.append(eid)
        if eid == "A":
            return {"action": "EXPAND", "next_events": _neighbours(messages), "satisfied_subgoals": [0]}
        return {"action": "SKIP"}

    subgoals = ["cafe matcha latte drinks", "receipt date"]
    resources.llm_ = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": subgoals}],
            LOCALIZER: [{"event_ids": ["A"]}],
            RESPONDER: [{"answer": "x", "cited_ids": []}],
        },
        respond=explorer,
    )
    final = graph.invoke(
        {"question": "cafe drink and date"},
        output_keys=list(CompassState.__annotations__),
        context=CompassContext(explorers=1, max_steps=3, max_refinements=0, namespace="g", resources=resources),
    )
    ranked = next(e for e in final["log"] if e["node"] == "merge" and e["step"] == 1)["priorities"]
    emb = resources.embeddings

    def sim(text: str, goal: str) -> float:
        return float(normalize(np.asarray(emb.embed_query(text))) @ normalize(np.asarray(emb.embed_query(goal))))

    b_text, c_text = "the cafe served matcha latte drinks", "the receipt showed the date"
    # Priorities are similarities to the one open subgoal, not to the satisfied one.
    assert abs(ranked["B"] - sim(b_text, subgoals[1])) < 1e-4
    assert abs(ranked["C"] - sim(c_text, subgoals[1])) < 1e-4
    assert sim(b_text, subgoals[0]) > sim(c_text, subgoals[1]) > ranked["B"]
    # B matches the satisfied subgoal best, C the open one: C is explored first.
    assert order[:2] == ["A", "C"]


def test_explorers_of_one_superstep_run_concurrently(resources) -> None:
    build_namespace(resources, "g", {"A": "cafe one", "B": "cafe two", "C": "cafe three"}, [], {"T0": ["A", "B", "C"]})
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()
    delay = 0.4

    def explorer(messages):
        end = time.perf_counter()
        with lock:
            spans.append((end - delay, end))
        return {"action": "EXPAND"}

    resources.llm_ = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": ["cafe", "drink"]}],
            LOCALIZER: [{"event_ids": ["A", "B", "C"]}],
            RESPONDER: [{"answer": "x", "cited_ids": []}],
        },
        respond=explorer,
        delay=delay,
    )
    result = answer(
        "cafe?", "g", resources=resources, context=CompassContext(explorers=3, max_steps=1, max_refinements=0)
    )
    assert len(spans) == 3
    latest_start = max(s for s, _ in spans)
    earliest_end = min(e for _, e in spans)
    assert latest_start < earliest_end, "the three explorer calls overlap in time"
    assert result.cost.llm_calls == 6  # planner, localizer, 3 explorers, responder


def test_batched_mode_decides_a_superstep_in_one_call(resources) -> None:
    build_namespace(resources, "g", {"A": "cafe one", "B": "cafe two", "C": "cafe three"}, [], {"T0": ["A", "B", "C"]})
    resources.llm_ = ScriptedChatModel(
        routes={
            PLANNER: [{"subgoals": ["cafe", "drink"]}],
            LOCALIZER: [{"event_ids": ["A", "B", "C"]}],
            BATCH: [{"decisions": [{"event_id": e, "action": "EXPAND", "satisfied_subgoals": [0]} for e in "ABC"]}],
            RESPONDER: [{"answer": "x", "cited_ids": []}],
        }
    )
    result = answer(
        "cafe?",
        "g",
        resources=resources,
        context=CompassContext(explorers=3, max_steps=1, max_refinements=0, explorer_mode="batched"),
    )
    assert result.cost.llm_calls == 4
    assert sorted(e.id for e in result.evidence) == ["A", "B", "C"]
    assert result.details["satisfied"] == [True, False]


def test_compiled_graph_diagram_matches_the_snapshot() -> None:
    diagram = build_compass_graph().compile().get_graph().draw_mermaid()
    path = SNAPSHOTS / "compass.mmd"
    assert diagram == path.read_text(encoding="utf-8"), "the compass topology changed: update the snapshot if intended"


def test_cited_turns_cover_every_evidence_item_before_going_deep() -> None:
    from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem

    result = AnswerResult(
        strategy="x",
        namespace="n",
        question="q",
        answer="a",
        evidence=[
            EvidenceItem(id="E1", text="", turn_ids=["D1:1", "D1:2", "D1:3"]),
            EvidenceItem(id="E2", text="", turn_ids=["D2:1", "D1:2"]),
            EvidenceItem(id="E3", text="", turn_ids=["D3:1"]),
        ],
    )
    assert result.cited_turns() == ["D1:1", "D2:1", "D3:1", "D1:2", "D1:3"]
    assert result.cited_turns(2) == ["D1:1", "D2:1"]


def _commit_turn_events(resources, namespace: str, events: dict[str, list[tuple[str, str]]]) -> None:
    """Events made of raw turns (summary = the joined turns, as the no-LLM segmenter writes them)."""
    from logicmap.memory.records.records import Turn

    turns, records = [], []
    for i, (eid, lines) in enumerate(events.items()):
        ids = []
        for speaker, text in lines:
            dia_id = f"D1:{len(turns) + 1}"
            turns.append(
                Turn(
                    namespace=namespace, session_id="S1", dia_id=dia_id, speaker=speaker, text=text, position=len(turns)
                )
            )
            ids.append(dia_id)
        records.append(
            Event(
                id=eid,
                namespace=namespace,
                session_id="S1",
                order=i,
                participants=["Sam"],
                turn_ids=ids,
                summary=" ".join(f"{s}: {t}" for s, t in lines),
            )
        )
    emb = resources.embeddings
    resources.store.commit(
        ChangeSet(
            namespace=namespace,
            base_generation=0,
            turns=turns,
            turn_vectors=emb.embed_documents([t.render() for t in turns]),
            events=records,
            event_vectors=emb.embed_documents([e.summary for e in records]),
        )
    )


GIFT_EVENTS = {
    "anniversary": [
        ("Sam", "Nadia and I had our anniversary dinner, and I gave her a gift."),
        ("Priya", "What did you get her?"),
        ("Sam", "A vintage film camera from a flea market."),
    ],
    "shop": [("Priya", "Did Sam see Nadia downtown?")],
    "party": [("Priya", "What party did Sam throw?")],
    "card": [("Priya", "Nadia sent a gift card.")],
    "weather": [("Priya", "It rained all week in Denver.")],
}


def test_a_reply_ranks_with_the_event_that_gives_it_meaning(resources) -> None:
    _commit_turn_events(resources, "gift", GIFT_EVENTS)
    question = "What gift did Sam give Nadia for their anniversary?"
    with_context = answer(
        question, "gift", resources=resources, policy="heuristic", context_turns=3, ranker="similarity"
    )
    alone = answer(
        question,
        "gift",
        resources=resources,
        policy="heuristic",
        context_turns=3,
        context_weight=0.0,
        ranker="similarity",
    )
    camera = "D1:3"  # shares no word with the question: only its event makes it relevant
    assert camera in with_context.cited_turns(3)
    assert camera not in alone.cited_turns(3) and camera in alone.cited_turns()
    assert with_context.turn_ranking and with_context.cited_turns() == [
        t for t in with_context.turn_ranking if t in {t for item in with_context.evidence for t in item.turn_ids}
    ]


def test_no_llm_search_fills_the_context_budget_then_stops_at_the_bound(resources) -> None:
    lines = [
        "Sam gave Nadia a gift for the anniversary.",
        "Sam gave Nadia a gift.",
        "Nadia liked the gift from Sam.",
        "Sam and Nadia had an anniversary.",
        "Nadia got a gift.",
        "Sam got a gift for Nadia.",
        "Nadia went to the anniversary dinner with Sam.",
        "The anniversary gift was lovely.",
        "It rained all week in Denver.",
        "The bus was late again today.",
        "Pickle the cat slept all day.",
    ]
    _commit_turn_events(resources, "budget", {f"E{i}": [("Priya", text)] for i, text in enumerate(lines)})
    question = "What gift did Sam give Nadia for the anniversary?"
    small = answer(question, "budget", resources=resources, policy="heuristic", context_turns=2)
    large = answer(question, "budget", resources=resources, policy="heuristic", context_turns=6)
    assert small.cited_turns(1) == large.cited_turns(1) == ["D1:1"] and large.cost.llm_calls == 0
    assert len(large.cited_turns()) >= 6 and len(large.details["visited"]) > len(small.details["visited"])
    # The bound stops the search once no unread event can beat the budget's weakest turn: unrelated events stay unread.
    assert len(large.details["visited"]) < len(lines)


def test_strategy_turn_ranking_orders_the_cited_turns() -> None:
    from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem

    result = AnswerResult(
        strategy="x",
        namespace="n",
        question="q",
        answer="a",
        turn_ranking=["D2:1", "D9:9", "D1:2", "D1:1"],
        evidence=[
            EvidenceItem(id="E1", text="", turn_ids=["D1:1", "D1:2"]),
            EvidenceItem(id="E2", text="", turn_ids=["D2:1"]),
        ],
    )
    assert result.cited_turns() == ["D2:1", "D1:2", "D1:1"]  # a ranked turn outside the evidence is not cited
    assert result.cited_turns(2) == ["D2:1", "D1:2"]


def test_rank_turns_leads_with_cited_turns_and_lifts_replies_with_their_event(resources) -> None:
    from logicmap.graphs.runtime.result import EvidenceItem, rank_turns

    _commit_turn_events(resources, "rank", GIFT_EVENTS)
    snapshot = resources.store.snapshot("rank")
    query = resources.embeddings.embed_query("What gift did Sam give Nadia for their anniversary?")
    evidence = [
        EvidenceItem(kind="event", id=e, text="", turn_ids=list(snapshot.events[e].turn_ids))
        for e in ("card", "anniversary", "shop")
    ]
    lifted = rank_turns(snapshot, query, evidence)
    plain = rank_turns(snapshot, query, evidence, context_weight=0.0)
    assert sorted(lifted) == sorted(plain) == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:6"]
    assert lifted.index("D1:3") < lifted.index("D1:6") and plain.index("D1:3") > plain.index("D1:6")
    assert rank_turns(snapshot, query, evidence, first=["D1:4", "D9:9"])[0] == "D1:4"  # unknown ids are ignored


def test_extractive_responder_ignores_speaker_names_and_matches_word_forms() -> None:
    from logicmap.agents.answerers import answer_from_evidence
    from logicmap.agents.responder import EvidenceText

    evidence = [EvidenceText("E1", "Leo: That's wonderful, Maya!\nMaya: He is named Biscuit, a golden retriever.")]
    assert "Biscuit" in answer_from_evidence("What is the name of Maya's dog?", evidence).answer
    assert answer_from_evidence(
        "What is the name of Maya's dog?", [EvidenceText("E2", "Leo: Hi Maya!")]
    ).answer.startswith("Hi")


def test_extractive_responder_answers_when_with_the_date_the_turn_means() -> None:
    from logicmap.agents.answerers import answer_from_evidence
    from logicmap.agents.responder import EvidenceText

    summary = "Leo: I finished the half marathon yesterday! Maya: Congratulations!"
    turns = "    [D5:1] Leo: I finished the half marathon yesterday! (2023-05-08)\n    [D5:2] Maya: Congratulations! (2023-05-08)"
    # The event's own time (when it happened) must not be taken as the day the turn was said.
    evidence = [EvidenceText("S5-E1", f"(S5-E1, 2023-05-07) {summary}\n{turns}", "2023-05-07")]
    assert answer_from_evidence("When did Leo finish the half marathon?", evidence).answer == "7 May 2023"
    assert answer_from_evidence("What did Leo finish?", evidence).answer == "I finished the half marathon yesterday!"
    # Without a time phrase the sentence is the answer, with the day its turn was said (issue 41).
    undated = [EvidenceText("D1:1", "[D1:1] Leo: I ran the half marathon in Porto.", "2023-03-04")]
    assert (
        answer_from_evidence("When did Leo run the half marathon?", undated).answer
        == "I ran the half marathon in Porto. (4 March 2023)"
    )


def test_a_reply_inherits_the_relevance_of_the_question_it_answers(resources) -> None:
    from logicmap.graphs.runtime.result import EvidenceItem, turn_scores

    _commit_turn_events(
        resources,
        "pair",
        {
            "chat": [
                ("Sam", "It rained all week."),
                ("Priya", "Which gift did Sam give Nadia?"),
                ("Sam", "A film camera."),
                ("Sam", "Which gift did Sam give Nadia?"),
                ("Sam", "A film camera, again."),
            ],
        },
    )
    snapshot = resources.store.snapshot("pair")
    query = resources.embeddings.embed_query("Which gift did Sam give Nadia?")
    item = [EvidenceItem(kind="event", id="chat", text="", turn_ids=list(snapshot.events["chat"].turn_ids))]
    own = turn_scores(snapshot, query, item, context_weight=0.0)
    paired = turn_scores(snapshot, query, item, context_weight=0.9)
    assert own["D1:3"] < 0.9 * own["D1:2"] <= paired["D1:3"]  # Priya asks, Sam answers: the reply inherits
    assert paired["D1:5"] < 0.9 * own["D1:4"]  # the same speaker going on is no reply: no inheritance


def test_without_names_keeps_the_predicate_of_a_question() -> None:
    from logicmap.memory.language.text import query_readings, without_names

    assert without_names("Where exactly did Sam propose to Nadia?") == "Where exactly did propose to"
    assert without_names("What did I cook last week?") == ""  # nothing named: no second reading
    assert without_names("Which Osteria Verde?") == ""  # nothing but names would be left
    assert query_readings("Where did Sam propose?") == ["Where did Sam propose?", "Where did propose?"]
    assert query_readings("what did i cook") == ["what did i cook"]


def test_a_search_also_matches_the_question_without_its_names(resources) -> None:
    lines = [
        "Sam told Nadia about work.",
        "Nadia called Sam on Sunday.",
        "Sam and Nadia ate with Nadia's parents.",
        "Sam met Nadia downtown.",
        "Nadia and Sam watched a film.",
    ]
    events = {f"E{i}": [("Priya", text)] for i, text in enumerate(lines)}
    events["beach"] = [("Priya", "He decided to propose at sunset on the beach.")]
    _commit_turn_events(resources, "names", events)
    question = "Where did Sam propose to Nadia?"
    named = answer(
        question, "names", resources=resources, policy="heuristic", context_turns=2, name_free_readings=False
    )
    both = answer(question, "names", resources=resources, policy="heuristic", context_turns=2)
    proposal = "D1:6"
    assert proposal in both.cited_turns(1) and both.cost.llm_calls == 0
    # The names alone rank a turn about Sam and Nadia above it.
    assert both.turn_ranking.index(proposal) == 0 < named.turn_ranking.index(proposal)


def test_learned_ranker_reads_the_graph_around_each_turn(resources) -> None:
    from logicmap.memory.indexes.embeddings import normalize
    from logicmap.memory.retrieval.ranking import FEATURES, TurnRanker, turn_features

    _commit_turn_events(resources, "feat", GIFT_EVENTS)
    snapshot = resources.store.snapshot("feat")
    question = "What did Sam get Nadia as an anniversary gift?"
    readings = normalize(np.asarray(resources.embeddings.embed_documents([question]), dtype=np.float32))
    features = turn_features(snapshot, question, readings)
    row = {t: dict(zip(FEATURES, features.matrix[i])) for i, t in enumerate(features.turn_ids)}
    assert features.matrix.shape == (len(snapshot.turns), len(FEATURES))
    # "A vintage film camera." (D1:3) answers Priya's question (D1:2): it carries that question's similarity;
    # Priya's question follows a statement, so it is no reply.
    assert row["D1:3"]["reply"] == row["D1:3"]["previous"] == row["D1:2"]["own"] > 0 and row["D1:2"]["reply"] == 0
    assert row["D1:2"]["previous"] == row["D1:1"]["own"] > 0 and row["D1:1"]["next"] == row["D1:2"]["own"]
    assert row["D1:1"]["previous"] == 0 and row["D1:4"]["previous"] == 0  # an event's first turn has no context
    assert row["D1:1"]["speaker_named"] == 1 and row["D1:2"]["speaker_named"] == 0  # Sam is named, Priya is not
    assert row["D1:1"]["event"] == row["D1:3"]["event"] and row["D1:3"]["bm25_stem"] < row["D1:1"]["bm25_stem"] == 1.0
    with pytest.raises(ValueError, match=f"{len(FEATURES)} coefficients"):
        TurnRanker((1.0, 2.0))


def test_learned_ranker_puts_its_best_turns_into_the_evidence(resources) -> None:
    _commit_turn_events(resources, "learned", GIFT_EVENTS)
    question = "What gift did Sam give Nadia for their anniversary?"
    result = answer(question, "learned", resources=resources, policy="heuristic", context_turns=3)
    similarity = answer(
        question,
        "learned",
        resources=resources,
        policy="heuristic",
        context_turns=3,
        context_weight=0.0,
        ranker="similarity",
    )
    assert result.cost.llm_calls == 0 and "D1:3" in result.cited_turns(3)  # the reply, by its graph features
    assert "D1:3" not in similarity.cited_turns(3)
    cited = {t for item in result.evidence for t in item.turn_ids}
    assert set(result.cited_turns(3)) <= cited and result.turn_ranking[:3] == result.cited_turns(3)


def test_turn_ranker_training_writes_weights_and_a_leave_one_out_table(tmp_path, sample_path, capsys) -> None:
    import runpy
    import shutil

    from logicmap.evals.train.turn_ranker import main
    from logicmap.memory.retrieval.ranking import FEATURES

    files = [tmp_path / "a.json", tmp_path / "b.json"]
    for f in files:
        shutil.copy(sample_path, f)
    out = tmp_path / "weights.py"
    assert (
        main([*map(str, files), "--embeddings", "hashing", "--out", str(out), "--data-dir", str(tmp_path / "m")]) == 0
    )
    weights = runpy.run_path(str(out))
    assert set(weights["COEFFICIENTS"]) == set(FEATURES) and isinstance(weights["INTERCEPT"], float)
    printed = capsys.readouterr().out
    assert "| a.json | 15 |" in printed and "fitted on the other files" in printed
    assert not held_by_a_store(tmp_path / "m")  # the command closed the store it opened


# -- nodes and the no-LLM policy, each called alone on the ingested sample ------------------------
DRINK = "What drink did Maya have at the Blue Finch cafe"
MOVE = "When did Maya move to Lisbon"


def _runtime(resources, **settings):
    from langgraph.runtime import Runtime

    return Runtime(context=CompassContext(resources=resources, **settings), store=None)


def _sample_graph(resources):
    from logicmap.memory.indexes.graph import EventGraph

    return EventGraph.of(resources.store.snapshot("sample"))


def test_planner_node_alone_splits_the_question_and_resets_the_search(ingested_sample) -> None:
    from logicmap.agents.planner import clause_subgoals
    from logicmap.graphs.strategies.compass import planner

    question = f"{DRINK}?"
    update = planner({"question": question}, _runtime(ingested_sample, policy="heuristic", namespace="sample"))
    assert (
        update["namespace"] == "sample"
        and update["subgoals"] == clause_subgoals(question)
        and update["satisfied"] == [False] * len(update["subgoals"])
    )
    assert update["query"] == question and update["kept"] == [] and update["queue"] == {} and update["step"] == 0
    assert update["cost"].llm_calls == 0 and update["fallbacks"] == []


def test_localize_node_alone_queues_starts_best_priority_first(ingested_sample) -> None:
    from logicmap.agents.compass_policy import event_priorities
    from logicmap.graphs.strategies.compass import localize
    from logicmap.memory.retrieval.query import QueryEncoder

    state = {"namespace": "sample", "question": f"{DRINK}?", "subgoals": [DRINK], "satisfied": [False]}
    update = localize(state, _runtime(ingested_sample, policy="heuristic", explorers=2, top_k=3, top_p=3))
    log = update["log"][0]
    assert len(update["localized"]) == 3 and set(update["localized"]) <= set(log["candidates"])
    assert len(update["frontier"]) == 2 and update["visited"] == update["frontier"]
    assert set(update["frontier"]) | set(update["queue"]) == set(log["starts"])
    assert "S2-E2" in log["starts"]  # the Blue Finch visit
    graph = _sample_graph(ingested_sample)
    priority = event_priorities(
        graph, log["starts"], [DRINK], [False], QueryEncoder(ingested_sample.embeddings), by_turns=True
    )  # the no-LLM policy localizes by turns
    assert update["queue"] == {e: priority[e] for e in update["queue"]}
    assert min(priority[e] for e in update["frontier"]) >= max(update["queue"].values(), default=-1.0)


def test_merge_node_alone_applies_the_superstep_decisions(ingested_sample) -> None:
    from logicmap.agents.compass_policy import event_priorities
    from logicmap.graphs.strategies.compass import Decision, merge
    from logicmap.memory.retrieval.query import QueryEncoder

    def decision(step, eid, action, nxt=(), sat=()):
        return Decision(step=step, event_id=eid, action=action, next_events=list(nxt), satisfied_subgoals=list(sat))

    state = {
        "namespace": "sample",
        "question": "q",
        "subgoals": [DRINK, MOVE],
        "satisfied": [False, False],
        "frontier": ["S2-E2", "S1-E1"],
        "visited": ["S2-E2", "S1-E1"],
        "queue": {"S4-E1": 0.0},
        "kept": [],
        "step": 0,
        "decisions": [
            decision(0, "S1-E1", "SKIP"),
            # S2-E1 is a neighbour; S4-E1 is queued already; S9-E9 does not exist; subgoal 7 is out of range.
            decision(0, "S2-E2", "EXPAND", ["S2-E1", "S4-E1", "S9-E9"], [0, 7]),
            decision(5, "S3-E1", "ANSWER", sat=[1]),  # another superstep's: ignored
        ],
    }
    update = merge(state, _runtime(ingested_sample, policy="heuristic", explorers=1))
    assert update["kept"] == ["S2-E2"] and update["satisfied"] == [True, False]
    assert update["step"] == 1 and not update["done"]
    priorities = update["log"][0]["priorities"]
    expected = event_priorities(
        _sample_graph(ingested_sample),
        ["S4-E1", "S2-E1"],
        [DRINK, MOVE],
        [True, False],
        QueryEncoder(ingested_sample.embeddings),
        by_turns=True,
    )
    assert priorities == expected  # recomputed against the one open subgoal
    best = max(expected, key=expected.get)
    assert update["frontier"] == [best] and update["visited"] == ["S2-E2", "S1-E1", best]
    assert set(update["queue"]) == set(expected) - {best}

    stop = merge(
        {**state, "decisions": [decision(0, "S2-E2", "ANSWER", sat=[0, 1])]},
        _runtime(ingested_sample, policy="llm", max_steps=6),
    )
    assert stop["done"] and stop["frontier"] == [] and stop["satisfied"] == [True, True]


def test_route_search_alone_sends_the_frontier_to_explorers(ingested_sample) -> None:
    from logicmap.graphs.strategies.compass import route_search

    state = {
        "namespace": "sample",
        "question": "q",
        "subgoals": [DRINK],
        "satisfied": [False],
        "kept": [],
        "frontier": ["S2-E2", "S2-E1"],
        "step": 0,
    }
    sends = route_search(state, _runtime(ingested_sample, policy="heuristic"))
    assert [(s.node, s.arg["event_ids"]) for s in sends] == [("explore", ["S2-E2"]), ("explore", ["S2-E1"])]
    batched = route_search(state, _runtime(ingested_sample, policy="heuristic", explorer_mode="batched"))
    assert [(s.node, s.arg["event_ids"]) for s in batched] == [("explore_batch", ["S2-E2", "S2-E1"])]
    done = {**state, "done": True, "satisfied": [True], "kept": ["S2-E2"], "visited": ["S2-E2"]}
    assert route_search(done, _runtime(ingested_sample, policy="llm")) == "respond"
    assert route_search({**done, "satisfied": [False]}, _runtime(ingested_sample, policy="llm")) == "refine"


def test_open_subgoals_are_all_subgoals_once_every_one_is_satisfied() -> None:
    from logicmap.agents.compass_policy import open_subgoals

    assert open_subgoals(["a", "b", "c"], [True, False, True]) == ["b"]
    assert open_subgoals(["a", "b"], [True, True]) == ["a", "b"]
    assert open_subgoals([], []) == []


def test_priorities_are_the_best_similarity_to_an_open_subgoal(ingested_sample) -> None:
    from logicmap.agents.compass_policy import event_priorities
    from logicmap.memory.retrieval.query import QueryEncoder

    graph = _sample_graph(ingested_sample)
    encoder = QueryEncoder(ingested_sample.embeddings)
    ids = list(graph.ids)
    for by_turns in (False, True):
        drink = event_priorities(graph, ids, [DRINK], [False], encoder, by_turns=by_turns)
        move = event_priorities(graph, ids, [MOVE], [False], encoder, by_turns=by_turns)
        both = event_priorities(graph, ids, [DRINK, MOVE], [False, False], encoder, by_turns=by_turns)
        assert both == pytest.approx({e: max(drink[e], move[e]) for e in ids})
        assert event_priorities(graph, ids, [DRINK, MOVE], [True, False], encoder, by_turns=by_turns) == move
        assert event_priorities(graph, ids, [DRINK, MOVE], [True, True], encoder, by_turns=by_turns) == both
    assert event_priorities(graph, [], [DRINK], [False], encoder) == {}
    assert event_priorities(graph, ["S1-E1"], [], [], encoder) == {"S1-E1": 0.0}  # nothing to rank against
    by_summary = event_priorities(graph, ["S2-E2"], [DRINK], [False], encoder)
    readings = encoder.vectors([DRINK])[0]
    assert by_summary["S2-E2"] == pytest.approx(float((readings @ graph.vector("S2-E2")).max()))


def test_heuristic_decision_keeps_the_cafe_event_and_expands_to_real_neighbours(ingested_sample) -> None:
    from logicmap.agents.compass_policy import heuristic_decision
    from logicmap.graphs.strategies.compass import explore
    from logicmap.memory.retrieval.query import QueryEncoder

    graph = _sample_graph(ingested_sample)
    encoder = QueryEncoder(ingested_sample.embeddings)
    thresholds = {"keep_threshold": 0.25, "satisfy_threshold": 0.55, "expand_threshold": 0.2}
    cafe = graph.event_of_turn["D2:4"]
    kept = heuristic_decision(graph, cafe, [DRINK], [False], encoder, **thresholds)
    assert kept.action in ("EXPAND", "ANSWER") and kept.next_events
    assert set(kept.next_events) <= {n.event_id for n in graph.neighbors(cafe)} and len(kept.next_events) <= 3
    strict = heuristic_decision(graph, cafe, [DRINK], [False], encoder, **{**thresholds, "keep_threshold": 0.99})
    assert strict.action == "SKIP" and not strict.next_events
    # The explore node, alone, makes the same decision for the same event.
    task = {
        "namespace": "sample",
        "question": "q",
        "subgoals": [DRINK],
        "satisfied": [False],
        "kept": [],
        "event_ids": [cafe],
        "step": 3,
    }
    [made] = explore(task, _runtime(ingested_sample, policy="heuristic"))["decisions"]
    assert made == {
        "step": 3,
        "event_id": cafe,
        "action": kept.action,
        "next_events": kept.next_events,
        "satisfied_subgoals": kept.satisfied_subgoals,
    }


def test_evidence_is_filled_when_the_budget_is_full_and_nothing_left_can_beat_it(ingested_sample) -> None:
    from logicmap.agents.compass_policy import evidence_filled
    from logicmap.memory.retrieval.query import QueryEncoder

    graph = _sample_graph(ingested_sample)
    encoder = QueryEncoder(ingested_sample.embeddings)
    everything = list(graph.ids)
    search = {"subgoals": [DRINK], "satisfied": [False], "visited": everything, "queue": {}}
    assert not evidence_filled(graph, encoder, kept=[], context_turns=1, **search)
    assert evidence_filled(graph, encoder, kept=everything, context_turns=10, **search)
    turns = sum(len(graph.events[e].turn_ids) for e in everything)
    assert not evidence_filled(graph, encoder, kept=everything, context_turns=turns + 1, **search)  # budget not full
    # A queued event that could still beat the budget's last turn keeps the search going.
    assert not evidence_filled(
        graph, encoder, kept=["S1-E1"], context_turns=4, **{**search, "visited": ["S1-E1"], "queue": {"S2-E2": 1.0}}
    )


def test_learned_turn_scores_rank_every_turn_and_find_the_drink(ingested_sample) -> None:
    from logicmap.memory.retrieval.query import QueryEncoder, learned_turn_scores

    snapshot = ingested_sample.store.snapshot("sample")
    encoder = QueryEncoder(ingested_sample.embeddings)
    assert encoder.readings(f"{DRINK}?") == [f"{DRINK}?", "What drink did have at the cafe?"]
    assert QueryEncoder(ingested_sample.embeddings, name_free_readings=False).readings(DRINK) == [DRINK]
    scores = learned_turn_scores(snapshot, f"{DRINK}?", encoder)
    assert set(scores) == set(snapshot.turns)
    assert "D2:4" in sorted(scores, key=lambda t: -scores[t])[:3]
