"""The store's connection: opening a data directory or a server, collections, locks and committed manifests.

``StoreCore`` is the base the commit protocol (``commits``) and the snapshot cache (``snapshots``) build on;
``store_call`` wraps each public method (refused in a forked child, low-level failures as one-line errors).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from logicmap.memory.records.records import stable_hash, validate_namespace
from logicmap.memory.store.errors import GenerationConflict, StoreError, UnknownNamespaceError
from logicmap.memory.store.generations import MANIFEST_ID, _manifest_id, _next_id
from logicmap.memory.store.health import (
    MEMORY_MARKER,
    check_database,
    os_error,
    prepare_directory,
    translated,
    unreachable,
)
from logicmap.memory.store.model import Manifest, NamespaceSnapshot, embedder_identity
from logicmap.memory.store.pending_log import PendingWrites, SqlitePendingLog
from logicmap.memory.store.process import acquire_process_lock, check_same_process, release_process_lock
from logicmap.settings import LogicMapSettings

__all__ = ["PURGE_SUFFIX", "StoreCore", "store_call"]

_log = logging.getLogger(__name__)
T = TypeVar("T")

# Readers search the snapshot's matrices; Chroma's vector index serves only ``MemoryStore.query``, so it is
# built cheaply (its default construction made each commit of a large namespace mostly index building).
# Collections created before keep their own settings.
_HNSW = {"space": "cosine", "ef_construction": 24, "max_neighbors": 8}
PURGE_SUFFIX = "-purge"  # a purge's copy of a collection, before it takes the collection's name (``purge``)
_NAMESPACE_LOCKS: dict[tuple[str, str], threading.RLock] = {}
_COMMITS: dict[tuple[str, str], int] = {}  # (location, namespace) -> commits tried in this process (under the guard)
_NAMESPACE_LOCKS_GUARD = threading.Lock()


def store_call(method: Callable[..., T]) -> Callable[..., T]:
    """A public store method: refused in a forked child, and low-level failures become one-line errors."""

    @functools.wraps(method)
    def call(self: StoreCore, *args: Any, **kwargs: Any) -> T:
        self._check_process()
        try:
            return method(self, *args, **kwargs)
        except (StoreError, GenerationConflict, UnknownNamespaceError, ValueError):
            raise
        except Exception as exc:
            error = translated(exc, self._directory) or unreachable(exc, self.settings)
            if error is None:
                raise
            if self._directory is not None:
                # After a failed write an embedded Chroma client can hang on its next call: refuse instead.
                self._broken = error
            raise error from exc

    return call


class StoreCore(PendingWrites):
    """The store's connection: its Chroma client, its collections and locks, and the committed manifests; an
    embedded store's pending log (``pending_log``)."""

    _read_page: ClassVar[int] = 10_000  # records per read: one unbounded get() of >32k exceeds SQLite's limit

    def __init__(
        self, settings: LogicMapSettings | None = None, *, client: Any = None, embedder: str | None = None
    ) -> None:
        self.settings = settings or LogicMapSettings()
        self.embedder = embedder or embedder_identity(self.settings)
        self.commit_lease_s = self.settings.commit_lease_s
        self._pid = os.getpid()
        self._broken: StoreError | None = None
        self._lock_path: str | None = None
        self._directory: Path | None = None
        self._marker: Path | None = None
        self._owns_client = client is None
        if client is not None:
            self.client = client
            self._location = f"client:{id(client)}"
        elif self.settings.chroma_host:
            import chromadb

            try:
                self.client = chromadb.HttpClient(host=self.settings.chroma_host, port=self.settings.chroma_port)
            except Exception as exc:
                # Chroma says "Could not connect to a Chroma server" without saying which one.
                refused = unreachable(exc.__cause__ or exc, self.settings)
                if refused is None and "could not connect" in str(exc).lower():
                    refused = unreachable(ConnectionError(str(exc)), self.settings)
                if refused is None:
                    raise
                raise refused from exc
            # Per store object: writers on a server are serialized by the lease and fenced by next@ links.
            self._location = f"server:{id(self)}"
        else:
            self.client = self._open_embedded(Path(self.settings.data_dir))
            self._location = f"dir:{self._lock_path}"
            self._pending_log = SqlitePendingLog(Path(self.settings.data_dir))
        self._collections: dict[str, Any] = {}
        self._guard = threading.Lock()
        # The snapshot cache's state (``snapshots.SnapshotCache``):
        self._snapshots: dict[str, NamespaceSnapshot] = {}
        self._verified: dict[str, int] = {}  # namespace -> commit count when its cached snapshot was last checked
        self._since_file: dict[str, int] = {}  # namespace -> records read since its snapshot file (-1: no file)
        self._kept: OrderedDict[tuple[str, int], NamespaceSnapshot] = OrderedDict()  # superseded, for pinned runs
        self._max_batch = int(getattr(self.client, "get_max_batch_size", lambda: 5000)() or 5000)
        if self._marker is not None and not self._marker.exists():
            self._adopt_legacy_store()

    def _open_embedded(self, directory: Path) -> Any:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        prepare_directory(directory)
        try:
            self._lock_path = acquire_process_lock(directory)
        except OSError as exc:
            raise os_error(exc, directory) from exc
        self._directory, self._marker = directory, directory / MEMORY_MARKER
        try:
            check_database(directory)
            return chromadb.PersistentClient(
                path=str(directory / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
            )
        except BaseException as exc:
            self.close()
            error = translated(exc, directory) if isinstance(exc, Exception) else None
            if error is None:
                raise
            raise error from exc

    def _adopt_legacy_store(self) -> None:
        """A store written before the memory marker existed: mark it when it holds namespaces."""
        try:
            if self._registry().count() > 0:
                self._mark_memory()
        except Exception as exc:
            error = translated(exc, self._directory)
            self.close()
            if error is None:
                raise
            raise error from exc

    def _mark_memory(self) -> None:
        """Record that this directory holds memory, so a lost database is reported instead of recreated."""
        if self._marker is None or self._marker.exists():
            return
        # One temporary file per thread: two threads of one process may mark a new store at once.
        tmp = self._marker.with_name(f"{MEMORY_MARKER}.{os.getpid()}.{threading.get_ident()}.tmp")
        body = {
            "what": "LogicMap memory lives in chroma/chroma.sqlite3 beside this file",
            "since": datetime.now(UTC).isoformat(),
        }
        try:
            tmp.write_text(json.dumps(body) + "\n", encoding="utf-8")
            os.replace(tmp, self._marker)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise os_error(exc, self._marker.parent) from exc

    # -- plumbing ---------------------------------------------------------------------------
    def close(self) -> None:
        """Release the process lock and the Chroma client this store opened (its files, connections and HNSW
        indexes; a client the caller gave stays theirs). The store is not used after it is closed."""
        if self._owns_client and os.getpid() == self._pid:
            client, self._owns_client = getattr(self, "client", None), False
            try:
                if client is not None and hasattr(client, "close"):
                    client.close()  # Chroma stops the shared system when its last client closes
            except Exception:  # closing is best effort; the lock below must still be released
                pass
        if self._pending_log is not None and os.getpid() == self._pid:
            self._pending_log.close()
            self._pending_log = None
        if self._lock_path and os.getpid() == self._pid:
            release_process_lock(self._lock_path)
        self._lock_path = None
        if os.getpid() == self._pid and self._broken is None:  # later calls get this line, not the client's crash
            where = f" of {self._directory}" if self._directory is not None else ""
            self._broken = StoreError(f"the memory store{where} is closed: open a new one to use it again")

    def __enter__(self) -> StoreCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_process(self) -> None:
        if self._broken is not None:
            raise type(self._broken)(str(self._broken))
        check_same_process(self._pid)

    def namespace_lock(self, namespace: str) -> threading.RLock:
        """The lock a writer of this namespace holds while it commits (shared by every store on one location)."""
        self._check_process()
        with _NAMESPACE_LOCKS_GUARD:
            return _NAMESPACE_LOCKS.setdefault((self._location, namespace), threading.RLock())

    @staticmethod
    def _collection_name(namespace: str, kind: str) -> str:
        return f"lm-{stable_hash(namespace, length=16)}-{kind}"

    def _adopt_copy(self, name: str) -> bool:
        """A purge killed between removing a collection and renaming its complete copy: the copy takes the name."""
        try:
            copy = self.client.get_collection(name + PURGE_SUFFIX)
        except Exception:  # no copy (Chroma's NotFoundError differs between versions)
            return False
        meta = dict(copy.metadata or {})
        if not meta.get("complete"):
            return False
        meta = {k: v for k, v in meta.items() if k not in ("purge_of", "complete")}
        copy.modify(name=name, metadata=meta or None)
        return True

    def _collection(self, namespace: str, kind: str) -> Any:
        name = self._collection_name(namespace, kind)
        with self._guard:
            col = self._collections.get(name)
            if col is None and self._directory is not None:
                try:
                    col = self.client.get_collection(name, embedding_function=None)
                except Exception:  # not there: a purge's complete copy, or a new collection
                    if self._adopt_copy(name):
                        col = self.client.get_collection(name, embedding_function=None)
                if col is not None:
                    self._collections[name] = col
            if col is None:
                col = self.client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": _HNSW},
                    metadata={"namespace": namespace, "kind": kind},
                )
                self._collections[name] = col
        return col

    def _registry(self) -> Any:
        with self._guard:
            col = self._collections.get("lm-namespaces")
            if col is None:
                col = self.client.get_or_create_collection("lm-namespaces", embedding_function=None)
                self._collections["lm-namespaces"] = col
        return col

    def _batched(self, items: Sequence[Any]) -> Iterable[Sequence[Any]]:
        step = max(1, self._max_batch)
        for start in range(0, len(items), step):
            yield items[start : start + step]

    # -- manifest -----------------------------------------------------------------------------
    @store_call
    def manifest(self, namespace: str) -> Manifest:
        """The committed manifest: the hint record, then the chain of next@ links past it."""
        validate_namespace(namespace)
        meta = self._collection(namespace, "meta")
        for _ in range(100):
            got = meta.get(ids=[MANIFEST_ID], include=["documents"])
            hint = Manifest.model_validate_json(got["documents"][0]) if got["ids"] else Manifest(namespace=namespace)
            head = hint.generation
            while True:
                link = meta.get(ids=[_next_id(head)], include=["metadatas"])
                if not link["ids"]:
                    break
                head = int(link["metadatas"][0]["generation"])
            if head == hint.generation:
                return hint
            body = meta.get(ids=[_manifest_id(head)], include=["documents"])
            if body["ids"]:
                return Manifest.model_validate_json(body["documents"][0])
            # A newer commit removed it after moving past it: the chain has grown, walk it again.
        raise GenerationConflict(f"namespace {namespace!r}: the manifest kept moving while it was read")

    @store_call
    def namespaces(self, under: str | None = None) -> list[str]:
        """The namespaces with committed memory; ``under``: only that namespace and those below it
        (``acme``, ``acme.bob``; never ``acmex``), whose manifests alone are read."""
        got = self._registry().get(include=[])
        names = []
        for ns in got["ids"]:
            if under is not None and ns != under and not ns.startswith(under + "."):
                continue
            try:
                validate_namespace(ns)
            except ValueError:
                # Registered by a version that matched names without their end ("acme\n"): unreadable now.
                _log.warning("skipping namespace %r: not a valid name, so it can no longer be read", ns)
                continue
            names.append(ns)
        # Registered before their first commit: list only namespaces whose manifest is committed.
        return sorted(ns for ns in names if self.manifest(ns).generation > 0)

    @store_call
    def has_namespace(self, namespace: str) -> bool:
        return self.manifest(namespace).generation > 0

    @store_call
    def require_namespace(self, namespace: str) -> Manifest:
        """The namespace's manifest, or ``UnknownNamespaceError`` (which names no other namespace)."""
        manifest = self.manifest(namespace)
        if manifest.generation == 0:
            raise UnknownNamespaceError(namespace)
        return manifest

    def _commit_count(self, namespace: str) -> int:
        with _NAMESPACE_LOCKS_GUARD:
            return _COMMITS.get((self._location, namespace), 0)

    def _count_commit(self, namespace: str) -> None:
        """A commit was tried (visible or failed): cached snapshots of this location are checked again."""
        with _NAMESPACE_LOCKS_GUARD:
            key = (self._location, namespace)
            _COMMITS[key] = _COMMITS.get(key, 0) + 1
