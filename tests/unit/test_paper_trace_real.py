"""Paper trace of REAL (arXiv:2606.10694, Algorithm 1, Eq. 5-8): a scripted evaluator on a small fact set.

The paper's case study (Fig. 4: Caroline's adoption process, "home country" a lexically similar but
insufficient memory) is an image in the text at hand, so the facts below rebuild it in words and the
scripted scores follow Algorithm 1. Each score is chosen so that one rule changes the outcome:

* Stop when S_AS(P) >= max S_AS(P') (Eq. 7), not by a weighted score: the adoption path (S_AS 0.6) has an
  extension scoring higher on relevance and coherence but lower on sufficiency; it stops.
* Expand inserts exactly the expansions whose S_AS exceeds the path's (Eq. 8), with no relevance gate:
  the support-group fact (relevance 0.3) enters the beam, the "home country" fact (S_AS 0) does not.
* Repair only when expansion is unreliable (no candidate, max S_QR < delta_QR or max S_LC < delta_LC):
  three reliable expansions of m = 5 trigger no repair.
* Recovered paths are ranked by the evaluator (top max(0, m - |reliable|)), not by embedding similarity.
* Every final path is evidence (AggregateEvidence(P_final)): no top-five cut.
* The intent is carried per hop (Eq. 5): after a TEMPORAL hop a causal beam may follow a FACT edge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime

import pytest
from langchain_core.messages import BaseMessage

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.strategies.real import answer
from logicmap.memory.records.facts import apply_fact_updates, fact_text, make_fact
from logicmap.memory.records.records import Fact, Turn
from logicmap.memory.store import ChangeSet

NS = "real-trace"
QUESTION = "What will Caroline decide about the adoption?"
Scores = tuple[float, float, float]


def case_facts() -> list[Fact]:
    def f(head, relation, tail, turn, intent="FACT"):
        return make_fact(
            NS, head, relation, tail, valid_from="2023-02-01", confidence=0.9, intent=intent, turn_ids=[turn]
        )

    return apply_fact_updates(
        {},
        [
            f("Caroline", "started_adoption_with", "Hope agency", "D1:1"),
            f("Caroline", "moved_from", "her home country", "D1:2"),
            f("Caroline", "attends", "a support group", "D1:3"),
            f("Caroline", "met", "a counselor", "D1:4", intent="TEMPORAL"),
            f("Hope agency", "approved", "the home study", "D1:5"),
            f("Hope agency", "located_in", "Boston", "D1:6"),
            f("a support group", "meets_on", "Tuesdays", "D1:7"),
            f("a counselor", "recommended", "the foster plan", "D1:8"),
            # A second root for the intent-per-hop trace: a causal beam, a temporal hop, then a plain fact.
            f("Melanie", "signed_up_for", "a pottery class", "D1:9", intent="TEMPORAL"),
            f("a pottery class", "taught_by", "Jon", "D1:10"),
            # Facts pointing INTO Dana only: the symmetry rule's hypotheses when Dana's expansion fails.
            f("Dana", "mentions", "the adoption decision", "D1:11"),
            f("Melanie", "talked_adoption_decision_with", "Dana", "D1:12"),
            f("Hope agency", "sent_papers_to", "Dana", "D1:13"),
            # Six leaves of two roots, for the final-set size.
            *(
                f(root, f"owns_{i}", f"{root.lower()} thing {i}", f"D2:{j}")
                for j, (root, i) in enumerate([(r, i) for r in ("Rex", "Zoe") for i in range(3)], start=1)
            ),
        ],
    ).facts


@pytest.fixture
def memory(resources):
    facts = case_facts()
    turns = [
        Turn(
            namespace=NS,
            session_id="S1",
            dia_id=f"D1:{j}",
            speaker="Caroline",
            text=f"turn {j}",
            session_time=datetime(2023, 6, 1, 10, 0),
            position=j,
        )
        for j in range(1, 14)
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


def case_judge(text: str) -> Scores:
    """(relevance, coherence, sufficiency) of one listed path, by its last fact."""
    last = text.split("-[")[-1]
    table: dict[str, Scores] = {
        "started_adoption_with": (0.6, 0.6, 0.6),
        "approved": (1.0, 1.0, 0.5),  # weighted 0.4/0.2/0.4: 0.80 > 0.60, yet sufficiency 0.5 < 0.6
        "located_in": (0.2, 0.9, 0.1),
        "moved_from": (0.9, 0.9, 0.0),  # "home country": lexically similar, answers nothing
        "attends": (0.3, 0.9, 0.2),  # not relevant, yet more sufficient than the bare root
        "meets_on": (0.6, 0.9, 0.1),
        "met": (0.8, 0.9, 0.3),
        "recommended": (0.9, 0.9, 0.9),
    }
    for relation, scores in table.items():
        if last.startswith(relation):
            return scores
    return 0.1, 0.9, 0.0


def scripted(judge: Callable[[str], Scores], roots: Sequence[tuple[str, str]]) -> ScriptedChatModel:
    def respond(messages: Sequence[BaseMessage]) -> dict:
        system, human = str(messages[0].content), str(messages[1].content)
        if "REAL root planner" in system:
            return {
                "roots": [{"entity": e, "intent": i} for e, i in roots],
                "reference_time": None,
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
            return {"answer": "the foster plan", "path_ids": [first.group(1)] if first else []}
        raise AssertionError(f"unexpected role: {system[:80]}")

    return ScriptedChatModel(respond=respond)


def shown(llm: ScriptedChatModel) -> list[list[str]]:
    """The path lines each evaluator call was shown, in call order."""
    prompts = [str(c[1].content) for c in llm.calls if "REAL path evaluator" in str(c[0].content)]
    return [re.findall(r"^P\d+: (.*)$", p, re.MULTILINE) for p in prompts]


def trail(result, name: str) -> list[dict]:
    return [t for t in result.details["trail"] if t["node"] == name]


def relations(result, path_id: str) -> list[str]:
    by_id = {p["id"]: p for p in result.details["paths"]}
    return [f["relation"] for f in by_id[path_id]["facts"]]


def test_no_repair_while_expansion_is_reliable(memory):
    memory.llm_ = scripted(case_judge, [("Caroline", "FACT")])
    result = answer(QUESTION, NS, resources=memory)
    # Step 1: three reliable expansions of m = 5 (adoption, home country, counselor): expansion is reliable,
    # so NO counterfactual repair (the old rule repaired any path with fewer than m relevant expansions).
    first = trail(result, "evaluate")[0]
    assert first["phase"] == "expand" and first["budgets"] == {}
    assert [t["node"] for t in result.details["trail"][:4]] == ["roots", "expand", "evaluate", "select"]
    # Step 2 likewise (adoption and support group have reliable expansions); step 3: the foster-plan path
    # has no candidate at all, the one case here where repair is triggered, with the whole budget m.
    budgets = [t["budgets"] for t in trail(result, "evaluate") if t["phase"] == "expand"]
    assert budgets[:2] == [{}, {}] and list(budgets[2].values()) == [5]


def test_stop_and_expand_by_entity_specific_sufficiency(memory):
    memory.llm_ = llm = scripted(case_judge, [("Caroline", "FACT")])
    result = answer(QUESTION, NS, resources=memory, repair=False)
    calls = shown(llm)
    selects = trail(result, "select")
    # Expand inserts exactly the expansions more sufficient than the bare root (S_AS 0): the support group
    # (relevance 0.3, below delta_QR) is in the beam; "her home country" (S_AS 0) is not.
    step1 = selects[0]["beam"]
    beam_lines = [line for line in calls[1] if line.count("-[") == 1]  # the current paths, listed again
    assert len(step1) == 3 and len(beam_lines) == 3
    assert any("a support group" in line for line in beam_lines)
    assert not any("home country" in line for line in beam_lines)

    # Step 2: the adoption path (S_AS 0.6) Stops although "approved the home study" scores higher on
    # relevance and coherence (weighted 0.80 vs 0.60): its S_AS is 0.5. The support group (0.2) Stops
    # against Tuesdays (0.1); the counselor path (0.3) Expands to the foster plan (0.9).
    decisions = selects[1]["decisions"]
    assert sorted(decisions.values()) == ["Expand", "Stop", "Stop"]
    final = result.details["final_paths"]
    final_relations = sorted(tuple(relations(result, i)) for i in final)
    assert ("started_adoption_with",) in final_relations
    assert ("started_adoption_with", "approved") not in final_relations
    assert not any("approved" in line for call in calls[2:] for line in call)  # never expanded from
    assert ("attends",) in final_relations and ("met", "recommended") in final_relations
    assert sorted(final_relations) == [("attends",), ("met", "recommended"), ("started_adoption_with",)]
    # The evidence is the final set, the evaluator's most sufficient path first.
    assert {e.id for e in result.evidence} == set(final)
    assert relations(result, result.evidence[0].id) == ["met", "recommended"]
    # The evaluator is asked for the sufficiency of the sub-question about the path's own root entity.
    system = next(str(c[0].content) for c in llm.calls if "REAL path evaluator" in str(c[0].content))
    assert "root entity" in system


def dana_judge(text: str) -> Scores:
    if "talked_adoption_decision_with" in text:
        return 0.9, 0.9, 0.3  # lexically closest to the question
    if "sent_papers_to" in text:
        return 0.9, 0.9, 0.8  # the evaluator's choice
    return 0.2, 0.9, 0.1  # Dana's own expansion: unreliable (relevance below delta_QR)


def test_repair_trigger_budget_and_evaluator_ranking(memory):
    memory.llm_ = llm = scripted(dana_judge, [("Dana", "FACT")])
    result = answer("Who talked with Dana about the adoption decision?", NS, resources=memory, candidates=1)
    calls = shown(llm)
    # Dana's one expansion has relevance 0.2 < delta_QR: NeedCounterfactual, budget max(0, 1 - 0) = 1.
    root = result.details["trail"][1]["beam"][0]
    assert trail(result, "evaluate")[0]["budgets"] == {root: 1}
    # Every hypothesis of the rule table goes to the evaluator (both incoming facts, by symmetry), and the
    # top-1 BY THE EVALUATOR is kept: the papers, not the lexically closer conversation.
    repair_lines = calls[1]
    assert len(repair_lines) == 2 and all("(repair: symmetry" in line for line in repair_lines)
    kept = trail(result, "select")[0]["recovered"]
    assert len(kept) == 1 and relations(result, kept[0]) == ["sent_papers_to"]
    assert result.details["repairs"] == 1
    assert not any("talked_adoption_decision_with" in relations(result, i) for i in result.details["final_paths"])


def test_the_final_set_is_kept_whole(memory):
    def leaves(text: str) -> Scores:
        return (0.9, 0.9, 0.5) if "owns_" in text else (0.1, 0.9, 0.0)

    memory.llm_ = scripted(leaves, [("Rex", "FACT"), ("Zoe", "FACT")])
    result = answer("What do Rex and Zoe own?", NS, resources=memory, repair=False)
    final = result.details["final_paths"]
    assert len(final) == 6 and {e.id for e in result.evidence} == set(final)  # not cut to five


def test_intent_is_carried_per_hop(memory):
    def pottery(text: str) -> Scores:
        return (0.9, 0.9, 0.9) if "taught_by" in text else (0.9, 0.9, 0.4)

    memory.llm_ = llm = scripted(pottery, [("Melanie", "CAUSAL")])
    result = answer("Why did Melanie learn from Jon?", NS, resources=memory, repair=False)
    lines = [line for call in shown(llm) for line in call]
    # The causal root admits the TEMPORAL hop; after it the path's intent is TEMPORAL, which admits the
    # plain FACT edge taught_by (a causal intent held for the whole path would refuse it).
    assert any("signed_up_for" in line and "taught_by" in line for line in lines)
    best = result.details["paths"][0]
    assert [f["relation"] for f in best["facts"]] == ["signed_up_for", "taught_by"] and best["intent"] == "FACT"


def test_faithful_causal_beam_follows_causal_facts_only(resources):
    """``faithful`` (III-B2: "for a causal intent, only edges labeled CAUSAL are allowed"): a causal beam's
    candidates are its CAUSAL facts; the default's table also admits TEMPORAL and EVOLUTION facts."""
    ns = "real-causal"

    def f(relation: str, tail: str, intent: str, turn: str) -> Fact:
        return make_fact(
            ns, "Nora", relation, tail, valid_from="2023-02-01", confidence=0.9, intent=intent, turn_ids=[turn]
        )

    commit_facts(
        resources,
        ns,
        apply_fact_updates(
            {},
            [
                f("quit_because_of", "the noisy gym", "CAUSAL", "D1:1"),
                f("signed_up_for", "a yoga class", "TEMPORAL", "D1:2"),
                f("switched_to", "morning runs", "EVOLUTION", "D1:3"),
                f("likes", "green tea", "FACT", "D1:4"),
            ],
        ).facts,
    )
    followed = {}
    for faithful in (False, True):
        resources.llm_ = llm = scripted(lambda text: (0.9, 0.9, 0.5), [("Nora", "CAUSAL")])
        answer("Why did Nora stop going to the gym?", ns, resources=resources, repair=False, faithful=faithful)
        lines = " ".join(line for call in shown(llm) for line in call)
        followed[faithful] = [r for r in ("quit_because_of", "signed_up_for", "switched_to", "likes") if r in lines]
    assert followed == {False: ["quit_because_of", "signed_up_for", "switched_to"], True: ["quit_because_of"]}


