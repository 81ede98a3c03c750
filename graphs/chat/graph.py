"""The chatbot graph: recall -> respond -> remember, its context, input/output and state (``graphs.chat.chatbot``
describes it and re-exports every public name)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import END, START, add_messages
from langgraph.runtime import Runtime, get_runtime
from pydantic import ConfigDict, with_config
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from logicmap.agents.answerers import reply_from_recall
from logicmap.agents.base import Cost
from logicmap.agents.chat_responder import reply_text
from logicmap.graphs.chat.ingestion import chat_turn_session, default_ingestion_queue, wait_for_queued_turns
from logicmap.graphs.chat.messages import add_messages as add_chat_messages
from logicmap.graphs.runtime.resources import (
    Resources,
    ResourcesField,
    resolve_policy,
    resources_field,
    resources_of,
    run_context,
    run_namespace,
    server_mode,
)
from logicmap.graphs.runtime.tracing import TracedStateGraph
from logicmap.graphs.strategies.registry import STRATEGIES, StrategyName
from logicmap.graphs.strategies.registry import answer as strategy_answer
from logicmap.memory.files.loaders import Session
from logicmap.memory.runtime.blocking import run_blocking
from logicmap.memory.runtime.input_limits import check_message, recall_query
from logicmap.memory.runtime.tenancy import ThreadTenantError, tenant_key
from logicmap.prompts import chat as prompt
from logicmap.settings import LogicMapSettings

__all__ = [
    "ChatContext",
    "ChatInput",
    "ChatOutput",
    "ChatState",
    "StrategyName",
    "TurnIngest",
    "after_recall",
    "after_remember",
    "build_chatbot_graph",
    "builder",
    "graph",
    "message_text",
    "recall",
    "remember",
    "remember_mode",
    "respond",
    "route_start",
    "schedule_remember",
    "store_unscheduled",
]


log = logging.getLogger("logicmap.graphs.chat.chatbot")  # the logger of all the chatbot's modules

TurnIngest = Callable[[Session, str, str], Any]
"""Stores a finished chat turn: ``store_turn(session, namespace, policy) -> report`` (``ChatContext.store_turn``)."""


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass(kw_only=True)
class ChatContext:
    """Per-run settings of the chatbot: whose memory, how to recall it, how to reply, what to remember."""

    namespace: str | None = None
    """The tenant whose memory this run reads and writes: a name, or a template such as '{user_id}' filled from
    config['configurable']; unset = config['configurable']['namespace']. A run that names none fails."""
    strategy: StrategyName = "rerank"
    """How memory is recalled for the last user message (rerank: the graph-feature reranker, no LLM call to
    recall; compass, goalmem, reconstruct... navigate with the chat model, at several calls per turn)."""
    policy: Literal["auto", "llm", "heuristic"] = "auto"
    """auto = the LLM policy when a chat model is configured, else the no-LLM one; llm = recall, reply and
    ingestion through the chat model; heuristic = no LLM call (extractive replies)."""
    user_name: str = "user"
    """The user's name: the speaker of the user's turns in memory and in the responder's prompt."""
    assistant_name: str = "assistant"
    """The assistant's name: the speaker of its replies in memory."""
    recall: bool = True
    """Recall memory for each user message (off: reply from the thread alone)."""
    respond: bool = True
    """Reply to the user (off: recall only; the evidence and memory's answer are in the output for an
    application that answers with its own model)."""
    ingest: bool = True
    """Remember each turn in the tenant's memory."""
    ingest_replies: bool = True
    """Remember the assistant's model-written replies too, as the assistant's (extractive replies only echo
    memory: never stored)."""
    trust_assistant: bool = False
    """Let the assistant's stored replies be evidence for what memory recalls (off: they are kept as the
    assistant's words, and a model's guess never becomes a fact about the user)."""
    remember_mode: Literal["auto", "sync", "background", "deferred"] = "auto"
    """How a turn is stored once the reply is out: sync = within the run (it ends stored); background = by an
    in-process ingestion queue (the next recall of the namespace in the process waits for it; a normal exit
    stores what is queued); deferred = by a run the chatbot schedules on the API server for its thread
    (LangGraph's runs.create with multitask_strategy='enqueue'; with no run to schedule, within the run);
    auto = deferred on the API server, else background."""
    remember_after_s: float = 0.0
    """deferred: seconds the scheduled run waits before storing (a later turn's run is queued behind it)."""
    remember_only: bool = False
    """Set on the run the chatbot schedules (deferred): store the thread's turns not stored yet; no recall, no
    reply."""
    history: int = 12
    """How many recent messages of the thread the responder sees."""
    evidence_shown: int = 8
    """How many recalled items are kept in the output's evidence and shown to the responder."""
    ingestion: SkipJsonSchema[Any] = None
    """Python callers only: the IngestionQueue that stores turns in the background (flush it before exiting);
    unset = the process-wide one (``default_ingestion_queue()``, drained at exit)."""
    store_turn: SkipJsonSchema[Any] = None
    """Python callers only: store_turn(session, namespace, policy) stores a finished turn; unset = the ingest
    graph on this run's resources."""
    resources: ResourcesField = resources_field()


