"""The store's exceptions: one-line errors that say what, where and what to do.

``StoreError`` and its kinds are raised for stores that cannot be used; ``GenerationConflict`` for commits that lost.
"""

from __future__ import annotations

__all__ = [
    "CommitLeaseLost",
    "EmbedderMismatchError",
    "GenerationConflict",
    "StoreAccessError",
    "StoreDamagedError",
    "StoreError",
    "StoreForkedError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TurnIdConflictError",
    "UnknownNamespaceError",
]


class StoreError(RuntimeError):
    """The store cannot be used as it is. The message is one line: what, where, and what to do."""


class StoreLockedError(StoreError):
    """Another process holds the embedded store; use Chroma server mode to share memory."""


class StoreDamagedError(StoreError):
    """The database of a data directory that held memory is damaged or missing; nothing is written over it."""


class StoreAccessError(StoreError):
    """The store's files cannot be used: the data directory is a file, the lock path a directory, the disk full."""


class StoreUnavailableError(StoreError):
    """The Chroma server stopped answering (killed, restarted, unreachable) in the middle of a store call."""


class StoreForkedError(StoreError):
    """A store opened before ``os.fork()`` used in the child (a Chroma client does not survive a fork)."""


class EmbedderMismatchError(StoreError):
    """A commit whose vectors come from another embedder than the namespace's (vector spaces would mix)."""


class UnknownNamespaceError(KeyError):
    """A namespace that has no committed memory.

    The message names only the namespace asked for: it is raised inside a tenant's request, so it never lists
    the other tenants (an operator lists them with ``logicmap namespaces``).
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        super().__init__(f"unknown namespace {namespace!r}: it holds no committed memory yet")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


class TurnIdConflictError(ValueError):
    """A commit that would overwrite a stored turn of another session (turn ids are unique per namespace)."""


class GenerationConflict(RuntimeError):
    """Another writer committed to the namespace since this change set was computed."""


class CommitLeaseLost(GenerationConflict):
    """A writer stalled past its commit lease and another writer took over: nothing of its change is visible."""
