"""The write path: a fast, durable write, and the consolidator that builds the event graph behind it.

``write_sessions`` is what an agent's write costs in its turn: the sessions' turns embedded (one call) and appended
to the store's pending log (``memory.store.pending_log``: one small durable write), visible at once to ``get``,
``search`` and every strategy through the live view (``memory.store.live``), ranked as plain turns. The consolidator
builds them into memory behind it: ``consolidate`` runs the ingest graph (segmentation, relations, fusion, the topic
layer's online rule per event with its re-clustering every T steps, facts, cues; the LLM roles when a model is
configured) on the pending sessions, oldest first, many in one run; each session's commit carries its write's
sequence number, so the namespace's consolidated mark moves in the same generation as the records built from it.
A kill loses nothing (the write is in the log until that commit) and repeats nothing (a write at or below the mark is
never consolidated again); a reader sees a write as a plain turn or consolidated, never half of it.

``Consolidator`` runs ``consolidate`` in a background thread of this process (``LogicMapStore`` starts one);
``logicmap consolidate`` is the same loop as a command (``--watch`` for a deployment's worker). ``flush`` waits for
a namespace to be consolidated; ``pending`` says how far behind it is. A store whose backend keeps no pending log
(``StoragePort.fast_writes`` false: the Chroma server, PostgreSQL) ingests and commits each write at once.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, cast

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, Field

from logicmap.agents.base import Cost, FallbackRecord
from logicmap.graphs.ingest.nodes import IngestReport, SessionReport
from logicmap.graphs.runtime.resources import Resources, default_resources
from logicmap.memory.files.loaders import Conversation, Session
from logicmap.memory.indexes.embeddings import CachedEmbeddings
from logicmap.memory.records.items import STORE_SOURCE
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.store import ChangeSet, GenerationConflict, StoragePort
from logicmap.memory.store.live import latest_entries, pending_turns
from logicmap.memory.store.model import Manifest, PendingHead, PendingWrite, vector_matrix
from logicmap.memory.store.staged import StagedStore

__all__ = [
    "ConsolidationReport",
    "Consolidator",
    "PendingReport",
    "background",
    "consolidate",
    "consolidation_lock",
    "flush",
    "marker_commit",
    "pending",
    "store_sessions",
    "write_sessions",
]

_log = logging.getLogger(__name__)
_LOCKS: dict[tuple[int, str], threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()
_BACKGROUND: dict[int, tuple[StoragePort, Consolidator]] = {}
_REPLACED: dict[
    tuple[int, str], int
] = {}  # (store, namespace) -> replaced values consolidated since its last purge  # the store is held: its id is not reused
DEFAULT_BATCH = 64  # pending sessions one consolidation run ingests
BATCH_TURNS = 2000  # and at most this many turns (one session more if the first alone is larger): a run's memory
MAX_BATCH_CONFLICTS = 5  # times a batch is computed again when another writer committed first


class ConsolidationReport(BaseModel):
    """What one ``consolidate`` run did."""

    namespace: str
    sessions: int = Field(default=0, description="pending sessions ingested and committed")
    superseded: int = Field(default=0, description="pending writes a later write of the same session replaced")
    consolidated_through: int = Field(default=0, description="the namespace's consolidated mark after the run")
    remaining: int = Field(default=0, description="pending writes still waiting")
    session_reports: list[SessionReport] = Field(default_factory=list, description="the ingest's, per session")
    fallbacks: list[FallbackRecord] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    wall_time_s: float = 0.0


class PendingReport(BaseModel):
    """How far behind the consolidator is on one namespace."""

    namespace: str
    writes: int = Field(description="pending writes not consolidated yet")
    oldest_s: float | None = Field(description="the age of the oldest, in seconds (None: nothing pending)")
    consolidated_through: int


def consolidation_lock(store: StoragePort, namespace: str) -> threading.RLock:
    """The lock a consolidation run of ``namespace`` holds in this process (a delete of a store key takes it too, so
    a write it removes from the log cannot be committed by a run that read it before)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault((id(store), namespace), threading.RLock())


