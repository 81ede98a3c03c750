"""Writers racing for one namespace: wait with full-jitter backoff and try again, until the run's deadline.

Every write path that commits (ingest, ``--redo-fallbacks``, backup import, the chatbot's and tools' remember)
retries a lost commit through ``wait_for_namespace``, so concurrent writers all finish instead of giving up.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from logicmap.memory.runtime.deadline import RunDeadline, current_deadline, deadline_scope, remaining_time
from logicmap.memory.store import GenerationConflict

__all__ = [
    "MAX_CONFLICTS",
    "WAIT_BASE_S",
    "WAIT_CAP_S",
    "NamespaceBusyError",
    "commit_with_backoff",
    "wait_for_namespace",
]

T = TypeVar("T")

WAIT_BASE_S = 0.05  # the first wait's ceiling; it doubles per conflict (full jitter below the ceiling)
WAIT_CAP_S = 2.0  # no single wait longer than this: a writer checks back often enough to take a free turn
MAX_CONFLICTS = 1000  # lost commits of one change before giving up even without a deadline (bounds graph steps)

_rng = random.Random()


class NamespaceBusyError(GenerationConflict):
    """A writer that lost the race for a namespace until its deadline and gave up; nothing of its change is
    visible (committed memory is never touched), and a re-run resumes where it stopped."""

    def __init__(self, namespace: str, conflicts: int, waited_s: float) -> None:
        self.namespace, self.conflicts, self.waited_s = namespace, conflicts, waited_s
        super().__init__(
            f"namespace {namespace!r}: gave up after waiting {waited_s:.1f} s for other writers ({conflicts} "
            f"commit{'s' if conflicts != 1 else ''} lost to them); nothing of this change was written: re-run to "
            "resume, or raise LOGICMAP_RUN_DEADLINE_S"
        )


def _budget_left(waited_s: float, bound_s: float | None) -> float | None:
    """Seconds this writer may still wait: the enclosing run's deadline, else ``bound_s`` minus what it waited."""
    remaining = remaining_time()
    if remaining is None and bound_s:
        remaining = bound_s - waited_s
    return remaining


def wait_for_namespace(
    namespace: str, conflicts: int, since: float, *, bound_s: float | None = None, rng: random.Random | None = None
) -> float:
    """Sleep before retrying a commit that lost the race for ``namespace`` for the ``conflicts``-th time (1-based):
    a full-jitter wait below ``WAIT_BASE_S * 2**(conflicts-1)`` (at most ``WAIT_CAP_S``). Returns the seconds slept.

    ``since`` is when the writer first tried to commit (``time.monotonic()``). Bounded by the run's deadline
    (``memory.runtime.deadline``) or, outside a run, by ``bound_s`` seconds since then (``None``/0: no bound): raises
    ``NamespaceBusyError`` (one line: namespace, time waited) when the wait would pass it."""
    ceiling = min(WAIT_CAP_S, WAIT_BASE_S * 2 ** min(max(conflicts - 1, 0), 30))
    delay = (rng or _rng).uniform(0.0, ceiling)
    waited = time.monotonic() - since
    left = _budget_left(waited, bound_s)
    if left is not None and delay >= left:
        raise NamespaceBusyError(namespace, conflicts, waited)
    time.sleep(delay)
    return delay


def commit_with_backoff(namespace: str, attempt: Callable[[], T], *, bound_s: float | None = None) -> T:
    """``attempt()`` (which reads the namespace afresh and commits) until it does not lose the race: each
    ``GenerationConflict`` waits through ``wait_for_namespace``; ``NamespaceBusyError`` when the bound passes.

    Outside a run (a backup import), ``bound_s`` is the deadline of the whole write: the store's wait for a
    server-mode commit lock is bounded by it too."""
    if current_deadline() is None and bound_s:
        scope = RunDeadline(deadline_s=bound_s)
        scope.restart()
        with deadline_scope(scope):
            return _commit_until_won(namespace, attempt)
    return _commit_until_won(namespace, attempt)


def _commit_until_won(namespace: str, attempt: Callable[[], T]) -> T:
    conflicts, since = 0, time.monotonic()
    while True:
        try:
            return attempt()
        except NamespaceBusyError:
            raise
        except GenerationConflict:
            conflicts += 1
            if conflicts > MAX_CONFLICTS:
                raise NamespaceBusyError(namespace, conflicts, time.monotonic() - since) from None
            wait_for_namespace(namespace, conflicts, since)
