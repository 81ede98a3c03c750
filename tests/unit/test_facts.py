"""REAL's fact layer: cardinality-aware non-destructive updates, confidence, as-of queries, extraction, enrich."""

from __future__ import annotations

from datetime import datetime

import pytest

from logicmap.agents.fact_extractor import facts_from_extraction, is_hedged, pattern_extraction
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.enrich import EnrichRequest
from logicmap.graphs.ingest.facts import enrich
from logicmap.memory.files.loaders import Session
from logicmap.memory.records.facts import (
    HEDGED_CONFIDENCE,
    STABLE_CONFIDENCE,
    apply_fact_updates,
    attribute_history,
    combine_confidence,
    describe_facts,
    fact_id,
    facts_as_of,
    make_fact,
    normalize_relation,
    relation_cardinality,
    valid_at,
)
from logicmap.memory.records.records import Fact, Turn
from logicmap.memory.store import Manifest, NamespaceSnapshot

NS = "facts-test"


def fact(head: str, relation: str, tail: str, when: str, *, confidence: float = 0.9, turns=("D1:1",), **kw) -> Fact:
    return make_fact(NS, head, relation, tail, valid_from=when, confidence=confidence, turn_ids=list(turns), **kw)


def apply(existing: dict[str, Fact], *incoming: Fact) -> tuple[dict[str, Fact], list[str]]:
    """Apply an update and return the namespace's facts after it (as a commit would), and the actions."""
    update = apply_fact_updates(existing, list(incoming))
    merged = {**existing, **{f.id: f for f in update.facts}}
    return merged, update.actions()


def turns_of(session: Session, namespace: str = NS) -> list[Turn]:
    return [
        Turn(
            namespace=namespace,
            session_id=session.session_id,
            dia_id=r.dia_id,
            speaker=r.speaker,
            text=r.text,
            session_time=session.timestamp,
        )
        for r in session.turns
    ]


# -- cardinality-aware, non-destructive updates ------------------------------------------------------


def test_single_valued_change_closes_old_interval_and_keeps_both_versions():
    facts, _ = apply({}, fact("Maya", "lives_in", "Porto", "2023-03-04", turns=["D1:2"]))
    porto_id = fact_id(NS, "Maya", "lives_in", "Porto")
    facts, actions = apply(facts, fact("Maya", "lives_in", "Lisbon", "2023-04-24", turns=["D4:1"], intent="EVOLUTION"))

    assert actions == ["add", "close"]
    porto, lisbon = facts[porto_id], facts[fact_id(NS, "Maya", "lives_in", "Lisbon")]
    assert porto.valid_from == datetime(2023, 3, 4) and porto.valid_to == datetime(2023, 4, 24)
    assert lisbon.valid_from == datetime(2023, 4, 24) and lisbon.valid_to is None
    assert porto.history[-1]["action"] == "close" and porto.history[-1]["by"] == lisbon.id
    assert porto.turn_ids == ["D1:2"] and porto.cardinality == "single"


def test_multi_valued_relation_adds_parallel_fact():
    facts, _ = apply({}, fact("Leo", "likes", "sushi", "2023-03-04", turns=["D1:6"]))
    facts, actions = apply(facts, fact("Leo", "loves", "pasteis de nata", "2023-06-03", turns=["D5:3"]))

    assert actions == ["parallel"]
    open_likes = [f for f in facts.values() if f.relation == "likes" and f.valid_to is None]
    assert sorted(f.tail for f in open_likes) == ["pasteis de nata", "sushi"]


def test_unknown_relation_is_multi_valued():
    assert relation_cardinality("collects_stamps_from") == "multi"
    assert relation_cardinality("collects_stamps_from", hint="single") == "single"
    assert relation_cardinality("lives in") == "single" and normalize_relation("Resides in") == "lives_in"
    facts, _ = apply({}, fact("Leo", "collects_stamps_from", "Japan", "2023-03-01"))
    facts, actions = apply(facts, fact("Leo", "collects_stamps_from", "Peru", "2023-04-01"))
    assert actions == ["parallel"] and all(f.valid_to is None for f in facts.values())