@with_config(ConfigDict(use_attribute_docstrings=True))
class ChatInput(TypedDict):
    """What a caller supplies: the new user message (a checkpointed thread keeps the earlier ones)."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The conversation; the last user message is the one recalled for and answered."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class ChatOutput(TypedDict, total=False):
    """What a turn returns: the thread with the reply, what was recalled, the cost, whether the turn was stored."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The thread; its last message is the reply (the user's message when ``respond`` is off)."""
    evidence: list[dict[str, Any]]
    """The memories recalled for the last user message (kind, id, text, time, cited turn ids)."""
    recall: dict[str, Any]
    """Recall's summary: strategy, namespace, memory's own answer, the ids it cited, its LLM calls."""
    cost: dict[str, Any]
    """This turn's cost: LLM calls, prompt and completion tokens, wall time (recall + reply + storing)."""
    fallbacks: list[dict[str, Any]]
    """Roles that had no valid model answer this turn and used their deterministic fallback."""
    memory_write: dict[str, Any]
    """Whether this turn was stored: status stored | queued | skipped | failed (with the error), namespace,
    session id."""


class ChatState(ChatOutput, total=False):
    """Thread state. Besides the messages, plain JSON values only (checkpointers and servers store them as is).

    Whose memory a run reads and writes comes from the run's ``ChatContext`` (and config) only, so an input (or
    a parent graph's state) cannot name another tenant. The thread records a fingerprint of the tenant of its
    first run (``tenant_key``); a run of another tenant on the thread is refused before recall.
    """

    tenant_key: str
    """A fingerprint of the tenant this thread belongs to (``memory.runtime.tenancy.tenant_key``), set by its first run."""


def _ctx(runtime: Runtime[ChatContext] | None) -> ChatContext:
    return run_context(runtime, ChatContext)


def _policy(ctx: ChatContext, res: Resources) -> str:
    """The run's policy with ``auto`` resolved: the LLM policy when the run has a chat model."""
    return resolve_policy(ctx.policy, res)


def _internal(step: Callable[[dict[str, Any]], Any], args: dict[str, Any], name: str) -> Any:
    """Run ``step(args)`` as a child run tagged ``nostream``: its LLM calls (recall's roles, ingestion's) stay
    out of ``stream_mode="messages"``, which then carries the reply only. Tracing still records them."""
    return RunnableLambda(step, name=name).invoke(args, {"tags": [TAG_NOSTREAM], "run_name": name})


# -- replies ----------------------------------------------------------------------------------------


def message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, list):
        return " ".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content).strip()
    return str(content or "").strip()


def _memories_text(evidence: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"[{e.get('kind')} {e.get('id')}{', ' + e['time'] if e.get('time') else ''}] {str(e.get('text', ''))[:400]}"
        for e in evidence
    )


# -- nodes ------------------------------------------------------------------------------------------


def _last_user_message(state: ChatState) -> str:
    for message in reversed(state.get("messages", [])):
        if isinstance(message, HumanMessage):
            return message_text(message)
    return ""


def _namespace_of(ctx: ChatContext) -> str:
    """The run's tenant: the context's namespace (or template) resolved against the run's config, never
    anything from the thread's state; ``NamespaceRequiredError`` when the run names none."""
    return run_namespace(ctx.namespace)


