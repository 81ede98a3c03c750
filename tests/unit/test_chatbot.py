"""The drop-in chatbot: cross-thread recall through memory, non-blocking ingestion, scripted replies, drop-in use, CLI."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.chatbot import (
    ChatContext,
    IngestionQueue,
    build_chatbot_graph,
    chat_turn_session,
    extractive_reply,
    ingest_session,
)

SNAPSHOTS = Path(__file__).parent / "snapshots"
HEURISTIC = ChatContext(namespace="alice", strategy="reconstruct", policy="heuristic", user_name="Alice")


def thread(name: str) -> dict:
    return {"configurable": {"thread_id": name}}


def say(bot, text: str, thread_id: str, context: ChatContext = HEURISTIC) -> dict:  # noqa: ANN001
    return bot.invoke({"messages": [HumanMessage(content=text)]}, thread(thread_id), context=context)


def test_a_second_thread_recalls_a_fact_told_in_the_first(resources) -> None:  # noqa: ANN001
    work = IngestionQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = replace(HEURISTIC, resources=resources, ingestion=work)
    first = say(bot, "My dog's name is Pixel and she is a beagle.", "t1", ctx)
    assert first["messages"][-1].content == "Noted, I'll remember that." and first["evidence"] == []
    say(bot, "I work as a pilot at Lisbon airport.", "t1", ctx)
    assert work.flush(timeout=60) and work.errors == [] and work.completed == 2

    second = say(bot, "What is my dog's name?", "t2", ctx)
    reply = second["messages"][-1].content
    assert "Pixel" in reply and len(second["messages"]) == 2  # a fresh thread: only memory knew it
    assert any("Pixel" in e["text"] for e in second["evidence"]) and second["recall"]["strategy"] == "reconstruct"
    assert "pilot" in say(bot, "Where do I work?", "t2", ctx)["messages"][-1].content
    # Each thread keeps its own messages in the checkpointer.
    assert len(bot.get_state(thread("t1")).values["messages"]) == 4
    # Stored turns are the user's words; extractive replies are not stored (they only echo memory).
    work.flush(timeout=60)
    turns = resources.store.snapshot("alice").turns.values()
    assert {t.speaker for t in turns} == {"Alice"} and len(turns) == 4


def test_the_reply_does_not_wait_for_ingestion(resources) -> None:  # noqa: ANN001
    release = threading.Event()
    stored: list[tuple[str, str, str]] = []

    def slow_ingest(session, namespace: str, policy: str) -> None:  # noqa: ANN001
        release.wait(timeout=30)
        stored.append((namespace, session.turns[0].text, policy))

    work = IngestionQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    out = say(bot, "I planted tomatoes today.", "t1",
              replace(HEURISTIC, resources=resources, ingestion=work, store_turn=slow_ingest))
    assert out["messages"][-1].content  # replied while the turn is still queued
    assert work.pending == 1 and stored == []
    assert work.flush(timeout=0.05) is False
    release.set()
    assert work.flush(timeout=30) and stored == [("alice", "I planted tomatoes today.", "heuristic")]


def test_ingestion_failures_are_recorded_not_raised(resources) -> None:  # noqa: ANN001
    def broken(session, namespace: str, policy: str) -> None:  # noqa: ANN001
        raise RuntimeError("disk full")

    work = IngestionQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    say(bot, "Remember my locker code is 4312.", "t1",
        replace(HEURISTIC, resources=resources, ingestion=work, store_turn=broken))
    assert work.flush(timeout=30) and "disk full" in work.errors[0][1]
    no_ingest = ChatContext(namespace="alice", policy="heuristic", ingest=False, ingestion=work, store_turn=broken,
                            resources=resources)
    say(bot, "Another thing.", "t1", no_ingest)
    assert work.flush(timeout=30) and work.completed == 1


def test_the_chat_model_answers_from_recalled_memories(resources) -> None:  # noqa: ANN001
    told = chat_turn_session("alice", "t0", [("Alice", "My favourite colour is teal.")], datetime(2024, 1, 2, 9, 0))
    ingest_session(told, "alice", resources=resources, policy="heuristic")
    dia_id = told.turns[0].dia_id
    model = ScriptedChatModel(routes={
        "reconstructing the memory": [  # recall through the reconstruct strategy's navigator
            AIMessage(content="", tool_calls=[{"name": "search_events", "args": {"query": "favourite colour"}, "id": "s1"}]),
            AIMessage(content="", tool_calls=[{"name": "submit_answer", "id": "s2", "args": {
                "answer": "teal", "cited_event_ids": [], "cited_turn_ids": [dia_id], "confidence": 0.9}}]),
        ],
        "helpful assistant with long-term memory": [{"reply": "Your favourite colour is teal.", "used_memory_ids": [dia_id]}],
    })
    resources.llm_ = model
    work = IngestionQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    context = ChatContext(namespace="alice", strategy="reconstruct", policy="llm", user_name="Alice",
                          ingestion=work, resources=resources)
    out = say(bot, "What is my favourite colour?", "t9", context)
    assert out["messages"][-1].content == "Your favourite colour is teal."
    responder_prompt = next(c for c in model.calls if "helpful assistant with long-term memory" in str(c[0].content))
    assert "My favourite colour is teal." in responder_prompt[0].content  # the recalled turn reached the model
    assert "Memory's answer to the last message: teal" in responder_prompt[0].content
    assert responder_prompt[-1].content == "What is my favourite colour?"
    assert out["recall"]["llm_calls"] == 2 and out["turn_cost"]["llm_calls"] == 3 and out["fallbacks"] == []
    assert out["messages"][-1].response_metadata["used_memory_ids"] == [dia_id]
    work.flush(timeout=60)
    # A model's reply is part of the conversation, so it is stored with the user's turn.
    assert any(t.text == "Your favourite colour is teal." for t in resources.store.snapshot("alice").turns.values())


def test_drop_in_as_a_subgraph_of_another_messages_graph(resources) -> None:  # noqa: ANN001
    ingest_session(chat_turn_session("alice", "t0", [("Alice", "My bike is a red Brompton.")], datetime(2024, 1, 2, 9, 0)),
                   "alice", resources=resources, policy="heuristic")
    memory_bot = build_chatbot_graph().compile()
    parent = StateGraph(MessagesState)
    parent.add_node("memory_bot", memory_bot)
    parent.add_edge(START, "memory_bot")
    app = parent.compile(checkpointer=InMemorySaver())
    context = replace(HEURISTIC, resources=resources, ingestion=IngestionQueue())
    out = app.invoke({"messages": [("user", "What bike do I have?")]}, thread("p1"), context=context)
    assert [m.type for m in out["messages"]] == ["human", "ai"]
    assert "Brompton" in out["messages"][-1].content


def test_extractive_replies_and_configuration_errors(resources) -> None:  # noqa: ANN001
    assert extractive_reply("What is my name?", {"answer": "not in memory"}).reply == "I don't have anything in memory about that yet."
    assert extractive_reply("where do I live", {"answer": "Alfama"}).reply == "From memory: Alfama"
    assert extractive_reply("I live in Alfama.", {"answer": "x"}).reply == "Noted, I'll remember that."
    bot = build_chatbot_graph().compile()
    with pytest.raises(ValueError, match="unknown recall strategy"):
        say(bot, "hi", "t1", ChatContext(namespace="alice", strategy="telepathy", ingestion=IngestionQueue(),
                                         resources=resources))


def test_cli_chat_shows_evidence_on_request(resources, monkeypatch, capsys, tmp_path) -> None:  # noqa: ANN001
    from logicmap.graphs.cli import main

    data_dir = tmp_path / "cli-memory"
    lines = iter(["I keep my spare key under the blue pot.", "/quit"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    argv = ["--data-dir", str(data_dir), "--embeddings", "hashing", "chat", "-n", "bob", "--policy", "heuristic", "--user", "Bob"]
    assert main(argv) == 0
    lines = iter(["Where is my spare key?", "/evidence", "/quit"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(new;" in out and "(existing;" in out
    assert "bot> From memory: I keep my spare key under the blue pot." in out
    assert "recalled by reconstruct (0 LLM calls)" in out and "Bob: I keep my spare key under the blue pot." in out


def test_studio_graph_is_compiled_without_a_checkpointer() -> None:
    from logicmap.graphs import chatbot

    assert chatbot.graph.checkpointer is None
    diagram = chatbot.builder.compile().get_graph().draw_mermaid()
    assert diagram == (SNAPSHOTS / "chatbot.mmd").read_text(encoding="utf-8"), "the chatbot topology changed"


def _runtime(context: ChatContext):  # noqa: ANN202
    from langgraph.runtime import Runtime

    return Runtime(context=context, store=None, stream_writer=lambda _: None, previous=None)


def test_chatbot_nodes_run_alone(resources) -> None:  # noqa: ANN001
    """Each node is a module-level function of (state, runtime): it runs without compiling the graph."""
    from logicmap.graphs.chatbot import queue_turn, recall, respond

    stored: list[tuple[str, str, str]] = []
    work = IngestionQueue()
    ctx = replace(HEURISTIC, resources=resources, ingestion=work,
                  store_turn=lambda session, ns, policy: stored.append((ns, session.turns[0].text, policy)))
    state = {"messages": [HumanMessage(content="Where is my bike?")]}
    recalled = recall(state, _runtime(ctx))  # a namespace that holds nothing yet: nothing to recall
    assert recalled["evidence"] == [] and recalled["recall"]["answer"] is None
    replied = respond({**state, **recalled}, _runtime(ctx))
    assert replied["messages"][0].content == "I don't have anything in memory about that yet."
    assert queue_turn({"messages": [*state["messages"], *replied["messages"]]}, _runtime(ctx),
                      {"configurable": {"thread_id": "t1"}}) == {}
    assert work.flush(timeout=30) and stored == [("alice", "Where is my bike?", "heuristic")]