def test_update_leaves_unrelated_facts_untouched():
    existing = {}
    for f in (
        fact("Maya", "lives_in", "Porto", "2023-03-04"),
        fact("Leo", "lives_in", "Porto", "2023-03-04"),  # same relation, other head
        fact("Maya", "works_at", "Santo Antonio hospital", "2023-03-04"),  # same head, other relation
        fact("Maya", "likes", "Porto", "2023-03-04"),  # same head and tail, other relation
    ):
        existing, _ = apply(existing, f)
    update = apply_fact_updates(existing, [fact("Maya", "lives_in", "Lisbon", "2023-04-24")])

    written = {f.id: f for f in update.facts}
    assert set(written) == {fact_id(NS, "Maya", "lives_in", "Lisbon"), fact_id(NS, "Maya", "lives_in", "Porto")}
    for key in [
        fact_id(NS, "Leo", "lives_in", "Porto"),
        fact_id(NS, "Maya", "works_at", "Santo Antonio hospital"),
        fact_id(NS, "Maya", "likes", "Porto"),
    ]:
        assert key not in written and existing[key].valid_to is None


def test_same_triple_confirms_and_extends_interval():
    facts, _ = apply({}, fact("Maya", "works_at", "Santo Antonio hospital", "2023-03-04", turns=["D1:3"]))
    key = fact_id(NS, "Maya", "works_at", "Santo Antonio hospital")
    facts, actions = apply(facts, fact("maya", "works at", "the Santo Antonio hospital", "2023-03-21", turns=["D2:9"]))
    assert actions == ["confirm"] and facts[key].turn_ids == ["D1:3", "D2:9"] and len(facts) == 1
    # Stated again with an earlier start: the same fact's interval now starts earlier.
    facts, actions = apply(facts, fact("Maya", "works_at", "Santo Antonio hospital", "2022-01-10", turns=["D3:1"]))
    assert actions == ["extend"] and facts[key].valid_from == datetime(2022, 1, 10) and facts[key].valid_to is None
    assert [h["action"] for h in facts[key].history] == ["add", "confirm", "extend"]


def test_reasserting_an_old_value_opens_a_new_episode():
    facts = {}
    for city, when in (("Porto", "2023-01-01"), ("Lisbon", "2023-05-01"), ("Porto", "2023-09-01")):
        facts, _ = apply(facts, fact("Maya", "lives_in", city, when))
    history = attribute_history(facts, "Maya", "lives_in")
    assert [(f.tail, f.valid_to) for f in history] == [
        ("Porto", datetime(2023, 5, 1)),
        ("Lisbon", datetime(2023, 9, 1)),
        ("Porto", None),
    ]
    assert history[2].id == fact_id(NS, "Maya", "lives_in", "Porto", episode=1) != history[0].id


def test_older_value_stated_late_is_backfilled_closed():
    facts, _ = apply({}, fact("Maya", "lives_in", "Lisbon", "2023-04-24"))
    facts, actions = apply(facts, fact("Maya", "lives_in", "Madrid", "2021-01-01"))
    assert actions == ["backfill"]
    assert facts[fact_id(NS, "Maya", "lives_in", "Madrid")].valid_to == datetime(2023, 4, 24)
    assert facts[fact_id(NS, "Maya", "lives_in", "Lisbon")].valid_to is None


def test_ended_fact_closes_the_open_triple():
    facts, _ = apply({}, fact("Maya", "works_at", "Santo Antonio hospital", "2023-03-04"))
    ended = make_fact(NS, "Maya", "works_at", "Santo Antonio hospital", valid_to="2023-04-30", turn_ids=["D4:3"])
    facts, actions = apply(facts, ended)
    assert actions == ["end"] and facts[fact_id(NS, "Maya", "works_at", "Santo Antonio hospital")].valid_to == datetime(
        2023, 4, 30
    )


def test_confirmation_raises_confidence_and_hedged_value_does_not_retire_a_stable_one():
    assert combine_confidence(0.6, 0.6) == pytest.approx(0.84)
    facts, _ = apply({}, fact("Leo", "lives_in", "Braga", "2023-01-01", confidence=0.9))
    hedged = fact("Leo", "lives_in", "Porto", "2023-05-01", confidence=HEDGED_CONFIDENCE)
    facts, actions = apply(facts, hedged)
    assert actions == ["add", "contest"]
    assert facts[fact_id(NS, "Leo", "lives_in", "Braga")].valid_to is None  # a maybe does not move anyone

    facts, actions = apply(facts, fact("Leo", "lives_in", "Porto", "2023-06-01", confidence=HEDGED_CONFIDENCE))
    porto = facts[fact_id(NS, "Leo", "lives_in", "Porto")]
    assert actions == ["confirm", "promote"]
    assert porto.confidence >= STABLE_CONFIDENCE > HEDGED_CONFIDENCE
    assert facts[fact_id(NS, "Leo", "lives_in", "Braga")].valid_to == datetime(2023, 5, 1)


