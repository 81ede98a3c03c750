"""Store health: damaged and missing databases, full disks and unreachable servers, each as a one-line error.

A data directory that held memory (``MEMORY_MARKER``) whose SQLite database is damaged or missing is refused and
never written over; low-level failures of Chroma are translated here into ``StoreError`` kinds.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

from logicmap.memory.store.errors import StoreAccessError, StoreDamagedError, StoreError, StoreUnavailableError
from logicmap.settings import LogicMapSettings

__all__ = ["MEMORY_MARKER", "check_database", "os_error", "prepare_directory", "translated", "unreachable"]

MEMORY_MARKER = ".logicmap-memory"  # written in the data directory before the first commit
_DAMAGE_SIGNS = ("database disk image is malformed", "file is not a database", "(code: 11)", "(code: 26)")
_FULL_BELOW_BYTES = 2 * 1024 * 1024  # free space under which a failed Chroma write is a full disk
_FULL_SIGNS = ("database or disk is full", "no space left on device", "(code: 13)", "os error 28")


def prepare_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise StoreAccessError(
            f"the data directory {directory} is a file, not a directory; "
            "set LOGICMAP_DATA_DIR (or --data-dir) to a directory"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StoreAccessError(
            f"the data directory {directory} cannot be created: a part of its path is a file; "
            "set LOGICMAP_DATA_DIR (or --data-dir) to a directory"
        ) from None
    except OSError as exc:
        raise os_error(exc, directory) from exc


def os_error(exc: OSError, where: Path) -> StoreError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(where, exc.strerror or str(exc))
    return StoreAccessError(
        f"the memory store at {where} cannot be used ({exc.strerror or exc}); "
        "check the path and its permissions, then re-run"
    )


def _disk_full(where: Path | str, reason: str) -> StoreAccessError:
    return StoreAccessError(
        f"the disk of the memory store at {where} is full ({reason}); nothing more was "
        "committed and committed sessions are kept: free disk space and re-run"
    )


def _damaged(database: Path, reason: str) -> StoreDamagedError:
    return StoreDamagedError(
        f"the memory store {database} is damaged ({reason}); nothing was written to it: restore it "
        f"from a backup, or move {database.parent.parent} aside to start an empty store"
    )


def check_database(directory: Path) -> None:
    """Refuse a data directory whose database is damaged, or missing although the directory held memory.

    The file's bytes only raise a suspicion; SQLite decides. A process killed inside a transaction leaves a
    hot rollback journal (or a WAL) beside a database whose header counts pages it never wrote: SQLite rolls
    it back on open and the store is whole. So a store is damaged only when SQLite, after its own recovery,
    says so."""
    database = directory / "chroma" / "chroma.sqlite3"
    marker = directory / MEMORY_MARKER
    if database.is_dir():
        raise _damaged(database, "it is a directory")
    size = database.stat().st_size if database.exists() else 0
    if size == 0:
        if marker.exists():
            what = "is empty" if database.exists() else "is missing"
            raise StoreDamagedError(
                f"the memory store {database} {what} but {directory} held memory ({marker} exists); "
                f"nothing was written: restore {database.name} from a backup, or delete {marker} to start "
                "an empty store there"
            )
        return
    suspicion = _header_suspicion(database, size)
    if suspicion is None and not _has_recovery_file(database):
        return
    problem = _integrity_problem(database, recover=True)
    if problem is not None:
        raise _damaged(database, f"{suspicion}; SQLite: {problem}" if suspicion else problem)


def _header_suspicion(database: Path, size: int) -> str | None:
    """What the database file's first 100 bytes say is wrong with it (None: nothing)."""
    with database.open("rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return "not a SQLite database"
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    pages = struct.unpack(">I", header[28:32])[0]
    # The page count in the header is valid when its "version-valid-for" number equals the change counter.
    if header[92:96] == header[24:28] and pages and size < page_size * pages:
        return f"truncated: {size} of {page_size * pages} bytes"
    return None


def _has_recovery_file(database: Path) -> bool:
    """A rollback journal or WAL beside the database: SQLite replays or rolls it back when it opens it."""
    for suffix in ("-journal", "-wal"):
        extra = database.with_name(database.name + suffix)
        try:
            if extra.stat().st_size > 0:
                return True
        except OSError:
            continue
    return False


def translated(exc: BaseException, directory: Path | None) -> StoreError | None:
    """The one-line store error for a low-level failure (None: not a store failure we know)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(directory or "the server", exc.strerror or str(exc))
    text = str(exc)
    lowered = text.lower()
    if any(sign in lowered for sign in _FULL_SIGNS):
        return _disk_full(directory or "the server", text.splitlines()[0][:200] if text else "disk full")
    if any(sign in lowered for sign in _DAMAGE_SIGNS):
        database = (directory / "chroma" / "chroma.sqlite3") if directory else Path("the server's database")
        return _damaged(database, text.splitlines()[0][:200])
    if directory is not None and type(exc).__module__.startswith("chromadb"):
        if _nearly_full(directory):
            # Chroma reports a full disk as a failed compaction or log write, without saying why.
            return _disk_full(directory, text.splitlines()[0][:200] if text else "no space left")
        database = directory / "chroma" / "chroma.sqlite3"
        damage = _integrity_problem(database)
        if damage is not None:
            return _damaged(database, damage)
    return None


def unreachable(exc: BaseException, settings: LogicMapSettings) -> StoreUnavailableError | None:
    """The one-line error for a Chroma server that stopped answering: the class of transport failures (the
    connection refused, reset or closed mid-response, a timeout), whatever the call was doing."""
    if not settings.chroma_host:
        return None
    try:
        import httpx
    except ImportError:  # pragma: no cover - chromadb's HTTP client brings it
        return None
    if not isinstance(exc, (httpx.TransportError, ConnectionError)):
        return None
    server = f"{settings.chroma_host}:{settings.chroma_port}"
    reason = str(exc).splitlines()[0][:160] if str(exc) else "no answer"
    return StoreUnavailableError(
        f"the Chroma server at {server} does not answer ({type(exc).__name__}: {reason}); nothing uncommitted became "
        "visible and committed sessions are kept: start the server and re-run"
    )


def _integrity_problem(database: Path, *, recover: bool = False) -> str | None:
    """SQLite's own quick check of the database (run only when something looks wrong, so it costs nothing
    otherwise). ``recover``: opened for writing, so SQLite first rolls back a hot journal (or replays a WAL)
    left by a killed writer, as it would when Chroma opens it; read-only, it could not."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"file:{database}?mode={'rw' if recover else 'ro'}", uri=True)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        found = [str(row[0]) for row in connection.execute("PRAGMA quick_check").fetchmany(3)]
        if found != ["ok"]:
            return "; ".join(found)[:200]
        # Bytes overwritten inside a record keep the file's structure but not its text.
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for _ in connection.execute(f'SELECT * FROM "{table}"'):
                pass
    except sqlite3.Error as exc:
        return str(exc)[:200]
    finally:
        connection.close()
    return None


def _nearly_full(directory: Path) -> bool:
    try:
        stats = os.statvfs(directory)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < _FULL_BELOW_BYTES
