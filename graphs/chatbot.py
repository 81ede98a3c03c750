"""The drop-in chatbot: a messages graph that recalls long-term memory, answers, and remembers each turn.

recall -> respond -> remember. Recall uses a strategy chosen per run (``ChatContext.strategy``: compass,
goalmem, reconstruct, dense...); the reply is plain text whose tokens stream in ``stream_mode="messages"``
(every internal LLM call, in recall and in ingestion, is tagged ``nostream``); ``remember`` stores the turn
within the run, after the reply, so a finished run has stored its turn (or says in ``memory_write`` why it
could not). ``respond=False`` makes it a recall-only step: the evidence and memory's answer land in the
output for an application that answers with its own model. Studio loads ``graph``.

Whose memory: the run's ``ChatContext.namespace``, a name or a template such as ``"{user_id}"`` filled from
``config["configurable"]``; unset = ``config["configurable"]["namespace"]``. A run that names none fails with
``NamespaceRequiredError``; there is no default tenant.

Two ways to drop it into someone else's chatbot
------------------------------------------------

1. In process, as a subgraph or a plain runnable. Its state shares the ``messages`` key of
   ``MessagesState``, so it can be a node of any messages graph. What it runs against travels in the
   run's ``ChatContext``: ``resources`` (store, embedder, chat model; unset = the process-wide defaults
   from ``LOGICMAP_*`` settings), ``store_turn`` (how a turn is stored) and ``ingestion`` (an
   ``IngestionQueue`` to store turns in the background instead, for interactive loops that flush on exit)::

       from langgraph.checkpoint.memory import InMemorySaver
       from langgraph.graph import START, MessagesState, StateGraph
       from logicmap.graphs.chatbot import ChatContext, build_chatbot_graph
       from logicmap.graphs.resources import Resources

       resources = Resources()                                        # or Resources(llm_=your_model, ...)
       parent = StateGraph(MessagesState)
       parent.add_node("memory_bot", build_chatbot_graph().compile())  # a subgraph node
       parent.add_edge(START, "memory_bot")
       app = parent.compile(checkpointer=InMemorySaver())
       app.invoke({"messages": [("user", "Where does Maya live now?")]},
                  {"configurable": {"thread_id": "t1", "user_id": "alice"}},
                  context=ChatContext(namespace="{user_id}", strategy="reconstruct", resources=resources))

2. Out of process, against a LangGraph server (``langgraph dev --no-reload --port 2025`` in ``studio/``,
   whose langgraph.json maps ``"chatbot"`` to ``logicmap.graphs.chatbot:graph``; the server supplies
   persistence, and its resources come from its ``LOGICMAP_*`` settings). ``RemoteChatbot`` is a
   ``RemoteGraph`` that resolves the tenant from the caller's config on every call and sends it along, so
   as a node of a parent graph (which forwards its ``configurable`` but not its context) the tenant named
   by the parent's config always arrives; a call that names none fails before any request::

       import uuid
       from logicmap.graphs.chatbot import RemoteChatbot

       remote = RemoteChatbot(url="http://127.0.0.1:2025", namespace="{user_id}",
                              settings={"strategy": "reconstruct"})
       parent = StateGraph(MessagesState)
       parent.add_node("memory_bot", remote)
       parent.add_edge(START, "memory_bot")
       app = parent.compile(checkpointer=InMemorySaver())
       config = {"configurable": {"thread_id": str(uuid.uuid4()), "user_id": "alice"}}  # server thread ids are UUIDs
       out = app.invoke({"messages": [("user", "Where does Maya live now?")]}, config)

   A plain ``RemoteGraph("chatbot", url=...)`` works too when the config names the tenant itself
   (``configurable={"namespace": "alice", ...}``); with neither, the server's run fails, it never writes to a
   default namespace.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.pregel.remote import RemoteGraph
from langgraph.runtime import Runtime
from pydantic import ConfigDict, with_config
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from logicmap.agents.base import Cost
from logicmap.agents.chat_responder import reply_text
from logicmap.agents.provider import ProviderError, run_scope
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
from logicmap.memory.input_limits import InputTooLargeError, check_message, recall_query
from logicmap.memory.loaders import Conversation, RawTurn, Session
from logicmap.memory.records import stable_hash, validate_namespace
from logicmap.memory.tenancy import ThreadTenantError, resolve_namespace, tenant_key
from logicmap.memory.text import is_no_answer, printable
from logicmap.prompts import chat as prompt
from logicmap.prompts.chat import ChatReply

__all__ = [
    "ChatContext",
    "ChatInput",
    "ChatOutput",
    "ChatState",
    "IngestionQueue",
    "RemoteChatbot",
    "StrategyName",
    "TurnIngest",
    "after_recall",
    "build_chatbot_graph",
    "builder",
    "chat_turn_session",
    "extractive_reply",
    "graph",
    "ingest_session",
    "recall",
    "remember",
    "respond",
    "run_chat",
    "session_ingester",
]

log = logging.getLogger(__name__)

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


# -- background ingestion (interactive loops) -------------------------------------------------------


class IngestionQueue:
    """Runs ingestion jobs one at a time on a daemon thread, so an interactive reply never waits for its turn.

    For loops that own their process (``logicmap chat``): ``flush`` waits until every submitted job has
    finished, and ``errors`` holds the failures. A graph run without one stores its turn within the run.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[str, Callable[[], Any]]] = queue.Queue()
        self._cond = threading.Condition()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self.completed = 0
        self.errors: list[tuple[str, str]] = []
        self.failed: list[tuple[str, Callable[[], Any]]] = []
        _queues.add(self)

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def submit(self, job: Callable[[], Any], label: str = "") -> None:
        with self._cond:
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="logicmap-ingest", daemon=True)
                self._thread.start()
        self._jobs.put((label, job))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the queued jobs; ``False`` if some are still running after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout=timeout)

    def retry_failed(self) -> int:
        """Queue the failed jobs again (after a provider failure is fixed); how many were queued."""
        with self._cond:
            failed, self.failed = self.failed, []
            self.errors = []
        for label, job in failed:
            self.submit(job, label)
        return len(failed)

    def _work(self) -> None:
        while True:
            label, job = self._jobs.get()
            try:
                job()
            except Exception as exc:  # noqa: BLE001 - a failed ingestion is recorded; the chat goes on
                log.exception("ingestion of %s failed", label)
                self.errors.append((label, f"{type(exc).__name__}: {exc}"))
                self.failed.append((label, job))  # nothing of it was committed: ``retry_failed`` stores it again
            finally:
                with self._cond:
                    self._pending -= 1
                    self.completed += 1
                    self._cond.notify_all()