# -- the defaults of Section IV-A, each through the behaviour it controls ------------------------------------


def commit_facts(resources, namespace: str, facts: list[Fact]) -> None:
    turns = sorted({t for f in facts for t in f.turn_ids})
    records = [
        Turn(
            namespace=namespace,
            session_id="S1",
            dia_id=t,
            speaker="Nora",
            text=f"turn {t}",
            session_time=datetime(2023, 6, 1, 10, 0),
            position=j,
        )
        for j, t in enumerate(turns, start=1)
    ]
    emb = resources.embeddings
    resources.store.commit(
        ChangeSet(
            namespace=namespace,
            base_generation=0,
            turns=records,
            turn_vectors=emb.embed_documents([t.text for t in records]),
            facts=facts,
            fact_vectors=emb.embed_documents([fact_text(f) for f in facts]),
        )
    )


@pytest.mark.parametrize(
    ("relevance", "coherence", "repaired"),
    [
        (0.45, 0.9, True),
        (0.55, 0.9, False),  # delta_QR = 0.5: 0.4 or 0.6 would swap one of these
        (0.9, 0.45, True),
        (0.9, 0.55, False),  # delta_LC = 0.5, likewise
    ],
)
def test_repair_thresholds_delta_qr_and_delta_lc_are_one_half(memory, relevance, coherence, repaired):
    def judge(text: str) -> Scores:
        return (0.9, 0.9, 0.8) if "sent_papers_to" in text else (relevance, coherence, 0.1)

    memory.llm_ = scripted(judge, [("Dana", "FACT")])
    result = answer("Who talked with Dana about the adoption decision?", NS, resources=memory)
    budgets = trail(result, "evaluate")[0]["budgets"]
    assert (list(budgets.values()) == [5]) if repaired else budgets == {}  # m = 5, no reliable expansion