RECALL_WITHOUT_MODEL = frozenset({"rerank", "dense", "bm25"})
"""Strategies that only retrieve before their responder: in the chatbot they recall without the model (the reply
is the turn's one LLM call; their responder's answer would be written twice)."""


def _recall_step(args: dict[str, Any]) -> Any:
    return strategy_answer(
        args["strategy"], args["question"], args["namespace"], resources=args["resources"], policy=args["policy"]
    )


def _thread_tenant(state: ChatState, namespace: str) -> str:
    """The thread's tenant fingerprint; ``ThreadTenantError`` when the thread belongs to another tenant."""
    key = tenant_key(namespace)
    recorded = state.get("tenant_key")
    if recorded and recorded != key:
        raise ThreadTenantError(
            "this thread belongs to another tenant: start a new thread (a thread is bound to "
            "the tenant of its first run)"
        )
    return key


def recall(state: ChatState, runtime: Runtime[ChatContext]) -> dict[str, Any]:
    """Recall what memory holds about the last user message through the run's strategy (after checking that
    the thread belongs to the run's tenant)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    if ctx.strategy not in STRATEGIES:
        raise ValueError(f"unknown recall strategy {ctx.strategy!r}; choose one of {sorted(STRATEGIES)}")
    namespace = _namespace_of(ctx)
    key = _thread_tenant(state, namespace)
    policy = _policy(ctx, res)
    message = check_message(_last_user_message(state), res.settings, where="the chatbot's message")
    empty = {
        "evidence": [],
        "recall": {"strategy": ctx.strategy, "namespace": namespace, "answer": None},
        "cost": Cost().model_dump(),
        "fallbacks": [],
        "memory_write": {},
        "tenant_key": key,
    }
    if ctx.recall and message:
        wait_for_queued_turns(namespace)  # turns of this namespace queued in this process are recalled too
    if not ctx.recall or not message or not res.store.has_namespace(namespace):
        return empty
    question = recall_query(message, res.settings)  # a long message recalls with its end, within the question limit
    recall_policy = "heuristic" if ctx.strategy in RECALL_WITHOUT_MODEL else policy
    result = _internal(
        _recall_step,
        {
            "strategy": ctx.strategy,
            "question": question,
            "namespace": namespace,
            "resources": res,
            "policy": recall_policy,
        },
        "recall_strategy",
    )
    cited = list(result.details.get("cited_event_ids", [])) + list(result.details.get("cited_turn_ids", []))
    return {
        "evidence": [e.model_dump(mode="json") for e in result.evidence[: ctx.evidence_shown]],
        "recall": {
            "strategy": ctx.strategy,
            "namespace": namespace,
            "answer": result.answer,
            "cited": cited,
            "llm_calls": result.cost.llm_calls,
            "steps": result.steps,
        },
        "cost": result.cost.model_dump(),
        "fallbacks": [f.model_dump() for f in result.fallbacks],
        "memory_write": {},
        "tenant_key": key,
    }


def respond(state: ChatState, runtime: Runtime[ChatContext]) -> dict[str, Any]:
    """Answer the last message from the recent history and the recalled memories (extractive without a model).

    The model's reply is plain text: in ``stream_mode="messages"`` its tokens stream as they come.
    """
    ctx, res = _ctx(runtime), resources_of(runtime)
    message = _last_user_message(state)
    recalled = state.get("recall") or {}
    llm = res.llm if _policy(ctx, res) == "llm" else None
    history = [
        m
        for m in state.get("messages", [])
        if isinstance(m, (HumanMessage, AIMessage)) and not getattr(m, "tool_calls", None)
    ]
    outcome = reply_text(
        llm,
        prompt.build_messages(
            history[-ctx.history :],
            _memories_text(state.get("evidence", [])),
            user_name=ctx.user_name,
            recalled_answer=recalled.get("answer"),
        ),
        fallback=lambda: reply_from_recall(message, recalled),
        used_memory_ids=recalled.get("cited", []) if state.get("evidence") else [],
        tags=[f"strategy:{ctx.strategy}", "graph:chatbot"],
        metadata={"prompt_version": prompt.VERSION, "namespace": _namespace_of(ctx)},
    )
    # The streamed chunks carry the model message's id: the reply keeps it, so a messages stream does not
    # repeat the whole reply after its tokens.
    reply = AIMessage(
        content=outcome.output.reply,
        name=ctx.assistant_name,
        id=outcome.message_id if outcome.fallback is None else None,
        response_metadata={
            "used_memory_ids": outcome.output.used_memory_ids,
            "extractive": outcome.fallback is not None,
        },
    )
    fallbacks = list(state.get("fallbacks") or [])
    if outcome.fallback and llm is not None:
        fallbacks.append(outcome.fallback.model_dump())
    cost = Cost.model_validate(state.get("cost") or {}) + outcome.cost
    return {"messages": [reply], "cost": cost.model_dump(), "fallbacks": fallbacks}


def _is_model_reply(message: AnyMessage) -> bool:
    """A reply a model wrote (an extractive reply only repeats memory or acknowledges: never stored)."""
    return (
        isinstance(message, AIMessage)
        and not message.response_metadata.get("extractive")
        and not getattr(message, "tool_calls", None)
        and bool(message_text(message))
    )


def _turn_messages(state: ChatState, ctx: ChatContext) -> list[AnyMessage]:
    """What a turn stores: the last user message and the model's reply to it (``remember_only``: every such
    message of the thread; those already stored are skipped by ``add_messages``)."""
    messages = list(state.get("messages", []))
    if ctx.remember_only:
        return [
            m
            for m in messages
            if (isinstance(m, HumanMessage) and message_text(m)) or (ctx.ingest_replies and _is_model_reply(m))
        ]
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
    if last_user is None or not message_text(messages[last_user]):
        return []
    turn = [messages[last_user]]
    reply = messages[-1] if len(messages) > last_user + 1 else None
    if ctx.ingest_replies and reply is not None and _is_model_reply(reply):
        turn.append(_within_limit(reply, ctx))
    return turn


CLIPPED = " [reply clipped: longer than LOGICMAP_MAX_MESSAGE_CHARS]"


def _within_limit(reply: AnyMessage, ctx: ChatContext) -> AnyMessage:
    """A model's reply as stored: clipped to the message limit (a user's message over it is refused before the
    run; a model's reply is the model's, so the turn is still stored, with the clip said in its text)."""
    res = ctx.resources if isinstance(ctx.resources, Resources) else None
    limit = int((res.settings if res is not None else LogicMapSettings()).max_message_chars)
    text = message_text(reply)
    if len(text) <= limit:
        return reply
    return reply.model_copy(update={"content": text[: max(0, limit - len(CLIPPED))] + CLIPPED})


def _speaker_turns(messages: list[AnyMessage], ctx: ChatContext) -> list[tuple[str, str]]:
    return [(ctx.user_name if isinstance(m, HumanMessage) else ctx.assistant_name, message_text(m)) for m in messages]


def _store_step(args: dict[str, Any]) -> Any:
    ingest, namespace, policy = args["store_turn"], args["namespace"], args["policy"]
    if ingest is not None:  # a caller's own ingest function takes the turn as one session
        return ingest(args["session"], namespace, policy)
    ctx: ChatContext = args["ctx"]
    return add_chat_messages(
        namespace,
        args["messages"],
        resources=args["resources"],
        policy=policy,
        trust_assistant=ctx.trust_assistant,
        user_name=ctx.user_name,
        assistant_name=ctx.assistant_name,
        memory_manager=args.get("memory_manager"),
    )


def remember_mode(ctx: ChatContext) -> str:
    """The run's way of storing its turn, ``auto`` resolved (``ChatContext.remember_mode``)."""
    if ctx.remember_only:
        return "sync"
    if ctx.ingestion is not None:  # a queue the caller gave is how it wants turns stored
        return "background"
    if ctx.remember_mode != "auto":
        return ctx.remember_mode
    return "deferred" if server_mode() and ctx.store_turn is None else "background"


