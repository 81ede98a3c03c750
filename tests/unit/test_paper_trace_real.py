"""Paper trace of REAL: a scripted evaluator makes the paper's decisions on a small worked fact set.

The assertions are on the control flow (what each evaluator call was shown, which paths were closed,
which repairs were budgeted), not only on the answer: per beam path, the current path is scored together
with its expansions; a path no child improves on is closed into the final set and the evidence is that
set; no global stop at a sufficiency threshold; repair only when a path has fewer than m relevant
expansions, budgeted max(0, m - |relevant|); a causal beam refuses plain attributes; with no time named,
facts must hold at the dialogue's current time (the latest session's date).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

import pytest
from langchain_core.messages import BaseMessage

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.real import answer, repair_budget
from logicmap.memory.fact_paths import SearchFilter
from logicmap.memory.facts import apply_fact_updates, fact_text, make_fact
from logicmap.memory.records import Fact, Turn
from logicmap.memory.store import ChangeSet

NS = "trace"
QUESTION = "What breed is Maya's dog?"
SESSIONS = {"S1": datetime(2023, 3, 1, 14, 0), "S2": datetime(2023, 6, 1, 10, 30)}


def worked_facts() -> list[Fact]:
    def f(head, relation, tail, when, turn, intent="FACT"):  # noqa: ANN001, ANN202
        return make_fact(NS, head, relation, tail, valid_from=when, confidence=0.9, intent=intent, turn_ids=[turn])

    incoming = [
        f("Maya", "lives_in", "Porto", "2023-01-10", "D1:1"),
        f("Maya", "lives_in", "Lisbon", "2023-05-01", "D2:1"),  # closes Porto at 2023-05-01
        f("Maya", "has_pet", "Biscuit", "2023-02-01", "D1:2"),
        f("Maya", "likes", "sushi", "2023-03-01", "D1:3"),
        f("Maya", "decided_because", "night shifts wore her down", "2023-04-12", "D2:2", intent="CAUSAL"),
        f("Biscuit", "is_a", "golden retriever", "2023-02-01", "D1:4"),
        f("Biscuit", "likes", "the beach", "2023-02-01", "D1:5"),
        f("Biscuit", "plays", "fetch", "2023-02-01", "D1:6"),
        f("Ana", "helped_pack", "Maya", "2023-04-28", "D2:3", intent="TEMPORAL"),
    ]
    return apply_fact_updates({}, incoming).facts


@pytest.fixture
def memory(resources):  # noqa: ANN001, ANN201
    """The worked facts plus two sessions of turns: the last session is on 2023-06-01."""
    facts = worked_facts()
    turns = [
        Turn(
            namespace=NS,
            session_id=session,
            dia_id=f"D{i + 1}:{j}",
            speaker="Maya",
            text=f"turn {j}",
            session_time=when,
            position=10 * i + j,
        )
        for i, (session, when) in enumerate(SESSIONS.items())
        for j in range(1, 7)
    ]
    emb = resources.embeddings
    resources.store.commit(
        ChangeSet(
            namespace=NS,
            base_generation=0,
            turns=turns,
            turn_vectors=emb.embed_documents([t.text for t in turns]),
            facts=facts,
            fact_vectors=emb.embed_documents([fact_text(f) for f in facts]),
        )
    )
    return resources


def judge(text: str) -> tuple[float, float, float]:
    """The worked example's evaluator: (relevance, coherence, sufficiency) of one path line."""
    if "Porto" in text or "helped_pack" in text or "decided_because" in text:
        return 0.2, 0.9, 0.0
    if "is_a" in text:
        return 0.9, 0.9, 0.95  # score 0.92
    if "has_pet" in text and ("the beach" in text or "fetch" in text):
        return 0.7, 0.9, 0.3  # relevant, score 0.58: no better than the path it extends
    if "has_pet" in text:
        return 0.9, 0.9, 0.8  # score 0.86; sufficiency 0.8 would have stopped a sufficiency-threshold search
    if "lives_in" in text:
        return 0.6, 0.9, 0.1  # relevant, score 0.46, and nothing extends it
    return 0.1, 0.9, 0.0


