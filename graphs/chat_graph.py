"""The chatbot graph: recall -> respond -> remember, its context, input/output and state (``graphs.chatbot``
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
from langgraph.runtime import Runtime
from pydantic import ConfigDict, with_config
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from logicmap.agents.base import Cost
from logicmap.agents.chat_responder import reply_text
from logicmap.graphs.chat_ingestion import chat_turn_session, ingest_session
from logicmap.graphs.resources import (
    Resources,
    ResourcesField,
    resolve_policy,
    resources_field,
    resources_of,
    run_context,
    run_namespace,
)
from logicmap.graphs.strategies import STRATEGIES
from logicmap.graphs.strategies import answer as strategy_answer
from logicmap.graphs.tracing import TracedStateGraph
from logicmap.memory.input_limits import check_message, recall_query
from logicmap.memory.loaders import Session
from logicmap.memory.tenancy import ThreadTenantError, tenant_key
from logicmap.memory.text import is_no_answer
from logicmap.prompts import chat as prompt
from logicmap.prompts.chat import ChatReply

__all__ = [
    "ChatContext",
    "ChatInput",
    "ChatOutput",
    "ChatState",
    "StrategyName",
    "TurnIngest",
    "after_recall",
    "build_chatbot_graph",
    "builder",
    "extractive_reply",
    "graph",
    "message_text",
    "recall",
    "remember",
    "respond",
]


log = logging.getLogger("logicmap.graphs.chatbot")  # the logger of all the chatbot's modules

TurnIngest = Callable[[Session, str, str], Any]
"""Stores a finished chat turn: ``store_turn(session, namespace, policy) -> report`` (``ChatContext.store_turn``)."""

StrategyName = Literal[tuple(STRATEGIES)]  # type: ignore[valid-type]  # the registry's names, known at import
"""The recall strategies (``graphs.strategies.STRATEGIES``), a choice list in Studio's form."""

NOTHING_RECALLED = "I don't have anything in memory about that yet."
_QUESTION_STARTS = ("what", "when", "where", "who", "whom", "whose", "which", "why", "how", "do ", "does", "did",
                    "is ", "are ", "was", "were", "can", "could", "should", "would", "will", "have", "has", "tell me",
                    "remind me", "remember")


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass(kw_only=True)
class ChatContext:
    """Per-run settings of the chatbot: whose memory, how to recall it, how to reply, what to remember."""

    namespace: str | None = None
    """The tenant whose memory this run reads and writes: a name, or a template such as '{user_id}' filled from
    config['configurable']; unset = config['configurable']['namespace']. A run that names none fails."""
    strategy: StrategyName = "reconstruct"
    """How memory is recalled for the last user message."""
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
    """Remember the assistant's model-written replies too (extractive replies only echo memory: never stored)."""
    history: int = 12
    """How many recent messages of the thread the responder sees."""
    evidence_shown: int = 8
    """How many recalled items are kept in the output's evidence and shown to the responder."""
    ingestion: SkipJsonSchema[Any] = None
    """Python callers only: an IngestionQueue that stores turns in the background (flush it before exiting);
    unset = the turn is stored within the run."""
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
    """A fingerprint of the tenant this thread belongs to (``memory.tenancy.tenant_key``), set by its first run."""


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


def _is_question(text: str) -> bool:
    lowered = text.strip().lower()
    return lowered.endswith("?") or lowered.startswith(_QUESTION_STARTS)


def extractive_reply(message: str, recall: dict[str, Any] | None) -> ChatReply:
    """The reply without a chat model: memory's answer to a question, an acknowledgement of a statement."""
    answer = (recall or {}).get("answer") or ""
    if _is_question(message):
        if not is_no_answer(answer):
            return ChatReply(reply=f"From memory: {answer}", used_memory_ids=list((recall or {}).get("cited", [])))
        return ChatReply(reply=NOTHING_RECALLED)
    return ChatReply(reply="Noted, I'll remember that.")


