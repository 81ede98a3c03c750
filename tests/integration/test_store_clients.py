"""Real ``BaseStore`` clients on ``LogicMapStore``: LangMem's memory tools and the memory-template's write/recall flow.

Nothing is mocked but the chat model, a LangChain fake chat model whose tool calls are scripted (no LLM is reachable):
LangMem's ``create_manage_memory_tool`` / ``create_search_memory_tool`` run in a LangChain ``create_agent`` agent with
``namespace=("memories", "{langgraph_user_id}")``; the memory-template's ``memory_graph`` (LangMem's
``create_memory_store_manager`` over trustcall) writes and its chatbot's ``bot`` node recalls, as in
github.com/langchain-ai/memory-template. Two users; nothing crosses.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config, get_store
from langgraph.func import entrypoint, task
from langgraph.graph import StateGraph, add_messages
from langmem import create_manage_memory_tool, create_memory_store_manager, create_search_memory_tool
from typing_extensions import TypedDict

from logicmap.graphs.surfaces.basestore import LogicMapStore
from tests.conftest import make_resources

pytestmark = pytest.mark.integration

Step = Callable[[list[BaseMessage], list[str]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """A fake chat model: each call answers with the next scripted step, a function of the messages and the names
    of the tools bound to it (so a step can quote an id a tool returned). ``bind_tools`` keeps the script."""

    steps: list[Any]
    tool_names: list[str] = []
    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        bound = self.model_copy(update={"tool_names": names})
        bound.steps, bound.seen = self.steps, self.seen  # one script, shared by every binding
        return bound

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        step = self.steps.pop(0)
        message = step(messages, self.tool_names) if callable(step) else step
        return ChatResult(generations=[ChatGeneration(message=message)])


def _call(name: str, args: dict[str, Any], n: int = 1) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{name}-{n}"}])


def _last_tool_text(messages: list[BaseMessage]) -> str:
    return next(str(m.content) for m in reversed(messages) if isinstance(m, ToolMessage))


def _memory_id(messages: list[BaseMessage]) -> str:
    found = re.search(r"created memory ([0-9a-f-]{36})", _last_tool_text(messages))
    assert found, _last_tool_text(messages)
    return found.group(1)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    res = make_resources(tmp_path / "memory")
    yield LogicMapStore(resources=res, policy="heuristic")
    if res.store_ is not None:
        res.store_.close()


def _agent(store: LogicMapStore, steps: list[Any]) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(steps=steps)
    tools = [
        create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}")),
        create_search_memory_tool(namespace=("memories", "{langgraph_user_id}")),
    ]
    return create_agent(model, tools, store=store), model


def _run(agent: Any, user: str, text: str, *, use_async: bool = False) -> list[BaseMessage]:
    config = {"configurable": {"langgraph_user_id": user}}
    inputs = {"messages": [HumanMessage(text)]}
    final = asyncio.run(agent.ainvoke(inputs, config)) if use_async else agent.invoke(inputs, config)
    return list(final["messages"])


def test_langmem_tools_write_update_search_and_delete_per_user(store: LogicMapStore) -> None:
    ids: dict[str, str] = {}

    def remember_id(user: str) -> Step:
        def step(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
            ids[user] = _memory_id(messages)
            return AIMessage("Noted.")

        return step

    alice, _ = _agent(
        store,
        [
            _call("manage_memory", {"content": "My vault code is zebra-4471 and I live in Lisbon."}),
            remember_id("alice"),
        ],
    )
    _run(alice, "alice", "Remember my vault code: zebra-4471. I live in Lisbon.")
    bob, _ = _agent(
        store,
        [
            _call("manage_memory", {"content": "I keep bees on my roof in Oslo."}),
            remember_id("bob"),
            _call("search_memory", {"query": "vault code"}),
            AIMessage("I found nothing about a vault."),
        ],
    )
    _run(bob, "bob", "I keep bees on my roof in Oslo.")
    bob_search = _run(bob, "bob", "What is my vault code?", use_async=True)
    found = json.loads(_last_tool_text(bob_search))
    assert [m["value"]["content"] for m in found] == ["I keep bees on my roof in Oslo."]  # only bob's own
    assert "zebra" not in json.dumps(found)

    alice2, _ = _agent(
        store,
        [
            _call("search_memory", {"query": "What is my vault code?"}),
            lambda messages, tools: _call(
                "manage_memory",
                {
                    "action": "update",
                    "id": json.loads(_last_tool_text(messages))[0]["key"],
                    "content": "My vault code is now okapi-9000; I live in Lisbon.",
                },
                2,
            ),
            _call("search_memory", {"query": "vault code"}, 3),
            AIMessage("Your vault code is okapi-9000."),
        ],
    )
    messages = _run(alice2, "alice", "I changed my vault code to okapi-9000.", use_async=True)
    tool_texts = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
    first, after = json.loads(tool_texts[0]), json.loads(tool_texts[2])
    assert first[0]["key"] == ids["alice"] and "zebra-4471" in first[0]["value"]["content"]
    assert tool_texts[1] == f"updated memory {ids['alice']}"
    assert [(m["key"], m["value"]["content"]) for m in after] == [
        (ids["alice"], "My vault code is now okapi-9000; I live in Lisbon.")
    ]  # replaced, no stale copy
    assert "zebra" not in str(store.search(("memories", "alice"), query="zebra-4471 vault", limit=50))

    alice3, _ = _agent(
        store,
        [
            _call("manage_memory", {"action": "delete", "id": ids["alice"]}),
            _call("search_memory", {"query": "vault code"}, 2),
            AIMessage("Forgotten."),
        ],
    )
    messages = _run(alice3, "alice", "Please forget my vault code.")
    tool_texts = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
    assert tool_texts[0] == f"Deleted memory {ids['alice']}" and json.loads(tool_texts[1]) == []
    assert store.get(("memories", "bob"), ids["bob"]).value == {"content": "I keep bees on my roof in Oslo."}


# -- the memory-template (github.com/langchain-ai/memory-template), its graphs as written there -------------------
# memory_graph/graph.py and chatbot/graph.py's ``bot``, with two changes: the chat model is the scripted one (the
# template calls ``init_chat_model``), and ``bot`` searches ("memories", user_id), where memory_graph writes (the
# template searches (user_id,), a prefix under which its own writes never land, so it would recall nothing on
# any store). ``schedule_memories`` enqueues the memory run on the API server; here the test runs it in-process.

# The template's two memory types (configuration.DEFAULT_MEMORY_CONFIGS): its store managers take only
# ``enable_inserts`` from them, so both keep LangMem's default ``Memory`` schema ({"content": str}).
MEMORY_TYPES = [{"name": "User", "update_mode": "patch"}, {"name": "Note", "update_mode": "insert"}]


class TemplateState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class ProcessorState(TemplateState):
    function_name: str


def template_memory_graph(model: BaseChatModel, store: LogicMapStore) -> Any:
    """The template's ``memory_graph``: one LangMem store manager per memory type, run in parallel."""

    @functools.lru_cache(maxsize=100)
    def get_store_manager(function_name: str) -> Any:
        memory_config = next(conf for conf in MEMORY_TYPES if conf["name"] == function_name)
        kwargs: dict[str, Any] = {"enable_inserts": memory_config["update_mode"] == "insert"}
        return create_memory_store_manager(model, namespace=("memories", "{user_id}", function_name), **kwargs)

    @task()
    async def process_memory_type(state: ProcessorState) -> None:
        user_id = get_config()["configurable"]["user_id"]
        await get_store_manager(state["function_name"]).ainvoke(
            {"messages": state["messages"], "max_steps": 1}, config={"configurable": {"user_id": user_id}}
        )

    @entrypoint(store=store)  # the API server gives the graph its configured store
    async def graph(state: TemplateState) -> None:
        if not state["messages"]:
            raise ValueError("No messages provided")
        await asyncio.gather(
            *[
                process_memory_type(ProcessorState(messages=state["messages"], function_name=v["name"]))
                for v in MEMORY_TYPES
            ]
        )

    return graph