def remember(state: ChatState, runtime: Runtime[ChatContext], config: RunnableConfig) -> dict[str, Any]:
    """Store the finished turn in the tenant's memory once the reply is in the thread: in an ingestion queue
    (background), in a run scheduled for the thread (deferred: the ``schedule_remember`` node sends it), or
    within this run (sync: the run ends with its turn stored, or with ``memory_write`` saying why not)."""
    ctx = _ctx(runtime)
    if ctx.remember_only:  # a run that skips recall still checks that the thread is its tenant's
        _thread_tenant(state, _namespace_of(ctx))
    messages = _turn_messages(state, ctx) if ctx.ingest else []
    if not messages:
        return {"memory_write": {"status": "skipped"}}
    if remember_mode(ctx) == "deferred":
        return {"memory_write": {"namespace": _namespace_of(ctx), "turns": len(messages), "status": "scheduled"}}
    return _store_turn(state, ctx, resources_of(runtime), config, messages, remember_mode(ctx))


def _store_turn(
    state: ChatState, ctx: ChatContext, res: Resources, config: RunnableConfig, messages: list[AnyMessage], mode: str
) -> dict[str, Any]:
    """Store the turn's messages now (sync) or in the ingestion queue (background); the ``memory_write`` update."""
    namespace = _namespace_of(ctx)
    thread_id = str((config.get("configurable") or {}).get("thread_id", "no-thread"))
    session = chat_turn_session(namespace, thread_id, _speaker_turns(messages, ctx), datetime.now())
    record = {"namespace": namespace, "turns": len(messages)}
    args = {
        "store_turn": ctx.store_turn,
        "session": session,
        "messages": messages,
        "namespace": namespace,
        "policy": _policy(ctx, res),
        "resources": res,
        "ctx": ctx,
        "memory_manager": "r2" if ctx.strategy == "r2" else None,
    }  # the r2 strategy recalls R2's memory
    if mode == "background":
        work = ctx.ingestion if ctx.ingestion is not None else default_ingestion_queue()
        work.submit(partial(_store_step, args), label=f"{namespace}/{thread_id}", namespace=namespace)
        return {"memory_write": {**record, "status": "queued"}}
    try:
        report = _internal(_store_step, args, "store_turn")
    except Exception as exc:  # the reply is delivered; the failure is reported in the output
        log.exception("storing the turn of %s/%s failed", namespace, thread_id)
        return {"memory_write": {**record, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:1000]}}
    ingest = getattr(report, "ingest", None) or report  # add_messages' report holds the ingest's
    # The roles of this turn's ingestion that fell back join the turn's fallbacks (its stats record them too).
    stored = [f.model_dump() if hasattr(f, "model_dump") else f for f in getattr(ingest, "fallbacks", None) or []]
    fallbacks = {"fallbacks": [*(state.get("fallbacks") or []), *stored]} if stored else {}
    spent = getattr(ingest, "cost", None)
    sessions = getattr(report, "parts", None) or [session.session_id]
    record = {**record, "session_id": sessions[-1] if sessions else None}
    if not isinstance(spent, Cost):
        return {"memory_write": {**record, "status": "stored"}, **fallbacks}
    cost = Cost.model_validate(state.get("cost") or {}) + spent
    return {
        "memory_write": {**record, "status": "stored", "llm_calls": spent.llm_calls},
        "cost": cost.model_dump(),
        **fallbacks,
    }


