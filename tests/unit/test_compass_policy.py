"""CompassMem's policy objects (``agents.compass_policy``): the factory picks the policy once from the pinned name;
the rule policy decides as the no-LLM rules do; the LLM policy calls its roles and falls back on garbage."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from langgraph.runtime import Runtime

from logicmap.agents.answerers import answer_from_evidence
from logicmap.agents.compass_policy import (
    LLMCompassPolicy,
    RuleCompassPolicy,
    SearchProgress,
    compass_policy,
    evidence_filled,
    heuristic_decision,
)
from logicmap.agents.planner import clause_subgoals
from logicmap.agents.responder import EvidenceText
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.strategies.compass import CompassContext, localize
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.retrieval.query import (
    QueryEncoder,
    learned_turn_scores,
)
from tests.unit.test_compass import EXPLORER, PLANNER, REFINER, RESPONDER, build_namespace

DRINK = "What drink did Maya have at the Blue Finch cafe"
MOVE = "When did Maya move to Lisbon"
RULES = {"keep_threshold": 0.25, "satisfy_threshold": 0.55, "expand_threshold": 0.2, "context_turns": 4}


def _refused() -> list[str]:
    raise AssertionError("the rule policy must not ask for the candidates (they cost an embedding call)")


def _no_model() -> ScriptedChatModel:
    raise AssertionError("a heuristic run must not build the chat model")


def test_the_factory_compares_the_name_once_and_builds_the_model_only_for_the_llm_policy(resources) -> None:
    encoder = QueryEncoder(resources.embeddings)
    rule = compass_policy("heuristic", _no_model, encoder=encoder, **RULES)
    assert isinstance(rule, RuleCompassPolicy) and rule.ranking_recipe == "turns"
    assert rule.keep_threshold == 0.25 and rule.context_turns == 4 and rule.encoder is encoder
    llm = ScriptedChatModel()
    built = compass_policy(
        "llm", lambda: llm, encoder=encoder, tags=["strategy:compass"], metadata={"namespace": "n"}, **RULES
    )
    assert isinstance(built, LLMCompassPolicy) and built.llm is llm and built.ranking_recipe == "dense"
    assert built.tags == ("strategy:compass",) and built.metadata == {"namespace": "n"}
    given = compass_policy("llm", llm, encoder=encoder, **RULES)
    assert isinstance(given, LLMCompassPolicy) and given.llm is llm
    assert compass_policy("llm", None, encoder=encoder, **RULES) == LLMCompassPolicy(None)


def test_the_compass_graph_never_tests_the_policy_name() -> None:
    source = (Path(__file__).resolve().parents[2] / "graphs" / "strategies" / "compass.py").read_text(encoding="utf-8")
    assert not re.search(r"policy\s*[!=]=|[!=]=\s*\"heuristic\"|\"heuristic\"", source)


def test_the_rule_policy_decides_as_the_no_llm_rules(ingested_sample) -> None:
    graph = EventGraph.of(ingested_sample.store.snapshot("sample"))
    encoder = QueryEncoder(ingested_sample.embeddings)
    rule = compass_policy("heuristic", None, encoder=encoder, learned_ranking=False, **RULES)
    question = f"{DRINK} and {MOVE}?"

    planned = rule.plan(graph, question, _refused, max_starts=5)
    assert planned.value.subgoals == clause_subgoals(question) and planned.value.starts == []
    assert planned.cost.llm_calls == 0 and planned.fallbacks == []
    # The two best topic leaders, then the top ranked, at most max_starts.
    assert rule.starts(graph, question, [DRINK], ["a", "b", "c"], ["d", "a", "e"], [], max_starts=4).value == [
        "d",
        "a",
        "b",
        "c",
    ]

    cafe = graph.event_of_turn["D2:4"]
    progress = SearchProgress(question=question, subgoals=[DRINK, MOVE], satisfied=[False, False])
    expected = heuristic_decision(
        graph,
        cafe,
        [DRINK, MOVE],
        [False, False],
        encoder,
        keep_threshold=0.25,
        satisfy_threshold=0.55,
        expand_threshold=0.2,
    )
    assert expected.action in ("EXPAND", "ANSWER")
    assert rule.explore(graph, progress, cafe, None).value == [(cafe, expected)]
    others = [e for e in graph.ids if e != cafe][:2]
    batch = rule.explore_batch(graph, progress, [cafe, *others], {})
    assert [e for e, _ in batch.value] == [cafe, *others] and batch.value[0][1] == expected
    assert batch.fallbacks == [] and batch.cost.llm_calls == 0

    everything = list(graph.ids)
    outcomes = []
    for kept in (everything, []):
        filled = rule.evidence_filled(graph, SearchProgress(question, [DRINK], [False], kept), everything, {})
        assert filled == evidence_filled(
            graph,
            encoder,
            kept=kept,
            subgoals=[DRINK],
            satisfied=[False],
            visited=everything,
            queue={},
            context_turns=4,
        )
        outcomes.append(filled)
    assert outcomes == [True, False]
    # A queued event that could still beat the budget's last turn keeps the search going.
    assert not rule.evidence_filled(
        graph, SearchProgress(question, [DRINK], [False], everything[:1]), everything[:1], {everything[-1]: 1.0}
    )

    assert rule.refine(question, [MOVE], "found", question).value.query == MOVE
    refined = rule.refine(question, [], "found", question).value
    assert refined.query == question and not refined.repeated  # the rules never mark a query repeated

    assert rule.evidence(graph, question, [cafe]) == ([cafe], [])  # similarity ranking: the kept events only
    evidence = [EvidenceText(e, graph.events[e].render(), graph.events[e].time) for e in [cafe, *others]]
    answered = rule.respond(DRINK, evidence, None)
    assert answered.value == answer_from_evidence(DRINK, evidence) and answered.fallbacks == []


def test_the_rule_policy_with_the_learned_ranking_joins_the_rankers_best_turns(ingested_sample) -> None:
    snapshot = ingested_sample.store.snapshot("sample")
    graph = EventGraph.of(snapshot)
    encoder = QueryEncoder(ingested_sample.embeddings)
    rule = compass_policy("heuristic", None, encoder=encoder, **RULES)
    kept = [graph.ids[-1]]
    evidence_ids, ranking = rule.evidence(graph, f"{DRINK}?", kept)
    scores = learned_turn_scores(snapshot, f"{DRINK}?", encoder)
    best = sorted(scores, key=lambda t: -scores[t])[:4]
    assert evidence_ids[0] == kept[0] and {graph.event_of_turn[t] for t in best} <= set(evidence_ids)
    assert ranking[0] == best[0] and set(ranking) == {t for e in evidence_ids for t in graph.events[e].turn_ids}


EVENTS = {"A": "maya visited the blue finch cafe", "B": "maya drank an iced matcha latte", "Z": "the bus was late"}


def test_the_llm_policy_calls_its_roles_and_falls_back_on_garbage(resources) -> None:
    build_namespace(resources, "llmpolicy", EVENTS, [("A", "causes", "B")], {"T0": ["A", "B"], "T1": ["Z"]})
    graph = EventGraph.of(resources.store.snapshot("llmpolicy"))
    llm = ScriptedChatModel(
        routes={
            PLANNER: ["not json", "still not json"],
            EXPLORER: [{"action": "EXPAND", "next_events": ["B"], "satisfied_subgoals": [0]}, "garbage", "garbage"],
            REFINER: [{"query": "Which cafe did Maya visit?"}],
            RESPONDER: ["???", "???"],
        }
    )
    policy = compass_policy(
        "llm", lambda: llm, encoder=QueryEncoder(resources.embeddings), tags=["strategy:compass"], **RULES
    )
    question = "Which cafe did Maya visit?"

    planned = policy.plan(graph, question, lambda: ["A", "B", "Z"], max_starts=5)
    assert planned.value.subgoals == clause_subgoals(question) and planned.value.starts == []
    assert [f.role for f in planned.fallbacks] == ["planner"] and planned.cost.llm_calls == 2  # one retry
    assert all(e in str(llm.calls[0][-1].content) for e in "ABZ")  # the candidates were shown

    progress = SearchProgress(question, ["which cafe", "what drink"], [False, False])
    kept = policy.explore(graph, progress, "A", None)
    assert kept.value[0][0] == "A" and kept.value[0][1].action == "EXPAND" and kept.value[0][1].next_events == ["B"]
    assert kept.fallbacks == [] and kept.cost.llm_calls == 1
    assert "- B [causes]" in str(llm.calls[2][-1].content)  # the explorer saw its neighbour and the relation
    skipped = policy.explore(graph, progress, "B", "A")
    assert skipped.value[0][1].action == "SKIP" and [f.role for f in skipped.fallbacks] == ["explorer"]
    assert "reached it from A by [causes]" in str(llm.calls[3][-1].content)

    refined = policy.refine(question, ["what drink"], "found", "cafe")
    assert refined.value.repeated and refined.fallbacks == []  # it only repeats the question
    answered = policy.respond(question, [EvidenceText("A", EVENTS["A"])], None)
    assert [f.role for f in answered.fallbacks] == ["responder"] and answered.value.answer
    assert policy.evidence_filled(graph, progress, [], {"Z": 1.0})  # the explorers judge sufficiency
    assert policy.evidence(graph, question, ["A"]) == (["A"], [])
    assert len(llm.calls) == 8  # planner 2 (retry), explorer 1 + 2 (retry), refiner 1, responder 2 (retry)


def test_one_candidate_start_is_taken_without_a_call(resources) -> None:
    build_namespace(resources, "single", {"A": EVENTS["A"]}, [], {"T0": ["A"]})
    graph = EventGraph.of(resources.store.snapshot("single"))
    llm = ScriptedChatModel()
    policy = compass_policy("llm", llm, encoder=QueryEncoder(resources.embeddings), **RULES)
    assert policy.starts(graph, "q", ["g"], ["A"], ["A"], ["A"], max_starts=5).value == ["A"] and llm.calls == []


@pytest.mark.parametrize("top_p", [0, 5])
def test_localize_candidates_are_the_top_k_and_the_leaders_of_the_first_p_topics(ingested_sample, top_p: int) -> None:
    state = {"namespace": "sample", "question": f"{DRINK}?", "subgoals": [DRINK], "satisfied": [False]}
    ctx = CompassContext(resources=ingested_sample, policy="heuristic", top_k=2, top_p=top_p)
    update = localize(state, Runtime(context=ctx, store=None))
    candidates = update["log"][0]["candidates"]
    topic_of = EventGraph.of(ingested_sample.store.snapshot("sample")).topic_of
    assert candidates[:2] == update["localized"]  # the top k first
    if top_p == 0:  # the paper's no-clustering setting (Section 5.3): the top k only
        assert candidates == update["localized"]
    else:  # one event (the best ranked) of each of the first p distinct topics
        topics = [topic_of.get(e, e) for e in candidates]
        assert len(set(topics)) == min(top_p, len(set(topic_of.values())))


def test_the_localizer_is_asked_with_the_papers_node_selection_prompt_and_the_scores(ingested_sample) -> None:
    """Psi_start (CompassMem App. F, Memory Node Selection Prompt): the candidates come with their similarity scores
    (the ranking that chose them, best first) and the paper's instructions (be selective, at most 5, diversity)."""
    from tests.unit.test_compass import LOCALIZER

    graph = EventGraph.of(ingested_sample.store.snapshot("sample"))
    ctx = CompassContext(resources=ingested_sample, policy="llm", top_k=3, top_p=3, plan_starts=False)
    llm = ScriptedChatModel(routes={LOCALIZER: [{"event_ids": []}, {"event_ids": []}]})
    ingested_sample.llm_ = llm
    try:
        state = {
            "namespace": "sample",
            "question": f"{DRINK}?",
            "subgoals": [DRINK],
            "satisfied": [False],
            "policy": "llm",
        }
        update = localize(state, Runtime(context=ctx, store=None))
    finally:
        ingested_sample.llm_ = None
    system, human = (str(m.content) for m in llm.calls[0])
    assert "Be selective" in system and "at most 5 nodes" in system and "similarity score" in system
    candidates = update["log"][0]["candidates"]
    shown = re.findall(r"^(\S+): .*\[similarity (-?[0-9.]+)\]$", human.split("CANDIDATE NODES", 1)[1], re.M)
    assert [e for e, _ in shown] == candidates and len(shown) == len(candidates) >= 2
    top = [float(s) for e, s in shown if e in update["localized"]]
    assert top == sorted(top, reverse=True)  # the top k, best first, with the scores that ranked them
    assert all(e in graph.events for e in candidates)
    assert [f.role for f in update["fallbacks"]] == ["localizer"]  # an empty pick: retried once, then the top ones


