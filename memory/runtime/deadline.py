"""The run's deadline (``LOGICMAP_RUN_DEADLINE_S``) as every layer sees it, and the checks its loops make.

A run (a question, one ingested session) enters a scope; model calls (``agents.provider``) and no-LLM loops
(ranking, traversal, Goal-Mem's scoring) call ``check_deadline`` so a run past its deadline stops with one error.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "DEADLINE_HINT",
    "RunDeadline",
    "RunDeadlineExceeded",
    "check_deadline",
    "current_deadline",
    "deadline_scope",
    "remaining_time",
]

DEADLINE_HINT = "raise LOGICMAP_RUN_DEADLINE_S if the run is just slow"


class RunDeadlineExceeded(RuntimeError):
    """The run's deadline passed: the run stops and commits nothing partial."""


@dataclass
class RunDeadline:
    """A run's deadline: ``deadline_s`` seconds from the last ``restart`` (monotonic time; ``None``: no limit)."""

    deadline_s: float | None = None
    deadline: float | None = None

    def restart(self) -> None:
        """Start the deadline over (ingest gives each session the full deadline)."""
        self.deadline = time.monotonic() + self.deadline_s if self.deadline_s else None

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def expired_error(self, where: str) -> RuntimeError:
        """The error a run past its deadline stops with (``agents.provider.RunScope``: the provider's)."""
        return RunDeadlineExceeded(f"the run's deadline ({self.deadline_s or 0:g} s) passed {where} ({DEADLINE_HINT})")

    def check(self, where: str) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.expired_error(where)


# LangGraph copies the context into its node threads: they share the run's (mutable) deadline object.
_current: contextvars.ContextVar[RunDeadline | None] = contextvars.ContextVar("logicmap_run_scope", default=None)


def current_deadline() -> RunDeadline | None:
    """The enclosing run's deadline, or ``None`` outside a run scope."""
    return _current.get()


def remaining_time() -> float | None:
    """Seconds left before the enclosing run's deadline (``None``: no run scope or no limit)."""
    scope = _current.get()
    return None if scope is None else scope.remaining()


def check_deadline(where: str) -> None:
    """Raise the run's deadline error when its deadline has passed; cheap enough for every loop iteration.

    ``where`` completes "the run's deadline passed ...", e.g. ``"while Goal-Mem scored turns"``."""
    scope = _current.get()
    if scope is not None and scope.deadline is not None and time.monotonic() > scope.deadline:
        raise scope.expired_error(where)


@contextlib.contextmanager
def deadline_scope(scope: RunDeadline) -> Iterator[RunDeadline]:
    """Make ``scope`` the enclosing run's deadline for the block."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        try:
            _current.reset(token)
        except ValueError:  # a streaming run's generator finalized in another context: that context's value stays
            pass
