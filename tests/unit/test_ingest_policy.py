"""Ingestion's policy object (``agents.ingest_policy``): the factory, the rules, the model's roles.

Checked: the factory picks the class from the policy name alone and builds no model for the no-LLM policy; the
rules decide exactly as the no-LLM code did (change points, a temporal chain, similarity verdicts, shared-participant
links, no topic labels, fact patterns, lexical cues, one fact per turn and the deterministic manager); the LLM policy
calls the scripted model, and records the fallback when the model answers garbage; no ingest graph module compares
the policy name any more.
"""

from __future__ import annotations

import ast
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from logicmap.agents.base import Cost
from logicmap.agents.coref import CandidatePair, similarity_verdicts
from logicmap.agents.fact_extractor import pattern_extraction
from logicmap.agents.ingest_policy import (
    LLMIngestPolicy,
    RuleIngestPolicy,
    ingest_policy,
    shared_participant_links,
)
from logicmap.agents.r2 import candidates_from, fallback_extraction, heuristic_edits
from logicmap.agents.relations import chain_relations
from logicmap.agents.segmenter import changepoint_segments, finalize_times
from logicmap.agents.testing import ScriptedChatModel
from logicmap.agents.topic_abstractor import TopicCluster, fallback_abstracts
from logicmap.agents.windowing import ContextBudget
from logicmap.memory.indexes.embeddings import HashingEmbeddings
from logicmap.memory.records.r2 import FactMemory
from logicmap.memory.records.records import Topic, Turn
from logicmap.prompts.abstract_topics import SYSTEM_MARKER

ROOT = Path(__file__).resolve().parents[2]
WHEN = datetime(2023, 5, 8, 14, 0)
LINES = [
    ("Maya", "I adopted a dog named Biscuit last week."),
    ("Leo", "That is great! What breed is Biscuit?"),
    ("Maya", "A beagle. We walk in the park every morning."),
    ("Leo", "I started training for the Porto marathon yesterday."),
    ("Maya", "How far do you run now?"),
    ("Leo", "Ten kilometres, three times a week."),
]


def _turns() -> list[Turn]:
    return [
        Turn(
            namespace="ns", session_id="S1", dia_id=f"D1:{i + 1}", speaker=who, text=text, session_time=WHEN, position=i
        )
        for i, (who, text) in enumerate(LINES)
    ]


def _vectors(turns: list[Turn]) -> np.ndarray:
    return np.asarray(HashingEmbeddings().embed_documents([t.render() for t in turns]), dtype=np.float32)


class _Builds:
    """A lazy model source that counts how often it was asked."""

    def __init__(self, model: object) -> None:
        self.model, self.asked = model, 0

    def __call__(self) -> object:
        self.asked += 1
        return self.model


# -- the factory ---------------------------------------------------------------------------------------


def test_the_factory_picks_the_class_from_the_name_and_builds_no_model_for_the_rules() -> None:
    model = ScriptedChatModel()
    source = _Builds(model)
    rules = ingest_policy("heuristic", model=source)
    assert isinstance(rules, RuleIngestPolicy) and source.asked == 0 and rules.name == "heuristic" and rules.llm is None
    assert rules.run_fallbacks() == []
    llm = ingest_policy(
        "llm", model=source, method="json_mode", budget=ContextBudget(4096), tags=["t"], metadata={"session_id": "S1"}
    )
    assert isinstance(llm, LLMIngestPolicy) and source.asked == 1 and llm.llm is model and llm.name == "llm"
    assert (llm.method, llm.budget, llm.tags, dict(llm.metadata)) == (
        "json_mode",
        ContextBudget(4096),
        ("t",),
        {"session_id": "S1"},
    )
    assert isinstance(ingest_policy("llm", model), LLMIngestPolicy)


