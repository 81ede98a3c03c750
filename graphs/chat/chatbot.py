"""The drop-in chatbot: a messages graph that recalls long-term memory, answers, and remembers each turn.

recall -> respond -> remember. Recall uses a strategy chosen per run (``ChatContext.strategy``; default rerank,
no LLM call; compass, goalmem, reconstruct... navigate with the model); the reply is plain text whose tokens
stream in ``stream_mode="messages"`` (every internal LLM call, in recall and in ingestion, is tagged
``nostream``); ``remember`` stores the turn after the reply through ``add_messages`` (the user's statements are
memory, a question is the context of its reply, the model's replies are the assistant's and not evidence unless
``trust_assistant``): in an in-process ingestion queue by default, in a run scheduled for the thread on the API
server (``remember_mode="deferred"``), or within the run (``remember_mode="sync"``: a finished run has stored
its turn, or says in ``memory_write`` why it could not). ``respond=False`` makes it a recall-only step: the evidence and memory's answer land in the
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
   ``IngestionQueue`` to store turns in the background, drained at exit; unset = the process-wide one)::

       from langgraph.checkpoint.memory import InMemorySaver
       from langgraph.graph import START, MessagesState, StateGraph
       from logicmap.graphs.chat.chatbot import ChatContext, build_chatbot_graph
       from logicmap.graphs.runtime.resources import Resources

       resources = Resources()                                        # or Resources(llm_=your_model, ...)
       parent = StateGraph(MessagesState)
       parent.add_node("memory_bot", build_chatbot_graph().compile())  # a subgraph node
       parent.add_edge(START, "memory_bot")
       app = parent.compile(checkpointer=InMemorySaver())
       app.invoke({"messages": [("user", "Where does Maya live now?")]},
                  {"configurable": {"thread_id": "t1", "user_id": "alice"}},
                  context=ChatContext(namespace="{user_id}", strategy="reconstruct", resources=resources))

2. Out of process, against a LangGraph server (``langgraph dev --no-reload --port 2025`` in ``studio/``,
   whose langgraph.json maps ``"chatbot"`` to ``logicmap.graphs.chat.chatbot:graph``; the server supplies
   persistence, and its resources come from its ``LOGICMAP_*`` settings). ``RemoteChatbot`` is a
   ``RemoteGraph`` that resolves the tenant from the caller's config on every call and sends it along, so
   as a node of a parent graph (which forwards its ``configurable`` but not its context) the tenant named
   by the parent's config always arrives; a call that names none fails before any request::

       import uuid
       from logicmap.graphs.chat.chatbot import RemoteChatbot

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

from logicmap.graphs.chat.graph import (
    ChatContext,
    ChatInput,
    ChatOutput,
    ChatState,
    StrategyName,
    TurnIngest,
    after_recall,
    after_remember,
    build_chatbot_graph,
    builder,
    graph,
    recall,
    remember,
    remember_mode,
    respond,
    route_start,
    schedule_remember,
    store_unscheduled,
)
from logicmap.graphs.chat.ingestion import (
    IngestionQueue,
    chat_turn_session,
    default_ingestion_queue,
    ingest_session,
    session_ingester,
    wait_for_queued_turns,
)
from logicmap.graphs.chat.messages import MessageFormatError, MessagesReport, aadd_messages, add_messages
from logicmap.graphs.chat.remote import RemoteChatbot
from logicmap.graphs.chat.terminal import run_chat

__all__ = [
    "ChatContext",
    "ChatInput",
    "ChatOutput",
    "ChatState",
    "IngestionQueue",
    "MessageFormatError",
    "MessagesReport",
    "RemoteChatbot",
    "StrategyName",
    "TurnIngest",
    "aadd_messages",
    "add_messages",
    "after_recall",
    "after_remember",
    "build_chatbot_graph",
    "builder",
    "chat_turn_session",
    "default_ingestion_queue",
    "graph",
    "ingest_session",
    "recall",
    "remember",
    "remember_mode",
    "respond",
    "route_start",
    "run_chat",
    "schedule_remember",
    "session_ingester",
    "store_unscheduled",
    "wait_for_queued_turns",
]
