"""LangChain's conventions on the public API (issue 43, item 6): ``config=`` is a ``RunnableConfig`` wherever a run
starts (its callbacks see the run, its tags, metadata and run name are the run's), and an unknown keyword is a
``TypeError`` naming it and the close valid ones, never an option run without.

Everything runs on the real store with the no-LLM policy; the callback handler only records what LangChain sends.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler

from logicmap import (
    LogicMapStore,
    aanswer,
    add_messages,
    aforget,
    answer,
    delete_namespace,
    forget,
    get_memory,
    ingest_conversation,
    list_memories,
    update_memory,
)
from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.files.loaders import Conversation, RawTurn, Session

QUESTION = "Why did Maya move to Lisbon?"


class Recorder(BaseCallbackHandler):
    """Every chain start and end LangChain reports: (name, whether it is a root run, tags, metadata)."""

    def __init__(self) -> None:
        self.starts: list[tuple[str | None, bool, list[str], dict[str, Any]]] = []
        self.ends = 0

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.starts.append((kwargs.get("name"), parent_run_id is None, list(tags or []), dict(metadata or {})))

    def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        self.ends += 1

    @property
    def roots(self) -> list[tuple[str | None, bool, list[str], dict[str, Any]]]:
        return [s for s in self.starts if s[1]]


def _config(handler: Recorder, **extra: Any) -> dict[str, Any]:
    return {"callbacks": [handler], "tags": ["caller-tag"], "metadata": {"caller": "me"}, **extra}


@pytest.mark.parametrize("strategy", ["compass", "rerank", "goalmem", "dense", "forward_react"])
def test_answer_runs_under_the_callers_config_and_answers_the_same(strategy: str, ingested_sample: Resources) -> None:
    handler = Recorder()
    plain = answer(strategy, QUESTION, "sample", resources=ingested_sample, policy="heuristic")
    traced = answer(
        strategy,
        QUESTION,
        "sample",
        resources=ingested_sample,
        policy="heuristic",
        config=_config(handler, run_name="my-answer"),
    )
    assert traced.answer == plain.answer and traced.evidence == plain.evidence  # the config changes no answer
    [(name, _, tags, metadata)] = handler.roots
    assert name == "my-answer"
    assert "caller-tag" in tags and f"strategy:{strategy}" in tags
    assert metadata["caller"] == "me" and metadata["namespace"] == "sample"
    assert handler.ends >= 1
    if strategy != "dense" and not strategy.startswith("forward"):  # a graph: its nodes are child runs that inherit
        assert all("caller-tag" in tags for _, _, tags, _ in handler.starts)
        assert len(handler.starts) > 1


def test_aanswer_takes_the_config_too(ingested_sample: Resources) -> None:
    handler = Recorder()
    asyncio.run(
        aanswer(
            "rerank", QUESTION, "sample", resources=ingested_sample, policy="heuristic", config={"callbacks": [handler]}
        )
    )
    assert [name for name, *_ in handler.roots] == ["rerank"]


def test_an_unknown_keyword_is_a_type_error_naming_the_close_ones(ingested_sample: Resources) -> None:
    with pytest.raises(TypeError) as caught:
        answer("compass", QUESTION, "sample", resources=ingested_sample, top_kk=3)
    assert str(caught.value) == (
        "answer() got an unexpected keyword argument 'top_kk' for strategy 'compass'. Did you mean 'top_k' or 'top_p'?"
    )
    with pytest.raises(TypeError) as caught:
        answer("rerank", QUESTION, "sample", resources=ingested_sample, callbacks=[Recorder()])
    assert str(caught.value) == (
        "answer() got an unexpected keyword argument 'callbacks' for strategy 'rerank'. "
        "Did you mean config={'callbacks': ...}?"
    )
    with pytest.raises(TypeError) as caught:
        answer("dense", QUESTION, "sample", resources=ingested_sample, backbone="events")
    assert str(caught.value) == (
        "answer() got an unexpected keyword argument 'backbone' for strategy 'dense'; "
        "it takes config, k, policy, resources"
    )
    with pytest.raises(TypeError, match="'top_kk' for strategy 'compass'"):
        asyncio.run(aanswer("compass", QUESTION, "sample", resources=ingested_sample, top_kk=3))
    # the options a strategy does take still run: goalmem's k, compass's top_k
    answer("goalmem", QUESTION, "sample", resources=ingested_sample, policy="heuristic", k=3)
    answer("compass", QUESTION, "sample", resources=ingested_sample, policy="heuristic", top_k=3)


def test_the_stores_constructor_names_the_close_keyword() -> None:
    with pytest.raises(TypeError) as caught:
        LogicMapStore(stratgy="dense")  # type: ignore[call-arg]
    assert str(caught.value) == (
        "LogicMapStore.__init__() got an unexpected keyword argument 'stratgy'. Did you mean 'strategy'?"
    )


def _conversation(name: str) -> Conversation:
    turns = [
        RawTurn(dia_id="D1:1", speaker="Ana", text="I moved to Porto for the light."),
        RawTurn(dia_id="D1:2", speaker="Ana", text="My sister keeps bees in Braga."),
    ]
    return Conversation(
        conversation_id=name,
        speakers=["Ana"],
        sessions=[Session(session_id="S1", timestamp="2024-05-01T10:00:00", turns=turns)],
    )


def test_ingest_and_the_lifecycle_run_under_the_callers_config(resources: Resources) -> None:
    handler = Recorder()
    config = _config(handler)
    ingest_conversation(_conversation("ana"), "ana", resources=resources, policy="heuristic", config=config)
    list_memories("ana", resources=resources, config=config)
    get_memory("ana", "D1:1", resources=resources, config=config)
    update_memory("ana", "D1:2", "My sister keeps goats in Braga.", resources=resources, config=config)
    forget("ana", turn_ids=["D1:1"], resources=resources, config=config)
    asyncio.run(aforget("ana", turn_ids=["D1:2"], resources=resources, config=config))
    add_messages(
        "ana",
        [{"role": "user", "content": "I swim at Matosinhos on Sundays."}],
        resources=resources,
        policy="heuristic",
        config=config,
    )
    delete_namespace("ana", resources=resources, config=_config(handler, run_name="wipe-ana"))
    assert [name for name, *_ in handler.roots] == [
        "ingest",
        "list_memories",
        "get_memory",
        "update_memory",
        "forget",
        "forget",
        "add_messages",
        "wipe-ana",
    ]
    assert all("caller-tag" in tags and metadata["caller"] == "me" for *_, tags, metadata in handler.roots)
    # add_messages' ingest is a run inside its own
    assert any(name == "ingest" and not root for name, root, *_ in handler.starts)


def test_the_lifecycle_refuses_an_unknown_keyword_before_any_work(resources: Resources, tmp_path: Path) -> None:
    handler = Recorder()
    with pytest.raises(TypeError) as caught:
        list_memories("ana", kindd="turns", resources=resources, config={"callbacks": [handler]})  # type: ignore[call-arg]
    assert str(caught.value) == "list_memories() got an unexpected keyword argument 'kindd'. Did you mean 'kind'?"
    assert handler.starts == []  # refused before the run started
    with pytest.raises(TypeError) as caught:
        forget("ana", turn_id=["D1:1"], resources=resources)  # type: ignore[call-arg]
    assert str(caught.value) == "forget() got an unexpected keyword argument 'turn_id'. Did you mean 'turn_ids'?"
    with pytest.raises(TypeError) as caught:
        add_messages("ana", [], callbacks=[handler], resources=resources)  # type: ignore[call-arg]
    assert str(caught.value) == (
        "add_messages() got an unexpected keyword argument 'callbacks'. Did you mean config={'callbacks': ...}?"
    )
    with pytest.raises(TypeError) as caught:
        ingest_conversation(_conversation("ana"), "ana", resources=resources, polcy="heuristic")  # type: ignore[call-arg]
    assert str(caught.value) == (
        "ingest_conversation() got an unexpected keyword argument 'polcy'. Did you mean 'policy'?"
    )
    assert not resources.store.has_namespace("ana")


def test_ask_refuses_a_backbone_the_strategy_has_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from logicmap.graphs.surfaces.cli import main

    args = ["--data-dir", str(tmp_path / "memory"), "--embeddings", "hashing", "ask", "Where?", "-n", "sample"]
    assert main([*args, "-s", "compass", "--backbone", "dense"]) == 2  # before: run without it, silently
    assert capsys.readouterr().err == (
        "error: --backbone: strategy compass takes no backbone (these do: goalmem, "
        "forward_reformulate, forward_reflect, forward_react)\n"
    )


def test_a_graph_node_hands_its_config_down(ingested_sample: Resources) -> None:
    """The LangGraph way: a node passes the config it was given; the strategy's run nests under the node, and its
    recursion limit stays its own (goalmem's loops need more steps than the parent allows itself)."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        question: str
        answer: str

    def recall(state: State, config: RunnableConfig) -> dict[str, str]:
        result = answer(
            "goalmem",
            state["question"],
            "sample",
            resources=ingested_sample,
            policy="heuristic",
            max_breadth=3,
            max_depth=5,
            config=config,
        )
        return {"answer": result.answer}

    builder = StateGraph(State)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", END)
    handler = Recorder()
    # The parent needs 1 step: its limit of 4 would stop goalmem's run (parse, decompose, retrieve, ...) half way.
    out = builder.compile().invoke(
        {"question": QUESTION}, {"callbacks": [handler], "tags": ["app"], "recursion_limit": 4}
    )
    assert (
        out["answer"]
        == answer(
            "goalmem", QUESTION, "sample", resources=ingested_sample, policy="heuristic", max_breadth=3, max_depth=5
        ).answer
    )
    names = [name for name, *_ in handler.starts]
    assert names[:3] == ["LangGraph", "recall", "goalmem"] and [n for n, *_ in handler.roots] == ["LangGraph"]
    assert all("app" in tags for _, _, tags, _ in handler.starts)