_SERVER_KEYS = (
    "thread_id",
    "run_id",
    "assistant_id",
    "graph_id",
    "checkpoint_id",
    "checkpoint_ns",
    "checkpoint_map",
    "remember_only",
    "remember_mode",
    "remember_after_s",
)


async def schedule_remember(state: ChatState, runtime: Runtime[ChatContext], config: RunnableConfig) -> dict[str, Any]:
    """On the API server: schedule the run that stores this turn, as LangGraph's memory template does: the same
    assistant on the same thread (so the same tenant, through the same checks), ``remember_only``, enqueued
    behind any later turn's run, ``remember_after_s`` seconds from now. A run that cannot schedule one (outside
    the API server, or no thread: a stateless run) stores the turn itself."""
    from langgraph_sdk import get_client

    ctx = _ctx(runtime)
    configurable = dict(config.get("configurable") or {})
    thread_id, assistant_id = configurable.get("thread_id"), configurable.get("assistant_id")
    if not server_mode() or not thread_id or not assistant_id:  # nothing to schedule on: store the turn now
        return await run_blocking(store_unscheduled, state, runtime, config)
    forwarded = {
        k: v
        for k, v in configurable.items()
        if k not in _SERVER_KEYS and not k.startswith(("__", "langgraph_")) and _plain(v)
    }
    try:
        run = await get_client().runs.create(
            thread_id,
            assistant_id,
            input={"messages": []},
            multitask_strategy="enqueue",
            after_seconds=max(0, int(ctx.remember_after_s)) or None,
            config={"configurable": {**forwarded, "remember_only": True}},
        )
    except Exception:  # a stateless run has no thread to come back to: store the turn now
        log.warning(
            "scheduling the memory run of thread %s failed; storing the turn within this run", thread_id, exc_info=True
        )
        return await run_blocking(store_unscheduled, state, runtime, config)
    return {"memory_write": {**state.get("memory_write", {}), "status": "scheduled", "run_id": run.get("run_id")}}


