"""A fake OpenAI-compatible chat server on 127.0.0.1 whose faults switch per scenario, for tests and benchmarks.

Valid replies come from ``evals.bench.scripted`` (a reply each role accepts); faults: HTTP errors with
OpenAI's error bodies and ``Retry-After``, hangs, truncated tool arguments, cut-off or filtered replies,
``choices: []``, prompts over a context limit. Every request is recorded (time, size, status, usage sent).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.messages import convert_to_messages

from logicmap.evals.bench.scripted import scripted_reply

__all__ = ["FakeOpenAIServer", "Scenario", "ServedRequest"]


@dataclass
class Scenario:
    """What the server does. Counted faults hit the first ``n`` requests, then the server answers normally.

    ``status``: reply this HTTP status (with ``error_code``/``message``) to the first ``status_times`` requests
    (``None``: every request); ``retry_after``: seconds sent as ``Retry-After`` and ``retry-after-ms``;
    ``hang_s``: sleep this long before answering the first ``hang_times`` requests; ``truncated``,
    ``empty_choices``, ``length``, ``content_filter``: that many such replies first; ``max_prompt_chars``:
    a request body over it gets OpenAI's 400 ``context_length_exceeded``; ``usage``: report token usage.
    """

    status: int | None = None
    status_times: int | None = None
    error_code: str | None = None
    message: str = "simulated failure"
    retry_after: float | None = None
    hang_s: float = 0.0
    hang_times: int | None = None
    truncated: int = 0
    empty_choices: int = 0
    length: int = 0
    content_filter: int = 0
    max_prompt_chars: int | None = None
    usage: bool = True


@dataclass
class ServedRequest:
    """One request as the server saw it."""

    at: float
    chars: int
    status: int
    kind: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    body: dict[str, Any] = field(default_factory=dict, repr=False)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class FakeOpenAIServer:
    """``with FakeOpenAIServer() as server: ... server.url`` (an OpenAI ``base_url``); ``server.scenario = ...``
    switches behaviour at run time; ``server.requests`` records what came in; ``reply`` builds valid answers."""

    def __init__(
        self, scenario: Scenario | None = None, reply: Callable[[list[Any]], dict[str, Any]] = scripted_reply
    ) -> None:
        self._lock = threading.Lock()
        self._scenario = scenario or Scenario()
        self._served: dict[str, int] = {}
        self.reply = reply
        self.requests: list[ServedRequest] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-openai", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    @scenario.setter
    def scenario(self, scenario: Scenario) -> None:
        with self._lock:
            self._scenario, self._served = scenario, {}

    def reset(self, scenario: Scenario | None = None) -> None:
        """A new scenario and an empty request log."""
        with self._lock:
            self._scenario, self._served, self.requests = scenario or Scenario(), {}, []

    def usage_sent(self) -> tuple[int, int]:
        """Prompt and completion tokens the server reported over all requests."""
        with self._lock:
            return sum(r.prompt_tokens for r in self.requests), sum(r.completion_tokens for r in self.requests)

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- deciding and building replies --------------------------------------------------------------------

    def _take(self, fault: str, limit: int | None) -> bool:
        """Whether this request gets ``fault`` (the first ``limit`` requests do; ``None``: all)."""
        with self._lock:
            used = self._served.get(fault, 0)
            if limit is not None and used >= limit:
                return False
            self._served[fault] = used + 1
            return True

    def _record(self, entry: ServedRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def respond(self, body: dict[str, Any], chars: int) -> tuple[int, dict[str, str], dict[str, Any], str]:
        """``(status, headers, JSON body, kind)`` for one request."""
        sc = self._scenario
        if sc.hang_s and (sc.hang_times is None or self._take("hang", sc.hang_times)):
            time.sleep(sc.hang_s)
        if sc.max_prompt_chars is not None and chars > sc.max_prompt_chars:
            return self._error(
                400,
                "context_length_exceeded",
                f"This model's maximum context length is "
                f"{sc.max_prompt_chars // 4} tokens. However, your messages resulted in "
                f"{chars // 4} tokens.",
            )
        if sc.status is not None and self._take("status", sc.status_times):
            return self._error(sc.status, sc.error_code, sc.message)
        for kind in ("truncated", "empty_choices", "length", "content_filter"):
            if getattr(sc, kind) and self._take(kind, getattr(sc, kind)):
                return self._completion(body, kind)
        return self._completion(body, "ok")

    def _error(self, status: int, code: str | None, message: str) -> tuple[int, dict[str, str], dict[str, Any], str]:
        headers: dict[str, str] = {}
        if self._scenario.retry_after is not None:
            headers["retry-after-ms"] = str(int(self._scenario.retry_after * 1000))
            headers["retry-after"] = str(max(1, round(self._scenario.retry_after)))
        error = {"message": message, "type": _ERROR_TYPES.get(status, "server_error"), "param": None, "code": code}
        return status, headers, {"error": error}, f"http_{status}"

    def _completion(self, body: dict[str, Any], kind: str) -> tuple[int, dict[str, str], dict[str, Any], str]:
        messages = convert_to_messages(body.get("messages", []))
        args = json.dumps(self.reply(messages))
        finish = "stop"
        if kind in ("truncated", "length"):
            args, finish = args[: max(1, len(args) // 2)], ("length" if kind == "length" else "tool_calls")
        if kind == "content_filter":
            finish = "content_filter"
        tool = (
            (body.get("tool_choice") or {}).get("function", {}).get("name")
            if isinstance(body.get("tool_choice"), dict)
            else None
        )
        if tool:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": args}}],
            }
            finish = "tool_calls" if finish == "stop" else finish
        else:
            message = {"role": "assistant", "content": args}
        prompt = _tokens(json.dumps(body.get("messages", [])))
        completion = _tokens(args)
        choices = [] if kind == "empty_choices" else [{"index": 0, "message": message, "finish_reason": finish}]
        reply: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": choices,
        }
        if self._scenario.usage:
            reply["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return 200, {}, reply, kind


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # the base class's name
            pass

        def do_POST(self) -> None:  # http.server's naming
            at = time.monotonic()
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {}
            entry = ServedRequest(at=at, chars=len(raw), status=0, kind="pending", body=body)
            server._record(entry)  # on arrival, so a request still hanging is counted
            headers: dict[str, str]
            payload: dict[str, Any]
            if not self.path.rstrip("/").endswith("/chat/completions"):
                status, headers, payload, kind = 404, {}, {"error": {"message": "not found"}}, "http_404"
            else:
                status, headers, payload, kind = server.respond(body, len(raw))
            usage = payload.get("usage") or {}
            entry.status, entry.kind = status, kind
            entry.prompt_tokens = usage.get("prompt_tokens", 0)
            entry.completion_tokens = usage.get("completion_tokens", 0)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout): nothing to send
                pass

    return Handler