def scripted(
    roots: Sequence[tuple[str, str]] = (("Maya", "FACT"),), reference_time: str | None = None
) -> ScriptedChatModel:
    def respond(messages: Sequence[BaseMessage]) -> dict:
        system, human = str(messages[0].content), str(messages[1].content)
        if "REAL root planner" in system:
            return {
                "roots": [{"entity": e, "intent": i} for e, i in roots],
                "reference_time": reference_time,
                "include_uncertain": False,
            }
        if "REAL path evaluator" in system:
            lines = re.findall(r"^(P\d+): (.*)$", human, re.MULTILINE)
            return {
                "scores": [
                    dict(zip(("path_id", "relevance", "coherence", "sufficiency"), (label, *judge(text)), strict=True))
                    for label, text in lines
                ]
            }
        if "REAL answerer" in system:
            first = re.search(r"^(path-\w+): (.*)$", human, re.MULTILINE)
            end = re.split(r"\]-> |\]- ", first.group(2))[-1] if first else "unknown"
            return {"answer": end, "path_ids": [first.group(1)] if first else []}
        raise AssertionError(f"unexpected role: {system[:80]}")

    return ScriptedChatModel(respond=respond)


def evaluator_calls(llm: ScriptedChatModel) -> list[list[str]]:
    """The path lines each evaluator call was shown, in call order."""
    prompts = [str(c[1].content) for c in llm.calls if "REAL path evaluator" in str(c[0].content)]
    return [re.findall(r"^P\d+: (.*)$", p, re.MULTILINE) for p in prompts]


def nodes(result, name: str) -> list[dict]:  # noqa: ANN001
    return [t for t in result.details["trail"] if t["node"] == name]


def test_beam_decision_current_path_scored_with_expansions_and_closed_into_the_final_set(memory):
    memory.llm_ = llm = scripted()
    result = answer(QUESTION, NS, resources=memory, candidates=3)
    calls = evaluator_calls(llm)
    order = [t["node"] for t in result.details["trail"]]

    # Step 1: the root's three admissible expansions; two are relevant (< m = 3), so one repair hypothesis.
    assert order[:6] == ["roots", "expand", "evaluate", "repair", "evaluate", "select"]
    assert len(calls[0]) == 3 and sum("has_pet" in p or "lives_in" in p or "sushi" in p for p in calls[0]) == 3
    assert len(calls[1]) == 1 and "(repair: " in calls[1][0]

    # Step 2: the current paths are listed together with the expansions, in ONE call.
    has_pet_alone = [p for p in calls[2] if "has_pet" in p and not re.search(r"is_a|the beach|fetch", p)]
    lisbon_alone = [p for p in calls[2] if "lives_in" in p and "Lisbon" in p]
    assert len(has_pet_alone) == 1 and len(lisbon_alone) == 1
    assert sum(bool(re.search(r"has_pet.*(is_a|likes|plays)", p)) for p in calls[2]) == 3 and len(calls[2]) == 5

    # No global stop: has_pet's sufficiency 0.8 did not end the search; it went on to a second hop.
    assert "stop" not in str(result.details["trail"]) and result.details["evaluator_calls"] == len(calls) == 3
    paths = {p["id"]: p for p in result.details["paths"]}
    final = result.details["final_paths"]
    # The final set: the Lisbon path (nothing extends it) and has_pet -> is_a (at its end); the has_pet path
    # alone is not in it (its is_a extension scored above it), nor the beach / fetch extensions (below it).
    assert len(final) == 2 and {e.id for e in result.evidence} == set(final) == set(paths)
    relations = sorted(tuple(f["relation"] for f in paths[i]["facts"]) for i in final)
    assert relations == [("has_pet", "is_a"), ("lives_in",)]
    closed = [t["closed"] for t in nodes(result, "select")]
    lisbon = next(i for i in final if paths[i]["facts"][0]["tail"] == "Lisbon")
    breed = next(i for i in final if len(paths[i]["facts"]) == 2)
    assert closed == [[], [lisbon], [breed]]  # step 1 closes nothing: the root improved
    assert paths[breed]["parent"] not in final and result.answer == "golden retriever"
    assert result.evidence[0].id == breed


