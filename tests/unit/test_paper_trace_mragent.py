"""Paper trace of MRAgent (Algorithm 1, Table 4, Appendix B/E): a scripted model makes the paper's decisions.

EXTRACTCUES is an LLM role: the question's keywords, copied from it (the paper's keyword prompt), matched against
the stored cues to seed the active set; the lexical matcher is its recorded fallback. The navigator is given exactly
the paper's seven tools (Table 4, under their names) and navigates with them only. After every tool round a prune
step (R_LLM) keeps only the active items that support the question and routes to navigate again or to the answer,
so the answer sees only the pruned set. Construction: the cue extractor rewrites a statement with its pronouns
resolved and gives its tags and cues; a garbage reply falls back to the lexical builder, recorded.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import Field

from logicmap import tools as toolkit
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.cues import enrich
from logicmap.graphs.ingest.enrich import EnrichRequest
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.reconstruct import ReconstructContext, answer, build_reconstruct_graph
from logicmap.memory.files.loaders import RawTurn, Session
from logicmap.memory.indexes.cue_extraction import build_cue_layer
from logicmap.memory.indexes.cue_index import CueIndex
from logicmap.memory.records.records import Event, Turn

NS = "sample"
NAVIGATOR = "reconstructing the memory"  # in the navigator's system prompt
FINAL = "from the memories below only"  # in the final answer's system prompt
DOG = "What is the name of Maya's dog?"
DOG_EVENT, RACE_EVENT = "S1-E1", "S4-E2"  # the adoption (supports the question); the half marathon (does not)
RACE_TEXT = "I finished the half marathon"  # said only in the race event's turn D4:4
SUPPORTING = {("event", DOG_EVENT), ("turn", "D1:1"), ("turn", "D1:2")}
QUERY_CUES = "You extract the cues of a question"  # the query cue role's system prompt (prompts/query_cues.py)
# Table 4 of the paper, in its order.
PAPER_TOOLS = [
    "query_tag_events",
    "query_conversation_time",
    "query_event_keywords",
    "query_event_context",
    "query_personal_information",
    "query_personal_aspect",
    "query_topic_events",
]


class Recorder(ScriptedChatModel):
    """A scripted model that records the names of the tools each ``bind_tools`` call gives it."""

    bound: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recorder:
        self.bound.append([getattr(t, "name", None) or t["function"]["name"] for t in tools])
        return self


_MEMORY_LINE = re.compile(r"^(M\d+): \[(\w+) ([^,\]]+)", re.MULTILINE)


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


class Pruner:
    """The pruner's decisions: keep the adoption event and the turns that name the dog; ``answer_at`` is the
    call (1-based) that says the kept memories answer the question."""

    def __init__(self, answer_at: int | None = None) -> None:
        self.answer_at = answer_at
        self.shown: list[list[tuple[str, str]]] = []

    def __call__(self, messages: list[BaseMessage]) -> dict[str, Any]:
        shown = [(m.group(2), m.group(3)) for m in _MEMORY_LINE.finditer(str(messages[-1].content))]
        self.shown.append(shown)
        keys = [m.group(1) for m in _MEMORY_LINE.finditer(str(messages[-1].content))]
        keep = [key for key, item in zip(keys, shown) if item in SUPPORTING]
        return {"keep": keep, "answer_now": len(self.shown) == self.answer_at}


def with_model(base: Resources, model: ScriptedChatModel) -> Resources:
    return Resources(settings=base.settings, store_=base.store, embeddings_=base.embeddings, llm_=model)


def run_trace(resources: Resources) -> tuple[list[str], dict[str, list[set[tuple[str, str]]]], dict[str, Any]]:
    """The nodes in the order they ran, the active set after each node, and the final state."""
    graph = build_reconstruct_graph().compile()
    nodes: list[str] = []
    after: dict[str, list[set[tuple[str, str]]]] = {}
    state: dict[str, Any] = {}
    context = ReconstructContext(policy="llm", namespace=NS, resources=resources)
    for mode, chunk in graph.stream({"question": DOG}, context=context, stream_mode=["updates", "values"]):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            state = chunk
            if nodes:
                after.setdefault(nodes[-1], []).append({(i.kind, i.id) for i in chunk.get("active", [])})
    return nodes, after, state


def seen_text(messages: list[BaseMessage]) -> str:
    """What a model was shown of the memory: the prompts and the tool replies (not its own calls)."""
    return "\n".join(str(m.content) for m in messages if isinstance(m, (HumanMessage, ToolMessage)))


def test_navigate_tools_prune_loop_drops_the_irrelevant_event_and_the_navigator_answers(ingested_sample) -> None:
    navigator = [
        AIMessage(
            content="",
            tool_calls=[
                call("query_tag_events", {"cue": "Biscuit"}, "r1a"),
                call("query_event_context", {"event_id": RACE_EVENT, "window": 0}, "r1b"),
            ],
        ),
        AIMessage(content="", tool_calls=[call("query_event_context", {"event_id": DOG_EVENT, "window": 0}, "r2a")]),
        AIMessage(
            content="",
            tool_calls=[
                call(
                    "submit_answer",
                    {
                        "answer": "Biscuit",
                        "cited_event_ids": [DOG_EVENT],
                        "cited_turn_ids": ["D1:1"],
                        "confidence": 0.9,
                    },
                    "r3",
                )
            ],
        ),
    ]
    pruner = Pruner()
    model = ScriptedChatModel(routes={QUERY_CUES: [{"keywords": ["dog"]}], NAVIGATOR: navigator}, respond=pruner)
    nodes, after, state = run_trace(with_model(ingested_sample, model))

    assert nodes == ["seed", "navigate", "tools", "prune", "navigate", "tools", "prune", "navigate", "answer", "finish"]
    # Round 1 fetched the race event and other Biscuit events; the prune kept only the adoption event.
    assert ("event", RACE_EVENT) in after["tools"][0] and len(after["tools"][0]) > 1
    assert after["prune"][0] == {("event", DOG_EVENT)}
    # Round 2 read the adoption event and its turns; the prune kept the event and the turns naming the dog.
    assert {("turn", "D1:3"), ("turn", "D1:4")} <= after["tools"][1]
    assert after["prune"][1] == SUPPORTING
    assert [len(s) for s in after["prune"]] < [len(s) for s in after["tools"]]  # the active set shrank each time
    assert ("event", RACE_EVENT) in pruner.shown[0] and ("event", RACE_EVENT) not in pruner.shown[1]
    # The pruner read the race event's reply; the navigator's next turns see the pruned set only.
    pruner_calls = [c for c in model.calls if "You prune" in str(c[0].content)]
    assert RACE_TEXT in seen_text(pruner_calls[0]) and RACE_TEXT not in seen_text(pruner_calls[1])
    navigator_calls = [c for c in model.calls if NAVIGATOR in str(c[0].content)]
    assert all(RACE_TEXT not in seen_text(c) for c in navigator_calls[1:])
    (race_reply,) = [m for m in navigator_calls[1] if isinstance(m, ToolMessage) and m.tool_call_id == "r1b"]
    assert race_reply.content.startswith("Pruned:") and race_reply.artifact == []
    (dog_reply,) = [m for m in navigator_calls[2] if isinstance(m, ToolMessage) and m.tool_call_id == "r2a"]
    assert {(r["kind"], r["id"]) for r in dog_reply.artifact} == SUPPORTING  # turns D1:3 and D1:4 were pruned
    assert state["final"].answer == "Biscuit" and state["mode"] == "answered"
    assert [p["by"] for p in state["pruned"]] == ["model", "model"] and not state.get("fallbacks")


def test_the_pruner_routes_to_the_answer_which_sees_only_the_pruned_set(ingested_sample) -> None:
    navigator = [
        AIMessage(
            content="",
            tool_calls=[
                call("query_tag_events", {"cue": "Biscuit"}, "r1a"),
                call("query_event_context", {"event_id": RACE_EVENT, "window": 0}, "r1b"),
                call("query_event_context", {"event_id": DOG_EVENT, "window": 0}, "r1c"),
            ],
        )
    ]
    final = {"answer": "Biscuit", "cited_event_ids": [DOG_EVENT], "cited_turn_ids": ["D1:1"], "confidence": 0.8}
    model = ScriptedChatModel(
        routes={QUERY_CUES: [{"keywords": ["dog"]}], NAVIGATOR: navigator, FINAL: [final]}, respond=Pruner(answer_at=1)
    )
    nodes, after, state = run_trace(with_model(ingested_sample, model))

    assert nodes == [
        "seed",
        "navigate",
        "tools",
        "prune",
        "force_answer",
        "finish",
    ]  # the pruner found the kept set enough
    assert after["prune"][0] == SUPPORTING and ("event", RACE_EVENT) in after["tools"][0]
    final_prompt = str(model.calls[-1][-1].content)
    assert FINAL in str(model.calls[-1][0].content)
    assert f"[event {DOG_EVENT}" in final_prompt and "[turn D1:1" in final_prompt
    assert RACE_EVENT not in final_prompt and RACE_TEXT not in final_prompt
    assert state["mode"] == "answered" and state["final"].answer == "Biscuit"
    assert {(i.kind, i.id) for i in state["active"]} == SUPPORTING


def test_a_pruner_reply_that_stays_invalid_falls_back_to_the_similarity_rule(ingested_sample) -> None:
    navigator = [
        AIMessage(content="", tool_calls=[call("query_event_context", {"event_id": DOG_EVENT, "window": 0}, "r1")])
    ]
    final = {"answer": "Biscuit", "cited_event_ids": [DOG_EVENT], "cited_turn_ids": ["D1:1"], "confidence": 0.5}
    model = ScriptedChatModel(
        routes={
            QUERY_CUES: [{"keywords": ["dog"]}],
            NAVIGATOR: navigator,
            "You prune": [{"keep": ["M99"]}, "no idea"],
            FINAL: [final],
        }
    )
    result = answer(DOG, NS, resources=with_model(ingested_sample, model), max_turns=1, max_active=3)
    (record,) = [f for f in result.fallbacks if f.role == "active_pruner"]
    assert "M99" in " ".join(record.errors)
    (step,) = result.details["prune_trace"]
    assert step["by"] == "rule" and len(step["kept"]) <= 3 and step["dropped"]


def test_no_llm_policy_prunes_with_the_rule_each_round(ingested_sample) -> None:
    result = answer(DOG, NS, resources=ingested_sample, policy="heuristic", max_active=4)
    steps = result.details["prune_trace"]
    assert steps and all(s["by"] == "rule" and len(s["kept"]) <= 4 for s in steps)
    assert "Biscuit" in result.answer and result.cost.llm_calls == 0 and not result.fallbacks


# -- EXTRACTCUES and the paper's toolkit ---------------------------------------------------------------


def answer_at_once(navigator_turns: list[Any] | None = None) -> list[Any]:
    return navigator_turns or [
        AIMessage(
            content="",
            tool_calls=[
                call(
                    "submit_answer",
                    {
                        "answer": "Biscuit",
                        "cited_event_ids": [DOG_EVENT],
                        "cited_turn_ids": ["D1:1"],
                        "confidence": 0.9,
                    },
                    "a1",
                )
            ],
        )
    ]


def test_query_cues_are_an_llm_role_whose_keywords_seed_the_active_set(ingested_sample) -> None:
    # The first reply invents a keyword ("puppy" is not in the question): sent back; the retry copies "dog" only.
    model = Recorder(
        routes={QUERY_CUES: [{"keywords": ["dog", "puppy"]}, {"keywords": ["dog"]}], NAVIGATOR: answer_at_once()}
    )
    result = answer(DOG, NS, resources=with_model(ingested_sample, model))
    assert "keywords ['puppy'] are not in the question" in str(model.calls[1][-1].content)
    assert result.details["query_keywords"] == ["dog"] and result.details["seed_cues"] == ["dog"]
    # The lexical matcher would also have seeded Maya (a person cue): the model's keywords decided.
    lexical = CueIndex.of(ingested_sample.store.snapshot(NS)).cues_of_text(DOG)
    assert {c.text for c in lexical} == {"dog", "Maya"}
    navigator_prompt = str(next(c for c in model.calls if NAVIGATOR in str(c[0].content))[1].content)
    assert "Cues found in the question: dog (entity)\n" in navigator_prompt
    assert not result.fallbacks and result.cost.llm_calls == 3  # two query-cue replies, one navigator turn


def test_the_lexical_matcher_is_the_query_cue_roles_recorded_fallback(ingested_sample) -> None:
    model = Recorder(routes={QUERY_CUES: ["no JSON", {"keywords": []}], NAVIGATOR: answer_at_once()})
    result = answer(DOG, NS, resources=with_model(ingested_sample, model))
    (record,) = [f for f in result.fallbacks if f.role == "query_cues"]
    assert record.reason == "invalid model output after one retry"
    assert result.details["query_keywords"] is None and set(result.details["seed_cues"]) == {"dog", "Maya"}


def test_the_navigator_is_given_exactly_the_papers_seven_tools(ingested_sample) -> None:
    assert list(toolkit.MRAGENT_TOOLS) == PAPER_TOOLS and not set(toolkit.EXTRA_TOOLS) & set(PAPER_TOOLS)
    snapshot = ingested_sample.store.snapshot(NS)
    topic = next(t.id for t in snapshot.topics.values() if DOG_EVENT in t.members)
    navigator = [
        AIMessage(
            content="",
            tool_calls=[
                call("query_topic_events", {"topic_id": topic}, "t1"),
                call("query_personal_information", {"person": "Maya"}, "t2"),
                call("search_events", {"query": "dog"}, "t3"),
            ],
        ),  # an extra: not given
        *answer_at_once(),
    ]
    model = Recorder(routes={QUERY_CUES: [{"keywords": ["dog"]}], NAVIGATOR: navigator}, respond=Pruner())
    nodes, after, state = run_trace(with_model(ingested_sample, model))
    assert model.bound and all(names == [*PAPER_TOOLS, "submit_answer"] for names in model.bound)
    # The seed prompt names the topic nodes of the active set, so query_topic_events can be called.
    first = str(next(c for c in model.calls if NAVIGATOR in str(c[0].content))[1].content)
    assert f"{topic}: " in first
    replies = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert replies["t1"].status == "success" and DOG_EVENT in replies["t1"].content
    # phi_{c^s -> g^s}: the person's aspects, not their facts.
    assert replies["t2"].status == "success" and {r["kind"] for r in replies["t2"].artifact} == {"aspect"}
    assert replies["t3"].status == "error" and "search_events" in replies["t3"].content
    # The extras stay, named as extras, when asked for.
    extra = Recorder(routes={QUERY_CUES: [{"keywords": ["dog"]}], NAVIGATOR: answer_at_once()})
    answer(DOG, NS, resources=with_model(ingested_sample, extra), extra_tools=True)
    assert extra.bound[0] == [*PAPER_TOOLS, *toolkit.EXTRA_TOOLS, "submit_answer"]


# -- construction: the cue extractor -----------------------------------------------------------------

CUE_NS = "trace-cues"
EXTRACTOR = "You index one session"  # in the cue extractor's system prompt
WHEN = datetime(2023, 6, 2, 10, 0)


def adoption_session(
    resources: Resources, model: ScriptedChatModel | None
) -> tuple[EnrichRequest, list[Turn], list[Event]]:
    turns = [
        Turn(
            namespace=CUE_NS,
            session_id="S1",
            dia_id="D1:1",
            speaker="Leo",
            text="How is your sister Ana?",
            session_time=WHEN,
        ),
        Turn(
            namespace=CUE_NS,
            session_id="S1",
            dia_id="D1:2",
            speaker="Maya",
            text="Great! Ana got a puppy called Biscuit. She adopted him in May.",
            session_time=WHEN,
        ),
    ]
    events = [
        Event(
            id="S1-E1",
            namespace=CUE_NS,
            session_id="S1",
            summary="Maya tells Leo that Ana got a puppy.",
            turn_ids=["D1:1", "D1:2"],
            participants=["Leo", "Maya"],
        )
    ]
    session = Session(
        session_id="S1", timestamp=WHEN, turns=[RawTurn(dia_id=t.dia_id, speaker=t.speaker, text=t.text) for t in turns]
    )
    request = EnrichRequest(
        namespace=CUE_NS,
        session=session,
        turns=turns,
        events=events,
        snapshot=resources.store.snapshot(CUE_NS),
        policy="llm",
        llm=model,
        embeddings=resources.embeddings,
    )
    return request, turns, events


def unit(content: str) -> dict[str, Any]:
    return {
        "units": [
            {
                "turn_id": "D1:2",
                "content": content,
                "tags": ["pet", "adoption"],
                "cues": [
                    {"cue": "Ana", "kind": "person"},
                    {"cue": "Biscuit", "kind": "entity"},
                    {"cue": "May", "kind": "time"},
                ],
            }
        ]
    }


def test_cue_extractor_rewrites_the_statement_with_names_resolved(resources) -> None:
    resolved = "Ana adopted Biscuit in May 2023."
    model = ScriptedChatModel(routes={EXTRACTOR: [unit("She adopted him in May."), unit(resolved)]})
    request, _, _ = adoption_session(resources, model)
    enrichment = enrich(request)

    # The unresolved rewrite was sent back once with the problem; the second reply is the layer.
    assert enrichment.cost.llm_calls == 2 and not enrichment.fallbacks
    assert "She adopted him in May" in str(model.calls[0][-1].content)  # the model saw the turns
    retry = str(model.calls[1][-1].content)
    assert "starts with 'She'" in retry
    event_tags = [t for t in enrichment.tags if t.target_kind == "event"]
    assert {(t.cue_id, t.tag) for t in event_tags} == {
        (cue, tag) for cue in ("cue:ana", "cue:biscuit", "cue:may") for tag in ("pet", "adoption")
    }
    assert {t.content for t in event_tags} == {resolved} and {t.person for t in event_tags} == {"Maya"}
    assert {c.id: c.kind for c in enrichment.cues}["cue:ana"] == "person"


def test_a_garbage_extraction_falls_back_to_the_lexical_builder_and_says_so(resources) -> None:
    model = ScriptedChatModel(routes={EXTRACTOR: ["garbage", "still garbage"]})
    request, turns, events = adoption_session(resources, model)
    enrichment = enrich(request)

    assert enrichment.cost.llm_calls == 2
    (record,) = enrichment.fallbacks
    assert record.role == "cue_extractor" and record.reason == "invalid model output after one retry"
    lexical = build_cue_layer(CUE_NS, turns, events)
    assert sorted(t.id for t in enrichment.tags) == sorted(t.id for t in lexical.tags)
    # The lexical builder's content is the sentence as said: the pronouns stay unresolved.
    assert any(t.content == "Maya: She adopted him in May." for t in enrichment.tags)


# -- Eq. 18: topics abstracted by the LLM from the clustered events ------------------------------------------

TOPIC_ABSTRACTOR = "You abstract topics from clusters"  # prompts/abstract_topics.py
_TOPIC_BLOCK = re.compile(r"^(T\d+) \(\d+ events\):\n((?:- .*\n?)*)", re.MULTILINE)


def _ingest_with_topics(resources: Resources, topic_reply: Any) -> tuple[Any, list[str]]:
    """Ingest the sample's first session, every role answered validly except the topic abstractor's."""
    from logicmap.evals.bench.scripted import scripted_reply
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.memory.files.loaders import load_conversations
    from tests.reliability.support import SAMPLE

    shown: list[str] = []

    def respond(messages: list[BaseMessage]) -> Any:
        if TOPIC_ABSTRACTOR in str(messages[0].content):
            shown.append(str(messages[-1].content))
            return topic_reply(shown[-1]) if callable(topic_reply) else topic_reply
        return scripted_reply(messages)

    conversation = load_conversations(SAMPLE)[0]
    conversation = conversation.model_copy(update={"sessions": conversation.sessions[:1]})
    resources.llm_ = ScriptedChatModel(respond=respond)
    return ingest_conversation(conversation, "eq18", resources=resources, policy="llm"), shown


def test_topics_are_abstracted_by_the_llm_from_the_clustered_events(resources) -> None:
    def abstraction(prompt: str) -> dict[str, Any]:
        return {
            "topics": [
                {"topic": tid, "label": f"pattern of {tid}", "description": f"What {tid}'s episodes share."}
                for tid, _ in _TOPIC_BLOCK.findall(prompt)
            ]
        }

    report, shown = _ingest_with_topics(resources, abstraction)
    snap = resources.store.snapshot("eq18")
    # A_LLM({e_i}): one call, shown each topic's clustered episodes (its member events, under its id) ...
    assert len(shown) == 1 and not report.fallbacks
    blocks = dict(_TOPIC_BLOCK.findall(shown[0]))
    assert set(blocks) == set(snap.topics)
    for tid, topic in snap.topics.items():
        assert all(snap.events[m].summary[:60] in blocks[tid] for m in topic.members[:6]), tid
        # ... and each topic node carries the model's abstraction, linked to its episodes (topic-episode links).
        assert (topic.label, topic.description, topic.label_source) == (
            f"pattern of {tid}",
            f"What {tid}'s episodes share.",
            "llm",
        )
        text = str(toolkit.create_query_topic_events_tool("eq18", store=resources.store).invoke({"topic_id": tid}))
        assert f"Topic {tid}: pattern of {tid}" in text
        assert all(snap.events[m].summary[:40] in text for m in topic.members[:5])


def test_a_garbage_topic_abstraction_records_its_fallback(resources) -> None:
    from logicmap.agents.topic_abstractor import TopicCluster, fallback_abstracts

    report, shown = _ingest_with_topics(resources, "```not json at all")
    snap = resources.store.snapshot("eq18")
    assert len(shown) == 2  # the reply and its one retry
    (record,) = report.fallbacks
    assert record.role == "topic_abstractor" and record.reason == "invalid model output after one retry"
    assert any(line.startswith("topic_abstractor") for line in report.sessions[0].fallbacks)
    # The recorded fallback: the key terms of the most central events, marked as such on the topic.
    clusters = [
        TopicCluster(tid, tuple(line[2:] for line in body.splitlines() if not line.startswith("- ... and")))
        for tid, body in _TOPIC_BLOCK.findall(shown[0])
    ]
    expected = {t.topic: t.label for t in fallback_abstracts(clusters).topics}
    assert {tid: t.label for tid, t in snap.topics.items() if t.label} == expected and expected
    assert {t.label_source for t in snap.topics.values() if t.label} == {"fallback"}


def test_the_papers_budgets_by_default_eight_turns_of_at_most_ten_tool_calls(ingested_sample) -> None:
    """Appendix D.4: at most 8 reasoning turns and 10 tool calls per turn. A navigator that never answers and asks
    for 12 calls each turn runs 8 turns of 10 calls (2 dropped each), then the final answer is forced."""
    from tests.unit.test_reconstruct import event_of, keep_everything, tool_call, with_model

    eid = event_of(ingested_sample, "D4:4")
    twelve = AIMessage(
        content="", tool_calls=[tool_call("query_event_keywords", {"event_id": eid}, f"k{i}") for i in range(12)]
    )
    final = {"answer": "1 hour 52 minutes", "cited_event_ids": [eid], "cited_turn_ids": ["D4:4"], "confidence": 0.7}
    model = ScriptedChatModel(
        routes={QUERY_CUES: [{"keywords": ["Leo", "half marathon"]}], NAVIGATOR: [twelve] * 12, FINAL: [final]},
        respond=keep_everything,
    )
    result = answer("What was Leo's half marathon time?", NS, resources=with_model(ingested_sample, model))
    assert result.steps == 8 and result.details["mode"] == "forced"
    assert result.details["tool_calls"] == 80 and result.details["dropped_tool_calls"] == 16


# -- the faithful configuration: the paper's routing step and QA prompt ------------------------------------

WALK_EVENT = "S2-E2"  # a Biscuit event the router keeps in round 1 and would drop if it were shown it again


class Router(Pruner):
    """Keeps the supporting items and, on its first call only, the walk event; always says "answer now"."""

    def __call__(self, messages: list[BaseMessage]) -> dict[str, Any]:
        text = str(messages[-1].content)
        shown = [(m.group(2), m.group(3)) for m in _MEMORY_LINE.finditer(text)]
        self.shown.append(shown)
        wanted = SUPPORTING | ({("event", WALK_EVENT)} if len(self.shown) == 1 else set())
        keys = [m.group(1) for m in _MEMORY_LINE.finditer(text)]
        return {"keep": [k for k, item in zip(keys, shown) if item in wanted], "answer_now": True}


PAPER_NAVIGATOR = "Choose ONE mode"  # the paper's QA and Tool-Use Prompt (prompts/reconstruct.py)
PAPER_FINAL = "The memory tools are no longer available"
ROUTER = "You route the memory reconstruction"  # R_LLM over the new candidates (prompts/reconstruct_prune.py)


def faithful_trace(resources: Resources, model: ScriptedChatModel) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    graph = build_reconstruct_graph().compile()
    nodes: list[str] = []
    after: dict[str, list[set[tuple[str, str]]]] = {}
    state: dict[str, Any] = {}
    context = ReconstructContext(policy="llm", namespace=NS, resources=with_model(resources, model), faithful=True)
    for mode, chunk in graph.stream({"question": DOG}, context=context, stream_mode=["updates", "values"]):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            state = chunk
            if nodes:
                after.setdefault(nodes[-1], []).append({(i.kind, i.id) for i in chunk.get("active", [])})
    return nodes, after, state


def test_faithful_routing_judges_only_the_new_candidates_and_keeps_the_reconstructed_context(ingested_sample) -> None:
    """Eq. 9: Z(t+1) = R_LLM(x, H(t), Z~(t+1)), H(t+1) = H(t) u Z(t+1). The router is shown the held context
    without keys and keys only the tool round's new items; what it once kept is never judged or dropped again,
    and its ``answer_now`` does not end the navigation (the navigator decides). The default re-judges the whole
    active set each round (the tests above)."""
    navigator = [
        AIMessage(
            content="",
            tool_calls=[
                call("query_tag_events", {"cue": "Biscuit"}, "r1a"),
                call("query_event_context", {"event_id": RACE_EVENT, "window": 0}, "r1b"),
            ],
        ),
        AIMessage(content="", tool_calls=[call("query_event_context", {"event_id": DOG_EVENT, "window": 0}, "r2a")]),
        AIMessage(
            content="",
            tool_calls=[
                call(
                    "submit_answer",
                    {
                        "answer": "Biscuit",
                        "cited_event_ids": [DOG_EVENT],
                        "cited_turn_ids": ["D1:1"],
                        "confidence": 0.9,
                    },
                    "r3",
                )
            ],
        ),
    ]
    router = Router()  # says "answer now" on every call: the faithful step ignores it
    model = ScriptedChatModel(routes={QUERY_CUES: [{"keywords": ["dog"]}], PAPER_NAVIGATOR: navigator}, respond=router)
    nodes, after, state = faithful_trace(ingested_sample, model)

    assert nodes == ["seed", "navigate", "tools", "prune", "navigate", "tools", "prune", "navigate", "answer", "finish"]
    assert after["seed"][0] == {("event", DOG_EVENT)}  # H(0), the cue's event
    assert len([c for c in model.calls if ROUTER in str(c[0].content)]) == 2
    assert not [c for c in model.calls if "You prune" in str(c[0].content)]
    # Round 1: the router is keyed the new items only (not the seed) and keeps the walk event S2-E2.
    assert ("event", DOG_EVENT) not in router.shown[0] and ("event", WALK_EVENT) in router.shown[0]
    assert after["prune"][0] == {("event", DOG_EVENT), ("event", WALK_EVENT)}
    # Round 2: the held items are not judged again (the default would show both and, here, drop them).
    assert router.shown[1] == [("turn", "D1:1"), ("turn", "D1:2"), ("turn", "D1:3"), ("turn", "D1:4")]
    assert after["prune"][1] == {("event", DOG_EVENT), ("event", WALK_EVENT), ("turn", "D1:1"), ("turn", "D1:2")}
    assert ("event", RACE_EVENT) in after["tools"][0] and ("event", RACE_EVENT) not in after["prune"][0]
    assert state["final"].answer == "Biscuit" and state["mode"] == "answered"
    # The navigator was asked with the paper's QA and Tool-Use Prompt: its answer rules, no abstention.
    system = str([c for c in model.calls if PAPER_NAVIGATOR in str(c[0].content)][0][0].content)
    for rule in (
        "Yes/No questions: output `Yes`, `No`, `Likely yes`, or `Likely no`.",
        "Location questions: answer with a specific place name.",
        "Counting questions: answer with the number of relevant items.",
        "Other questions: output the minimal concrete entity or phrase.",
    ):
        assert rule in system
    assert "not in memory" not in system.lower()


def test_faithful_runs_without_a_model_and_its_forced_answer_keeps_the_papers_answer_rules(ingested_sample) -> None:
    result = answer(DOG, NS, resources=ingested_sample, policy="heuristic", faithful=True)
    steps = result.details["prune_trace"]
    assert steps and all(s["by"] == "rule" for s in steps) and "Biscuit" in result.answer
    final = {"answer": "Biscuit", "cited_event_ids": [DOG_EVENT], "cited_turn_ids": ["D1:1"], "confidence": 0.5}
    model = ScriptedChatModel(
        routes={
            QUERY_CUES: [{"keywords": ["dog"]}],
            PAPER_FINAL: [final],
            PAPER_NAVIGATOR: [
                AIMessage(
                    content="", tool_calls=[call("query_event_context", {"event_id": DOG_EVENT, "window": 0}, "r1")]
                )
            ],
        },
        default={"keep": []},
    )
    forced = answer(DOG, NS, resources=with_model(ingested_sample, model), max_turns=1, faithful=True)
    (messages,) = [c for c in model.calls if PAPER_FINAL in str(c[0].content)]
    assert "Counting questions: answer with the number of relevant items." in str(messages[0].content)
    assert "not in memory" not in str(messages[0].content).lower() and forced.answer == "Biscuit"


def test_faithful_cue_extractor_asks_with_the_dialogue_processing_prompt(resources) -> None:
    """``IngestContext.faithful`` (the request's ``paper_prompts``): the Dialogue Processing Prompt (Appendix E), its
    rules checked: every sentence kept (a unit per turn) and one tag of at most two words, else sent back once."""
    import dataclasses

    processor = "You are a dialogue processor"
    asked = {
        "turn_id": "D1:1",
        "content": "Leo asks how Maya's sister Ana is.",
        "tags": ["family"],
        "cues": [{"cue": "Ana", "kind": "person"}],
    }
    model = ScriptedChatModel(
        routes={
            processor: [
                unit("Ana adopted Biscuit in May."),
                {"units": [asked, {**unit("Ana adopted Biscuit in May.")["units"][0], "tags": ["pet"]}]},
            ]
        }
    )
    request, _, _ = adoption_session(resources, model)
    enrichment = enrich(dataclasses.replace(request, paper_prompts=True))
    assert enrichment.cost.llm_calls == 2 and not enrichment.fallbacks
    system = str(model.calls[0][0].content)
    for rule in (
        "- Preserve every original sentence.",
        "- Replace all pronouns with explicit entities or noun phrases",
        "Assign a short concrete `tag` (at most two words).",
        "Normalize time to `YYYY-MM-DD`",
        "If a question is answered by the next sentence, merge them.",
        "Do not invent, paraphrase, or generalize keywords.",
    ):
        assert rule in system, rule
    retry = str(model.calls[1][-1].content)
    assert "no unit for turns ['D1:1']" in retry and "one short concrete tag (at most two words)" in retry
    assert {t.tag for t in enrichment.tags} == {"family", "pet"}