def test_asking_for_the_model_without_one_gives_the_rules_and_records_it_once() -> None:
    policy = ingest_policy("llm", None, model=lambda: None)
    assert policy == RuleIngestPolicy(missing_model=True) and policy.name == "heuristic"
    assert [(f.role, f.reason) for f in policy.run_fallbacks()] == [
        ("ingest", "no chat model configured: heuristic policy used")
    ]
    turns = _turns()
    assert [f.role for f in policy.extract_facts(turns, ["Maya", "Leo"]).fallbacks] == ["fact_extractor"]
    assert [f.role for f in policy.r2_edits(FactMemory("ns"), turns, ["Maya", "Leo"], None).fallbacks] == [
        "r2_extractor"
    ]
    assert policy.cue_links(turns, [], WHEN, None).fallbacks == []  # the lexical cue builder is no fallback


@pytest.mark.parametrize("name", ["auto", "LLM", "", "none"])
def test_an_unresolved_or_unknown_name_is_one_clear_error(name: str) -> None:
    with pytest.raises(ValueError, match="unknown ingest policy"):
        ingest_policy(name, ScriptedChatModel())


# -- the rules equal the no-LLM code -------------------------------------------------------------------


def test_the_rules_decide_as_the_no_llm_code_did() -> None:
    turns, rules = _turns(), RuleIngestPolicy()
    vectors = _vectors(turns)
    outcome, layers = rules.segment(turns, vectors, WHEN, combined=True, facts=True, cues=True)
    assert layers is None and outcome.cost == Cost() and not outcome.fallbacks and not outcome.notes
    assert outcome.output == finalize_times(changepoint_segments(turns, vectors), turns, WHEN)
    groups = [e.turn_ids for e in outcome.output.events]
    keys = [f"E{i + 1}" for i in range(len(groups))]
    assert rules.relate([e.summary for e in outcome.output.events], groups, turns).output == chain_relations(
        keys, groups
    )
    pairs = [CandidatePair("S2:E1", "a", "S1:E1", "b", 0.97), CandidatePair("S2:E2", "c", "S1:E2", "d", 0.91)]
    judged = rules.judge(pairs)
    assert judged.output == similarity_verdicts(pairs) and judged.cost == Cost() and judged.fallback is None
    topic = Topic(id="T0", namespace="ns", centroid=[1.0], members=["S1:E1"])
    built: list[int] = []
    assert rules.label_topics([topic], lambda: built.append(1) or []) is None
    assert topic.label is None and not built  # unlabelled, and no cluster was even built
    facts = rules.extract_facts(turns, ["Maya", "Leo"])
    assert facts.output == pattern_extraction(turns, ["Maya", "Leo"]) and facts.by_rules and not facts.fallbacks
    cues = rules.cue_links(turns, [], WHEN, None)
    assert cues.output == [] and cues.by_rules
    memory = FactMemory("ns")
    decided = rules.r2_edits(memory, turns, ["Maya", "Leo"], "2023-05-08")
    candidates = candidates_from(fallback_extraction(turns, ["Maya", "Leo"]))
    assert decided.output == (candidates, heuristic_edits(memory, candidates)) and decided.cost == Cost()


def test_shared_participant_links_are_rule_only(ingested_sample) -> None:
    from logicmap.memory.indexes.graph import EventGraph

    snapshot = ingested_sample.store.snapshot("sample")
    graph = EventGraph.of(snapshot)
    newest = max(snapshot.events.values(), key=lambda e: e.order)
    new = newest.model_copy(update={"id": "S99:E1", "session_id": "S99"})
    vectors = {new.id: snapshot.event_vectors[newest.id]}
    links = RuleIngestPolicy().participant_links([new], vectors, graph, "sample", "S99")
    assert links == shared_participant_links([new], vectors, graph, "sample", "S99")
    assert links and all(r.label == "shared_participant" and r.target == "S99:E1" for r in links) and len(links) <= 2
    assert all(set(snapshot.events[r.source].participants) & set(new.participants) for r in links)
    assert LLMIngestPolicy(ScriptedChatModel()).participant_links([new], vectors, graph, "sample", "S99") == []


# -- the model's roles ---------------------------------------------------------------------------------