_queues: weakref.WeakSet[IngestionQueue] = weakref.WeakSet()


@atexit.register
def _drain_at_exit() -> None:
    # A turn still queued when the interpreter shuts down would be lost: give it a bounded chance to finish.
    for work in list(_queues):
        work.flush(timeout=60)


def ingest_session(session: Session, namespace: str, *, resources: Resources | None = None, policy: str = "llm",
                   memory_manager: str | None = None) -> Any:
    """Store one session in a namespace through the ingest graph (its report); ``memory_manager="r2"`` also
    lets the Memory-R2 manager maintain the namespace's R2 fact memory (what the ``r2`` strategy reads)."""
    from logicmap.graphs.ingest import ingest_conversation

    conversation = Conversation(conversation_id=namespace, sessions=[session],
                                speakers=sorted({t.speaker for t in session.turns}))
    return ingest_conversation(conversation, namespace, resources=resources, policy=policy,  # type: ignore[arg-type]
                               source="chat", append=True, memory_manager=memory_manager)  # type: ignore[arg-type]


def session_ingester(resources: Resources | None = None, policy: str = "llm") -> Callable[[Session, str], Any]:
    """An ``ingest(session, namespace)`` callable for ``tools.create_remember_tool`` and the toolkit."""
    return partial(ingest_session, resources=resources, policy=policy)


