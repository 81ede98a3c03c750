"""The drop-in chatbot: cross-thread recall through memory, turns stored within the run (``remember_mode="sync"``)
or queued (the default in process), the tenant resolved per run, streamed replies, recall-only runs, drop-in use,
CLI."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from logicmap.agents.answerers import reply_from_recall
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.chat.chatbot import (
    ChatContext,
    IngestionQueue,
    build_chatbot_graph,
    chat_turn_session,
    ingest_session,
)
from logicmap.memory.runtime.tenancy import NamespaceRequiredError

SNAPSHOTS = Path(__file__).parent / "snapshots"
HEURISTIC = ChatContext(
    namespace="alice", strategy="reconstruct", policy="heuristic", user_name="Alice", remember_mode="sync"
)


def thread(name: str) -> dict:
    return {"configurable": {"thread_id": name}}


def say(bot, text: str, thread_id: str, context: ChatContext = HEURISTIC) -> dict:
    return bot.invoke({"messages": [HumanMessage(content=text)]}, thread(thread_id), context=context)


def test_a_second_thread_recalls_a_fact_told_in_the_first(resources) -> None:
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = replace(HEURISTIC, resources=resources)
    first = say(bot, "My dog's name is Pixel and she is a beagle.", "t1", ctx)
    assert first["messages"][-1].content == "Noted, I'll remember that." and first["evidence"] == []
    # Stored within the run: the finished run says so, and the memory holds the turn already.
    assert first["memory_write"]["status"] == "stored" and first["memory_write"]["namespace"] == "alice"
    say(bot, "I work as a pilot at Lisbon airport.", "t1", ctx)

    second = say(bot, "What is my dog's name?", "t2", ctx)
    reply = second["messages"][-1].content
    assert "Pixel" in reply and len(second["messages"]) == 2  # a fresh thread: only memory knew it
    assert any("Pixel" in e["text"] for e in second["evidence"]) and second["recall"]["strategy"] == "reconstruct"
    assert "pilot" in say(bot, "Where do I work?", "t2", ctx)["messages"][-1].content
    # Each thread keeps its own messages in the checkpointer.
    assert len(bot.get_state(thread("t1")).values["messages"]) == 4
    # Stored turns are the user's words; extractive replies are not stored (they only echo memory).
    turns = resources.store.snapshot("alice").turns.values()
    assert {t.speaker for t in turns} == {"Alice"} and len(turns) == 4


def test_the_reply_does_not_wait_for_ingestion(resources) -> None:
    release = threading.Event()
    stored: list[tuple[str, str, str]] = []

    def slow_ingest(session, namespace: str, policy: str) -> None:
        release.wait(timeout=30)
        stored.append((namespace, session.turns[0].text, policy))

    work = IngestionQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    out = say(
        bot,
        "I planted tomatoes today.",
        "t1",
        replace(HEURISTIC, resources=resources, ingestion=work, store_turn=slow_ingest),
    )
    assert out["messages"][-1].content  # replied while the turn is still queued
    assert work.pending == 1 and stored == []
    assert work.flush(timeout=0.05) is False
    release.set()
    assert work.flush(timeout=30) and stored == [("alice", "I planted tomatoes today.", "heuristic")]


def test_a_failed_write_is_in_the_output_and_the_reply_is_kept(resources) -> None:
    def broken(session, namespace: str, policy: str) -> None:
        raise RuntimeError("disk full")

    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    out = say(bot, "My locker code is 4312.", "t1", replace(HEURISTIC, resources=resources, store_turn=broken))
    assert out["messages"][-1].content == "Noted, I'll remember that."
    write = out["memory_write"]
    assert write["status"] == "failed" and "RuntimeError: disk full" in write["error"] and write["namespace"] == "alice"
    assert bot.get_state(thread("t1")).values["memory_write"]["status"] == "failed"  # in the checkpoint too
    # The next turn's status is its own, not the last failure's.
    again = say(bot, "Another thing.", "t1", replace(HEURISTIC, resources=resources, ingest=False, store_turn=broken))
    assert again["memory_write"] == {"status": "skipped"}
    # Queued in the background (an interactive loop), a failure is recorded on the queue.
    work = IngestionQueue()
    queued = say(
        bot, "My locker is number 7.", "t1", replace(HEURISTIC, resources=resources, ingestion=work, store_turn=broken)
    )
    assert queued["memory_write"]["status"] == "queued"
    assert work.flush(timeout=30) and "disk full" in work.errors[0][1]


def test_the_chat_model_answers_from_recalled_memories(resources) -> None:
    told = chat_turn_session("alice", "t0", [("Alice", "My favourite colour is teal.")], datetime(2024, 1, 2, 9, 0))
    ingest_session(told, "alice", resources=resources, policy="heuristic")
    dia_id = told.turns[0].dia_id
    told_event = next(e.id for e in resources.store.snapshot("alice").events.values() if dia_id in e.turn_ids)
    model = ScriptedChatModel(
        routes={
            "You extract the cues of a question": [{"keywords": ["favourite colour"]}],  # MRAgent's EXTRACTCUES
            "reconstructing the memory": [  # recall through the reconstruct navigator, with the paper's tools
                AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "query_event_context", "args": {"event_id": told_event, "window": 0}, "id": "s1"}
                    ],
                ),
                AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "submit_answer",
                            "id": "s2",
                            "args": {
                                "answer": "teal",
                                "cited_event_ids": [],
                                "cited_turn_ids": [dia_id],
                                "confidence": 0.9,
                            },
                        }
                    ],
                ),
            ],
            "You prune the working memory": [{"keep": ["M1"], "answer_now": False}],  # after the tool round
            "helpful assistant with long-term memory": ["Your favourite colour is teal."],  # plain text: it streams
        }
    )
    resources.llm_ = model
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    context = ChatContext(
        namespace="alice",
        strategy="reconstruct",
        policy="auto",
        user_name="Alice",
        remember_mode="sync",
        trust_assistant=True,
        resources=resources,
    )  # the reply is memory
    out = say(bot, "What is my favourite colour?", "t9", context)
    assert out["messages"][-1].content == "Your favourite colour is teal."
    responder_prompt = next(c for c in model.calls if "helpful assistant with long-term memory" in str(c[0].content))
    assert "My favourite colour is teal." in responder_prompt[0].content  # the recalled turn reached the model
    assert "Memory's answer to the last message: teal" in responder_prompt[0].content
    assert responder_prompt[-1].content == "What is my favourite colour?"
    assert (
        "JSON schema" not in responder_prompt[0].content and "plain conversational text" in responder_prompt[0].content
    )
    # auto = the LLM policy, since a model is configured; the turn's cost adds recall, reply and storing.
    assert out["recall"]["llm_calls"] == 4 and out["memory_write"]["status"] == "stored"
    # Recall and reply had valid model answers; storing the turn did not (the script has no ingest replies): the
    # turn's output reports those ingest roles' fallbacks, as the store's stats record them.
    roles = {f["role"] for f in out["fallbacks"]}
    assert out["fallbacks"] and "segmenter" in roles and not roles & {"navigator", "pruner", "responder", "query_cues"}
    assert out["cost"]["llm_calls"] == 5 + out["memory_write"]["llm_calls"]  # recall (4) and the reply
    assert out["messages"][-1].response_metadata["used_memory_ids"] == [dia_id]
    # A model's reply is part of the conversation, so it is stored with the user's turn, as the assistant's.
    stored = {t.text: t for t in resources.store.snapshot("alice").turns.values()}
    assert (
        stored["Your favourite colour is teal."].model_written and not stored["What is my favourite colour?"].evidence
    )


def test_drop_in_as_a_subgraph_of_another_messages_graph(resources) -> None:
    ingest_session(
        chat_turn_session("alice", "t0", [("Alice", "My bike is a red Brompton.")], datetime(2024, 1, 2, 9, 0)),
        "alice",
        resources=resources,
        policy="heuristic",
    )
    memory_bot = build_chatbot_graph().compile()
    parent = StateGraph(MessagesState)
    parent.add_node("memory_bot", memory_bot)
    parent.add_edge(START, "memory_bot")
    app = parent.compile(checkpointer=InMemorySaver())
    context = replace(HEURISTIC, resources=resources)
    out = app.invoke({"messages": [("user", "What bike do I have?")]}, thread("p1"), context=context)
    assert [m.type for m in out["messages"]] == ["human", "ai"]
    assert "Brompton" in out["messages"][-1].content


def test_extractive_replies_and_configuration_errors(resources) -> None:
    assert (
        reply_from_recall("What is my name?", {"answer": "not in memory"}).reply
        == "I don't have anything in memory about that yet."
    )
    assert reply_from_recall("where do I live", {"answer": "Alfama"}).reply == "From memory: Alfama"
    assert reply_from_recall("I live in Alfama.", {"answer": "x"}).reply == "Noted, I'll remember that."
    bot = build_chatbot_graph().compile()
    with pytest.raises(ValueError, match="unknown recall strategy"):
        say(bot, "hi", "t1", ChatContext(namespace="alice", strategy="telepathy", resources=resources))


def test_cli_chat_shows_evidence_on_request(resources, monkeypatch, capsys, tmp_path) -> None:
    from logicmap.graphs.surfaces.cli import main

    data_dir = tmp_path / "cli-memory"
    lines = iter(["I keep my spare key under the blue pot.", "/quit"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    argv = [
        "--data-dir",
        str(data_dir),
        "--embeddings",
        "hashing",
        "chat",
        "-n",
        "bob",
        "--policy",
        "heuristic",
        "--user",
        "Bob",
    ]
    assert main(argv) == 0
    lines = iter(["Where is my spare key?", "/evidence", "/quit"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(new;" in out and "(existing;" in out
    assert "bot> From memory: I keep my spare key under the blue pot." in out
    assert "recalled by rerank (0 LLM calls)" in out and "Bob: I keep my spare key under the blue pot." in out


def test_studio_graph_is_compiled_without_a_checkpointer() -> None:
    from logicmap.graphs.chat import chatbot

    assert chatbot.graph.checkpointer is None
    diagram = chatbot.builder.compile().get_graph().draw_mermaid()
    assert diagram == (SNAPSHOTS / "chatbot.mmd").read_text(encoding="utf-8"), "the chatbot topology changed"


def _runtime(context: ChatContext):
    from langgraph.runtime import Runtime

    return Runtime(context=context, store=None, stream_writer=lambda _: None, previous=None)


def test_chatbot_nodes_run_alone(resources) -> None:
    """Each node is a module-level function of (state, runtime): it runs without compiling the graph."""
    from logicmap.graphs.chat.chatbot import recall, remember, respond

    stored: list[tuple[str, str, str]] = []
    ctx = replace(
        HEURISTIC,
        resources=resources,
        store_turn=lambda session, ns, policy: stored.append((ns, session.turns[0].text, policy)),
    )
    state = {"messages": [HumanMessage(content="Where is my bike?")]}
    recalled = recall(state, _runtime(ctx))  # a namespace that holds nothing yet: nothing to recall
    assert recalled["evidence"] == [] and recalled["recall"]["answer"] is None
    replied = respond({**state, **recalled}, _runtime(ctx))
    assert replied["messages"][0].content == "I don't have anything in memory about that yet."
    written = remember(
        {"messages": [*state["messages"], *replied["messages"]]}, _runtime(ctx), {"configurable": {"thread_id": "t1"}}
    )
    assert written["memory_write"]["status"] == "stored" and stored == [("alice", "Where is my bike?", "heuristic")]


# -- the tenant, resolved per run -----------------------------------------------------------------------------


def test_a_run_that_names_no_tenant_fails_and_writes_nothing(resources) -> None:
    bot = build_chatbot_graph().compile()
    anonymous = ChatContext(policy="heuristic", resources=resources)
    with pytest.raises(NamespaceRequiredError):
        bot.invoke({"messages": [("user", "My PIN is 1234.")]}, thread("t1"), context=anonymous)
    # A template whose value the config does not carry fails the same way.
    with pytest.raises(NamespaceRequiredError, match="user_id"):
        bot.invoke(
            {"messages": [("user", "My PIN is 1234.")]}, thread("t1"), context=replace(anonymous, namespace="{user_id}")
        )
    assert resources.store.namespaces() == []  # nothing went to a "default" tenant


def test_the_tenant_comes_from_a_template_or_configurable_namespace(resources) -> None:
    bot = build_chatbot_graph().compile()
    template = ChatContext(namespace="team-{user_id}", policy="heuristic", remember_mode="sync", resources=resources)
    out = bot.invoke(
        {"messages": [("user", "I like green tea.")]},
        {"configurable": {"thread_id": "t1", "user_id": "bob"}},
        context=template,
    )
    assert out["memory_write"]["namespace"] == "team-bob" and out["recall"]["namespace"] == "team-bob"
    out = bot.invoke(
        {"messages": [("user", "I like black coffee.")]},
        {"configurable": {"thread_id": "t2", "namespace": "carol"}},
        context=ChatContext(policy="heuristic", remember_mode="sync", resources=resources),
    )
    assert out["memory_write"]["namespace"] == "carol"
    with pytest.raises(ValueError, match="invalid value for namespace field"):  # a value cannot reach another tenant
        bot.invoke(
            {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t3", "user_id": "bob.x"}}, context=template
        )
    assert sorted(resources.store.namespaces()) == ["carol", "team-bob"]


def test_a_parent_graph_config_names_the_tenant_of_the_chatbot_subgraph(resources) -> None:
    parent = StateGraph(MessagesState)
    parent.add_node("memory_bot", build_chatbot_graph().compile())
    parent.add_edge(START, "memory_bot")
    app = parent.compile(checkpointer=InMemorySaver())
    context = ChatContext(namespace="{user_id}", policy="heuristic", remember_mode="sync", resources=resources)
    for user in ("dora", "ezra"):
        app.invoke(
            {"messages": [("user", f"My name is {user}.")]},
            {"configurable": {"thread_id": f"p-{user}", "user_id": user}},
            context=context,
        )
    assert sorted(resources.store.namespaces()) == ["dora", "ezra"]
    assert [t.text for t in resources.store.snapshot("ezra").turns.values()] == ["My name is ezra."]


def test_remote_chatbot_resolves_the_tenant_before_any_request() -> None:
    from logicmap.agents.local_llm import free_port
    from logicmap.graphs.chat.chatbot import RemoteChatbot

    remote = RemoteChatbot(
        url=f"http://127.0.0.1:{free_port()}",
        namespace="{user_id}",
        settings={"strategy": "dense", "policy": "heuristic"},
    )
    with pytest.raises(NamespaceRequiredError):  # nothing listens on that port: raised before a request
        remote.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "x"}})
    sent = remote._tenant_config(
        {"configurable": {"thread_id": "x", "user_id": "alice", "namespace": "mallory"}}, {"ingest": False}
    )
    assert sent["configurable"] == {
        "thread_id": "x",
        "user_id": "alice",
        "namespace": "alice",
        "strategy": "dense",
        "policy": "heuristic",
        "ingest": False,
    }
    copied = remote.with_config({"tags": ["x"]})  # RemoteGraph.copy rebuilds it from its attributes
    assert isinstance(copied, RemoteChatbot) and copied.namespace == "{user_id}" and copied.settings == remote.settings


# -- streaming, recall-only runs, schemas ------------------------------------------------------------------------


def _told(resources, text: str = "My favourite colour is teal.") -> str:
    told = chat_turn_session("alice", "t0", [("Alice", text)], datetime(2024, 1, 2, 9, 0))
    ingest_session(told, "alice", resources=resources, policy="heuristic")
    return told.turns[0].dia_id


def test_the_reply_streams_as_text_chunks_and_internal_roles_do_not(resources) -> None:

    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessageChunk

    _told(resources)
    # One streaming model: dense recall makes no model call in the chatbot, so the reply is the turn's one call.
    resources.llm_ = GenericFakeChatModel(messages=iter([AIMessage(content="Your favourite colour is teal.")]))
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = ChatContext(
        namespace="alice", strategy="dense", policy="llm", user_name="Alice", resources=resources, ingest=False
    )
    streamed = list(
        bot.stream(
            {"messages": [("user", "What is my favourite colour?")]}, thread("s1"), context=ctx, stream_mode="messages"
        )
    )
    chunks = [message for message, _ in streamed]
    assert all(isinstance(m, AIMessageChunk) for m in chunks) and len(chunks) > 3  # token by token
    assert "".join(m.content for m in chunks) == "Your favourite colour is teal."  # the reply, nothing else
    assert {meta["langgraph_node"] for _, meta in streamed} == {"respond"}
    final = bot.get_state(thread("s1")).values
    assert "teal" in final["recall"]["answer"] and final["recall"]["llm_calls"] == 0
    assert final["messages"][-1].content == "Your favourite colour is teal."
    assert final["messages"][-1].id == chunks[0].id  # the chunks and the stored reply are one message


def test_a_recall_that_calls_the_model_stays_off_the_messages_stream(resources) -> None:
    dia_id = _told(resources)
    resources.llm_ = ScriptedChatModel(
        routes={
            "reconstructing the memory": [
                AIMessage(
                    content="",
                    tool_calls=[{"name": "search_events", "args": {"query": "favourite colour"}, "id": "s1"}],
                ),
                AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "submit_answer",
                            "id": "s2",
                            "args": {
                                "answer": "teal",
                                "cited_event_ids": [],
                                "cited_turn_ids": [dia_id],
                                "confidence": 0.9,
                            },
                        }
                    ],
                ),
            ],
            "You prune the working memory": [{"keep": ["M1"], "answer_now": False}],
            "helpful assistant with long-term memory": ["Your favourite colour is teal."],
        }
    )
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = ChatContext(namespace="alice", strategy="reconstruct", policy="llm", resources=resources, ingest=False)
    streamed = list(
        bot.stream(
            {"messages": [("user", "What is my favourite colour?")]}, thread("s3"), context=ctx, stream_mode="messages"
        )
    )
    assert streamed and {meta["langgraph_node"] for _, meta in streamed} == {"respond"}
    assert "".join(m.content for m, _ in streamed) == "Your favourite colour is teal."
    assert bot.get_state(thread("s3")).values["recall"]["llm_calls"] >= 1  # recall did call the model


def test_without_a_model_the_reply_still_arrives_on_the_messages_stream(resources) -> None:
    _told(resources)
    bot = build_chatbot_graph().compile()
    streamed = list(
        bot.stream(
            {"messages": [("user", "What is my favourite colour?")]},
            thread("s2"),
            context=replace(HEURISTIC, resources=resources, ingest=False),
            stream_mode="messages",
        )
    )
    assert [(m.type, m.content) for m, _ in streamed] == [("ai", "From memory: My favourite colour is teal.")]


def test_a_recall_only_run_puts_the_evidence_in_the_output_and_adds_no_reply(resources) -> None:
    _told(resources)
    model = ScriptedChatModel(default="this would be a reply")
    resources.llm_ = model
    bot = build_chatbot_graph().compile()
    ctx = ChatContext(
        namespace="alice",
        strategy="dense",
        policy="heuristic",
        respond=False,
        remember_mode="sync",
        resources=resources,
    )
    out = bot.invoke({"messages": [("user", "What is my favourite colour?")]}, thread("r1"), context=ctx)
    assert [m.type for m in out["messages"]] == ["human"] and model.calls == []
    assert any("teal" in e["text"] for e in out["evidence"]) and "teal" in out["recall"]["answer"]
    assert out["memory_write"]["status"] == "stored" and out["memory_write"]["turns"] == 1  # the user's words


def test_the_studio_schemas_describe_what_a_user_supplies_and_gets() -> None:
    from typing import get_args

    from logicmap.graphs.chat import chatbot
    from logicmap.graphs.strategies.registry import STRATEGIES

    inputs = chatbot.graph.get_input_jsonschema()
    assert list(inputs["properties"]) == ["messages"] and inputs["required"] == ["messages"]
    outputs = chatbot.graph.get_output_jsonschema()["properties"]
    assert set(outputs) == {"messages", "evidence", "recall", "cost", "fallbacks", "memory_write"}
    form = chatbot.graph.get_context_jsonschema()["properties"]
    assert all(field.get("description") for field in form.values()), [
        k for k, v in form.items() if not v.get("description")
    ]
    assert {"resources", "ingestion", "store_turn"}.isdisjoint(form)  # a form user cannot fill those
    assert form["policy"]["default"] == "auto" and form["namespace"]["default"] is None
    assert set(get_args(chatbot.StrategyName)) == set(STRATEGIES) == set(form["strategy"]["enum"])


# -- durable turns ---------------------------------------------------------------------------------------------

_ONE_TURN_AND_EXIT = """
import os, sys
from pathlib import Path
from logicmap.graphs.chat.chatbot import ChatContext, graph
from logicmap.graphs.runtime.resources import Resources
from logicmap.settings import LogicMapSettings

