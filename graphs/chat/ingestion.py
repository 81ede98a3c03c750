"""The chatbot's ingestion of finished turns: one turn as a session, stored through the ingest graph, in the
background for interactive loops (``IngestionQueue``: a later recall of the namespace in this process waits for
its queued turns, and the queues are drained at exit before the interpreter shuts its thread pools down)."""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 - its exit hook must be registered before this module's
import logging
import queue
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, Literal

from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.memory.records.records import stable_hash

__all__ = [
    "IngestionQueue",
    "default_ingestion_queue",
    "chat_turn_session",
    "ingest_session",
    "session_ingester",
    "wait_for_queued_turns",
]

log = logging.getLogger("logicmap.graphs.chat.chatbot")  # one logger for the chatbot's pieces


# -- background ingestion (interactive loops) -------------------------------------------------------


class IngestionQueue:
    """Runs ingestion jobs one at a time on a daemon thread, so an interactive reply never waits for its turn.

    ``flush`` waits until every submitted job has finished, ``wait_for(namespace)`` until the jobs of one
    namespace have (the chatbot's recall does, so a later turn reads the earlier ones), and ``errors`` holds
    the failures. Every queue is drained when the interpreter exits (``EXIT_DRAIN_S`` at most per queue).
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[str, str | None, Callable[[], Any]]] = queue.Queue()
        self._cond = threading.Condition()
        self._pending = 0
        self._by_namespace: Counter[str] = Counter()
        self._thread: threading.Thread | None = None
        self.completed = 0
        self.errors: list[tuple[str, str]] = []
        self.failed: list[tuple[str, Callable[[], Any]]] = []
        self._failed_namespaces: list[str | None] = []  # the namespace of each failed job, for ``retry_failed``
        _queues.add(self)

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def submit(self, job: Callable[[], Any], label: str = "", namespace: str | None = None) -> None:
        """Queue ``job`` (``namespace``: the memory it writes, which ``wait_for`` waits on)."""
        _register_exit_drain()
        with self._cond:
            self._pending += 1
            if namespace is not None:
                self._by_namespace[namespace] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="logicmap-ingest", daemon=True)
                self._thread.start()
        self._jobs.put((label, namespace, job))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the queued jobs; ``False`` if some are still running after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout=timeout)

    def wait_for(self, namespace: str, timeout: float | None = None) -> bool:
        """Wait for the queued jobs that write ``namespace``; ``False`` if some are still running after
        ``timeout`` seconds (at once ``True`` on the queue's own thread: a job never waits for itself)."""
        if threading.current_thread() is self._thread:
            return True
        with self._cond:
            return self._cond.wait_for(lambda: self._by_namespace[namespace] <= 0, timeout=timeout)

    def retry_failed(self) -> int:
        """Queue the failed jobs again (after a provider failure is fixed); how many were queued."""
        with self._cond:
            failed, self.failed = self.failed, []
            namespaces, self._failed_namespaces = self._failed_namespaces, []
            self.errors = []
        for (label, job), namespace in zip(failed, namespaces, strict=True):
            self.submit(job, label, namespace)
        return len(failed)

    def _work(self) -> None:
        while True:
            label, namespace, job = self._jobs.get()
            try:
                job()
            except Exception as exc:  # a failed ingestion is recorded; the chat goes on
                log.exception("ingestion of %s failed", label)
                self.errors.append((label, f"{type(exc).__name__}: {exc}"))
                self.failed.append((label, job))  # nothing of it was committed: ``retry_failed`` stores it again
                self._failed_namespaces.append(namespace)
            finally:
                with self._cond:
                    self._pending -= 1
                    if namespace is not None:
                        self._by_namespace[namespace] -= 1
                    self.completed += 1
                    self._cond.notify_all()


_queues: weakref.WeakSet[IngestionQueue] = weakref.WeakSet()
_default_queue: IngestionQueue | None = None
_default_lock = threading.Lock()


def default_ingestion_queue() -> IngestionQueue:
    """The process-wide queue the chatbot stores turns with when a run names none (drained at exit)."""
    global _default_queue
    with _default_lock:
        if _default_queue is None:
            _default_queue = IngestionQueue()
        return _default_queue


RECALL_WAIT_S = 30.0
"""How long the chatbot's recall waits for the turns of its namespace still queued in this process."""
EXIT_DRAIN_S = 60.0
"""How long the interpreter's exit waits for each queue's turns (the ones left are logged as not stored)."""


def wait_for_queued_turns(namespace: str, timeout: float = RECALL_WAIT_S) -> bool:
    """Wait until no queue of this process holds a job writing ``namespace`` (read-your-writes for the chatbot's
    recall); ``False`` (logged) when some are still running after ``timeout`` seconds."""
    for work in list(_queues):
        if not work.wait_for(namespace, timeout=timeout):
            log.warning("turns of %s still being stored after %.0f s: recalling without them", namespace, timeout)
            return False
    return True


def _drain_at_exit() -> None:
    # A turn still queued when the interpreter shuts down would be lost: give each queue a bounded time to finish.
    for work in list(_queues):
        if not work.flush(timeout=EXIT_DRAIN_S):
            log.warning("exiting with %d chat turns not stored (still queued after %.0f s)", work.pending, EXIT_DRAIN_S)


_exit_drain_registered = False


def _register_exit_drain() -> None:
    """Drain the queues at exit while thread pools still take work. ``atexit`` runs too late: the interpreter's
    ``threading._shutdown`` first runs the hooks of ``threading._register_atexit``, among them the one of
    ``concurrent.futures`` that makes every ``ThreadPoolExecutor.submit`` raise ("cannot schedule new futures
    after interpreter shutdown"), and the ingest graph runs its nodes on such a pool. Those hooks run last
    registered first, so this one, registered after ``concurrent.futures.thread`` was imported, runs before it."""
    global _exit_drain_registered
    with _default_lock:
        if _exit_drain_registered:
            return
        _exit_drain_registered = True
    register: Callable[[Callable[[], None]], None] | None = getattr(threading, "_register_atexit", None)
    try:
        if register is None:  # not CPython's threading: the best left is atexit
            atexit.register(_drain_at_exit)
        else:
            register(_drain_at_exit)
    except RuntimeError:  # the interpreter is already shutting down: nothing can be drained any more
        log.warning("the interpreter is exiting: a chat turn queued now may not be stored")


def ingest_session(
    session: Session,
    namespace: str,
    *,
    resources: Resources | None = None,
    policy: str = "llm",
    memory_manager: Literal["none", "r2"] | None = None,
) -> Any:
    """Store one session in a namespace through the ingest graph (its report); ``memory_manager="r2"`` also
    lets the Memory-R2 manager maintain the namespace's R2 fact memory (what the ``r2`` strategy reads)."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.runtime.resources import default_resources
    from logicmap.graphs.writes.consolidate import store_sessions

    res = resources or default_resources()
    if res.store.fast_writes and memory_manager in (None, "none"):  # the write path (graphs.consolidate)
        return store_sessions(namespace, [session], resources=res, policy=policy, source="chat")
    conversation = Conversation(
        conversation_id=namespace, sessions=[session], speakers=sorted({t.speaker for t in session.turns})
    )
    return ingest_conversation(
        conversation,
        namespace,
        resources=res,
        policy=policy,  # type: ignore[arg-type]  # a caller's name: the ingest refuses a bad one
        source="chat",
        append=True,
        memory_manager=memory_manager,
    )


def session_ingester(resources: Resources | None = None, policy: str = "llm") -> Callable[[Session, str], Any]:
    """An ``ingest(session, namespace)`` callable for ``tools.create_remember_tool`` and the toolkit."""
    return partial(ingest_session, resources=resources, policy=policy)


def chat_turn_session(namespace: str, thread_id: str, turns: list[tuple[str, str]], when: datetime) -> Session:
    """A finished chat turn as a session of ``(speaker, text)`` turns, with ids derived from its content."""
    session_id = (
        f"chat-{stable_hash(namespace, thread_id, when.isoformat(), *(s + ':' + t for s, t in turns), length=12)}"
    )
    prefix = f"C{stable_hash(session_id, length=8)}"
    raw = [RawTurn(dia_id=f"{prefix}:{i + 1}", speaker=speaker, text=text) for i, (speaker, text) in enumerate(turns)]
    return Session(session_id=session_id, timestamp=when, timestamp_text=when.isoformat(timespec="minutes"), turns=raw)
