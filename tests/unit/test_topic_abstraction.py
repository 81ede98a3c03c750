"""MRAgent's topic abstraction (Eq. 18): the topic_abstractor role, its place in ingest, and the Topic record.

Checked: the role's validation, retry and recorded key-term fallback; one call per session listing only the
topics whose members changed (unchanged topics keep their labels); none under the no-LLM policy; the labels
shown by ``query_topic_events`` and the reconstruct graph; old topic records and backups stay byte-identical
and labelled topics survive a backup and the snapshot file.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from logicmap.agents.testing import ScriptedChatModel
from logicmap.agents.topic_abstractor import TopicCluster, abstract_topics, fallback_abstracts, key_terms
from logicmap.evals.bench.scripted import scripted_reply
from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.graphs.runtime.result import EvidenceItem
from logicmap.graphs.strategies.reconstruct import _topics_text
from logicmap.memory.files.backup import export_namespace, import_namespace
from logicmap.memory.records.records import Topic
from logicmap.prompts.abstract_topics import SYSTEM_MARKER
from logicmap.tools import create_query_topic_events_tool
from tests.conftest import make_resources

CLUSTERS = [
    TopicCluster("T0", ("Maya adopted a dog named Biscuit.", "Maya walks Biscuit the dog in the park.")),
    TopicCluster("T1", ("Leo trains for the half marathon.",)),
]
GOOD = {
    "topics": [
        {"topic": "T0", "label": "Maya's dog Biscuit", "description": "Adopting and walking Biscuit."},
        {"topic": "T1", "label": "marathon training", "description": "Leo's running."},
    ]
}
_LISTED = re.compile(r"^(T\d+) \((\d+) events\):", re.MULTILINE)


# -- the role ------------------------------------------------------------------------------------------


def test_a_valid_reply_labels_every_topic_in_one_call() -> None:
    model = ScriptedChatModel(replies=[GOOD])
    outcome = abstract_topics(model, CLUSTERS)
    assert outcome.fallback is None and outcome.cost.llm_calls == 1
    assert {t.topic: t.label for t in outcome.output.topics} == {"T0": "Maya's dog Biscuit", "T1": "marathon training"}
    shown = str(model.calls[0][-1].content)
    assert _LISTED.findall(shown) == [("T0", "2"), ("T1", "1")]
    assert "Maya walks Biscuit the dog in the park." in shown  # the clustered events themselves are shown


def test_a_missing_topic_is_asked_again_with_the_error() -> None:
    partial = {"topics": GOOD["topics"][:1]}
    model = ScriptedChatModel(replies=[partial, GOOD])
    outcome = abstract_topics(model, CLUSTERS)
    assert outcome.fallback is None and outcome.cost.llm_calls == 2
    assert "topics without an entry: ['T1']" in str(model.calls[1][-1].content)


def test_invented_ids_overlong_labels_and_garbage_fall_back_to_key_terms() -> None:
    invented = {"topics": [*GOOD["topics"], {"topic": "T9", "label": "x", "description": "y"}]}
    long_label = {
        "topics": [{**GOOD["topics"][0], "label": "a label of far too many words for a topic"}, GOOD["topics"][1]]
    }
    for replies in ([invented, "not json"], [long_label, long_label], ["", ""]):
        outcome = abstract_topics(ScriptedChatModel(replies=list(replies)), CLUSTERS)
        assert outcome.fallback is not None and outcome.fallback.role == "topic_abstractor"
        assert outcome.cost.llm_calls == 2
        assert outcome.output == fallback_abstracts(CLUSTERS)
    labels = {t.topic: (t.label, t.description) for t in fallback_abstracts(CLUSTERS).topics}
    assert labels == {
        "T0": ("Maya dog Biscuit", "Maya adopted a dog named Biscuit."),
        "T1": ("Leo trains half", "Leo trains for the half marathon."),
    }


def test_key_terms_are_deterministic_and_skip_function_words() -> None:
    assert key_terms(["The dog and the dog", "a dog, the cat"]) == ["dog", "cat"]
    assert key_terms(["it is what it is"]) == []
    assert fallback_abstracts([TopicCluster("T0", ("it is what it is",))]).topics == []  # stays unlabelled


def test_no_model_and_no_cluster() -> None:
    assert abstract_topics(None, CLUSTERS).fallback.reason == "no chat model configured"
    empty = abstract_topics(ScriptedChatModel(), [])
    assert empty.cost.llm_calls == 0 and empty.output.topics == []


def test_a_small_context_shows_fewer_events_per_topic() -> None:
    many = [
        TopicCluster(f"T{i}", tuple(f"Event {i}.{j} about the topic number {i}." * 3 for j in range(6)))
        for i in range(30)
    ]
    from logicmap.agents.windowing import ContextBudget

    model = ScriptedChatModel(replies=["", ""])
    abstract_topics(model, many, budget=ContextBudget(4096))
    wide = ScriptedChatModel(replies=["", ""])
    abstract_topics(wide, many)
    assert len(str(model.calls[0][-1].content)) < len(str(wide.calls[0][-1].content))
    assert "... and" in str(model.calls[0][-1].content)


# -- in ingest -------------------------------------------------------------------------------------------


class TopicModel(ScriptedChatModel):
    """Every ingest role answered validly (the benchmark's scripted replies); topic prompts recorded and
    answered with a label naming the topic and its event count."""

    topic_prompts: list[str] = []

    def _next(self, messages: Any) -> Any:
        self.calls.append(list(messages))
        if SYSTEM_MARKER in str(messages[0].content):
            shown = str(messages[-1].content)
            self.topic_prompts.append(shown)
            return {
                "topics": [
                    {"topic": t, "label": f"theme {t} of {n}", "description": f"{n} events of {t}."}
                    for t, n in _LISTED.findall(shown)
                ]
            }
        return scripted_reply(messages)


def _two_sessions(sample):
    return sample.model_copy(update={"sessions": sample.sessions[:2]})


def test_ingest_abstracts_only_the_topics_whose_members_changed_once_per_session(resources, sample) -> None:
    model = TopicModel(topic_prompts=[])
    resources.llm_ = model
    context = IngestContext(policy="llm", recluster_every=0)  # no re-clustering: incremental topics only
    report = ingest_conversation(_first(sample, 1), "ns", resources=resources, context=context)
    assert not report.fallbacks and len(model.topic_prompts) == 1
    first = resources.store.snapshot("ns").topics
    assert first and all(
        t.label == f"theme {t.id} of {len(t.members)}" and t.label_source == "llm" for t in first.values()
    )
    report = ingest_conversation(_two_sessions(sample), "ns", resources=resources, context=context)
    assert not report.fallbacks and len(model.topic_prompts) == 2  # one call for the second session
    after = resources.store.snapshot("ns").topics
    listed = {t for t, _ in _LISTED.findall(model.topic_prompts[1])}
    changed = {tid for tid, t in after.items() if tid not in first or t.members != first[tid].members}
    assert listed == changed and changed and set(after) - changed  # some topics kept their members
    for tid, topic in after.items():  # a topic whose members stayed keeps its label; the others are relabelled
        assert topic.label == f"theme {tid} of {len(topic.members)}", tid
        if tid not in changed:
            assert topic == first[tid]


def test_the_no_llm_policy_and_the_switch_leave_topics_unlabelled(resources, sample) -> None:
    report = ingest_conversation(_first(sample, 1), "plain", resources=resources, policy="heuristic")
    assert all(t.label is None and t.label_source is None for t in resources.store.snapshot("plain").topics.values())
    assert report.sessions[0].cost.llm_calls == 0
    model = TopicModel(topic_prompts=[])
    resources.llm_ = model
    off = IngestContext(policy="llm", abstract_topics=False)
    ingest_conversation(_first(sample, 1), "off", resources=resources, context=off)
    assert not model.topic_prompts
    assert all(t.label is None for t in resources.store.snapshot("off").topics.values())


def test_a_garbage_reply_records_the_fallback_and_stores_key_terms(resources, sample) -> None:
    def respond(messages):
        return "{not json" if SYSTEM_MARKER in str(messages[0].content) else scripted_reply(messages)

    resources.llm_ = ScriptedChatModel(respond=respond)
    report = ingest_conversation(_first(sample, 1), "junk", resources=resources, policy="llm")
    assert [f.role for f in report.fallbacks] == ["topic_abstractor"]
    assert any(line.startswith("topic_abstractor") for line in report.sessions[0].fallbacks)
    snap = resources.store.snapshot("junk")
    assert snap.topics and {t.label_source for t in snap.topics.values()} == {"fallback"}
    info = snap.manifest.sessions[report.sessions[0].session_id]
    assert "topic_abstractor" in {f.role for f in info.fallbacks}


def test_the_tool_and_the_reconstruct_graph_show_the_labels(resources, sample) -> None:
    resources.llm_ = TopicModel(topic_prompts=[])
    ingest_conversation(_first(sample, 1), "shown", resources=resources, policy="llm")
    snap = resources.store.snapshot("shown")
    topic = next(iter(snap.topics.values()))
    tool = create_query_topic_events_tool("shown", store=resources.store)
    text = str(tool.invoke({"topic_id": topic.id}))
    assert f"Topic {topic.id}: theme {topic.id} of {len(topic.members)}" in text and topic.description in text
    active = [EvidenceItem(kind="event", id=topic.members[0], text="")]
    assert f"{topic.id}: theme {topic.id} of {len(topic.members)} ({len(topic.members)} events)" in _topics_text(
        snap, active
    )


# -- records, backups, snapshot files -------------------------------------------------------------------


def test_an_unlabelled_topic_dumps_as_before_and_old_records_load() -> None:
    old = '{"id":"T0","namespace":"n","centroid":[1.0],"members":["a"]}'  # a record written before labels
    topic = Topic.model_validate_json(old)
    assert topic.label is None and topic.model_dump_json() == old
    assert hashlib.sha256(topic.model_dump_json().encode()).hexdigest() == hashlib.sha256(old.encode()).hexdigest()
    labelled = topic.model_copy(update={"label": "dogs", "description": "About dogs.", "label_source": "llm"})
    assert Topic.model_validate_json(labelled.model_dump_json()) == labelled
    assert json.loads(labelled.model_dump_json())["label"] == "dogs"


def test_labels_survive_a_backup_and_a_reopened_store(tmp_path, sample) -> None:
    resources = make_resources(tmp_path / "a", llm=TopicModel(topic_prompts=[]))
    ingest_conversation(_first(sample, 1), "b", resources=resources, policy="llm")
    topics = resources.store.snapshot("b").topics
    assert topics and all(t.label for t in topics.values())
    path = tmp_path / "b.lmb"
    export_namespace(resources.store, "b", path)
    resources.store.close()
    reopened = make_resources(tmp_path / "a")
    assert reopened.store.snapshot("b").topics == topics  # the snapshot file (or the records) keep the labels
    reopened.store.close()
    other = make_resources(tmp_path / "c")
    import_namespace(other.store, path)
    assert other.store.snapshot("b").topics == topics
    other.store.close()


def _first(sample, n: int):
    return sample.model_copy(update={"sessions": sample.sessions[:n]})


def test_a_reclustering_keeps_the_label_of_a_topic_whose_members_stayed() -> None:
    from logicmap.graphs.ingest.nodes import carry_topic_labels

    before = {
        "T0": Topic(
            id="T0",
            namespace="n",
            centroid=[1.0],
            members=["a", "b"],
            label="dogs",
            description="About dogs.",
            label_source="llm",
        ),
        "T1": Topic(
            id="T1",
            namespace="n",
            centroid=[0.0],
            members=["c"],
            label="runs",
            description="Running.",
            label_source="fallback",
        ),
    }
    after = [
        Topic(id="T0", namespace="n", centroid=[0.9], members=["b", "a"]),  # same members, rebuilt
        Topic(id="T1", namespace="n", centroid=[0.1], members=["c", "d"]),  # a new member
        Topic(id="T2", namespace="n", centroid=[0.5], members=["e"]),
    ]  # a new topic
    changed = carry_topic_labels(before, after)
    assert [t.id for t in changed] == ["T1", "T2"]
    assert (after[0].label, after[0].description, after[0].label_source) == ("dogs", "About dogs.", "llm")
    assert after[1].label is None and after[2].label is None  # left for the abstractor
