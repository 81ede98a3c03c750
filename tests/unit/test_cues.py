"""The Cue-Tag-Content layer: no-LLM cue extraction, the session's records, lookups, and the LLM enricher."""

from __future__ import annotations

from datetime import datetime

import pytest

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.cues import enrich
from logicmap.graphs.ingest.enrich import EnrichRequest
from logicmap.memory.files.loaders import RawTurn, Session
from logicmap.memory.indexes.cue_extraction import (
    AspectPrototypes,
    aspect_prototypes,
    build_cue_layer,
    detect_aspects,
    extract_cues,
    extract_personal_facts,
    resolve_aspects,
)
from logicmap.memory.indexes.cue_index import CueIndex
from logicmap.memory.records.cues import cue_id, fact_source_turn, normalize_cue, personal_fact_id
from logicmap.memory.records.records import Event, Turn

NS = "cue-test"


def _turn(dia_id: str, speaker: str, text: str, session: str = "S1") -> Turn:
    return Turn(
        namespace=NS,
        session_id=session,
        dia_id=dia_id,
        speaker=speaker,
        text=text,
        session_time=datetime(2023, 5, 8, 18, 40),
    )


def _event(eid: str, turns: list[Turn]) -> Event:
    return Event(
        id=eid,
        namespace=NS,
        session_id=turns[0].session_id,
        summary=" ".join(t.text for t in turns),
        turn_ids=[t.dia_id for t in turns],
        participants=sorted({t.speaker for t in turns}),
    )


def _kinds(text: str, people: tuple[str, ...] = ("Maya", "Leo")) -> dict[str, str]:
    return {c.text: c.kind for c in extract_cues(text, people=people)}


def test_cues_are_verbatim_names_places_times_quantities_and_activities() -> None:
    cues = _kinds(
        "I finished the half marathon yesterday in 1 hour 52 minutes! Next I want to run in Porto in November."
    )
    assert cues["half marathon"] == "entity"  # the content words after a determiner
    assert cues["yesterday"] == "time"
    assert cues["1 hour 52 minutes"] == "quantity"
    assert cues["Porto"] == "place"
    assert cues["November"] == "time"
    assert "Next" not in cues and "I" not in cues  # sentence-initial common words are no names

    cues = _kinds("My sister Ana is visiting me next month. I visited the Blue Finch on Rua das Flores.")
    assert cues["Ana"] == "person"  # a kinship word before a name
    assert cues["next month"] == "time"
    assert cues["Rua das Flores"] == "place"  # lowercase connectors inside a name
    assert cues["Blue Finch"] == "entity"

    cues = _kinds("I still work night shifts as a nurse at Santo Antonio hospital. Hi Leo!")
    assert cues["Santo Antonio"] == "place"  # a name after "at"
    assert cues["nurse"] == "entity"
    assert cues["Leo"] == "person"
    assert _kinds("Finally some gardening!")["gardening"] == "activity"  # an -ing head


def test_compound_nouns_keep_their_modifiers_and_are_one_cue() -> None:
    texts = [c.text for c in extract_cues("At the Blue Finch I had an iced matcha latte with oat milk.")]
    assert "iced matcha latte" in texts
    assert "matcha" not in texts and "iced matcha" not in texts and "latte" not in texts


def test_normalized_keys_and_ids_are_deterministic() -> None:
    assert normalize_cue("The Blue Finch's") == "blue finch"
    assert cue_id("Blue  Finch") == cue_id("the blue finch") == "cue:blue_finch"
    fid = personal_fact_id("D1:6", "Leo", "food", "Leo: Sushi is my favourite food.")
    assert fact_source_turn(fid) == "D1:6" and fid == personal_fact_id(
        "D1:6", "Leo", "food", "Leo: Sushi is my favourite food."
    )
    assert fact_source_turn("S1-E1") is None


def test_aspects_of_sentences_and_of_free_text() -> None:
    assert detect_aspects("Sushi is my favourite food") == ["preference", "food"]
    assert "work" in detect_aspects("I got a job offer from a hospital")
    assert set(resolve_aspects("favourite food")) == {"preference", "food"}
    assert resolve_aspects("occupation") == ["work"]
    assert resolve_aspects("hobbies") == ["hobby"]


def test_aspect_prototypes_file_sentences_by_similarity_to_the_taxonomy() -> None:
    from logicmap.memory.indexes.embeddings import HashingEmbeddings

    prototypes = AspectPrototypes(HashingEmbeddings())
    near = prototypes.nearest(["We talked about pets and animals all evening.", "Thanks, see you!"])
    assert near[0][0] == "pet"
    assert near[1] == []  # nearer to small talk than to any aspect
    assert detect_aspects("We talked about it.", nearest=["pet"]) == ["pet"]
    # At ingest a lexical embedder gives no prototypes: its aspect vectors are only the taxonomy's words.
    assert aspect_prototypes(HashingEmbeddings()) is None and aspect_prototypes(None) is None