def test_a_faithful_runs_result_scores_evidence_without_the_name_free_readings(resources) -> None:
    """``faithful`` turns the name-free readings off for the search; the result (the ``finish`` node) scores the
    kept events with the same plain question vector, not with the readings the default adds."""
    from logicmap.graphs.strategies.compass import answer as compass_answer

    build_namespace(
        resources,
        "faith",
        {"A": "drank an iced matcha latte at the cafe", "B": "the bus was late"},
        [],
        {"T0": ["A"], "T1": ["B"]},
    )
    question = "What drink did Maya have at the Blue Finch cafe?"
    graph = EventGraph.of(resources.store.snapshot("faith"))
    plain = graph.similarities(QueryEncoder(resources.embeddings, name_free_readings=False).embed([question])[0])
    readings = QueryEncoder(resources.embeddings)
    best = np.max([graph.similarities(v) for v in readings.embed(readings.readings(question))], axis=0)
    assert best[graph.index_of("A")] > plain[graph.index_of("A")] + 1e-3  # the readings would score A higher
    result = compass_answer(question, "faith", resources=resources, policy="heuristic", faithful=True)
    assert result.evidence
    for item in result.evidence:
        assert item.score == pytest.approx(float(plain[graph.index_of(item.id)]), abs=1e-6)
