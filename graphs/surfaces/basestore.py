"""``LogicMapStore``: LogicMap's memory behind LangGraph's ``BaseStore`` interface.

A LangGraph app keeps long-term memory behind ``langgraph.store.base.BaseStore`` (``graph.compile(store=...)``,
``get_store()``, ``runtime.store``, the ``store`` key of ``langgraph.json``); LangMem's tools and the
memory-template run on any ``BaseStore``. This store answers every operation (``GetOp``, ``SearchOp``, ``PutOp``,
``ListNamespacesOp``) from LogicMap memory:

- a namespace tuple is one LogicMap namespace (``("memories", "alice")`` -> ``memories.alice``,
  ``memory.records.items.namespace_of``); a tuple that cannot map is one ``InvalidItemError``;
- ``put`` stores the item as a one-session memory built by the ingest graph with the store's policy: a value with
  text (``content`` or ``text`` a string, or ``messages``) is that text (one turn, or one turn per message, each
  what ``add_messages`` makes of it: ``graphs.chat.messages.chat_turn``), any other JSON value is the text of its
  indexed fields (``index`` paths, like LangGraph's ``index.fields``). Items share a namespace with the chat's and
  files' sessions, whichever created it (``graphs.ingest.nodes.foreign_sessions`` keeps the item's id). A put on
  a key that exists ingests the new value with the old item and everything derived only from it retired in the same
  commit (``graphs.writes.replacement.replacement_forget``, ``memory.records.forgetting.with_replacement``); ``put(..., None)`` and
  ``delete`` only forget; what they retire stays on disk until a purge: ``LogicMapStore(purge=True)`` purges after
  every delete and replace (the commit records the purge as owed, so a kill before it ends leaves it to the next
  open or write), ``purge(namespace)`` purges one namespace whenever asked (``logicmap purge -n NS``);
- ``get`` is exact; ``search`` ranks the items of every namespace under the prefix as facts by default
  (``agents.item_ranking``: dense similarity in [0, 1], the newer statement of one attribute first; the ``rerank``
  strategy ranks a store namespace the same way), or by any strategy of ``graphs.strategies.registry.STRATEGIES`` with
  ``strategy=``, filters
  on values as LangGraph's stores do, and lists by recency without a query; ``list_namespaces`` honours prefix,
  suffix (``*`` wildcards), ``max_depth``, limit and offset.

Reads in one batch see the memory as it was before the batch's writes (as ``InMemoryStore``). A replacing put is one
commit: a reader sees the old item or the new one, never neither, never both.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from logicmap.graphs.runtime.entry import checked_keywords
from logicmap.memory.records.items import (
    STORE_SOURCE,
    InvalidItemError,
    ItemIndex,
    StoredItem,
    dumps_value,
    item_index,
    item_session_id,
    item_text,
    items_of,
    message_turns,
    namespace_of,
    namespace_tuple,
    refuse_period_labels,
    validate_key,
)
from logicmap.memory.runtime.blocking import run_blocking
from logicmap.memory.store.errors import StoreError

if TYPE_CHECKING:
    # Imported when first used (a put, a search, the default resources), not with the class: importing
    # ``LogicMapStore`` stays as light as LangGraph's own store (docs/performance.md, "Footprint").
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.graphs.writes.consolidate import ConsolidationReport, Consolidator, PendingReport
    from logicmap.memory.files.loaders import RawTurn, Session
    from logicmap.memory.store import NamespaceSnapshot, PurgeReport

__all__ = ["InvalidItemError", "LogicMapStore"]

SOURCE = STORE_SOURCE  # the source a namespace the store creates records


def _message_dict(message: Any) -> Any:
    """A LangChain message as the JSON ``{role, content}`` a value keeps (dicts and other values unchanged)."""
    if isinstance(message, dict) or not hasattr(message, "content"):
        return message
    role = {"human": "user", "ai": "assistant"}.get(getattr(message, "type", ""), getattr(message, "type", "user"))
    return {"role": role, "content": message.content}


def _json_value(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidItemError(f"a store value is a dict, not {type(value).__name__}")
    if isinstance(value.get("messages"), list):
        value = {**value, "messages": [_message_dict(m) for m in value["messages"]]}
    dumps_value(value)
    return value


def _matches_condition(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part))


class LogicMapStore(BaseStore):
    """LogicMap memory as a LangGraph ``BaseStore`` (see the module docstring).

    ``resources``: the store, embedder and chat model (default: the process-wide ones, from ``LOGICMAP_*``).
    ``policy``: the ingest policy a put builds memory with (``auto``: the LLM when one is configured, else the
    no-LLM heuristics). ``strategy``: how ``search`` ranks (``rerank``: items as facts, ``agents.item_ranking``, no
    LLM; another strategy's name runs that strategy and ranks by its evidence). ``index``: LangGraph's index config;
    only its ``fields`` are used (what a value without ``content``/``text`` is searched by). ``purge``: a delete or a
    replacing put also removes what it retired from disk (``logicmap.purge``), as ``forget(..., purge=True)``.
    ``trust_assistant``: the assistant's messages of a ``messages`` value are evidence (as
    ``add_messages(..., trust_assistant=True)``). ``consolidation``: how a write's event graph is built behind it
    (``graphs.writes.consolidate``): ``background`` (a thread of this process), ``sync`` (before the write returns, as a
    whole ingest), ``manual`` (by ``flush()``, ``logicmap consolidate`` or a worker); default
    ``LOGICMAP_CONSOLIDATION`` (``background``). ``max_pending``: the most
    writes a namespace may have waiting before a write consolidates in its own thread first (default:
    ``LOGICMAP_MAX_PENDING``)."""

    supports_ttl = False

    @checked_keywords
    def __init__(
        self,
        *,
        resources: Resources | None = None,
        policy: Literal["auto", "llm", "heuristic"] = "auto",
        strategy: str = "rerank",
        index: dict[str, Any] | None = None,
        purge: bool = False,
        trust_assistant: bool = False,
        consolidation: Literal["background", "sync", "manual"] | None = None,
        max_pending: int | None = None,
    ) -> None:
        from logicmap.graphs.runtime.resources import check_policy
        from logicmap.graphs.strategies.names import STRATEGY_NAMES

        if strategy not in STRATEGY_NAMES:
            raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGY_NAMES)}")
        check_policy(policy)
        self._resources = resources
        self.policy = policy
        self.strategy = strategy
        self.fields: list[str] | None = list((index or {}).get("fields") or []) or None
        self.purge_removals = purge
        self.trust_assistant = trust_assistant
        if consolidation not in (None, "background", "sync", "manual"):
            raise ValueError(f"consolidation must be background, sync or manual, not {consolidation!r}")
        self._consolidation = consolidation
        self.max_pending = max_pending
        self._consolidator: Consolidator | None = None
        self._closed = False
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    @property
    def resources(self) -> Resources:
        from logicmap.graphs.runtime.resources import default_resources

        return self._resources if self._resources is not None else default_resources()

    # -- LangGraph's own checks, with the fix -----------------------------------------------------------------
    # BaseStore refuses a label holding '.' before ``batch`` runs, with no hint: each public call checks first.

    def get(self, namespace: tuple[str, ...], *args: Any, **kwargs: Any) -> Item | None:
        refuse_period_labels(namespace)
        return super().get(namespace, *args, **kwargs)

    def search(self, namespace_prefix: tuple[str, ...], /, *args: Any, **kwargs: Any) -> list[SearchItem]:
        refuse_period_labels(namespace_prefix)
        return super().search(namespace_prefix, *args, **kwargs)

    def put(self, namespace: tuple[str, ...], *args: Any, **kwargs: Any) -> None:
        refuse_period_labels(namespace)
        super().put(namespace, *args, **kwargs)

    def delete(self, namespace: tuple[str, ...], *args: Any, **kwargs: Any) -> None:
        refuse_period_labels(namespace)
        super().delete(namespace, *args, **kwargs)

    async def aget(self, namespace: tuple[str, ...], *args: Any, **kwargs: Any) -> Item | None:
        refuse_period_labels(namespace)
        return await super().aget(namespace, *args, **kwargs)

    async def asearch(self, namespace_prefix: tuple[str, ...], /, *args: Any, **kwargs: Any) -> list[SearchItem]:
        refuse_period_labels(namespace_prefix)
        return await super().asearch(namespace_prefix, *args, **kwargs)

    async def aput(self, namespace: tuple[str, ...], *args: Any, **kwargs: Any) -> None:
        refuse_period_labels(namespace)
        await super().aput(namespace, *args, **kwargs)

    async def adelete(self, namespace: tuple[str, ...], *args: Any, **kwargs: Any) -> None:
        refuse_period_labels(namespace)
        await super().adelete(namespace, *args, **kwargs)

    # -- the interface ---------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop this store's background consolidator after its current run, and refuse every later operation
        (``with LogicMapStore(...) as store:`` closes on leaving). Nothing is lost: a write not yet consolidated
        waits, durable, in the pending log, and is shown and consolidated by the next store on the same memory
        (or ``logicmap consolidate``); ``flush()`` first to have it built now. The shared storage backend stays
        open (it belongs to the resources, ``Resources.store``). Closing twice is harmless."""
        self._closed = True
        if self._consolidator is not None:
            self._consolidator.stop(wait=True)

    def __enter__(self) -> LogicMapStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this LogicMapStore is closed: open a new LogicMapStore on the same resources")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations: reads (gets, searches, listings) first, on memory as before the batch, then every
        put, grouped per namespace (the last put of a key wins)."""
        self._check_open()
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        puts: dict[str, dict[str, PutOp]] = {}
        for op in ops:
            if isinstance(op, PutOp):
                name = namespace_of(op.namespace)
                puts.setdefault(name, {})[validate_key(op.key)] = op
                if op.value is not None:
                    self._turns(op, _json_value(op.value), op.key)
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif not isinstance(op, PutOp):
                raise InvalidItemError(f"unknown store operation {type(op).__name__}")
        for name, group in puts.items():
            self._put(name, group)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` on the process's shared executor (``memory.runtime.blocking``): the store's reads and commits block,
        the event loop keeps running, and concurrent calls share its few threads."""
        return await run_blocking(self.batch, list(ops))

    def purge(self, namespace: tuple[str, ...]) -> PurgeReport:
        """Remove every retired version of one namespace from disk (``logicmap.purge``): deleted items, replaced
        values, anything else forgotten without a purge. Nothing visible changes."""
        from logicmap.graphs.writes.forget import purge

        return purge(namespace_of(tuple(namespace)), resources=self.resources)

    async def apurge(self, namespace: tuple[str, ...]) -> PurgeReport:
        """``purge`` on the shared executor."""
        return await run_blocking(self.purge, namespace)

    # -- reads ------------------------------------------------------------------------------------------------

    def _snapshot(self, name: str) -> NamespaceSnapshot | None:
        """The namespace as readers see it: committed, with its pending writes (``memory.store.live``)."""
        from logicmap.memory.store.live import live_snapshot

        store = self.resources.store
        if not store.has_namespace(name):
            return None
        return live_snapshot(store, name)

    def _get(self, op: GetOp) -> Item | None:
        name = namespace_of(op.namespace)
        key = validate_key(op.key)
        found = self._held(name)[1].get(key)
        return None if found is None else self._item(name, found)

    def _held(self, name: str) -> tuple[NamespaceSnapshot | None, dict[str, StoredItem], int]:
        """The committed snapshot, the items readers see by key (committed ones, then the pending writes' on top:
        the live view's items without building the view), and how many writes are pending."""
        from logicmap.memory.store.live import latest_entries, pending_item

        store = self.resources.store
        committed = store.snapshot(name)
        if committed.generation == 0:
            return None, {}, 0
        items = items_of(committed)
        if not store.fast_writes:
            return committed, items, 0
        entries = latest_entries(store.pending_writes(name, after=committed.manifest.consolidated_through))
        if not entries:
            return committed, items, 0
        held = dict(items)
        for entry in entries:
            pending = pending_item(entry, name)
            if pending is not None:
                held[pending.key] = pending
        return committed, held, len(entries)

    @staticmethod
    def _item(name: str, stored: StoredItem) -> Item:
        return Item(
            value=stored.value,
            key=stored.key,
            namespace=namespace_tuple(name),
            created_at=stored.created_at,
            updated_at=stored.updated_at,
        )

    def _namespaces_under(self, prefix: Sequence[str]) -> list[str]:
        return self.resources.store.namespaces(namespace_of(tuple(prefix)) if prefix else None)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidItemError("search: limit and offset cannot be negative")
        parts: list[tuple[str, ItemIndex, np.ndarray]] = []  # per namespace: its index and the rows kept
        scores, updated = [], []
        for name in self._namespaces_under(op.namespace_prefix):
            snap = self._snapshot(name)
            if snap is None:
                continue
            index = item_index(snap)
            rows = np.flatnonzero(index.mask(op.filter))
            if not len(rows):
                continue
            parts.append((name, index, rows))
            updated.append(index.updated[rows])
            scores.append(self._scores(name, snap, op.query, index)[rows] if op.query else np.full(len(rows), np.nan))
        if not parts:
            return []
        score, recency = np.concatenate(scores), -np.concatenate(updated)
        # Ranked by score (unscored last), ties and listings by recency (the most recently updated first).
        order = (
            np.lexsort((recency, np.where(np.isnan(score), np.inf, -score)))
            if op.query
            else np.argsort(recency, kind="stable")
        )
        starts = np.cumsum([0] + [len(rows) for _, _, rows in parts])
        page = []
        for r in order[op.offset : op.offset + op.limit]:
            part = int(np.searchsorted(starts, r, side="right")) - 1
            name, index, rows = parts[part]
            it = index.items[int(rows[r - starts[part]])]
            page.append(
                SearchItem(
                    namespace=namespace_tuple(name),
                    key=it.key,
                    value=it.value,
                    created_at=it.created_at,
                    updated_at=it.updated_at,
                    score=None if np.isnan(score[r]) else float(score[r]),
                )
            )
        return page

    def _scores(self, name: str, snap: NamespaceSnapshot, query: str, index: ItemIndex) -> np.ndarray:
        """Each item's score for ``query``: by ``rerank``, as a fact (``agents.item_ranking.item_scores``: dense
        relevance in [0, 1], the newer of two statements of one attribute first); by another strategy, its best
        turn's rank in that strategy's answer (1/rank)."""
        if self.strategy == "rerank":
            from logicmap.agents.item_ranking import item_scores

            return item_scores(snap, query, self.resources.embeddings)
        return index.scores(self._strategy_scores(name, query))

    def _strategy_scores(self, name: str, query: str) -> dict[str, float]:
        from logicmap.graphs.strategies.registry import answer

        result = answer(self.strategy, query, name, resources=self.resources, policy=self.policy)
        order = list(result.turn_ranking or []) or [t for e in result.evidence for t in e.turn_ids]
        scores: dict[str, float] = {}
        for rank, tid in enumerate(order):
            scores.setdefault(tid, 1.0 / (rank + 1))
        return scores

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidItemError("list_namespaces: limit and offset cannot be negative")
        found: set[tuple[str, ...]] = set()
        store = self.resources.store
        for name in store.namespaces():
            snap = self._snapshot(name)
            if snap is None or not items_of(snap):
                continue  # memory ingested from a file or a chat holds no store item: not a store namespace
            ns = namespace_tuple(name)
            if all(_matches_condition(ns, c) for c in op.match_conditions or ()):
                found.add(ns[: op.max_depth] if op.max_depth is not None else ns)
        return sorted(found)[op.offset : op.offset + op.limit]

    # -- writes -----------------------------------------------------------------------------------------------

    def _lock(self, name: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(name, threading.Lock())

    def _put(self, name: str, group: dict[str, PutOp]) -> None:
        """Forget the deleted items; write the new values as one session each: a fast write to the pending log
        (``graphs.writes.consolidate``) where the backend keeps one, else an ingest and commit at once."""
        if self.resources.store.fast_writes:
            self._fast_put(name, group)
        else:
            self._ingest_put(name, group)

    def _fast_put(self, name: str, group: dict[str, PutOp]) -> None:
        """The fast write: the values' sessions appended to the pending log; a replaced item is hidden by its new
        value in the live view until the consolidator commits the new one in its place; a deleted key's pending
        writes leave the log and its committed item is forgotten."""
        from logicmap.graphs.writes.consolidate import write_sessions
        from logicmap.memory.files.loaders import check_sessions

        res = self.resources
        with self._lock(name):
            snap, held, waiting = self._held(name)
            now = datetime.now(UTC)
            sessions = [self._session(key, op, held.get(key), now) for key, op in group.items() if op.value is not None]
            check_sessions(sessions, where="store put")
            if snap is not None:
                _check_ids_free(name, snap, sessions, held)
            deleted = sorted(k for k, op in group.items() if k in held and op.value is None)
            if deleted:
                self._delete_keys(name, deleted, held)
            seqs: list[int] = []
            if sessions:
                seqs = write_sessions(
                    name,
                    sessions,
                    resources=res,
                    policy=self.policy,
                    source=SOURCE,
                    keys=[k for k, op in group.items() if op.value is not None],
                    purge=self.purge_removals,
                    known=snap is not None or self.consolidation == "sync",
                )
        if sessions:
            self._after_write(name, waiting + len(sessions), seqs)

    def _delete_keys(self, name: str, keys: list[str], held: dict[str, StoredItem]) -> None:
        """Delete store keys: their pending writes leave the log, their committed items are forgotten (one commit,
        made even when nothing committed held them, so a consolidation that read a removed write loses its commit)."""
        from logicmap.graphs.writes.consolidate import consolidation_lock, marker_commit
        from logicmap.graphs.writes.forget import forget

        store = self.resources.store
        sessions = {held[k].session_id for k in keys}
        with consolidation_lock(store, name):
            seqs = [e.seq for e in store.pending_writes(name) if e.session.get("session_id") in sessions]
            store.drop_pending(name, seqs=seqs)
            committed = items_of(store.snapshot(name))
            gone = [k for k in keys if k in committed]
            if gone:
                forget(name, keys=gone, purge=self.purge_removals, surface="store", resources=self.resources)
            else:
                marker_commit(store, name)
                if self.purge_removals:
                    store.purge(name)

    def _after_write(self, name: str, waiting: int, seqs: list[int]) -> None:
        """Consolidation after a write (``waiting``: about how many writes are pending now; ``seqs``: the write's):
        inline (``sync``, or past ``max_pending``), else the background thread."""
        from logicmap.graphs.writes.consolidate import consolidate, flush_or_withdraw

        res = self.resources
        if self.consolidation == "sync":  # a failed consolidation withdraws the writes: the put failed whole
            flush_or_withdraw(name, seqs, resources=res)
            return
        limit = self.max_pending if self.max_pending is not None else res.settings.max_pending
        while waiting > limit:  # the lag stays bounded: this write waits for a run
            waiting = consolidate(name, resources=res).remaining
        if self.consolidation == "background":
            self.consolidator.notify(name)

    @property
    def consolidation(self) -> str:
        """When a write is consolidated: the constructor's ``consolidation``, else ``LOGICMAP_CONSOLIDATION``."""
        return self._consolidation or self.resources.settings.consolidation

    @property
    def consolidator(self) -> Consolidator:
        """The background consolidator of this store (started by the first write)."""
        from logicmap.graphs.writes.consolidate import Consolidator

        if self._consolidator is None:
            self._consolidator = Consolidator(lambda: self.resources)
        return self._consolidator

    def flush(self, namespace: tuple[str, ...] | None = None) -> list[ConsolidationReport]:
        """Consolidate every pending write now (of ``namespace``, or of every namespace) and return when done:
        the event graph, facts and cues then include every write made before the call."""
        from logicmap.graphs.writes.consolidate import flush

        self._check_open()
        store = self.resources.store
        names = [namespace_of(tuple(namespace))] if namespace is not None else store.pending_namespaces()
        return [flush(name, resources=self.resources) for name in names]

    async def aflush(self, namespace: tuple[str, ...] | None = None) -> list[ConsolidationReport]:
        """``flush`` on the shared executor."""
        return await run_blocking(self.flush, namespace)

    def pending(self, namespace: tuple[str, ...]) -> PendingReport:
        """How far behind consolidation is on ``namespace``: writes waiting, the age of the oldest."""
        from logicmap.graphs.writes.consolidate import pending

        return pending(namespace_of(tuple(namespace)), resources=self.resources)

    def _ingest_put(self, name: str, group: dict[str, PutOp]) -> None:
        """A backend without a pending log: the deleted items forgotten, the new values ingested as one session
        each, a replaced item's old records retired in the same commit as its new ones
        (``IngestContext.replace_sessions``)."""
        from logicmap.graphs.ingest.ingest import ingest_conversation
        from logicmap.graphs.writes.forget import forget
        from logicmap.memory.files.loaders import Conversation, check_sessions

        res = self.resources
        with self._lock(name):
            snap = self._snapshot(name)
            held = items_of(snap) if snap is not None else {}
            now = datetime.now(UTC)
            sessions = [self._session(key, op, held.get(key), now) for key, op in group.items() if op.value is not None]
            check_sessions(
                sessions, where="store put"
            )  # a value ingest would refuse fails before anything is forgotten
            if snap is not None:
                _check_ids_free(name, snap, sessions, held)
            deleted = sorted(k for k, op in group.items() if k in held and op.value is None)
            replaced = [held[k].session_id for k, op in group.items() if k in held and op.value is not None]
            if deleted:
                forget(name, keys=deleted, purge=self.purge_removals, surface="store", resources=res)
            if sessions:  # a replaced item's old records retire in the commit that writes the new ones
                conversation = Conversation(conversation_id=SOURCE, sessions=sessions, source_format="jsonl")
                # A put writes exactly the value it is given: a deliberate re-add, never refused by a tombstone.
                ingest_conversation(
                    conversation,
                    name,
                    resources=res,
                    policy=self.policy,
                    source=SOURCE,
                    append=True,
                    replace_sessions=replaced,
                    purge_replaced=self.purge_removals,
                    allow_forgotten=True,
                )
                if replaced and self.purge_removals:
                    res.store.purge(name)

    def _session(self, key: str, op: PutOp, old: StoredItem | None, now: datetime) -> Session:
        from logicmap.memory.files.loaders import Session

        value = _json_value(dict(op.value or {}))
        sid = item_session_id(key)
        item = {
            "key": key,
            "value": value,
            "created_at": (old.created_at if old else now).isoformat(),
            "updated_at": now.isoformat(),
            "indexed": op.index is not False,
        }
        turns = [
            raw.model_copy(update={"dia_id": f"{sid}:{i + 1}", "item": item if i == 0 else None})
            for i, raw in enumerate(self._turns(op, value, key))
        ]
        # A replaced item stays in its session (one an older version stored may carry a tag, ``memory.records.items``).
        return Session(session_id=old.session_id if old else sid, timestamp=now, turns=turns)

    def _turns(self, op: PutOp, value: dict[str, Any], key: str) -> list[RawTurn]:
        """The value's turns: its messages as ``add_messages`` stores them (checked the same way, on the messages
        as given: a LangChain message keeps its type and tool calls), else its text as one user turn (ids and the
        item are set by ``_session``)."""
        from logicmap.graphs.chat.messages import chat_turn, normalize_messages
        from logicmap.memory.files.loaders import RawTurn

        fields = list(op.index) if isinstance(op.index, list | tuple) else self.fields
        given = op.value or {}
        if not fields and message_turns(given) is not None:
            try:
                checked, _ = normalize_messages(given["messages"], self.resources.settings)
            except ValueError as exc:
                raise InvalidItemError(f"store value messages: {exc}") from None
            turns = [chat_turn(t, t.when, trust_assistant=self.trust_assistant) for t in checked]
            if turns:  # only system or tool messages: the value's text, as any other value
                return turns
        return [RawTurn(dia_id="-", speaker="user", text=item_text(value, fields) or key)]


def _check_ids_free(name: str, snap: NamespaceSnapshot, sessions: list[Session], held: dict[str, StoredItem]) -> None:
    """Refuse, before anything is written, a put whose item id a session that holds no item already has (its
    item's turn was forgotten by turn id, or a file named a session so)."""
    items = {it.session_id for it in held.values()}
    for session in sessions:
        if session.session_id in snap.manifest.sessions and session.session_id not in items:
            raise InvalidItemError(
                f"store put: namespace {name!r} holds session {session.session_id!r}, the id of this key, without "
                "its item (its turn was forgotten by id, or a file named a session so); forget that session "
                "(forget(namespace, session_ids=[...])) and put again; nothing was written"
            )
