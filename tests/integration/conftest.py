"""Integration fixtures: real servers on 127.0.0.1 (the local model, the LangGraph API server, a capture server).

Every server binds a free loopback port, is stopped by process id at teardown, and is waited for with a deadline.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from logicmap.agents.local_llm import (
    LocalLLMServer,
    LocalLLMUnavailable,
    find_llm_python,
    find_model_path,
    free_port,
    stop_process_group,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STUDIO_CONFIG = PROJECT_ROOT / "studio" / "langgraph.json"
LANGGRAPH_BIN = Path(sys.executable).parent / "langgraph"

# Never let a developer's tracing or model settings leak into a server a test starts.
_SCRUBBED_PREFIXES = ("LANGSMITH_", "LANGCHAIN_", "LOGICMAP_", "OPENAI_")


PROJECT_DATA = Path(__file__).resolve().parents[2] / "data"


def server_env(data_dir: Path, *, embedder: str = "minilm", **extra: str | None) -> dict[str, str]:
    """Environment for a child process: offline, no telemetry, a private data dir, nothing traced unless asked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        ANONYMIZED_TELEMETRY="False",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        LOGICMAP_DATA_DIR=str(data_dir),
        LOGICMAP_EMBEDDING_PROVIDER=embedder,
        # The operator's allow-list for the ingest graph's `path` input on a server: the project's data/
        # (a server reads no files by default). A test passes LOGICMAP_INGEST_ROOT=None to start one without it.
        LOGICMAP_INGEST_ROOT=str(PROJECT_DATA),
        PYTHONUNBUFFERED="1",
    )
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.fixture
def child_env() -> Any:
    """``server_env`` as a fixture, for tests that start their own child processes."""
    return server_env


# -- the local model ------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LocalLLMServer]:
    """SmolLM2 behind llama-cpp-python's server, shared by the session. Skips only when it is not installed."""
    try:
        find_model_path(find_llm_python())
    except LocalLLMUnavailable as exc:
        pytest.skip(f"local model not installed ({exc})")
    server = LocalLLMServer()
    server.start(timeout=120)
    try:
        yield server
    finally:
        server.stop()


# -- the LangGraph API server ---------------------------------------------------------------------------------


