"""The registry of record kinds: every kind the store commits and snapshots is declared once, with its links."""

from __future__ import annotations

import typing

from logicmap.graphs.ingest.enrich import Enrichment
from logicmap.memory.records.kinds import BY_FIELD, BY_NAME, RECORD_KINDS, derived_from
from logicmap.memory.records.records import Event, Relation, Tag, Topic
from logicmap.memory.store import ChangeSet, NamespaceSnapshot

NOT_RECORDS = {"retire", "drop_sessions", "sessions", "forgets"}  # list/dict fields of a change set: no records


def _record_fields(model: type) -> set[str]:
    hints = typing.get_type_hints(model)
    return {
        name for name, hint in hints.items() if typing.get_origin(hint) in (list, dict) and not name.startswith("_")
    } - NOT_RECORDS


def _registered_fields() -> set[str]:
    return {name for kind in RECORD_KINDS for name in (kind.field, kind.vector_field) if name is not None}


def test_every_kind_of_a_change_set_is_registered() -> None:
    assert _record_fields(ChangeSet) == _registered_fields()


def test_every_kind_of_a_snapshot_is_registered() -> None:
    hints = typing.get_type_hints(NamespaceSnapshot)
    fields = {name for name in hints if not name.startswith("_")} - {"namespace", "manifest"}
    assert fields == _registered_fields()


def test_each_kind_names_its_record_model_in_the_change_set() -> None:
    hints = typing.get_type_hints(ChangeSet)
    for kind in RECORD_KINDS:
        assert typing.get_args(hints[kind.field]) == (kind.model,), kind.name
        assert kind.id_field in kind.model.model_fields, kind.name
        for ref in kind.sources:
            assert ref.field in kind.model.model_fields and ref.target in BY_NAME, (kind.name, ref)
    assert list(BY_FIELD) == [kind.field for kind in RECORD_KINDS] and len(BY_NAME) == len(RECORD_KINDS)


def test_enrichment_adds_only_registered_kinds() -> None:
    fields = set(Enrichment.model_fields) - NOT_RECORDS - {"cost", "fallbacks", "notes", "kind"}
    assert fields and fields <= _registered_fields()


def test_each_record_names_what_it_derives_from() -> None:
    event = Event(id="e1", namespace="n", session_id="S1", summary="moved", turn_ids=["D1:1", "D1:2"])
    relation = Relation(id="r", namespace="n", source="e1", target="e2", label="causes", turn_ids=["D1:2"])
    topic = Topic(id="t", namespace="n", centroid=[1.0], members=["e1", "e2"])
    on_event = Tag(id="g1", namespace="n", cue_id="cue:dog", tag="pet", target_kind="event", target_id="e1")
    on_fact = Tag(id="g2", namespace="n", cue_id="cue:dog", tag="pet", target_kind="fact", target_id="pf|D1:3|ab12")
    assert derived_from(BY_NAME["event"], event) == {"turn": ["D1:1", "D1:2"]}
    assert derived_from(BY_NAME["relation"], relation) == {"event": ["e1", "e2"], "turn": ["D1:2"]}
    assert derived_from(BY_NAME["topic"], topic) == {"event": ["e1", "e2"]}
    assert derived_from(BY_NAME["tag"], on_event) == {"cue": ["cue:dog"], "event": ["e1"]}
    assert derived_from(BY_NAME["tag"], on_fact) == {"cue": ["cue:dog"], "turn": ["D1:3"]}
    assert BY_NAME["turn"].sources == ()


def test_vectors_are_kept_for_exactly_the_queryable_kinds() -> None:
    assert [k.field for k in RECORD_KINDS if k.has_vectors] == [
        "turns",
        "events",
        "topics",
        "facts",
        "cues",
        "r2_facts",
    ]