def test_personal_facts_come_from_first_person_sentences() -> None:
    turn = _turn(
        "D1:6", "Leo", "Mostly rice and fish. Sushi is my favourite food, I could eat it every day. I would love that."
    )
    facts = extract_personal_facts(turn)
    assert {(p, a) for p, a, _, _ in facts} == {("Leo", "preference"), ("Leo", "food")}
    assert all(content == "Leo: Sushi is my favourite food, I could eat it every day." for _, _, content, _ in facts)
    # "Mostly rice and fish." has no first person; "I would love that." says nothing lasting.
    assert extract_personal_facts(_turn("D1:9", "Maya", "I would love that.")) == []


def test_session_layer_links_cues_to_events_and_facts_with_short_tags() -> None:
    # No embedder here: the sentence is filed under "pet" by the taxonomy's own word.
    t1 = _turn("D1:1", "Maya", "I adopted a pet dog last month. His name is Biscuit.")
    t2 = _turn("D1:2", "Leo", "Porto is lovely. I started training for the Lisbon half marathon.")
    t3 = _turn("D1:3", "Maya", "Good luck! I moved home to Lisbon two weeks ago.")
    events = [_event("S1-E1", [t1]), _event("S1-E2", [t2, t3])]
    batch = build_cue_layer(NS, [t1, t2, t3], events)
    cues = {c.id: c for c in batch.cues}
    assert cues["cue:lisbon"].kind == "place"  # "the Lisbon half marathon" and "to Lisbon": the place wins
    event_tags = [t for t in batch.tags if t.target_kind == "event"]
    biscuit = [t for t in event_tags if t.cue_id == "cue:biscuit"]
    assert [(t.target_id, t.tag, t.person) for t in biscuit] == [("S1-E1", "pet", "Maya")]
    assert biscuit[0].content == "Maya: His name is Biscuit."
    fact_tags = [t for t in batch.tags if t.target_kind == "fact"]
    assert {fact_source_turn(t.target_id) for t in fact_tags} >= {"D1:1", "D1:3"}
    assert any(
        t.cue_id == "cue:maya" and t.tag == "pet" for t in fact_tags
    )  # the person is always a cue of their facts
    assert len({t.id for t in batch.tags}) == len(batch.tags)

    # Committed records are not written again; a more specific kind rewrites the cue.
    again = build_cue_layer(NS, [t1, t2, t3], events, existing_cues=cues, existing_tags=[t.id for t in batch.tags])
    assert again.cues == [] and again.tags == []
    stale = {**cues, "cue:lisbon": cues["cue:lisbon"].model_copy(update={"kind": "entity"})}
    upgraded = build_cue_layer(NS, [t1, t2, t3], events, existing_cues=stale, existing_tags=[t.id for t in batch.tags])
    assert [(c.id, c.kind) for c in upgraded.cues] == [("cue:lisbon", "place")]


def _sample_event_of(snapshot, dia_id: str) -> str:
    return next(e.id for e in snapshot.events.values() if dia_id in e.turn_ids)


def test_index_lookups_by_cue_person_aspect_and_event(ingested_sample) -> None:
    snapshot = ingested_sample.store.snapshot("sample")
    index = CueIndex.of(snapshot)
    assert CueIndex.of(snapshot) is index  # cached on the snapshot
    # Every tag points at a committed cue and target: the layer committed with its sessions.
    assert all(t.cue_id in snapshot.cues for t in snapshot.tags.values())
    assert all(t.target_id in snapshot.events for t in snapshot.tags.values() if t.target_kind == "event")

    (biscuit, score), *_ = index.find_cues("biscuit")
    assert biscuit.text == "Biscuit" and score == 1.0
    linked = {t.target_id for t in index.event_tags(biscuit)}
    assert _sample_event_of(snapshot, "D1:1") in linked and _sample_event_of(snapshot, "D4:5") in linked
    assert {t.target_id for t in index.event_tags(biscuit, "pet")} <= linked
    assert [c.text for c, _ in index.find_cues("custard tart")] == ["custard tarts"]  # plural-insensitive
    assert any(c.text == "iced matcha latte" for c, _ in index.find_cues("matcha latte"))  # word containment

    assert set(index.known_people()) >= {"Maya", "Leo", "Ana"}
    food = index.person_facts("leo", "favourite food")
    assert food and food[0].turn_ids == ["D1:6"] and "Sushi" in food[0].content
    assert {"preference", "food"} <= set(food[0].aspects)
    assert {"work", "hobby"} <= set(index.aspects_of("Maya"))  # the taxonomy's words: "work", "hobby"
    assert any(f.person == "Maya" for f in index.person_facts("Ana"))  # facts that mention Ana

    keywords = {c.text for c, _ in index.keywords_of(_sample_event_of(snapshot, "D4:4"))}
    assert {"half marathon", "1 hour 52 minutes"} <= keywords
    assert [c.text for c in index.cues_of_text("When did Leo finish the half marathon?")][:1] == ["half marathon"]


