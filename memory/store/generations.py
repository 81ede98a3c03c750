"""Generations: how record versions are named and seen, and what fences a commit.

Every record is stored as a version ``<id>@<generation>`` with ``born``/``died`` generations. A namespace's
manifest holds its committed generation G; readers see exactly the versions with ``born <= G < died`` (minus the
``void`` generations of writers that lost their lease). A generation becomes visible in one step, when it is
linked to G (``next@G``, added only if absent); a writer holds a lease and a ``_Fence`` while it writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logicmap.memory.store.errors import CommitLeaseLost

__all__ = ["COMMIT_LOCK_ID", "MANIFEST_ID", "MAX_GENERATION", "SENTINEL"]

_log = logging.getLogger(__name__)

SENTINEL = 2**31  # "still alive"
# The highest generation a commit can write: a live version (died = SENTINEL) is visible only at generations
# below SENTINEL. Chroma keeps born/died as int64 metadata, which SENTINEL fits.
MAX_GENERATION = SENTINEL - 1
COMMIT_LOCK_ID = "commit-lock"
COMMIT_LOCK_LEASE_S = 120.0  # a writer that died holding the lock blocks others at most this long
COMMIT_LOCK_WAIT_S = 300.0
MANIFEST_ID = "manifest"  # the latest committed manifest (a hint: readers follow next@ links past it)
PURGED_ID = "purged"  # the generation of the namespace's last purge (readers older than it read whole again)
_MAX_CLAIMS = 10_000
# A record's JSON travels in this metadata key, not as a Chroma document: Chroma indexes every document for
# full-text search (trigrams), which made writing a record cost about twice as much, for a search nothing
# runs. Records written before keep their JSON in the document; readers take either.
_RECORD = "record"
_PLACEHOLDER = [1.0]  # records without a vector of their own (relations, tags)


def _visible(generation: int, void: Sequence[int] = ()) -> dict[str, Any]:
    """Versions of committed generations up to ``generation`` not retired by one of them."""
    if not void:
        return {"$and": [{"born": {"$lte": generation}}, {"died": {"$gt": generation}}]}
    void = sorted(void)
    return {
        "$and": [
            {"born": {"$lte": generation}},
            {"born": {"$nin": void}},
            {"$or": [{"died": {"$gt": generation}}, {"died": {"$in": void}}]},
        ]
    }


def _shown(meta: Mapping[str, Any], generation: int, void: Container[int]) -> bool:
    """``_visible`` for one version's metadata. A read that has a selective condition of its own (the ids
    asked for, the versions born since a generation) checks visibility here: Chroma evaluates each condition
    of a filter over the whole collection, so adding ``_visible``'s made such a read scan every version."""
    born, died = meta["born"], meta["died"]
    return born <= generation and born not in void and (died > generation or died in void)


def _next_id(generation: int) -> str:
    return f"next@{generation}"


def _manifest_id(generation: int) -> str:
    return f"manifest@{generation}"


def _claim_id(generation: int) -> str:
    return f"claim@{generation}"


class _LeaseWait:
    """Says why a writer waits for a namespace's commit lease: once it has waited a little, then now and then."""

    FIRST_S, EVERY_S = 2.0, 15.0

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.started = time.monotonic()
        self.said: float | None = None

    def note(self, holder: Mapping[str, Any] | None, now: float) -> None:
        waited = time.monotonic() - self.started
        if holder is None or waited < self.FIRST_S or (self.said is not None and waited - self.said < self.EVERY_S):
            return
        self.said = waited
        left = max(0.0, float(holder.get("expires", now)) - now)
        _log.warning(
            "namespace %r: waiting for its commit lease, held by writer %s, for %.0f s so far; the lease "
            "expires in %.0f s if that writer does not finish (a writer that died holding it blocks others "
            "until then)",
            self.namespace,
            str(holder.get("owner", "?"))[:8],
            waited,
            left,
        )


# -- fencing ----------------------------------------------------------------------------------------
# Server mode has no transactions, so a writer's lease (the commit-lock record) cannot be checked
# atomically with its writes. What makes a commit safe is a compare-and-set that Chroma does have:
# ``add`` of an id that exists is ignored, so the first writer's record stays and reading it back
# says who won.
#
# 1. Generation numbers are claimed, ``claim@n`` added only if absent, scanning up from G+1: every
#    number is owned by one writer forever, so versions ``<id>@n`` are only ever written by n's owner
#    and two writers never write (or overwrite) the same version.
# 2. A commit becomes visible by adding ``next@G`` (G = the generation it was computed on) naming n.
#    Only one ``next@G`` can exist, so only one writer can commit on top of G: a writer that stalled
#    past its lease while another took over finds ``next@G`` taken and aborts (``CommitLeaseLost``).
#    The committed generations are the chain of next@ links; readers follow it from the manifest hint.
# 3. The numbers a writer skipped while claiming (owned by writers that lost their lease or died)
#    go into the manifest's ``void`` list; readers never show versions born in a void generation and
#    ignore retirements made by one. So whatever a stalled writer writes after it lost the lease stays
#    invisible, whenever it lands; later commits garbage-collect it.
# 4. A writer checks its fence (lease still its own, next@G still free) before every batch it writes,
#    so a stalled writer stops at its next batch. The one thing those checks cannot exclude is a stall
#    of more than the lease *inside* one retirement update (between its check and the update landing):
#    that update can overwrite the retirement marks a newer writer just set on the same records.
#    Everything else a stalled writer does is invisible by (1)-(3).
# Embedded mode is one process (the directory lock) whose writers of a namespace share one in-process
# lock, so it uses n = G+1 without claims; the same next@ link makes its commits visible.
@dataclass
class _Fence:
    """What one commit owns: the generation it builds on, the number it writes, and how to prove it."""

    meta: Any
    namespace: str
    base: int
    generation: int
    void: list[int]
    skipped: list[int]
    token: str
    leased: bool
    lease_s: float

    def check(self, *, lease_only: bool = False) -> None:
        """Raise ``CommitLeaseLost`` when another writer took the lease or committed on top of ``base``."""
        if not self.leased:
            return
        ids = [COMMIT_LOCK_ID] if lease_only else [_next_id(self.base), COMMIT_LOCK_ID]
        got = self.meta.get(ids=ids, include=["metadatas"])
        found = dict(zip(got["ids"], got["metadatas"]))
        link = found.get(_next_id(self.base))
        if link is not None and link.get("owner") != self.token:
            raise self.lost(f"another writer committed generation {link.get('generation')} on top of it")
        lock = found.get(COMMIT_LOCK_ID)
        if lock is None or lock.get("owner") != self.token:
            raise self.lost("another writer took the commit lease")

    def lost(self, what: str) -> CommitLeaseLost:
        return CommitLeaseLost(
            f"namespace {self.namespace!r}: this writer held its commit lease longer than {self.lease_s:g}s and "
            f"{what}; nothing of this change (generation {self.generation} on {self.base}) is visible: re-run it"
        )