def test_the_llm_policy_calls_the_model_and_falls_back_on_garbage() -> None:
    turns = _turns()
    vectors = _vectors(turns)
    model = ScriptedChatModel(default="this is not JSON at all")
    policy = LLMIngestPolicy(model, tags=("strategy:ingest",), metadata={"session_id": "S1"})
    outcome, layers = policy.segment(turns, vectors, WHEN, combined=False, facts=True, cues=True)
    assert layers is None and len(model.calls) == 2  # one call, one retry with the error
    assert [f.role for f in outcome.fallbacks] == ["segmenter"] and outcome.cost.llm_calls == 2
    assert outcome.output.events  # the change-point fallback, recorded
    relations = policy.relate(
        [e.summary for e in outcome.output.events], [e.turn_ids for e in outcome.output.events], turns
    )
    assert [f.role for f in relations.fallbacks] == ["relation_extractor"]
    facts = policy.extract_facts(turns, ["Maya", "Leo"])
    assert [f.role for f in facts.fallbacks] == ["fact_extractor"] and not facts.by_rules
    assert facts.output == pattern_extraction(turns, ["Maya", "Leo"])
    judged = policy.judge([CandidatePair("S2:E1", "a", "S1:E1", "b", 0.97)])
    assert judged.fallback is not None and judged.output == similarity_verdicts(
        [CandidatePair("S2:E1", "a", "S1:E1", "b", 0.97)]
    )
    calls = len(model.calls)
    outcome, layers = policy.segment([], vectors[:0], WHEN, combined=True, facts=True, cues=True)
    assert len(model.calls) == calls and not outcome.output.events and layers is None  # no memory turns: no call


def test_the_llm_policy_labels_topics_in_place_or_records_the_fallback() -> None:
    clusters = [
        TopicCluster("T0", ("Maya adopted a dog named Biscuit.", "Maya walks Biscuit in the park.")),
        TopicCluster("T1", ("Leo trains for the Porto marathon.",)),
    ]
    good = {"topics": [{"topic": "T0", "label": "Maya's dog", "description": "Biscuit the beagle."}]}
    topics = [Topic(id=c.topic_id, namespace="ns", centroid=[1.0], members=[c.topic_id]) for c in clusters]
    model = ScriptedChatModel(routes={SYSTEM_MARKER: [good, good]})
    outcome = LLMIngestPolicy(model).label_topics(topics, lambda: clusters)
    assert outcome is not None and outcome.fallback is not None  # T1 missing twice: the key-term fallback
    expected = {a.topic: a for a in fallback_abstracts(clusters).topics}
    assert [(t.label, t.description, t.label_source) for t in topics] == [
        (expected[t.id].label, expected[t.id].description, "fallback") for t in topics
    ]
    answered = {"topics": [*good["topics"], {"topic": "T1", "label": "marathon", "description": "Leo runs."}]}
    model = ScriptedChatModel(routes={SYSTEM_MARKER: [answered]})
    outcome = LLMIngestPolicy(model).label_topics(topics, lambda: clusters)
    assert outcome is not None and outcome.fallback is None and len(model.calls) == 1
    assert [(t.label, t.label_source) for t in topics] == [("Maya's dog", "llm"), ("marathon", "llm")]


# -- no ingest module tests the policy name ------------------------------------------------------------


INGEST_MODULES = [
    "graphs/ingest/ingest.py",
    "graphs/ingest/nodes.py",
    "graphs/ingest/redo.py",
    "graphs/ingest/facts.py",
    "graphs/ingest/cues.py",
    "graphs/ingest/r2.py",
    "graphs/ingest/enrich.py",
]


def _policy_comparisons(path: Path) -> list[str]:
    """Comparisons with the policy names (``x == "heuristic"``, ``p in ("llm", "heuristic")``...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            names = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            if names & {"llm", "heuristic", "auto"}:
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_ingest_module_compares_the_policy_name() -> None:
    found = [hit for module in INGEST_MODULES for hit in _policy_comparisons(ROOT / module)]
    assert not found, f"policy-name branches (ask the IngestPolicy instead): {found}"
    factory = _policy_comparisons(ROOT / "agents" / "ingest_policy.py")
    assert len(factory) == 2  # the factory's check and choice: the one place that compares the name