def test_fact_ids_are_deterministic():
    a = apply_fact_updates(
        {}, [fact("Maya", "lives_in", "Porto", "2023-03-04"), fact("Maya", "lives_in", "Lisbon", "2023-04-24")]
    )
    b = apply_fact_updates(
        {}, [fact("Maya", "lives_in", "Lisbon", "2023-04-24"), fact("Maya", "lives_in", "Porto", "2023-03-04")]
    )
    assert [f.model_dump() for f in sorted(a.facts, key=lambda f: f.id)] == [
        f.model_dump() for f in sorted(b.facts, key=lambda f: f.id)
    ]
    assert fact_id(NS, "Maya", "lives_in", "Porto") == fact_id(NS, " maya", "Lives in", "the porto")
    assert fact_id(NS, "Maya", "lives_in", "Porto") != fact_id("other-ns", "Maya", "lives_in", "Porto")


# -- as-of queries --------------------------------------------------------------------------------


def test_as_of_queries_and_history():
    facts = {}
    for f in (
        fact("Maya", "lives_in", "Porto", "2023-03-04"),
        fact("Maya", "lives_in", "Lisbon", "2023-04-24"),
        fact("Maya", "has_pet", "Biscuit", "2023-02-01"),
        fact("Maya", "wants", "a boat", "2023-04-01", confidence=0.6),
    ):
        facts, _ = apply(facts, f)
    assert [f.tail for f in facts_as_of(facts, "2023-04-01", relation="lives_in")] == ["Porto"]
    assert [f.tail for f in facts_as_of(facts, datetime(2023, 5, 1), relation="lives_in")] == ["Lisbon"]
    assert facts_as_of(facts, "2023-03-01", relation="lives_in") == []  # before anyone said where she lives
    assert [f.tail for f in facts_as_of(facts, "2023-04-24", head="Maya")] == ["Biscuit", "a boat", "Lisbon"]
    assert "a boat" not in [f.tail for f in facts_as_of(facts, "2023-05-01", min_confidence=STABLE_CONFIDENCE)]
    assert [f.tail for f in attribute_history(facts, "maya", "lives in")] == ["Porto", "Lisbon"]
    porto = facts[fact_id(NS, "Maya", "lives_in", "Porto")]
    assert valid_at(porto, "2023-04-23") and not valid_at(porto, "2023-04-24")
    assert describe_facts(facts, history=("Maya", "lives_in"))[0].startswith(
        "Maya -[lives_in]-> Porto [2023-03-04 -> 2023-04-24)"
    )


# -- extraction -----------------------------------------------------------------------------------


def test_pattern_extraction_reads_statement_shapes_and_hedges(sample):
    s1, s4, s5 = sample.sessions[0], sample.sessions[3], sample.sessions[4]
    got = facts_from_extraction(pattern_extraction(turns_of(s1)), turns_of(s1), NS)
    triples = {(f.head, f.relation, f.tail.lower()) for f in got}
    # General clause shapes only: "I work ... as a nurse at Santo Antonio", "I adopted a dog ... His name is Biscuit".
    assert {
        ("Maya", "works_at", "santo antonio"),
        ("Maya", "occupation", "nurse"),
        ("Leo", "favourite_food", "sushi"),
        ("Leo", "likes", "sushi"),
        ("Maya", "adopted", "biscuit"),
        ("Biscuit", "is_a", "dog"),
    } <= triples
    adopted = next(f for f in got if f.relation == "adopted")
    assert adopted.valid_from == datetime(2023, 2, 1) and adopted.turn_ids == ["D1:1"]  # "last month"
    moved = next(
        f for f in facts_from_extraction(pattern_extraction(turns_of(s4)), turns_of(s4), NS) if f.relation == "lives_in"
    )
    assert (moved.tail, moved.valid_from, moved.intent) == (
        "Lisbon",
        datetime(2023, 4, 24),
        "EVOLUTION",
    )  # "two weeks ago"
    wants = next(
        f for f in facts_from_extraction(pattern_extraction(turns_of(s4)), turns_of(s4), NS) if f.relation == "wants"
    )
    assert wants.confidence == HEDGED_CONFIDENCE  # "maybe in Porto in November"
    loves = [
        f for f in facts_from_extraction(pattern_extraction(turns_of(s5)), turns_of(s5), NS) if f.relation == "likes"
    ]
    assert {f.tail.lower() for f in loves} == {"pasteis de nata", "sushi"}
    assert is_hedged("I think I might move") and not is_hedged("I moved to Lisbon")


