"""The process lock of an embedded store's data directory, and the check that a store is used by its own process.

One process holds a data directory at a time (an OS lock on the directory itself); a store opened before
``os.fork()`` is refused in the child, which neither reuses nor releases the parent's lock.
"""

from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from logicmap.memory.store.errors import StoreAccessError, StoreForkedError, StoreLockedError

__all__ = ["LOCK_FILE", "acquire_process_lock", "check_same_process", "release_process_lock"]

LOCK_FILE = ".logicmap.lock"


@dataclass
class _HeldLock:
    dir_fd: int
    file_fd: int
    count: int
    pid: int


_PROCESS_LOCKS: dict[str, _HeldLock] = {}  # resolved data directory -> the lock this process holds
_PROCESS_LOCKS_GUARD = threading.Lock()


def _locked_error(directory: Path) -> StoreLockedError:
    try:
        holder = (directory / LOCK_FILE).read_text(errors="replace").strip()[:32] or "unknown"
    except OSError:
        holder = "unknown"
    return StoreLockedError(
        f"the embedded store at {directory} is in use by another process (pid {holder}). "
        "The embedded store serves one process at a time; to share memory between processes "
        "run a Chroma server (`chroma run --path DIR --port 8000`) and set LOGICMAP_CHROMA_HOST "
        "(and LOGICMAP_CHROMA_PORT)."
    )


def acquire_process_lock(directory: Path) -> str:
    """Lock the data directory for this process: an OS lock held by open descriptors, not by a file's presence.

    The lock is taken on the directory itself, so deleting or replacing ``.logicmap.lock`` while a
    process holds the store admits no second writer. The lock file is locked too (older versions of
    LogicMap lock only the file) and names the holder's pid for the error message. A lock inherited
    through ``fork`` belongs to the parent: the child neither reuses nor releases it.
    """
    key = str(directory.resolve())
    lock_path = directory / LOCK_FILE
    with _PROCESS_LOCKS_GUARD:
        held = _PROCESS_LOCKS.get(key)
        if held is not None and held.pid == os.getpid():
            held.count += 1
            return key
        dir_fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
        file_fd = -1
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                file_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except IsADirectoryError:
                raise StoreAccessError(
                    f"the lock path {lock_path} is a directory, not a file; remove it (rmdir {lock_path}) and re-run"
                ) from None
            fcntl.flock(file_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(file_fd, 0)
            os.pwrite(file_fd, str(os.getpid()).encode(), 0)
        except BlockingIOError:
            _close_quietly(file_fd, dir_fd)
            raise _locked_error(directory) from None
        except BaseException:
            _close_quietly(file_fd, dir_fd)
            raise
        _PROCESS_LOCKS[key] = _HeldLock(dir_fd, file_fd, 1, os.getpid())
        return key


def _close_quietly(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def release_process_lock(key: str) -> None:
    with _PROCESS_LOCKS_GUARD:
        held = _PROCESS_LOCKS.get(key)
        if held is None or held.pid != os.getpid():
            return  # not ours (a forked child): unlocking would release the parent's lock
        held.count -= 1
        if held.count > 0:
            return
        del _PROCESS_LOCKS[key]
        for fd in (held.file_fd, held.dir_fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
        _close_quietly(held.file_fd, held.dir_fd)


def check_same_process(opened_by: int) -> None:
    """Refuse a store opened by process ``opened_by`` when used in a forked child (a Chroma client does not survive)."""
    if os.getpid() != opened_by:
        raise StoreForkedError(
            f"this memory store was opened by process {opened_by} and used in its forked child "
            f"{os.getpid()}; a Chroma client does not survive fork: open the store in the child "
            "after the parent closed it (or use a Chroma server), or start children with 'spawn'"
        )
