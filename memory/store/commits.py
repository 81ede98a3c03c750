"""The commit protocol: a change set written as the next generation and made visible in one step.

A writer takes the namespace's lock (in-process) and, on a server, a lease; claims its generation number; writes
its versions behind a fence (``generations._Fence``); links the generation to its base (``next@G``); and then
collects what lost writers left and the manifests it superseded. A crashed writer leaves only invisible versions,
which later writers clear, so a re-run reaches exactly the state of an uninterrupted run.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from pydantic import BaseModel

from logicmap.memory.records.kinds import BY_FIELD, RECORD_KINDS
from logicmap.memory.records.records import Turn, validate_namespace
from logicmap.memory.runtime.deadline import remaining_time
from logicmap.memory.store.core import StoreCore, store_call
from logicmap.memory.store.errors import (
    CommitLeaseLost,
    GenerationConflict,
    TurnIdConflictError,
)
from logicmap.memory.store.generations import (
    _MAX_CLAIMS,
    _PLACEHOLDER,
    _RECORD,
    COMMIT_LOCK_ID,
    COMMIT_LOCK_WAIT_S,
    MANIFEST_ID,
    MAX_GENERATION,
    SENTINEL,
    _claim_id,
    _Fence,
    _LeaseWait,
    _manifest_id,
    _next_id,
    _shown,
)
from logicmap.memory.store.model import ChangeSet, Manifest
from logicmap.memory.store.port import check_commit, check_restore, next_manifest, purge_requested

__all__ = ["CommitProtocol", "purge_requested"]


class CommitProtocol(StoreCore):
    """Writes change sets: ``commit`` and ``restore``, and the leases, claims, fences and collection under them."""

    @store_call
    def commit(self, change: ChangeSet) -> Manifest:
        """Write a change set as the next generation and make it visible atomically.

        Raises ``GenerationConflict`` when another writer committed since ``base_generation``
        (``CommitLeaseLost`` when this writer stalled past its lease and another took over), and
        ``EmbedderMismatchError`` when the namespace holds vectors of another embedder.
        """
        return self._commit(change)

    @store_call
    def restore(self, change: ChangeSet, manifest: Manifest) -> Manifest:
        """Write a whole exported namespace into an empty one in one commit (``memory.files.backup``).

        The change set holds every record with its vectors and ``base_generation`` 0; the namespace
        gets ``manifest`` (its sessions, topic steps, generation number) so it reads exactly as it did
        where it was exported. Like any commit it is all or nothing: a crash leaves the namespace empty.
        Raises ``GenerationConflict`` when the namespace is not empty.
        """
        check_restore(change, manifest)
        return self._commit(change, restored=manifest)

    def _commit(self, change: ChangeSet, restored: Manifest | None = None) -> Manifest:
        namespace = validate_namespace(change.namespace)
        try:
            return self._commit_locked(namespace, change, restored)
        finally:  # after the commit is visible (or failed): cached snapshots of this location are checked again
            self._count_commit(namespace)

    def _commit_locked(self, namespace: str, change: ChangeSet, restored: Manifest | None) -> Manifest:
        embedder = change.embedder or self.embedder
        with self.namespace_lock(namespace), self._server_commit_lock(namespace) as token:
            manifest = self.manifest(namespace)
            check_commit(change, manifest, embedder, restored=restored)
            self._check_turn_ids(change, manifest)
            self._before_commit(namespace, manifest, change)
            self._mark_memory()
            fence = self._claim(namespace, manifest, token, at=restored.generation if restored else None)
            try:
                # Registered first, so a crash right after the commit cannot leave the namespace unlisted.
                self._registry().upsert(
                    ids=[namespace], embeddings=[_PLACEHOLDER], documents=[namespace], metadatas=[{"ns": namespace}]
                )
                self._clear_uncommitted(namespace, manifest.generation, fence)
                self._write_change(change, fence)
                if restored is None:
                    new_manifest = self._next_manifest(manifest, change, fence, embedder)
                else:
                    new_manifest = restored.model_copy(
                        deep=True,
                        update={
                            "namespace": namespace,
                            "generation": fence.generation,
                            "void": fence.void,
                            "embedder": embedder,
                            "purge_requested": 0,
                        },
                    )
                self._move(fence, new_manifest)
            except CommitLeaseLost:
                self._abandon(fence)
                raise
            self._collect(fence)
            return new_manifest

    def _before_commit(self, namespace: str, manifest: Manifest, change: ChangeSet) -> None:
        """Run under the commit's locks before anything is written (``purge.StorePurge`` finishes an owed purge
        here and notes one this change asks for)."""

    def _check_turn_ids(self, change: ChangeSet, manifest: Manifest) -> None:
        """Refuse a change that would replace a stored turn of another session (unless it retires it)."""
        if not change.turns or manifest.generation == 0:
            return
        retired = set(change.retire.get("turns", ()))
        sessions = {t.dia_id: t.session_id for t in change.turns if t.dia_id not in retired}
        col = self._collection(change.namespace, "turns")
        void = frozenset(manifest.void)
        for chunk in self._batched(sorted(sessions)):
            got = col.get(where={"rid": {"$in": list(chunk)}}, include=["metadatas", "documents"])
            for meta, doc in zip(got["metadatas"], got["documents"]):
                if not _shown(meta, manifest.generation, void):
                    continue
                rid = meta["rid"]
                stored = meta.get("session_id") or Turn.model_validate_json(meta.get(_RECORD) or doc).session_id
                if stored != sessions[rid]:
                    raise TurnIdConflictError(
                        f"namespace {change.namespace!r}: turn {rid!r} of session {sessions[rid]!r} would overwrite "
                        f"the stored turn {rid!r} of session {stored!r}; nothing was written: give the turn another id"
                    )

    def _write_change(self, change: ChangeSet, fence: _Fence) -> None:
        ns, generation, base = fence.namespace, fence.generation, fence.base
        for kind in RECORD_KINDS:
            self._write(
                ns,
                kind.field,
                getattr(change, kind.field),
                kind.stored_vectors(change),
                generation,
                base=base,
                void=fence.void,
                fence=fence,
            )
        for field, ids in change.retire.items():
            self._retire(ns, field, ids, generation, base, void=fence.void, fence=fence)

    @staticmethod
    def _next_manifest(manifest: Manifest, change: ChangeSet, fence: _Fence, embedder: str) -> Manifest:
        return next_manifest(manifest, change, fence.generation, embedder, fence.void)

    def _claim(self, namespace: str, manifest: Manifest, token: str, at: int | None = None) -> _Fence:
        """The generation number this commit writes: G+1 embedded, the first free claim above G on a server.

        ``at`` (a restore) asks for that number: on a server every number below it is claimed too, so no
        stalled writer can later land versions there, and those others own are void."""
        meta = self._collection(namespace, "meta")
        base = manifest.generation
        leased = bool(self.settings.chroma_host)
        fence = _Fence(
            meta=meta,
            namespace=namespace,
            base=base,
            generation=at or base + 1,
            void=list(manifest.void),
            skipped=[],
            token=token,
            leased=leased,
            lease_s=self.commit_lease_s,
        )
        if not leased:
            return fence
        if at is not None:
            return self._claim_up_to(fence, at)
        for number in range(base + 1, min(base + 1 + _MAX_CLAIMS, MAX_GENERATION + 1)):
            meta.add(
                ids=[_claim_id(number)],
                embeddings=[_PLACEHOLDER],
                documents=[token],
                metadatas=[{"kind": "claim", "owner": token}],
            )
            got = meta.get(ids=[_claim_id(number)], include=["metadatas"])
            if got["ids"] and got["metadatas"][0].get("owner") == token:
                fence.generation = number
                break
            fence.skipped.append(number)  # owned by a writer that lost its lease or died
        else:
            raise GenerationConflict(f"namespace {namespace!r}: no free generation number above {base}")
        fence.void = sorted(set(fence.void) | set(fence.skipped))
        fence.check()
        return fence

    def _claim_up_to(self, fence: _Fence, at: int) -> _Fence:
        """Claim ``at`` and every number below it that a writer building on the same base could claim.

        A writer scans at most ``_MAX_CLAIMS`` numbers above its base, so numbers past that are never claimed
        by anyone building on this base: a restore of generation 10^9 claims about 10^4 numbers, not 10^9.
        Claimed in batches: ``add`` keeps an existing id's first owner, so reading the batch back says who won."""
        numbers = [*range(fence.base + 1, min(at, fence.base + 1 + _MAX_CLAIMS)), at]
        for chunk in self._batched(numbers):
            ids = [_claim_id(n) for n in chunk]
            fence.meta.add(
                ids=ids,
                embeddings=[_PLACEHOLDER] * len(ids),
                documents=[fence.token] * len(ids),
                metadatas=[{"kind": "claim", "owner": fence.token}] * len(ids),
            )
            got = fence.meta.get(ids=ids, include=["metadatas"])
            owners = {rid: meta.get("owner") for rid, meta in zip(got["ids"], got["metadatas"])}
            for number, rid in zip(chunk, ids):
                if owners.get(rid) == fence.token:
                    continue
                if number == at:
                    raise GenerationConflict(
                        f"namespace {fence.namespace!r}: generation {at} is claimed by another writer"
                    )
                fence.skipped.append(number)
        fence.void = sorted(set(fence.void) | set(fence.skipped))
        fence.check()
        return fence

    def _move(self, fence: _Fence, manifest: Manifest) -> None:
        """The one step that makes the generation visible: link it to its base, if no one else has."""
        meta, body = fence.meta, manifest.model_dump_json()
        fence.check()
        meta.add(
            ids=[_manifest_id(fence.generation)],
            embeddings=[_PLACEHOLDER],
            documents=[body],
            metadatas=[{"kind": "manifest", "generation": fence.generation}],
        )
        fence.check()
        meta.add(
            ids=[_next_id(fence.base)],
            embeddings=[_PLACEHOLDER],
            documents=[fence.token],
            metadatas=[{"kind": "next", "owner": fence.token, "generation": fence.generation}],
        )
        got = meta.get(ids=[_next_id(fence.base)], include=["metadatas"])
        link = got["metadatas"][0] if got["ids"] else {}
        if link.get("owner") != fence.token:
            raise fence.lost(f"another writer committed generation {link.get('generation')} on top of it")
        # The hint readers start from (they follow next@ links past a stale one).
        meta.upsert(
            ids=[MANIFEST_ID], embeddings=[_PLACEHOLDER], documents=[body], metadatas=[{"generation": fence.generation}]
        )

    def _collect(self, fence: _Fence) -> None:
        """After a won commit: drop what the skipped (now void) generations left, and superseded manifests."""
        if fence.skipped:
            try:
                self._clear_versions(
                    fence.namespace,
                    {"born": {"$in": fence.skipped}},
                    {"died": {"$in": fence.skipped}},
                    check=lambda: fence.check(lease_only=True),
                )
            except CommitLeaseLost:
                pass  # committed already; the next writer collects what is left
        fence.meta.delete(where={"$and": [{"kind": "manifest"}, {"generation": {"$lt": fence.generation}}]})

    def _abandon(self, fence: _Fence) -> None:
        """A lost commit removes what it wrote (best effort: it is invisible anyway, being void)."""
        if not fence.leased:
            return
        try:
            number = fence.generation
            self._clear_versions(fence.namespace, {"born": number}, {"died": number})
        except Exception:  # the lost-lease error is what the caller needs to see
            pass

    @contextmanager
    def _server_commit_lock(self, namespace: str) -> Iterator[str]:
        """Server mode: one writer per namespace across processes (a lock record added only if absent).

        The lease only keeps writers from wasting work; correctness comes from the fence (see ``_Fence``).
        """
        token = uuid.uuid4().hex
        if not self.settings.chroma_host:
            yield token  # embedded: the directory lock makes this process the only writer
            return
        col = self._collection(namespace, "meta")
        waiting = _LeaseWait(namespace)
        left = remaining_time()  # the run's deadline bounds this wait too (then memory.contention waits on)
        deadline = time.monotonic() + (COMMIT_LOCK_WAIT_S if left is None else max(0.0, min(COMMIT_LOCK_WAIT_S, left)))
        while True:
            now = time.time()
            col.add(
                ids=[COMMIT_LOCK_ID],
                embeddings=[_PLACEHOLDER],
                documents=[token],
                metadatas=[{"owner": token, "expires": now + self.commit_lease_s}],
            )
            got = col.get(ids=[COMMIT_LOCK_ID], include=["metadatas"])
            holder = got["metadatas"][0] if got["ids"] else None
            if holder is not None and holder.get("owner") == token:
                break
            if holder is not None and float(holder.get("expires", 0)) < now:
                col.delete(ids=[COMMIT_LOCK_ID], where={"owner": holder["owner"]})  # a dead or stalled writer's lease
                continue
            waiting.note(holder, now)
            if time.monotonic() > deadline:
                raise GenerationConflict(f"namespace {namespace!r}: another process holds the commit lock")
            time.sleep(0.02 + random.random() * 0.08)
        try:
            yield token
        finally:
            col.delete(ids=[COMMIT_LOCK_ID], where={"owner": token})

    def _clear_uncommitted(self, namespace: str, generation: int, fence: _Fence | None = None) -> None:
        """Undo what crashed or stalled writers left: embedded, every version born after G (and retirement
        after G); on a server, only what void generations left (a claim above G may belong to a live writer)."""
        void = list(fence.void) if fence is not None else []
        if fence is not None and fence.leased:
            if void:
                self._clear_versions(namespace, {"born": {"$in": void}}, {"died": {"$in": void}}, check=fence.check)
            return
        born: dict[str, Any] = {"born": {"$gt": generation}}
        died: dict[str, Any] = {"$and": [{"died": {"$gt": generation}}, {"died": {"$lt": SENTINEL}}]}
        if void:
            born = {"$or": [born, {"born": {"$in": void}}]}
            died = {"$or": [died, {"died": {"$in": void}}]}
        self._clear_versions(namespace, born, died)
        self._collection(namespace, "meta").delete(
            where={"$and": [{"kind": "manifest"}, {"generation": {"$gt": generation}}]}
        )

    def _clear_versions(
        self, namespace: str, born: dict[str, Any], died: dict[str, Any], check: Callable[[], None] | None = None
    ) -> None:
        """Delete the versions matching ``born`` and make those matching ``died`` alive again.

        ``check`` runs before each update: a writer that lost its lease must not reset marks it read
        before a newer writer retired the same versions."""
        for kind in RECORD_KINDS:
            col = self._collection(namespace, kind.field)
            while True:
                found = col.get(where=born, include=[], limit=self._read_page)
                if not found["ids"]:
                    break
                col.delete(ids=found["ids"])
            while True:
                killed = col.get(where=died, include=["metadatas"], limit=min(self._read_page, self._max_batch))
                if not killed["ids"]:
                    break
                if check is not None:
                    check()
                col.update(ids=killed["ids"], metadatas=[{**m, "died": SENTINEL} for m in killed["metadatas"]])

    def _retire(
        self,
        namespace: str,
        kind: str,
        rids: Sequence[str],
        generation: int,
        previous: int,
        *,
        void: Sequence[int] = (),
        fence: _Fence | None = None,
    ) -> None:
        if not rids:
            return
        col = self._collection(namespace, kind)
        voids = frozenset(void)
        for chunk in self._batched(list(rids)):
            got = col.get(
                where={"$and": [{"rid": {"$in": list(chunk)}}, {"died": {"$gt": previous}}]}, include=["metadatas"]
            )
            shown = [(i, m) for i, m in zip(got["ids"], got["metadatas"]) if _shown(m, previous, voids)]
            if shown:
                if fence is not None:
                    fence.check()
                col.update(ids=[i for i, _ in shown], metadatas=[{**m, "died": generation} for _, m in shown])

    def _write(
        self,
        namespace: str,
        kind: str,
        records: Sequence[BaseModel],
        vectors: Sequence[Sequence[float]] | None,
        generation: int,
        *,
        base: int | None = None,
        void: Sequence[int] = (),
        fence: _Fence | None = None,
    ) -> None:
        if not records:
            return
        rids = [BY_FIELD[kind].record_id(r) for r in records]
        if len(set(rids)) != len(rids):
            raise ValueError(f"duplicate {kind} ids in one change set")
        if vectors is not None and len(vectors) != len(records):
            raise ValueError(f"{kind}: {len(records)} records but {len(vectors)} vectors")
        self._retire(
            namespace, kind, rids, generation, generation - 1 if base is None else base, void=void, fence=fence
        )
        col = self._collection(namespace, kind)
        metas = [
            {"rid": rid, "born": generation, "died": SENTINEL, _RECORD: r.model_dump_json(), **self._extra_meta(r)}
            for rid, r in zip(rids, records)
        ]
        embeds = _embedding_rows(vectors) if vectors is not None else [_PLACEHOLDER] * len(records)
        ids = [f"{rid}@{generation}" for rid in rids]
        for start in range(0, len(ids), self._max_batch):
            end = start + self._max_batch
            if fence is not None:
                fence.check()
            col.upsert(ids=ids[start:end], embeddings=embeds[start:end], metadatas=metas[start:end])

    @staticmethod
    def _extra_meta(record: BaseModel) -> dict[str, Any]:
        session = getattr(record, "session_id", None)
        return {"session_id": session} if isinstance(session, str) else {}


def _embedding_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors as one float32 matrix: Chroma takes it as it is (no Python float per number)."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"vectors must be lists of numbers of one width ({str(exc).splitlines()[0][:120]})") from None
    if matrix.ndim != 2 or not np.isfinite(matrix).all():
        raise ValueError("vectors must be lists of finite numbers of one width")
    return matrix