def test_pattern_extraction_more_shapes():
    turns = [
        Turn(
            namespace=NS,
            session_id="S1",
            dia_id=f"D1:{i + 1}",
            speaker="Ana",
            text=text,
            session_time=datetime(2024, 1, 10),
        )
        for i, text in enumerate(
            [
                "I live in Braga now.",
                "My favourite food is bacalhau.",
                "I work at Braga Library.",
                "Maybe I will move, I think I live in Braga for now though.",
            ]
        )
    ]
    got = facts_from_extraction(pattern_extraction(turns), turns, NS)
    by = {(f.relation, f.tail, f.turn_ids[0]): f for f in got}
    assert ("lives_in", "Braga", "D1:1") in by and ("favourite_food", "bacalhau", "D1:2") in by
    assert ("works_at", "Braga Library", "D1:3") in by
    assert (
        by[("lives_in", "Braga", "D1:4")].confidence == HEDGED_CONFIDENCE < by[("lives_in", "Braga", "D1:1")].confidence
    )


def _session(sample, index: int) -> tuple[Session, list[Turn]]:
    session = sample.sessions[index]
    return session, turns_of(session, "enrich-test")


def _request(session, turns, snapshot, llm, resources, policy="llm") -> EnrichRequest:
    return EnrichRequest(
        namespace="enrich-test",
        session=session,
        turns=turns,
        events=[],
        snapshot=snapshot,
        policy=policy,
        llm=llm,
        embeddings=resources.embeddings,
    )


def test_enrich_uses_one_llm_call_per_session_and_applies_updates(sample, resources):
    reply_s1 = {
        "facts": [
            {"head": "Maya", "relation": "lives in", "tail": "Porto", "turn_ids": ["D1:2", "D1:3"]},
            {"head": "I", "relation": "likes", "tail": "ramen", "turn_ids": ["D1:7"], "hedged": True},
            {
                "head": "Maya",
                "relation": "adopted",
                "tail": "Biscuit",
                "turn_ids": ["D1:1"],
                "time_phrase": "last month",
                "intent": "TEMPORAL",
            },
        ]
    }
    reply_s4 = {
        "facts": [
            {
                "head": "Maya",
                "relation": "moved_to",
                "tail": "Lisbon",
                "turn_ids": ["D4:1"],
                "date": "2023-04-24",
                "intent": "EVOLUTION",
            }
        ]
    }
    llm = ScriptedChatModel(routes={"REAL fact extractor": [reply_s1, reply_s4]})
    session, turns = _session(sample, 0)
    empty = NamespaceSnapshot(namespace="enrich-test", manifest=Manifest(namespace="enrich-test"))
    first = enrich(_request(session, turns, empty, llm, resources))
    assert first.cost.llm_calls == 1 and not first.fallbacks and len(llm.calls) == 1
    assert len(first.facts) == len(first.fact_vectors) == 3
    by_rel = {f.relation: f for f in first.facts}
    assert by_rel["likes"].head == "Maya" and by_rel["likes"].confidence == HEDGED_CONFIDENCE
    assert by_rel["adopted"].valid_from == datetime(2023, 2, 1)
    assert by_rel["lives_in"].valid_from == sample.sessions[0].timestamp  # no stated time: the session's

    committed = NamespaceSnapshot(
        namespace="enrich-test",
        manifest=Manifest(namespace="enrich-test", generation=1),
        facts={f.id: f for f in first.facts},
        fact_vectors=dict(zip((f.id for f in first.facts), first.fact_vectors, strict=True)),
    )
    session4, turns4 = _session(sample, 3)
    second = enrich(_request(session4, turns4, committed, llm, resources))
    assert second.cost.llm_calls == 1 and not second.retire  # nothing is ever retired
    written = {f.tail: f for f in second.facts}
    assert set(written) == {"Porto", "Lisbon"}  # the closed version of Porto and the new Lisbon fact
    assert written["Porto"].id == by_rel["lives_in"].id and written["Porto"].valid_to == datetime(2023, 4, 24)
    assert written["Lisbon"].valid_to is None and len(second.fact_vectors) == 2


def test_enrich_falls_back_to_patterns_on_bad_replies_and_without_a_model(sample, resources):
    session, turns = _session(sample, 0)
    empty = NamespaceSnapshot(namespace="enrich-test", manifest=Manifest(namespace="enrich-test"))
    bad = ScriptedChatModel(
        routes={
            "REAL fact extractor": [
                {"facts": [{"head": "it", "relation": "", "tail": "x", "turn_ids": ["D9:9"]}]},
                "not json",
            ]
        }
    )
    broken = enrich(_request(session, turns, empty, bad, resources))
    assert broken.cost.llm_calls == 2 and broken.fallbacks[0].role == "fact_extractor"
    heuristic = enrich(_request(session, turns, empty, None, resources, policy="heuristic"))
    assert not heuristic.fallbacks and heuristic.cost.llm_calls == 0
    assert sorted(f.id for f in broken.facts) == sorted(f.id for f in heuristic.facts)