def test_repair_only_below_m_relevant_with_budget_m_minus_relevant(memory):
    memory.llm_ = scripted()
    result = answer(QUESTION, NS, resources=memory, candidates=3)
    evaluated = nodes(result, "evaluate")
    expand_budgets = [t["budgets"] for t in evaluated if t["phase"] == "expand"]
    root = result.details["trail"][1]["beam"][0]
    # Step 1: 2 relevant of m = 3 -> budget 1. Step 2: has_pet has 3 relevant (no budget), Lisbon none -> 3.
    # Step 3: the is_a path has no expansion -> 3.
    assert expand_budgets[0] == {root: 1}
    step2 = nodes(result, "expand")[1]["beam"]
    paths = {p["id"]: p for p in result.details["paths"]}
    lisbon = next(i for i in result.details["final_paths"] if paths[i]["facts"][0]["tail"] == "Lisbon")
    pet = next(i for i in step2 if i != lisbon)
    assert len(step2) == 2 and lisbon in step2
    assert expand_budgets[1] == {lisbon: 3} and pet not in expand_budgets[1]
    repairs = nodes(result, "repair")
    assert repairs[0]["budgets"] == {root: 1} and len(repairs[0]["hypotheses"]) == 1
    assert all(len(r["hypotheses"]) <= sum(r["budgets"].values()) for r in repairs)
    assert result.details["repairs"] == sum(len(r["hypotheses"]) for r in repairs)

    # The paper's default m = 5: the same two relevant expansions leave 3 repair slots, all used.
    memory.llm_ = scripted()
    wide = answer(QUESTION, NS, resources=memory)
    first = nodes(wide, "repair")[0]
    assert first["budgets"] == {root: 3} and len(first["hypotheses"]) == 3
    assert {rule for rule in first["rules"]} <= {
        "symmetry",
        "hyponymy",
        "temporal succession",
        "causality",
        "co-occurrence",
    }
    assert [repair_budget(r, 5) for r in (0, 2, 5, 7)] == [5, 3, 0, 0]


def test_no_repair_when_every_expansion_is_relevant(memory):
    memory.llm_ = scripted()
    result = answer(QUESTION, NS, resources=memory, candidates=1)  # m = 1: has_pet is the top expansion
    first_step = result.details["trail"][1:4]
    assert [t["node"] for t in first_step] == ["expand", "evaluate", "select"]
    assert first_step[1]["budgets"] == {}


def test_causal_beam_refuses_plain_attributes(memory):
    facts = {(f.relation, f.tail): f for f in worked_facts()}
    causal = SearchFilter()
    assert causal.admits(facts[("decided_because", "night shifts wore her down")], "CAUSAL")
    assert causal.admits(facts[("helped_pack", "Maya")], "CAUSAL")  # a dated event: temporal precedence
    assert not causal.admits(facts[("likes", "sushi")], "CAUSAL")
    assert not causal.admits(facts[("has_pet", "Biscuit")], "CAUSAL")

    memory.llm_ = llm = scripted(roots=[("Maya", "CAUSAL")])
    answer("Why did Maya move to Lisbon?", NS, resources=memory, repair=False)
    shown = evaluator_calls(llm)[0]
    assert any("decided_because" in p for p in shown)
    assert not any(re.search(r"likes|has_pet", p) for p in shown)


def test_default_time_filter_is_the_last_session_date(memory):
    memory.llm_ = llm = scripted()
    result = answer("Where does Maya live?", NS, resources=memory, repair=False)
    shown = [p for call in evaluator_calls(llm) for p in call]
    assert any("Lisbon" in p for p in shown)  # valid on 2023-06-01
    assert not any("Porto" in p for p in shown)  # its validity ended on 2023-05-01
    assert result.details["current_time"] == "2023-06-01" and result.details["reference_time"] is None

    # The dialogue's current time is when the question is asked, when that is given.
    memory.llm_ = llm = scripted()
    earlier = answer("Where does Maya live?", NS, resources=memory, repair=False, question_date="2023-03-15")
    shown = [p for call in evaluator_calls(llm) for p in call]
    assert any("Porto" in p for p in shown) and not any("Lisbon" in p for p in shown)
    assert earlier.details["current_time"] == "2023-03-15"