def store_unscheduled(state: ChatState, runtime: Runtime[ChatContext], config: RunnableConfig) -> dict[str, Any]:
    """A deferred turn no run is scheduled for, stored within this run: outside the API server, in a stateless
    run, and in a synchronous run (``invoke``: the server's client is async)."""
    ctx = _ctx(runtime)
    return _store_turn(state, ctx, resources_of(runtime), config, _turn_messages(state, ctx), "sync")


def _store_now(state: ChatState, config: RunnableConfig) -> dict[str, Any]:
    return store_unscheduled(state, get_runtime(ChatContext), config)


async def _schedule(state: ChatState, config: RunnableConfig) -> dict[str, Any]:
    return await schedule_remember(state, get_runtime(ChatContext), config)


def _schedule_remember_node() -> RunnableLambda[ChatState, dict[str, Any]]:
    """The ``schedule_remember`` node for ``invoke`` and ``ainvoke`` alike: LangGraph runs a coroutine node only
    through the async API (``invoke`` raised ``TypeError: No synchronous function provided``)."""
    return RunnableLambda(_store_now, afunc=_schedule, name="schedule_remember")


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def after_remember(state: ChatState, runtime: Runtime[ChatContext]) -> Literal["schedule_remember", "__end__"]:
    """Schedule the deferred write when ``remember`` left the turn for it."""
    return "schedule_remember" if (state.get("memory_write") or {}).get("status") == "scheduled" else "__end__"


def route_start(state: ChatState, runtime: Runtime[ChatContext]) -> Literal["recall", "remember"]:
    """A scheduled memory run (``remember_only``) stores the thread's turns; any other run recalls first."""
    return "remember" if _ctx(runtime).remember_only else "recall"


def after_recall(state: ChatState, runtime: Runtime[ChatContext]) -> Literal["respond", "remember"]:
    """Reply, unless the run is recall-only (``respond=False``)."""
    return "respond" if _ctx(runtime).respond else "remember"


# -- the graph --------------------------------------------------------------------------------------


def _runtime_config_node(node: Callable[[ChatState, Runtime[ChatContext], RunnableConfig], Any]) -> Callable[..., Any]:
    """``node`` as ``add_node`` takes it: LangGraph injects ``runtime`` and ``config`` by parameter name, but its node
    protocols have no (state, runtime, config) form; the signature is checked here instead."""
    return node


def build_chatbot_graph() -> TracedStateGraph[ChatState, ChatContext, ChatInput, ChatOutput]:
    """The chatbot ``StateGraph`` (uncompiled): recall -> respond -> remember (recall -> remember when the
    run is recall-only; -> schedule_remember on the API server; a scheduled ``remember_only`` run goes straight
    to remember). Resources, the ingest function and an optional background queue come from the
    run's ``ChatContext``."""
    builder: TracedStateGraph[ChatState, ChatContext, ChatInput, ChatOutput] = TracedStateGraph(
        ChatState, input_schema=ChatInput, output_schema=ChatOutput, context_schema=ChatContext, trace_name="chatbot"
    )  # however compiled: one named, tagged root run with its cost
    builder.add_node("recall", recall)
    builder.add_node("respond", respond)
    builder.add_node("remember", _runtime_config_node(remember))
    builder.add_node("schedule_remember", _schedule_remember_node())
    builder.add_conditional_edges(START, route_start, ["recall", "remember"])
    builder.add_conditional_edges("recall", after_recall, ["respond", "remember"])
    builder.add_edge("respond", "remember")
    builder.add_conditional_edges("remember", after_remember, ["schedule_remember", END])
    builder.add_edge("schedule_remember", END)
    return builder


builder = build_chatbot_graph()
graph = builder.compile(name="chatbot")