def test_ingested_sample_keeps_the_move_and_both_foods(ingested_sample):
    # Porto is only implied ("How is life in Porto?"): no general statement shape gives it, so the move to
    # Lisbon opens the city's only version (closing a version is covered by test_as_of_queries_and_history).
    snapshot = ingested_sample.store.snapshot("sample")
    history = attribute_history(snapshot, "Maya", "lives_in")
    assert [(f.tail, f.valid_to is None) for f in history] == [("Lisbon", True)]
    assert history[0].turn_ids == ["D4:1"] and history[0].valid_from == datetime(2023, 4, 24)
    likes = {f.tail.lower() for f in facts_as_of(snapshot, "2023-06-04", head="Leo", relation="likes")}
    assert likes == {"sushi", "pasteis de nata"}
    assert facts_as_of(snapshot, "2023-04-01", head="Maya", relation="lives_in") == []
    assert set(snapshot.fact_vectors) == set(snapshot.facts)


def test_cli_facts_subcommand(ingested_sample, capsys):
    from logicmap.graphs.surfaces.cli import main

    args = ["--data-dir", str(ingested_sample.settings.data_dir), "--embeddings", "hashing", "facts", "-n", "sample"]
    assert main([*args, "--history", "Maya", "lives_in"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "Lisbon [2023-04-24 -> open)" in out[0]
    assert main([*args, "--as-of", "2023-04-01"]) == 0
    out = capsys.readouterr().out
    assert "-[adopted]-> Biscuit" in out and "-[lives_in]-> Lisbon" not in out
    assert main([*args, "--as-of", "soon"]) == 2


def test_a_month_or_a_year_keeps_its_precision_through_updates_and_answers():
    from logicmap.memory.language.timeparse import date_text
    from logicmap.memory.records.facts import interval_text, when_text

    facts, _ = apply({}, fact("Maya", "lives_in", "Porto", "2021"))
    facts, actions = apply(facts, fact("Maya", "lives_in", "Lisbon", "2023-04", turns=["D4:1"]))
    porto, lisbon = facts[fact_id(NS, "Maya", "lives_in", "Porto")], facts[fact_id(NS, "Maya", "lives_in", "Lisbon")]
    assert actions == ["add", "close"]
    assert interval_text(porto) == "[2021 -> 2023-04)" and interval_text(lisbon) == "[2023-04 -> open)"
    assert lisbon.history[0]["at"] == "2023-04" and porto.history[-1] == {
        **porto.history[-1],
        "action": "close",
        "at": "2023-04",
    }
    # The datetimes still order and filter: April 2023 starts on the 1st.
    assert (
        lisbon.valid_from == datetime(2023, 4, 1)
        and valid_at(lisbon, "2023-04-20")
        and not valid_at(porto, "2023-05-01")
    )
    assert (
        date_text(lisbon.valid_from, lisbon.from_precision) == "April 2023"
        and date_text(porto.valid_from, "year") == "2021"
    )
    # A value stated late is closed at the later value's start, with that value's precision.
    facts, actions = apply(facts, fact("Maya", "lives_in", "Madrid", "2019-06-02"))
    assert (
        actions == ["backfill"]
        and interval_text(facts[fact_id(NS, "Maya", "lives_in", "Madrid")]) == "[2019-06-02 -> 2021)"
    )
    assert when_text(datetime(2023, 4, 24, 18, 30)) == "2023-04-24T18:30"


def test_an_extracted_month_date_is_stored_as_a_month():
    from logicmap.prompts.real_extract import ExtractedFact, FactExtraction

    turn = Turn(
        namespace=NS,
        session_id="S4",
        dia_id="D4:1",
        speaker="Maya",
        text="I moved to Lisbon in April.",
        session_time=datetime(2023, 5, 10),
    )
    extraction = FactExtraction(
        facts=[ExtractedFact(head="Maya", relation="lives_in", tail="Lisbon", turn_ids=["D4:1"], date="2023-04")]
    )
    [stored] = facts_from_extraction(extraction, [turn], NS)
    assert stored.from_precision == "month" and stored.valid_from == datetime(2023, 4, 1)
    [undated] = facts_from_extraction(
        FactExtraction(facts=[ExtractedFact(head="Maya", relation="likes", tail="tea", turn_ids=["D4:1"])]), [turn], NS
    )
    assert undated.valid_from == datetime(2023, 5, 10) and undated.from_precision == "day"  # the session's date
