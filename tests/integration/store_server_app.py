"""Graphs a ``langgraph dev`` server loads in ``test_store_server.py``: the memory-template's chatbot and memory graph.

Copied from github.com/langchain-ai/memory-template (src/chatbot/graph.py, src/memory_graph/graph.py) with the
chat models replaced by scripted fakes (no LLM is reachable) and ``bot`` searching ("memories", user_id), where the
memory graph writes. Everything else runs as in the template on the API server: ``get_store()`` is the server's
store (``LogicMapStore`` through ``langgraph.json``'s ``"store"``), and ``schedule_memories`` enqueues the memory
run on the same thread with ``multitask_strategy="enqueue"`` and ``after_seconds``.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
from typing import Annotated, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config, get_store
from langgraph.func import entrypoint, task
from langgraph.graph import StateGraph, add_messages
from langgraph_sdk import get_client
from langmem import create_memory_store_manager
from typing_extensions import TypedDict

FACTS = {
    "Alice": "Alice lives in Lisbon and is allergic to peanuts.",
    "Bob": "Bob lives in Oslo and runs marathons every spring.",
}


class ScriptedModel(BaseChatModel):
    """Bound to LangMem's ``Memory`` tool: saves the speaking user's fact. Otherwise: replies with the memories
    its system prompt was given (so a test reads what ``bot`` recalled)."""

    tool_names: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.model_copy(update={"tool_names": [convert_to_openai_tool(t)["function"]["name"] for t in tools]})

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        said = " ".join(str(m.content) for m in messages)
        if "Memory" in self.tool_names:
            user = next(u for u in FACTS if u in said)
            message = AIMessage("", tool_calls=[{"name": "Memory", "args": {"content": FACTS[user]}, "id": "m1"}])
        else:
            system = str(messages[0].content)
            message = AIMessage(system[system.find("<memories>") : system.find("</memories>") + 11])
        return ChatResult(generations=[ChatGeneration(message=message)])


llm = ScriptedModel()


# -- chatbot/graph.py ---------------------------------------------------------------------------------------------
class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


async def bot(state: ChatState) -> dict[str, list[Any]]:
    configurable = get_config()["configurable"]
    namespace = ("memories", configurable["user_id"])
    store = get_store()
    query = "\n".join(str(message.content) for message in state["messages"])
    items = await store.asearch(namespace, query=query, limit=10)
    memories = "\n".join(f"{m.value!s}\tLast updated: {m.updated_at}" for m in items)
    prompt = (
        f"You are a helpful and friendly chatbot.\n\n## Memories\n<memories>\n{memories}\n</memories>\n\n"
        f"System Time: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M:%S}"
    )
    m = await llm.ainvoke([{"role": "system", "content": prompt}, *state["messages"]])
    return {"messages": [m]}


async def schedule_memories(state: ChatState, config: RunnableConfig) -> None:
    configurable = config["configurable"]
    memory_client = get_client()
    await memory_client.runs.create(
        thread_id=configurable["thread_id"],
        multitask_strategy="enqueue",
        after_seconds=configurable.get("delay_seconds", 1),
        assistant_id="memory_graph",
        input={"messages": state["messages"]},
        config={"configurable": {"user_id": configurable["user_id"]}},
    )


builder = StateGraph(ChatState)
builder.add_node(bot)
builder.add_node(schedule_memories)
builder.add_edge("__start__", "bot")
builder.add_edge("bot", "schedule_memories")
chatbot = builder.compile()


# -- memory_graph/graph.py ----------------------------------------------------------------------------------------
MEMORY_TYPES = [{"name": "User", "update_mode": "patch"}, {"name": "Note", "update_mode": "insert"}]


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class ProcessorState(State):
    function_name: str


@functools.lru_cache(maxsize=100)
def get_store_manager(function_name: str) -> Any:
    memory_config = next(conf for conf in MEMORY_TYPES if conf["name"] == function_name)
    kwargs: dict[str, Any] = {"enable_inserts": memory_config["update_mode"] == "insert"}
    return create_memory_store_manager(llm, namespace=("memories", "{user_id}", function_name), **kwargs)


@task()
async def process_memory_type(state: ProcessorState) -> None:
    user_id = get_config()["configurable"]["user_id"]
    await get_store_manager(state["function_name"]).ainvoke(
        {"messages": state["messages"], "max_steps": 1}, config={"configurable": {"user_id": user_id}}
    )


@entrypoint()
async def memory_graph(state: State) -> None:
    if not state["messages"]:
        raise ValueError("No messages provided")
    await asyncio.gather(
        *[
            process_memory_type(ProcessorState(messages=state["messages"], function_name=v["name"]))
            for v in MEMORY_TYPES
        ]
    )


__all__ = ["chatbot", "memory_graph"]