def marker_commit(
    store: StoragePort,
    namespace: str,
    *,
    needed: Callable[[Manifest], bool] = lambda _: True,
    tries: int = 5,
    **fields: Any,
) -> None:
    """An otherwise empty commit of ``fields`` on the namespace's latest generation, made while ``needed`` says the
    committed manifest still wants it; a writer that moved the namespace first makes it try again on the new one.
    The namespace's first commit, a consolidated mark moved past skipped writes, a store delete's generation."""
    for _ in range(tries):
        manifest = store.manifest(namespace)
        if not needed(manifest):
            return
        try:
            store.commit(ChangeSet(namespace=namespace, base_generation=manifest.generation, **fields))
            return
        except GenerationConflict:
            continue


def _ensure_namespace(store: StoragePort, namespace: str, source: str | None) -> None:
    """A namespace with no commit gets an empty one first (it is known to every reader from then on)."""
    marker_commit(store, namespace, needed=lambda m: m.generation == 0, tries=3, source=source)


def write_sessions(
    namespace: str,
    sessions: Sequence[Session],
    *,
    resources: Resources,
    policy: str,
    source: str | None = STORE_SOURCE,
    keys: Sequence[str | None] | None = None,
    purge: bool = False,
    known: bool = False,
) -> list[int]:
    """The fast write: ``sessions`` embedded and appended to the pending log in one durable step (all or none);
    their sequence numbers. The store must keep a log (``StoragePort.fast_writes``). ``purge``: what a session
    replaces is purged from disk when it is consolidated (``LogicMapStore(purge=True)``). ``known``: the caller
    saw the namespace committed (else it gets its first, empty, commit)."""
    validate_namespace(namespace)
    store = resources.store
    if not known:
        _ensure_namespace(store, namespace, source)
    now = datetime.now(UTC)
    entries = [
        PendingWrite(
            namespace=namespace,
            session=s.model_dump(mode="json"),
            embedder=store.embedder,
            key=k,
            policy=policy,
            source=source,
            purge=purge,
            at=now,
        )
        for s, k in zip(sessions, keys if keys is not None else [None] * len(sessions))
    ]
    texts = [t.render() for e in entries for t in pending_turns(e, namespace, 0)]
    vectors = vector_matrix(_embed_for_the_log(resources.embeddings, texts) if texts else [])
    at = 0
    for entry in entries:
        n = len(entry.session["turns"])
        entry.vectors = vectors[at : at + n].copy() if n else vector_matrix([])
        at += n
    return store.append_pending(entries)