class LangGraphDevServer:
    """``langgraph dev`` serving studio/langgraph.json's graphs from a private working directory."""

    def __init__(self, workdir: Path, env: dict[str, str], config: Path = STUDIO_CONFIG) -> None:
        self.workdir = workdir
        self.env = env
        self.source_config = config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "langgraph-dev.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.graph_ids: list[str] = []

    def write_config(self) -> Path:
        # The studio config, run from elsewhere: the project root as the dependency, and no studio/.env
        # (a developer's .env would override the test's settings).
        config = json.loads(self.source_config.read_text())
        config["dependencies"] = [str(PROJECT_ROOT)]
        config.pop("env", None)
        self.graph_ids = list(config["graphs"])
        path = self.workdir / "langgraph.json"
        path.write_text(json.dumps(config, indent=2))
        return path

    def start(self, timeout: float = 180.0) -> LangGraphDevServer:
        config = self.write_config()
        command = [
            str(LANGGRAPH_BIN),
            "dev",
            "--no-reload",
            "--no-browser",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        log = open(self.log_path, "wb")  # the child owns it; closed below
        try:
            self.process = subprocess.Popen(
                command, cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                found = httpx.post(f"{self.url}/assistants/search", json={"limit": 50}, timeout=5.0)
                if found.status_code == 200 and {a["graph_id"] for a in found.json()} >= set(self.graph_ids):
                    return self
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"langgraph dev not ready within {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None:
            stop_process_group(self.process, timeout=15.0)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@pytest.fixture
def langgraph_dev(tmp_path: Path) -> Iterator[Any]:
    """Factory: ``langgraph_dev(**env)`` starts a LangGraph API server; every server is stopped at teardown.

    ``config`` replaces top-level keys of studio/langgraph.json for that server (``graphs``, ``store``, ``auth``)."""
    servers: list[LangGraphDevServer] = []

    def start(
        *, embedder: str = "minilm", config: dict[str, Any] | None = None, **extra: str | None
    ) -> LangGraphDevServer:
        workdir = tmp_path / f"langgraph-{len(servers)}"
        workdir.mkdir()
        source = STUDIO_CONFIG
        if config:
            source = tmp_path / f"langgraph-{len(servers)}.json"
            source.write_text(json.dumps({**json.loads(STUDIO_CONFIG.read_text()), **config}))
        server = LangGraphDevServer(workdir, server_env(workdir / "memory", embedder=embedder, **extra), config=source)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


async def refused_run(call: Any, *, error_output: bool = False) -> str:
    """The server's refusal of a run (403 with a detail) or the run's own error, as text; fails if the run succeeded.

    ``error_output``: a run whose output carries an ``error`` key counts as refused too."""
    from langgraph_sdk.errors import APIStatusError

    try:
        result = await call
    except (httpx.HTTPStatusError, APIStatusError) as exc:
        response = getattr(exc, "response", None)
        return f"{getattr(response, 'status_code', '?')} {getattr(response, 'text', exc)}"
    except Exception as exc:  # the SDK raises a plain Exception for a run that failed
        return f"run error {exc}"
    text = json.dumps(result)
    assert "__error__" in text or (error_output and "error" in (result or {})), f"the run was not refused: {text[:400]}"
    return text


# -- a LangSmith stand-in ---------------------------------------------------------------------------------------


class CaptureServer:
    """Records every HTTP request on 127.0.0.1 and answers like a tolerant LangSmith; parses run payloads."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with capture._lock:
                    capture.requests.append(
                        {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                    )
                status, payload = (200, b"{}")
                if self.command == "POST":
                    status = 202
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_PUT = _record

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> CaptureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def run_requests(self) -> list[dict[str, Any]]:
        """Requests that carry runs (anything but the client's ``GET /info`` probe)."""
        with self._lock:
            return [r for r in self.requests if not (r["method"] == "GET" and r["path"].rstrip("/").endswith("/info"))]

    def runs(self) -> dict[str, dict[str, Any]]:
        """Runs by id, posts and patches merged, from multipart and JSON batch payloads."""
        runs: dict[str, dict[str, Any]] = {}

        def merge(run_id: str, data: dict[str, Any]) -> None:
            runs.setdefault(run_id, {}).update({k: v for k, v in data.items() if v is not None})

        with self._lock:
            requests = list(self.requests)
        for request in requests:
            content_type = request["headers"].get("Content-Type") or request["headers"].get("content-type") or ""
            body = request["body"]
            if request["headers"].get("Content-Encoding") == "zstd":
                raise AssertionError("compressed trace payloads are not expected from the capture setup")
            if content_type.startswith("multipart/"):
                message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                    b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
                )
                for part in message.iter_parts():
                    name = part.get_param("name", header="content-disposition") or ""
                    value = json.loads(part.get_payload(decode=True) or b"null")
                    pieces = name.split(".")
                    if len(pieces) == 2:
                        merge(pieces[1], value)
                    elif len(pieces) == 3:
                        merge(pieces[1], {pieces[2]: value})
            elif request["path"].rstrip("/").endswith("/runs/batch") and body:
                batch = json.loads(body)
                for item in [*batch.get("post", []), *batch.get("patch", [])]:
                    merge(str(item["id"]), item)
            elif request["path"].rstrip("/").endswith("/runs") and request["method"] == "POST" and body:
                item = json.loads(body)
                merge(str(item["id"]), item)
            elif "/runs/" in request["path"] and request["method"] == "PATCH" and body:
                merge(request["path"].rstrip("/").rsplit("/", 1)[1], json.loads(body))
        return runs


@pytest.fixture
def capture_server() -> Iterator[CaptureServer]:
    with CaptureServer() as server:
        yield server