def test_expansion_admits_facts_of_confidence_theta_stable_08(resources):
    """theta_stable = 0.8 (Alg. 1 l. 14): a fact held with confidence 0.85 is a candidate, one of 0.75 is not
    (0.7 would admit both, 0.9 neither)."""
    ns = "real-theta"

    def f(relation: str, tail: str, confidence: float, turn: str) -> Fact:
        return make_fact(
            ns, "Nora", relation, tail, valid_from="2023-02-01", confidence=confidence, intent="FACT", turn_ids=[turn]
        )

    commit_facts(
        resources,
        ns,
        apply_fact_updates({}, [f("joined", "a choir", 0.85, "D1:1"), f("visited", "Vienna", 0.75, "D1:2")]).facts,
    )
    resources.llm_ = llm = scripted(lambda text: (0.9, 0.9, 0.5), [("Nora", "FACT")])
    answer("What does Nora do?", ns, resources=resources, repair=False)
    lines = [line for call in shown(llm) for line in call]
    assert any("joined" in line for line in lines) and not any("visited" in line for line in lines)


def test_paths_end_at_d_max_three(resources):
    """D_max = 3: a chain whose every hop is more sufficient is cut after three facts (open paths at D_max join
    P_final)."""
    ns = "real-depth"
    chain = ["Ivy", "a garden", "a seed", "a sprout", "a tree", "a forest"]
    facts = [
        make_fact(
            ns, a, f"leads_to_{i}", b, valid_from="2023-02-01", confidence=0.9, intent="FACT", turn_ids=[f"D1:{i}"]
        )
        for i, (a, b) in enumerate(zip(chain, chain[1:]), start=1)
    ]
    commit_facts(resources, ns, apply_fact_updates({}, facts).facts)

    def deeper(text: str) -> Scores:
        return 0.9, 0.9, min(1.0, 0.2 * text.count("-["))

    resources.llm_ = scripted(deeper, [("Ivy", "FACT")])
    result = answer("Where does Ivy's garden lead?", ns, resources=resources, repair=False)
    assert [relations(result, p) for p in result.details["final_paths"]] == [["leads_to_1", "leads_to_2", "leads_to_3"]]