def _memories_text(evidence: list[dict[str, Any]]) -> str:
    return "\n".join(f"[{e.get('kind')} {e.get('id')}{', ' + e['time'] if e.get('time') else ''}] {str(e.get('text', ''))[:400]}"
                     for e in evidence)


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


def _recall_step(args: dict[str, Any]) -> Any:
    return strategy_answer(args["strategy"], args["question"], args["namespace"], resources=args["resources"],
                           policy=args["policy"])  # fmt: skip


def _thread_tenant(state: ChatState, namespace: str) -> str:
    """The thread's tenant fingerprint; ``ThreadTenantError`` when the thread belongs to another tenant."""
    key = tenant_key(namespace)
    recorded = state.get("tenant_key")
    if recorded and recorded != key:
        raise ThreadTenantError("this thread belongs to another tenant: start a new thread (a thread is bound to "
                                "the tenant of its first run)")
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
    empty = {"evidence": [], "recall": {"strategy": ctx.strategy, "namespace": namespace, "answer": None},
             "cost": Cost().model_dump(), "fallbacks": [], "memory_write": {}, "tenant_key": key}
    if not ctx.recall or not message or not res.store.has_namespace(namespace):
        return empty
    question = recall_query(message, res.settings)  # a long message recalls with its end, within the question limit
    result = _internal(_recall_step, {"strategy": ctx.strategy, "question": question, "namespace": namespace,
                                      "resources": res, "policy": policy}, "recall_strategy")  # fmt: skip
    cited = list(result.details.get("cited_event_ids", [])) + list(result.details.get("cited_turn_ids", []))
    return {
        "evidence": [e.model_dump(mode="json") for e in result.evidence[: ctx.evidence_shown]],
        "recall": {"strategy": ctx.strategy, "namespace": namespace, "answer": result.answer, "cited": cited,
                   "llm_calls": result.cost.llm_calls, "steps": result.steps},
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
    history = [m for m in state.get("messages", [])
               if isinstance(m, (HumanMessage, AIMessage)) and not getattr(m, "tool_calls", None)]
    outcome = reply_text(
        llm,
        prompt.build_messages(history[-ctx.history:], _memories_text(state.get("evidence", [])),
                              user_name=ctx.user_name, recalled_answer=recalled.get("answer")),
        fallback=lambda: extractive_reply(message, recalled),
        used_memory_ids=recalled.get("cited", []) if state.get("evidence") else [],
        tags=[f"strategy:{ctx.strategy}", "graph:chatbot"],
        metadata={"prompt_version": prompt.VERSION, "namespace": _namespace_of(ctx)},
    )
    # The streamed chunks carry the model message's id: the reply keeps it, so a messages stream does not
    # repeat the whole reply after its tokens.
    reply = AIMessage(content=outcome.output.reply, name=ctx.assistant_name,
                      id=outcome.message_id if outcome.fallback is None else None,
                      response_metadata={"used_memory_ids": outcome.output.used_memory_ids,
                                         "extractive": outcome.fallback is not None})
    fallbacks = list(state.get("fallbacks") or [])
    if outcome.fallback and llm is not None:
        fallbacks.append(outcome.fallback.model_dump())
    cost = Cost.model_validate(state.get("cost") or {}) + outcome.cost
    return {"messages": [reply], "cost": cost.model_dump(), "fallbacks": fallbacks}


def _turns_to_store(state: ChatState, ctx: ChatContext) -> list[tuple[str, str]]:
    """The finished turn as (speaker, text): the user's message, and the reply when a model wrote it."""
    message = _last_user_message(state)
    if not message:
        return []
    messages = state.get("messages", [])
    turns = [(ctx.user_name, message)]
    last = messages[-1] if messages else None
    # An extractive reply only repeats memory or acknowledges: storing it would echo memory back.
    if ctx.ingest_replies and isinstance(last, AIMessage) and not last.response_metadata.get("extractive"):
        reply = message_text(last)
        if reply:
            turns.append((ctx.assistant_name, reply))
    return turns


def _store_step(args: dict[str, Any]) -> Any:
    ingest, session, namespace, policy = args["store_turn"], args["session"], args["namespace"], args["policy"]
    if ingest is not None:
        return ingest(session, namespace, policy)
    return ingest_session(session, namespace, resources=args["resources"], policy=policy,
                          memory_manager=args.get("memory_manager"))


def remember(state: ChatState, runtime: Runtime[ChatContext], config: RunnableConfig) -> dict[str, Any]:
    """Store the finished turn in the tenant's memory, within the run (after the reply, which is already in
    the thread): the run ends with its turn stored, or with ``memory_write`` saying why not."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    turns = _turns_to_store(state, ctx) if ctx.ingest else []
    if not turns:
        return {"memory_write": {"status": "skipped"}}
    namespace = _namespace_of(ctx)
    thread_id = str((config.get("configurable") or {}).get("thread_id", "no-thread"))
    session = chat_turn_session(namespace, thread_id, turns, datetime.now())
    record = {"namespace": namespace, "session_id": session.session_id, "turns": len(turns)}
    args = {"store_turn": ctx.store_turn, "session": session, "namespace": namespace,
            "policy": _policy(ctx, res), "resources": res,
            "memory_manager": "r2" if ctx.strategy == "r2" else None}  # the r2 strategy recalls R2's memory
    if ctx.ingestion is not None:
        ctx.ingestion.submit(partial(_store_step, args), label=f"{namespace}/{session.session_id}")
        return {"memory_write": {**record, "status": "queued"}}
    try:
        report = _internal(_store_step, args, "store_turn")
    except Exception as exc:  # noqa: BLE001 - the reply is delivered; the failure is reported in the output
        log.exception("storing the turn %s/%s failed", namespace, session.session_id)
        return {"memory_write": {**record, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:1000]}}
    # The roles of this turn's ingestion that fell back join the turn's fallbacks (its stats record them too).
    stored = [f.model_dump() if hasattr(f, "model_dump") else f for f in getattr(report, "fallbacks", None) or []]
    fallbacks = {"fallbacks": [*(state.get("fallbacks") or []), *stored]} if stored else {}
    spent = getattr(report, "cost", None)
    if not isinstance(spent, Cost):
        return {"memory_write": {**record, "status": "stored"}, **fallbacks}
    cost = Cost.model_validate(state.get("cost") or {}) + spent
    return {"memory_write": {**record, "status": "stored", "llm_calls": spent.llm_calls}, "cost": cost.model_dump(),
            **fallbacks}


def after_recall(state: ChatState, runtime: Runtime[ChatContext]) -> Literal["respond", "remember"]:
    """Reply, unless the run is recall-only (``respond=False``)."""
    return "respond" if _ctx(runtime).respond else "remember"


# -- the graph --------------------------------------------------------------------------------------


def build_chatbot_graph() -> TracedStateGraph:
    """The chatbot ``StateGraph`` (uncompiled): recall -> respond -> remember (recall -> remember when the
    run is recall-only). Resources, the ingest function and an optional background queue come from the
    run's ``ChatContext``."""
    builder = TracedStateGraph(ChatState, input_schema=ChatInput, output_schema=ChatOutput, context_schema=ChatContext,
                               trace_name="chatbot")  # however compiled: one named, tagged root run with its cost
    builder.add_node("recall", recall)
    builder.add_node("respond", respond)
    builder.add_node("remember", remember)
    builder.add_edge(START, "recall")
    builder.add_conditional_edges("recall", after_recall, ["respond", "remember"])
    builder.add_edge("respond", "remember")
    builder.add_edge("remember", END)
    return builder


builder = build_chatbot_graph()
graph = builder.compile(name="chatbot")
