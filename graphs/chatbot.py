"""The drop-in chatbot: a messages graph that recalls long-term memory, answers, and queues each turn for ingestion.

Recall uses a strategy chosen per run (``ChatContext.strategy``: compass, goalmem, reconstruct, dense...);
ingestion runs on a background queue, so the reply never waits for it. Studio loads ``graph``.

Two ways to drop it into someone else's chatbot
------------------------------------------------

1. In process, as a subgraph or a plain runnable. Its state shares the ``messages`` key of
   ``MessagesState``, so it can be a node of any messages graph. What it runs against travels in the
   run's ``ChatContext``: ``resources`` (store, embedder, chat model; unset = the process-wide defaults
   from ``LOGICMAP_*`` settings), ``ingestion`` (the queue finished turns are stored on; unset = the
   process-wide one, drained by ``flush_ingestion()``) and ``store_turn`` (how a turn is stored)::

       from langgraph.checkpoint.memory import InMemorySaver
       from langgraph.graph import START, MessagesState, StateGraph
       from logicmap.graphs.chatbot import ChatContext, IngestionQueue, build_chatbot_graph
       from logicmap.graphs.resources import Resources

       resources = Resources()                                        # or Resources(llm_=your_model, ...)
       memory_bot = build_chatbot_graph().compile()
       parent = StateGraph(MessagesState)
       parent.add_node("memory_bot", memory_bot)                      # a subgraph node
       parent.add_edge(START, "memory_bot")
       app = parent.compile(checkpointer=InMemorySaver())
       app.invoke({"messages": [("user", "Where does Maya live now?")]},
                  {"configurable": {"thread_id": "t1"}},
                  context=ChatContext(namespace="alice", strategy="reconstruct", resources=resources))

       # or on its own, with one checkpointer thread per conversation and your own ingestion queue:
       work = IngestionQueue()
       bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
       bot.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}},
                  context=ChatContext(namespace="alice", resources=resources, ingestion=work))
       work.flush()                                                   # wait until the turn is stored

2. Out of process, as a ``RemoteGraph`` against a LangGraph server (``langgraph dev --no-reload
   --port 2025`` in ``studio/``, whose langgraph.json maps ``"chatbot"`` to ``logicmap.graphs.chatbot:graph``;
   the server supplies persistence, and its resources come from its ``LOGICMAP_*`` settings). The remote
   graph is a runnable too, so it can also be a node::

       import uuid
       from langgraph.pregel.remote import RemoteGraph

       remote = RemoteGraph("chatbot", url="http://127.0.0.1:2025")
       config = {"configurable": {"thread_id": str(uuid.uuid4())}}   # the server creates the thread
       out = remote.invoke({"messages": [{"role": "user", "content": "Where does Maya live now?"}]},
                           config=config, context={"namespace": "alice", "strategy": "reconstruct"})
       print(out["messages"][-1]["content"], out["evidence"])
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.runtime import Runtime
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from logicmap.agents.base import Cost, run_role
from logicmap.agents.provider import ProviderError, run_scope
from logicmap.graphs.resources import Resources, ResourcesField, resources_field, resources_of, run_context
from logicmap.graphs.strategies import STRATEGIES
from logicmap.graphs.strategies import answer as strategy_answer
from logicmap.memory.loaders import Conversation, RawTurn, Session
from logicmap.memory.records import stable_hash, validate_namespace
from logicmap.memory.text import is_no_answer, printable
from logicmap.prompts import chat as prompt
from logicmap.prompts.chat import ChatReply

__all__ = [
    "ChatContext",
    "ChatState",
    "IngestionQueue",
    "TurnIngest",
    "build_chatbot_graph",
    "builder",
    "chat_turn_session",
    "default_ingestion_queue",
    "extractive_reply",
    "flush_ingestion",
    "graph",
    "ingest_session",
    "ingestion_queue",
    "queue_turn",
    "recall",
    "respond",
    "run_chat",
    "session_ingester",
]

log = logging.getLogger(__name__)

TurnIngest = Callable[[Session, str, str], Any]
"""Stores a finished chat turn: ``store_turn(session, namespace, policy) -> report`` (``ChatContext.store_turn``)."""

NOTHING_RECALLED = "I don't have anything in memory about that yet."
_QUESTION_STARTS = ("what", "when", "where", "who", "whom", "whose", "which", "why", "how", "do ", "does", "did",
                    "is ", "are ", "was", "were", "can", "could", "should", "would", "will", "have", "has", "tell me",
                    "remind me", "remember")


@dataclass
class ChatContext:
    """Per-run settings of the chatbot: whose memory, how to recall it, what to ingest."""

    namespace: str = "default"
    strategy: str = "reconstruct"
    policy: Literal["llm", "heuristic"] = "llm"
    user_name: str = "user"
    assistant_name: str = "assistant"
    recall: bool = True
    ingest: bool = True
    ingest_replies: bool = True
    history: int = 12
    evidence_shown: int = 8
    ingestion: SkipJsonSchema[Any] = field(default=None, metadata={
        "description": "The IngestionQueue finished turns are stored on (Python callers only); "
                       "unset = the process-wide queue (flush_ingestion() waits for it)."})
    store_turn: SkipJsonSchema[Any] = field(default=None, metadata={
        "description": "store_turn(session, namespace, policy) stores a finished turn (Python callers only); "
                       "unset = the ingest graph on this run's resources."})
    resources: ResourcesField = resources_field()


class ChatState(TypedDict, total=False):
    """Thread state. Besides the messages, plain JSON values only (checkpointers and servers store them as is).

    The tenant is not part of it: whose memory a run reads and writes comes from the run's ``ChatContext`` only,
    so an input (or a parent graph's state) cannot name another tenant, and nothing about it sticks to a thread.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    evidence: list[dict[str, Any]]
    recall: dict[str, Any]
    turn_cost: dict[str, Any]
    fallbacks: list[dict[str, Any]]


def _ctx(runtime: Runtime[ChatContext] | None) -> ChatContext:
    return run_context(runtime, ChatContext)


# -- background ingestion ---------------------------------------------------------------------------


class IngestionQueue:
    """Runs ingestion jobs one at a time on a daemon thread, so a reply never waits for its turn to be stored.

    ``flush`` waits until every submitted job has finished (tests, and the CLI before it exits).
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
    # A turn still being written when the interpreter shuts down would be lost (or crash the store's
    # native threads): give queued ingestion a bounded chance to finish.
    for work in list(_queues):
        work.flush(timeout=60)


_default_queue = IngestionQueue()


def default_ingestion_queue() -> IngestionQueue:
    return _default_queue


def ingestion_queue(ctx: ChatContext) -> IngestionQueue:
    """The queue a run's turns are stored on: the context's ``ingestion``, else the process-wide queue."""
    return ctx.ingestion if ctx.ingestion is not None else _default_queue


def flush_ingestion(timeout: float | None = None) -> bool:
    """Wait for the process-wide ingestion queue to drain."""
    return _default_queue.flush(timeout)


def ingest_session(session: Session, namespace: str, *, resources: Resources | None = None, policy: str = "llm") -> Any:
    """Store one session in a namespace through the ingest graph (its report)."""
    from logicmap.graphs.ingest import ingest_conversation

    conversation = Conversation(conversation_id=namespace, sessions=[session],
                                speakers=sorted({t.speaker for t in session.turns}))
    return ingest_conversation(conversation, namespace, resources=resources, policy=policy,  # type: ignore[arg-type]
                               source="chat")


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
    """The run's tenant: the context's namespace, never anything from the thread's state."""
    return validate_namespace(ctx.namespace)


def _ingest_job(ingest: TurnIngest | None, resources: Resources, session: Session, namespace: str,
                policy: str) -> Any:
    """One queued ingestion job: the context's ``ingest`` function, else the ingest graph on the run's resources."""
    if ingest is not None:
        return ingest(session, namespace, policy)
    return ingest_session(session, namespace, resources=resources, policy=policy)


def recall(state: ChatState, runtime: Runtime[ChatContext]) -> dict[str, Any]:
    """Recall what memory holds about the last user message through the run's strategy."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    if ctx.strategy not in STRATEGIES:
        raise ValueError(f"unknown recall strategy {ctx.strategy!r}; choose one of {sorted(STRATEGIES)}")
    namespace = _namespace_of(ctx)
    message = _last_user_message(state)
    empty = {"evidence": [], "recall": {"strategy": ctx.strategy, "namespace": namespace, "answer": None},
             "turn_cost": Cost().model_dump(), "fallbacks": []}
    if not ctx.recall or not message or not res.store.has_namespace(namespace):
        return empty
    result = strategy_answer(ctx.strategy, message, namespace, resources=res, policy=ctx.policy)
    cited = list(result.details.get("cited_event_ids", [])) + list(result.details.get("cited_turn_ids", []))
    return {
        "evidence": [e.model_dump(mode="json") for e in result.evidence[: ctx.evidence_shown]],
        "recall": {"strategy": ctx.strategy, "namespace": namespace, "answer": result.answer, "cited": cited,
                   "llm_calls": result.cost.llm_calls, "steps": result.steps},
        "turn_cost": result.cost.model_dump(),
        "fallbacks": [f.model_dump() for f in result.fallbacks],
    }


def respond(state: ChatState, runtime: Runtime[ChatContext]) -> dict[str, Any]:
    """Answer the last message from the recent history and the recalled memories (extractive without a model)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    message = _last_user_message(state)
    recalled = state.get("recall") or {}
    llm = res.llm if ctx.policy == "llm" else None
    history = [m for m in state.get("messages", [])
               if isinstance(m, (HumanMessage, AIMessage)) and not getattr(m, "tool_calls", None)]
    outcome = run_role(
        llm,
        role="chat_responder",
        messages=prompt.build_messages(history[-ctx.history:], _memories_text(state.get("evidence", [])),
                                       user_name=ctx.user_name, recalled_answer=recalled.get("answer")),
        schema=ChatReply,
        validate=lambda r: [] if r.reply.strip() else ["the reply is empty"],
        fallback=lambda: extractive_reply(message, recalled),
        method=res.method,
        tags=[f"strategy:{ctx.strategy}", "graph:chatbot"],
        metadata={"prompt_version": prompt.VERSION, "namespace": _namespace_of(ctx)},
    )
    reply = AIMessage(content=outcome.output.reply, name=ctx.assistant_name,
                      response_metadata={"used_memory_ids": outcome.output.used_memory_ids,
                                         "extractive": outcome.fallback is not None})
    fallbacks = list(state.get("fallbacks") or [])
    if outcome.fallback and llm is not None:
        fallbacks.append(outcome.fallback.model_dump())
    cost = Cost.model_validate(state.get("turn_cost") or {}) + outcome.cost
    return {"messages": [reply], "turn_cost": cost.model_dump(), "fallbacks": fallbacks}


def queue_turn(state: ChatState, runtime: Runtime[ChatContext], config: RunnableConfig) -> dict[str, Any]:
    """Queue the finished turn for ingestion on the context's queue (the reply does not wait for it)."""
    ctx = _ctx(runtime)
    if not ctx.ingest:
        return {}
    messages = state.get("messages", [])
    message = _last_user_message(state)
    reply = ""
    if messages and isinstance(messages[-1], AIMessage):
        # An extractive reply only repeats memory or acknowledges: storing it would echo memory back.
        reply = "" if messages[-1].response_metadata.get("extractive") else _text(messages[-1])
    if not message:
        return {}
    turns = [(ctx.user_name, message)]
    if ctx.ingest_replies and reply:
        turns.append((ctx.assistant_name, reply))
    namespace = _namespace_of(ctx)
    thread_id = str((config.get("configurable") or {}).get("thread_id", "no-thread"))
    session = chat_turn_session(namespace, thread_id, turns, datetime.now())
    job = partial(_ingest_job, ctx.store_turn, resources_of(runtime), session, namespace, ctx.policy)
    ingestion_queue(ctx).submit(job, label=f"{namespace}/{session.session_id}")
    return {}


# -- the graph --------------------------------------------------------------------------------------


def build_chatbot_graph() -> StateGraph:
    """The chatbot ``StateGraph`` (uncompiled): recall -> respond -> queue the turn for ingestion.

    Resources, the ingestion queue and the ingest function come from the run's ``ChatContext``.
    """
    builder = StateGraph(ChatState, context_schema=ChatContext)
    builder.add_node("recall", recall)
    builder.add_node("respond", respond)
    builder.add_node("queue_turn", queue_turn)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "respond")
    builder.add_edge("respond", "queue_turn")
    builder.add_edge("queue_turn", END)
    return builder