def chat_turn_session(
    namespace: str, thread_id: str, turns: list[tuple[str, str]], when: datetime
) -> Session:
    """A finished chat turn as a session of ``(speaker, text)`` turns, with ids derived from its content."""
    session_id = f"chat-{stable_hash(namespace, thread_id, when.isoformat(), *(s + ':' + t for s, t in turns), length=12)}"
    prefix = f"C{stable_hash(session_id, length=8)}"
    raw = [RawTurn(dia_id=f"{prefix}:{i + 1}", speaker=speaker, text=text) for i, (speaker, text) in enumerate(turns)]
    return Session(session_id=session_id, timestamp=when, timestamp_text=when.isoformat(timespec="minutes"), turns=raw)


# -- replies ----------------------------------------------------------------------------------------


def _text(message: BaseMessage) -> str:
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
            return _text(message)
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
        reply = _text(last)
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
    spent = getattr(report, "cost", None)
    if not isinstance(spent, Cost):
        return {"memory_write": {**record, "status": "stored"}}
    cost = Cost.model_validate(state.get("cost") or {}) + spent
    return {"memory_write": {**record, "status": "stored", "llm_calls": spent.llm_calls}, "cost": cost.model_dump()}


def after_recall(state: ChatState, runtime: Runtime[ChatContext]) -> Literal["respond", "remember"]:
    """Reply, unless the run is recall-only (``respond=False``)."""
    return "respond" if _ctx(runtime).respond else "remember"


# -- the graph --------------------------------------------------------------------------------------


def build_chatbot_graph() -> StateGraph:
    """The chatbot ``StateGraph`` (uncompiled): recall -> respond -> remember (recall -> remember when the
    run is recall-only). Resources, the ingest function and an optional background queue come from the
    run's ``ChatContext``."""
    builder = StateGraph(ChatState, input_schema=ChatInput, output_schema=ChatOutput, context_schema=ChatContext)
    builder.add_node("recall", recall)
    builder.add_node("respond", respond)
    builder.add_node("remember", remember)
    builder.add_edge(START, "recall")
    builder.add_conditional_edges("recall", after_recall, ["respond", "remember"])
    builder.add_edge("respond", "remember")
    builder.add_edge("remember", END)
    return builder


# -- the chatbot on a LangGraph server ----------------------------------------------------------------