def _embed_for_the_log(embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
    """The vectors of a fast write's turns. The log keeps them, and the consolidation hands them to the embedding
    cache when it builds those turns (``_seed_cache``): cached now as well, 100,000 pending messages held 180 MB
    twice (issue 37, item 11)."""
    if isinstance(embeddings, CachedEmbeddings):
        return embeddings.embed_uncached(texts)
    return embeddings.embed_documents(texts)


def _seed_cache(embeddings: Embeddings, namespace: str, group: Sequence[PendingWrite], embedder: str) -> None:
    """The embedding cache gets the vectors a batch's writes were written with, so its ingest embeds none again:
    only those of writes made with ``embedder`` (the store's now). A write logged under another embedder (the
    provider changed while it waited) or before writes recorded theirs is embedded again by the ingest: its vectors
    committed under this embedder's name would corrupt search, and cached they would reach other namespaces."""
    if not isinstance(embeddings, CachedEmbeddings):
        return
    for entry in group:
        if entry.embedder != embedder:
            continue
        texts = [t.render() for t in pending_turns(entry, namespace, 0)]
        if len(texts) == len(entry.vectors):
            embeddings.seed(texts, entry.vectors)


def store_sessions(
    namespace: str,
    sessions: Sequence[Session],
    *,
    resources: Resources,
    policy: str,
    source: str,
    mode: str | None = None,
) -> IngestReport:
    """Store sessions that hold no store item (chat turns, ``remember``'s statements) on the write path: a fast write,
    then consolidation as ``mode`` says (default ``LOGICMAP_CONSOLIDATION``): ``sync`` before returning (the report is
    the ingest's, as before the write path), ``background`` by this process's consolidator (``background``),
    ``manual`` by ``flush``/``logicmap consolidate`` (the report then lists no session: nothing is built yet)."""
    started = time.perf_counter()
    mode = mode or resources.settings.consolidation
    # sync: the namespace is made by the consolidation that follows (generations as an ingest numbers them)
    seqs = write_sessions(
        namespace, sessions, resources=resources, policy=policy, source=source, keys=None, known=mode == "sync"
    )
    if mode == "sync":
        done = flush_or_withdraw(namespace, seqs, resources=resources)
        return IngestReport(
            namespace=namespace,
            sessions=done.session_reports,
            fallbacks=done.fallbacks,
            cost=done.cost,
            wall_time_s=time.perf_counter() - started,
        )
    if mode == "background":
        background(resources).notify(namespace)
    return IngestReport(namespace=namespace, sessions=[], wall_time_s=time.perf_counter() - started)


def flush_or_withdraw(namespace: str, seqs: Sequence[int], *, resources: Resources) -> ConsolidationReport:
    """``flush`` after a write that waits for its consolidation (``sync``): if the consolidation fails, the writes
    ``seqs`` leave the log before the error goes on, so a write the caller saw fail is not stored later."""
    try:
        return flush(namespace, resources=resources)
    except BaseException:
        resources.store.drop_pending(namespace, seqs=seqs)
        raise


def background(resources: Resources) -> Consolidator:
    """This process's background consolidator of ``resources``' store (one per store, started by its first write)."""
    with _LOCKS_GUARD:
        found = _BACKGROUND.get(id(resources.store))
        if found is None or found[0] is not resources.store:
            found = _BACKGROUND[id(resources.store)] = (resources.store, Consolidator(lambda: resources))
        return found[1]


def consolidate(
    namespace: str, *, resources: Resources | None = None, policy: str | None = None, limit: int | None = DEFAULT_BATCH
) -> ConsolidationReport:
    """Ingest the oldest pending sessions of ``namespace`` (at most ``limit`` sessions and ``BATCH_TURNS`` turns;
    ``None``: all) into its memory: each run
    of them (one policy, source and kind) in one ingest and ONE commit (``_ingest_batch``)."""
    started = time.perf_counter()
    res = resources or default_resources()
    store = res.store
    report = ConsolidationReport(namespace=namespace)
    with consolidation_lock(store, namespace):
        heads = store.pending_heads(namespace)
        if not heads:
            mark = store.manifest(namespace).consolidated_through
            store.drop_pending(namespace, through=mark)
            report.consolidated_through = mark
            return report
        latest = latest_entries(heads)
        chosen = _within_turns(latest[:limit], BATCH_TURNS) if limit is not None else latest
        last = chosen[-1].seq
        report.superseded = sum(1 for h in heads if h.seq <= last) - len(chosen)
        # only the chosen writes are read whole: a backlog of 100,000 messages is not all in memory at once
        for group in _by_run(store.pending_writes(namespace, seqs=[h.seq for h in chosen])):
            ingest = _ingest_batch(namespace, group, res, policy)
            report.sessions += sum(1 for r in ingest.sessions if not r.skipped)
            report.session_reports += ingest.sessions
            report.fallbacks += ingest.fallbacks
            report.cost = report.cost + ingest.cost
        _mark_done(store, namespace, last)
        mark = store.manifest(namespace).consolidated_through
        store.drop_pending(namespace, through=mark)
        report.consolidated_through = mark
        report.remaining = len(latest_entries(store.pending_heads(namespace)))
    report.wall_time_s = time.perf_counter() - started
    return report


def _within_turns(heads: Sequence[PendingHead], budget: int) -> list[PendingHead]:
    """The first ``heads`` whose turns fit ``budget`` (at least the first): a consolidation run's working memory is
    bounded by its turns, not only by its sessions (one ``add_messages`` of 100,000 messages is 50 sessions of 2,000:
    one run of all of them held 600 MB more, issue 37 item 11)."""
    chosen: list[PendingHead] = []
    turns = 0
    for head in heads:
        turns += head.turns
        if chosen and turns > budget:
            break
        chosen.append(head)
    return chosen


def _ingest_batch(namespace: str, group: Sequence[PendingWrite], res: Resources, policy: str | None) -> IngestReport:
    """Ingest one run of pending sessions on a staged store (``memory.store.staged``: each session's commit applied
    in memory, seen by the next) and write them to the real store as ONE commit; a batch another writer overtook is
    computed again on the new generation."""
    from logicmap.graphs.ingest.ingest import ingest_conversation

    store = res.store
    _ = res.embeddings, res.llm  # built once here: the staged copy of the resources shares them
    _seed_cache(res.embeddings, namespace, group, store.embedder)
    for attempt in range(MAX_BATCH_CONFLICTS):
        staged = StagedStore(store, namespace)
        scoped = dataclasses.replace(res, store_=cast(StoragePort, staged))
        committed = set(staged.base.manifest.sessions)
        sessions = [Session.model_validate(e.session) for e in group]
        first = group[0]
        replaced = [s.session_id for s in sessions if s.session_id in committed]
        ingest = ingest_conversation(
            Conversation(conversation_id=first.source or STORE_SOURCE, sessions=sessions, source_format="jsonl"),
            namespace,
            resources=scoped,
            policy=_policy(policy or first.policy),
            source=first.source,
            append=True,
            replace_sessions=replaced,
            purge_replaced=first.purge,
            allow_forgotten=first.key is not None,
            consumes={str(e.session["session_id"]): e.seq for e in group},
        )
        try:
            staged.write()
        except GenerationConflict:
            if attempt == MAX_BATCH_CONFLICTS - 1:
                raise
            continue
        if replaced and first.purge:
            store.purge(namespace)
        elif replaced:
            _compact(store, namespace, len(replaced), res.settings.compact_every)
        return ingest
    raise AssertionError("unreachable")


def _compact(store: StoragePort, namespace: str, replaced: int, every: int) -> None:
    """Purge ``namespace``'s retired versions once ``every`` replaced values were consolidated since the last purge
    in this process (``LOGICMAP_COMPACT_EVERY``): a key replaced again and again leaves its live version plus at
    most that many retired ones, not its whole history."""
    if every <= 0:
        return
    key = (id(store), namespace)
    with _LOCKS_GUARD:
        _REPLACED[key] = _REPLACED.get(key, 0) + replaced
        due = _REPLACED[key] >= every
        if due:
            _REPLACED[key] = 0
    if due:
        store.purge(namespace)


def _by_run(entries: Sequence[PendingWrite]) -> list[list[PendingWrite]]:
    """Consecutive writes with one policy, source and kind (store item or chat turns) ingest in one run."""
    groups: list[list[PendingWrite]] = []
    for entry in entries:
        if groups and (groups[-1][0].policy, groups[-1][0].source, groups[-1][0].key is None, groups[-1][0].purge) == (
            entry.policy,
            entry.source,
            entry.key is None,
            entry.purge,
        ):
            groups[-1].append(entry)
        else:
            groups.append([entry])
    return groups


def _policy(name: str) -> Literal["auto", "llm", "heuristic"]:
    return "llm" if name == "llm" else "heuristic" if name == "heuristic" else "auto"


def _mark_done(store: StoragePort, namespace: str, seq: int) -> None:
    """A write the ingest skipped (its session was committed already, word for word) is done too: the mark moves
    past it in an otherwise empty commit."""
    marker_commit(store, namespace, needed=lambda m: m.consolidated_through < seq, consumes_through=seq)


def pending(namespace: str, *, resources: Resources | None = None) -> PendingReport:
    """How far behind the consolidation of ``namespace`` is."""
    store = (resources or default_resources()).store
    entries = latest_entries(store.pending_writes(namespace))
    oldest = min((e.at for e in entries), default=None)
    return PendingReport(
        namespace=namespace,
        writes=len(entries),
        oldest_s=None if oldest is None else (datetime.now(UTC) - oldest).total_seconds(),
        consolidated_through=store.manifest(namespace).consolidated_through,
    )


def flush(namespace: str, *, resources: Resources | None = None, policy: str | None = None) -> ConsolidationReport:
    """Consolidate every pending write of ``namespace`` now, in this thread (waits for a run in progress)."""
    res = resources or default_resources()
    total = ConsolidationReport(namespace=namespace)
    started = time.perf_counter()
    while True:
        step = consolidate(namespace, resources=res, policy=policy, limit=DEFAULT_BATCH)
        total.sessions += step.sessions
        total.session_reports += step.session_reports
        total.fallbacks += step.fallbacks
        total.superseded += step.superseded
        total.cost = total.cost + step.cost
        total.consolidated_through, total.remaining = step.consolidated_through, step.remaining
        if step.remaining == 0 or (step.sessions == 0 and step.superseded == 0):
            break
    total.wall_time_s = time.perf_counter() - started
    return total


class Consolidator:
    """``consolidate`` in a background thread of this process: woken by each write, it consolidates the namespaces
    written to, ``batch`` sessions per run, until nothing is pending. A failed run is logged and kept in ``error``; its
    writes stay in the log, for the next write, ``flush`` or ``logicmap consolidate``."""

    def __init__(
        self, resources: Callable[[], Resources], *, policy: str | None = None, batch: int = DEFAULT_BATCH
    ) -> None:
        self._resources, self.policy, self.batch = resources, policy, batch
        self._wake = threading.Condition()
        self._todo: set[str] = set()
        self._busy = 0
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.error: str | None = None

    def notify(self, namespace: str) -> None:
        """``namespace`` has new pending writes."""
        with self._wake:
            self._todo.add(namespace)
            if self._thread is None and not self._stopped:  # first start: what earlier processes left waiting too
                self._todo.update(self._resources().store.pending_namespaces())
            if not self._stopped and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._run, name="logicmap-consolidator", daemon=True)
                self._thread.start()
                _stop_at_exit(self)
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._todo and not self._stopped:
                    self._wake.wait(timeout=30.0)
                if self._stopped:
                    return
                namespace = sorted(self._todo)[0]
                self._todo.discard(namespace)
                self._busy += 1
            try:
                step = consolidate(namespace, resources=self._resources(), policy=self.policy, limit=self.batch)
                again = step.remaining > 0
                self.error = None
            except Exception as exc:  # kept and logged; the writes stay in the log for the next write or flush
                self.error = f"{type(exc).__name__}: {exc}"
                _log.warning(
                    "consolidation of %s failed (%s); its writes wait in the pending log for the next "
                    "write, flush() or `logicmap consolidate`",
                    namespace,
                    self.error,
                )
                again = False
            with self._wake:
                self._busy -= 1
                if again:
                    self._todo.add(namespace)
                self._wake.notify_all()

    def flush(self, namespace: str) -> ConsolidationReport:
        """Consolidate ``namespace`` now (in the caller's thread; a background run in progress is waited for)."""
        return flush(namespace, resources=self._resources(), policy=self.policy)

    def stop(self, *, wait: bool = False) -> None:
        """Stop the thread after its current run (pending writes stay in the log for the next consolidator);
        ``wait``: return when that run has ended."""
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
            thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    def status(self) -> dict[str, Any]:
        with self._wake:
            return {
                "running": self._thread is not None and self._thread.is_alive(),
                "queued": sorted(self._todo),
                "busy": self._busy,
                "error": self.error,
            }


def _stop_at_exit(consolidator: Consolidator) -> None:
    """At interpreter exit, let the consolidator's current run end and stop it, before the thread pools and the
    store's native client go away under it (a run cut there could crash the process). What is still pending
    stays in the log: the next process shows it and consolidates it. Registered with ``threading._register_atexit``
    (as ``graphs.chat.ingestion``'s drain), which runs before ``concurrent.futures`` refuses new work."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:  # not CPython's threading: the best left is atexit
            atexit.register(consolidator.stop, wait=True)
        else:
            register(consolidator.stop, wait=True)
    except RuntimeError:  # the interpreter is already shutting down
        consolidator.stop()