def template_chatbot(model: BaseChatModel) -> Any:
    """The template's chatbot ``bot`` node: recall the user's memories by search, answer with them in the prompt."""

    async def bot(state: TemplateState) -> dict[str, Any]:
        user_id = get_config()["configurable"]["user_id"]  # the template's ChatConfigurable.from_context()
        store = get_store()
        query = "\n".join(str(message.content) for message in state["messages"])
        items = await store.asearch(("memories", user_id), query=query, limit=10)
        memories = "\n".join(f"{m.value!s}\tLast updated: {m.updated_at}" for m in items)
        prompt = (
            f"You are a helpful and friendly chatbot.\n\n## Memories\n<memories>\n{memories}\n</memories>"
            f"\n\nSystem Time: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M:%S}"
        )
        return {"messages": [await model.ainvoke([{"role": "system", "content": prompt}, *state["messages"]])]}

    builder = StateGraph(TemplateState)
    builder.add_node(bot)
    builder.add_edge("__start__", "bot")
    return builder


def _extract(facts: dict[str, str]) -> Step:
    """The memory model's reply: a ``Memory`` tool call holding the fact of the user who is speaking."""

    def step(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
        said = " ".join(str(m.content) for m in messages)
        user = next(u for u in facts if u in said)
        assert "Memory" in tools, tools
        return _call("Memory", {"content": facts[user]}, len(said))

    return step


def test_memory_template_write_and_recall_flow_keeps_users_apart(store: LogicMapStore) -> None:
    facts = {
        "Alice": "Alice lives in Lisbon and is allergic to peanuts.",
        "Bob": "Bob lives in Oslo and runs marathons every spring.",
    }
    memory_model = ScriptedChatModel(steps=[_extract(facts) for _ in range(4)])
    memory_graph = template_memory_graph(memory_model, store)
    for user, said in (
        ("alice", "Hi, I'm Alice from Lisbon and I'm allergic to peanuts."),
        ("bob", "Hey, Bob here, from Oslo; I run marathons every spring."),
    ):
        asyncio.run(memory_graph.ainvoke({"messages": [HumanMessage(said)]}, {"configurable": {"user_id": user}}))
    assert not memory_model.steps  # one extraction call per memory type and user
    for kind in ("User", "Note"):
        stored = store.search(("memories", "alice", kind))
        assert [(m.value["kind"], m.value["content"]) for m in stored] == [("Memory", {"content": facts["Alice"]})]
    assert store.list_namespaces(prefix=("memories",)) == [
        ("memories", "alice", "Note"),
        ("memories", "alice", "User"),
        ("memories", "bob", "Note"),
        ("memories", "bob", "User"),
    ]

    chat_model = ScriptedChatModel(steps=[AIMessage("Noted, no peanuts!"), AIMessage("Enjoy the run!")])
    chatbot = template_chatbot(chat_model).compile(store=store)
    for user, said in (("alice", "What snack should I bring? Remember my allergy."), ("bob", "Any tips for my race?")):
        asyncio.run(chatbot.ainvoke({"messages": [HumanMessage(said)]}, {"configurable": {"user_id": user}}))
    alice_prompt, bob_prompt = (str(seen[0].content) for seen in chat_model.seen)
    assert "allergic to peanuts" in alice_prompt and "Lisbon" in alice_prompt
    assert "marathons" in bob_prompt and "Oslo" in bob_prompt
    assert "peanuts" not in bob_prompt and "Lisbon" not in bob_prompt
    assert "marathons" not in alice_prompt and "Oslo" not in alice_prompt