class RemoteChatbot(RemoteGraph):
    """The chatbot served by a LangGraph server, as a runnable or a node of your own graph.

    On every call it resolves the tenant from the caller's config (``namespace``: a name or a template such
    as ``"{user_id}"``; unset = ``configurable["namespace"]``) and sends it, with ``settings`` (strategy,
    policy...), in the run's ``configurable``, which the server hands to the chatbot's context. A parent
    graph forwards its ``configurable`` to a remote node but not its context, so this is how the parent's
    tenant reaches the server. ``NamespaceRequiredError`` is raised before any request when none is named.
    """

    def __init__(
        self,
        assistant_id: str = "chatbot",
        /,
        *,
        namespace: str | None = None,
        settings: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(assistant_id, **kwargs)
        self.namespace = namespace
        self.settings = dict(settings or {})

    def _tenant_config(self, config: RunnableConfig | None, context: Any) -> RunnableConfig:
        configurable = merge_configs(self.config, config).get("configurable") or {}
        namespace = resolve_namespace(self.namespace, configurable)
        # The server refuses a run that carries both configurable values and a context: send settings one way.
        extra = dict(context) if isinstance(context, dict) else {}
        return merge_configs(config, {"configurable": {**self.settings, **extra, "namespace": namespace}})

    def stream(self, input: Any, config: RunnableConfig | None = None, *, context: Any = None,
               **kwargs: Any) -> Iterator[Any]:  # fmt: skip
        return super().stream(input, self._tenant_config(config, context), **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, *, context: Any = None,
                **kwargs: Any) -> Any:  # fmt: skip
        return super().astream(input, self._tenant_config(config, context), **kwargs)


# -- the interactive loop ---------------------------------------------------------------------------


def run_chat(
    resources: Resources,
    namespace: str,
    *,
    strategy: str = "reconstruct",
    policy: Literal["auto", "llm", "heuristic"] = "auto",
    user_name: str = "user",
    thread_id: str | None = None,
    input_fn: Callable[[str], str] | None = None,
    output: Callable[[str], None] = print,
) -> int:
    """The interactive loop of ``logicmap chat``: ``/evidence`` shows what the last answer recalled, ``/quit`` ends.

    Turns are stored in the background while you chat (a failure is reported at the next prompt); on exit the
    loop waits until they are stored.
    """
    import uuid

    from langgraph.checkpoint.memory import InMemorySaver

    validate_namespace(namespace)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown recall strategy {strategy!r}; choose one of {sorted(STRATEGIES)}")
    read = input_fn or input
    work = IngestionQueue()
    bot = builder.compile(checkpointer=InMemorySaver())
    context = ChatContext(namespace=namespace, strategy=strategy, policy=policy, user_name=user_name,  # type: ignore[arg-type]
                          ingestion=work, resources=resources)
    config = {"configurable": {"thread_id": thread_id or str(uuid.uuid4())}}
    known = resources.store.has_namespace(namespace)
    output(f"chatting with the memory of {namespace!r} ({'existing' if known else 'new'}; recall: {strategy}, "
           f"policy: {policy}). Commands: /evidence, /quit")
    last: dict[str, Any] = {}
    reported = 0
    while True:
        reported = _report_errors(work, reported, output)
        try:
            line = read("you> ")
        except (EOFError, KeyboardInterrupt):
            output("")
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit", "/q"):
            break
        if text == "/evidence":
            _show_evidence(last, output)
        elif text == "/retry":
            output(f"(storing {work.retry_failed()} failed turn(s) again)")
            reported = 0  # the retried turns' errors were cleared: report any new failure afresh
        elif text.startswith("/"):
            output("commands: /evidence (what the last answer recalled), /retry (store failed turns again), /quit")
        else:
            last = _chat_turn(bot, text, config, context, output) or last
    if work.pending:
        output(f"(storing {work.pending} turn(s) in memory...)")
    work.flush()
    _report_errors(work, reported, output)
    return 0


def _chat_turn(bot: Any, text: str, config: dict[str, Any], context: ChatContext,
               output: Callable[[str], None]) -> dict[str, Any] | None:
    """One turn of ``run_chat``: the reply printed, or a provider failure printed as one line (the chat goes on)."""
    settings = context.resources.settings if isinstance(context.resources, Resources) else None
    try:
        with run_scope(settings):
            last = bot.invoke({"messages": [HumanMessage(content=text)]}, config, context=context)
    except ProviderError as exc:
        output(printable(f"error: {exc}; this message was not answered or stored, send it again", one_line=True))
        return None
    except InputTooLargeError as exc:
        output(printable(f"error: {exc}; this message was not answered or stored", one_line=True))
        return None
    # Continuation lines indented: a recalled or generated text cannot forge a "you>" line.
    output("bot> " + printable(_text(last["messages"][-1])).replace("\n", "\n     "))
    return last


def _report_errors(work: IngestionQueue, reported: int, output: Callable[[str], None]) -> int:
    """Print the ingestion failures not reported yet; the new count of reported ones."""
    errors = list(work.errors)
    for label, error in errors[reported:]:
        output(printable(f"warning: could not store {label}: {error}", one_line=True))
    return len(errors)


def _show_evidence(last: dict[str, Any], output: Callable[[str], None]) -> None:
    """``/evidence``: what the last answer recalled, and by which strategy at what cost."""
    recalled = last.get("recall") or {}
    evidence = last.get("evidence") or []
    if not evidence:
        output("(nothing recalled for the last message)")
        return
    cost = last.get("cost") or {}
    output(printable(f"recalled by {recalled.get('strategy')} ({cost.get('llm_calls', 0)} LLM calls): "
                     f"{recalled.get('answer')}", one_line=True))
    for item in evidence:
        output(printable(f"  [{item.get('kind')} {item.get('id')}] {str(item.get('text', ''))[:200]}", one_line=True))


builder = build_chatbot_graph()
graph = builder.compile(name="chatbot")