res = Resources(settings=LogicMapSettings(data_dir=Path(sys.argv[1]), embedding_provider="hashing"))
res.llm_ = None
out = graph.invoke({"messages": [("user", "My locker code is 4312.")]}, {"configurable": {"thread_id": "t1"}},
                   context=ChatContext(namespace="alice", policy="heuristic", remember_mode="sync", resources=res))
print(out["messages"][-1].content, out["memory_write"]["status"], flush=True)
os._exit(0)  # no atexit handler, no flush: the process ends right after the reply (sync mode: already stored)
"""


def test_a_turn_survives_the_process_exiting_right_after_the_reply(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import make_resources

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", _ONE_TURN_AND_EXIT, str(tmp_path / "memory")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "Noted, I'll remember that. stored"
    reopened = make_resources(tmp_path / "memory")
    try:
        assert [t.text for t in reopened.store.snapshot("alice").turns.values()] == ["My locker code is 4312."]
    finally:
        reopened.store.close()


def test_an_empty_model_reply_is_retried_then_the_extractive_reply_is_used(resources) -> None:
    from logicmap.agents.chat_responder import reply_text
    from logicmap.prompts.chat import ChatReply

    model = ScriptedChatModel(routes={"helpful assistant with long-term memory": ["", "  "]})
    resources.llm_ = model
    bot = build_chatbot_graph().compile()
    ctx = ChatContext(
        namespace="alice", strategy="dense", policy="llm", recall=False, ingest=False, resources=resources
    )
    out = bot.invoke({"messages": [("user", "I moved to Porto.")]}, thread("e1"), context=ctx)
    assert out["messages"][-1].content == "Noted, I'll remember that." and len(model.calls) == 2
    assert "Your reply was empty" in model.calls[1][-1].content  # the retry says what was wrong
    assert out["fallbacks"][0]["role"] == "chat_responder" and out["cost"]["llm_calls"] == 2
    # A model that still wraps its reply in the old JSON form is unwrapped, not shown as JSON.
    wrapped = ScriptedChatModel(replies=[{"reply": "Porto is lovely.", "used_memory_ids": []}])
    outcome = reply_text(wrapped, [HumanMessage(content="hi")], fallback=lambda: ChatReply(reply="x"))
    assert outcome.output.reply == "Porto is lovely." and outcome.fallback is None