def run_chat(
    resources: Resources,
    namespace: str,
    *,
    strategy: str = "reconstruct",
    policy: Literal["llm", "heuristic"] = "llm",
    user_name: str = "user",
    thread_id: str | None = None,
    input_fn: Callable[[str], str] | None = None,
    output: Callable[[str], None] = print,
) -> int:
    """The interactive loop of ``logicmap chat``: ``/evidence`` shows what the last answer recalled, ``/quit`` ends.

    Turns are stored in the background while you chat; on exit the loop waits until they are stored.
    """
    import uuid

    from langgraph.checkpoint.memory import InMemorySaver

    validate_namespace(namespace)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown recall strategy {strategy!r}; choose one of {sorted(STRATEGIES)}")
    read = input_fn or input
    work = IngestionQueue()
    bot = builder.compile(checkpointer=InMemorySaver())
    context = ChatContext(namespace=namespace, strategy=strategy, policy=policy, user_name=user_name,
                          ingestion=work, resources=resources)
    config = {"configurable": {"thread_id": thread_id or str(uuid.uuid4())}}
    known = resources.store.has_namespace(namespace)
    output(f"chatting with the memory of {namespace!r} ({'existing' if known else 'new'}; recall: {strategy}, "
           f"policy: {policy}). Commands: /evidence, /quit")
    last: dict[str, Any] = {}
    while True:
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
        elif text.startswith("/"):
            output("commands: /evidence (what the last answer recalled), /retry (store failed turns again), /quit")
        else:
            last = _chat_turn(bot, text, config, context, output) or last
    if work.pending:
        output(f"(storing {work.pending} turn(s) in memory...)")
    work.flush()
    for label, error in work.errors:
        output(printable(f"warning: could not store {label}: {error}", one_line=True))
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
    # Continuation lines indented: a recalled or generated text cannot forge a "you>" line.
    output("bot> " + printable(_text(last["messages"][-1])).replace("\n", "\n     "))
    return last


def _show_evidence(last: dict[str, Any], output: Callable[[str], None]) -> None:
    """``/evidence``: what the last answer recalled, and by which strategy at what cost."""
    recalled = last.get("recall") or {}
    evidence = last.get("evidence") or []
    if not evidence:
        output("(nothing recalled for the last message)")
        return
    cost = last.get("turn_cost") or {}
    output(printable(f"recalled by {recalled.get('strategy')} ({cost.get('llm_calls', 0)} LLM calls): "
                     f"{recalled.get('answer')}", one_line=True))
    for item in evidence:
        output(printable(f"  [{item.get('kind')} {item.get('id')}] {str(item.get('text', ''))[:200]}", one_line=True))

builder = build_chatbot_graph()
graph = builder.compile(name="chatbot")