def _request(llm, turns: list[Turn], events: list[Event], resources) -> EnrichRequest:
    session = Session(
        session_id="S1",
        timestamp=datetime(2023, 5, 8, 18, 40),
        turns=[RawTurn(dia_id=t.dia_id, speaker=t.speaker, text=t.text) for t in turns],
    )
    return EnrichRequest(
        namespace=NS,
        session=session,
        turns=turns,
        events=events,
        snapshot=resources.store.snapshot(NS),
        policy="llm" if llm else "heuristic",
        llm=llm,
        embeddings=resources.embeddings,
    )


def test_enricher_makes_one_llm_call_and_keeps_only_verbatim_cues(resources) -> None:
    # No embedder here: the sentence is filed under "pet" by the taxonomy's own word.
    t1 = _turn("D1:1", "Maya", "I adopted a pet dog last month. His name is Biscuit.")
    t2 = _turn("D1:2", "Leo", "Sushi is my favourite food.")
    events = [_event("S1-E1", [t1]), _event("S1-E2", [t2])]
    model = ScriptedChatModel(
        routes={
            "You index one session": [
                {
                    "units": [
                        {
                            "turn_id": "D1:1",
                            "content": "Maya adopted a dog named Biscuit last month.",
                            "tags": ["dog's name"],
                            "cues": [{"cue": "Biscuit", "kind": "entity"}, {"cue": "a unicorn", "kind": "entity"}],
                        }
                    ],  # never said: dropped
                    "person_facts": [
                        {
                            "person": "Leo",
                            "aspect": "food preference",
                            "content": "Leo's favourite food is sushi",
                            "cues": ["Sushi"],
                            "turn_id": "D1:2",
                        }
                    ],
                }
            ]
        }
    )
    enrichment = enrich(_request(model, [t1, t2], events, resources))
    assert enrichment.cost.llm_calls == 1 and not enrichment.fallbacks
    assert len(enrichment.cue_vectors) == len(enrichment.cues)
    labels = {(t.cue_id, t.tag, t.target_id) for t in enrichment.tags}
    assert ("cue:biscuit", "dog's name", "S1-E1") in labels  # the model's tag, with its rewritten content
    assert any(t.content == "Maya adopted a dog named Biscuit last month." for t in enrichment.tags)
    # The model's extraction is the layer: the lexical builder (its "pet" tag) is only the fallback.
    assert ("cue:biscuit", "pet", "S1-E1") not in labels
    assert not any(c.id == "cue:unicorn" for c in enrichment.cues)
    assert any(
        t.tag == "food preference"
        and t.person == "Leo"
        and t.content == "Leo's favourite food is sushi"
        and fact_source_turn(t.target_id) == "D1:2"
        for t in enrichment.tags
    )


def test_enricher_falls_back_to_the_heuristic_layer_on_bad_output(resources) -> None:
    # No embedder here: the sentence is filed under "pet" by the taxonomy's own word.
    t1 = _turn("D1:1", "Maya", "I adopted a pet dog last month. His name is Biscuit.")
    events = [_event("S1-E1", [t1])]
    model = ScriptedChatModel(
        routes={
            "You index one session": [
                "not json",
                {"units": [{"turn_id": "D9:9", "content": "x", "tags": ["x"], "cues": [{"cue": "Biscuit"}]}]},
            ]
        }
    )
    enrichment = enrich(_request(model, [t1], events, resources))
    assert enrichment.cost.llm_calls == 2  # one retry with the error, then the fallback
    assert [f.role for f in enrichment.fallbacks] == ["cue_extractor"]
    assert "D9:9" in " ".join(enrichment.fallbacks[0].errors)
    assert any(t.cue_id == "cue:biscuit" and t.tag == "pet" for t in enrichment.tags)

    heuristic = enrich(_request(None, [t1], events, resources))
    assert heuristic.cost.llm_calls == 0 and {c.id for c in heuristic.cues} == {c.id for c in enrichment.cues}


@pytest.mark.parametrize(
    "question,expected",
    [
        ("What is the name of Maya's dog?", {"dog", "Maya"}),
        ("What did Maya order at the ramen bar in Lisbon?", {"Lisbon", "Maya"}),
    ],
)
def test_question_cues_are_matched_to_stored_cues(ingested_sample, question: str, expected: set[str]) -> None:
    index = CueIndex.of(ingested_sample.store.snapshot("sample"))
    found = [c.text for c in index.cues_of_text(question)]
    assert expected <= set(found)
    assert found[-1] in {"Maya", "Leo"}  # persons come last
