"""The chatbot's ingestion of finished turns: one turn as a session, stored through the ingest graph, in the
background for interactive loops (``IngestionQueue``, drained at exit)."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, Literal

from logicmap.graphs.resources import Resources
from logicmap.memory.loaders import Conversation, RawTurn, Session
from logicmap.memory.records import stable_hash

__all__ = [
    "IngestionQueue",
    "default_ingestion_queue",
    "chat_turn_session",
    "ingest_session",
    "session_ingester",
]

log = logging.getLogger("logicmap.graphs.chatbot")  # one logger for the chatbot's pieces


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
_default_queue: IngestionQueue | None = None
_default_lock = threading.Lock()


def default_ingestion_queue() -> IngestionQueue:
    """The process-wide queue the chatbot stores turns with when a run names none (drained at exit)."""
    global _default_queue
    with _default_lock:
        if _default_queue is None:
            _default_queue = IngestionQueue()
        return _default_queue


@atexit.register
def _drain_at_exit() -> None:
    # A turn still queued when the interpreter shuts down would be lost: give it a bounded chance to finish.
    for work in list(_queues):
        work.flush(timeout=60)


def ingest_session(session: Session, namespace: str, *, resources: Resources | None = None,
                   policy: str = "llm", memory_manager: Literal["none", "r2"] | None = None) -> Any:
    """Store one session in a namespace through the ingest graph (its report); ``memory_manager="r2"`` also
    lets the Memory-R2 manager maintain the namespace's R2 fact memory (what the ``r2`` strategy reads)."""
    from logicmap.graphs.ingest import ingest_conversation

    conversation = Conversation(conversation_id=namespace, sessions=[session],
                                speakers=sorted({t.speaker for t in session.turns}))
    return ingest_conversation(conversation, namespace, resources=resources,
                               policy=policy,  # type: ignore[arg-type]  # a caller's name: the ingest refuses a bad one
                               source="chat", append=True, memory_manager=memory_manager)


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
