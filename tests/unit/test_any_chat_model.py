"""Any chat model: LangChain's ``provider:model`` strings build that provider's model, and the typed provider
errors classify those providers' own exceptions (their SDKs' exception types, and their real clients talking to a
stand-in server on 127.0.0.1: no network)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, SecretStr

from logicmap.agents.base import run_role
from logicmap.agents.models import make_chat_model, provider_of
from logicmap.agents.provider import ProviderError, classify_error, run_scope
from logicmap.settings import LogicMapSettings

anthropic = pytest.importorskip("anthropic")
genai_errors = pytest.importorskip("google.genai.errors")
ollama = pytest.importorskip("ollama")


def _settings(model: str, **extra: Any) -> LogicMapSettings:
    return LogicMapSettings(chat_model=model, **extra)


def test_provider_strings_pick_the_provider_and_base_urls_keep_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("GOOGLE_API_KEY", "g-test")
    assert provider_of("anthropic:claude-sonnet-4-5") == "anthropic"
    assert provider_of("qwen2.5:7b") is None and provider_of("gpt-4o-mini") is None
    assert provider_of("ollama:llama3.1", "http://127.0.0.1:11434/v1") is None  # a base URL: OpenAI-compatible
    built = {
        name: make_chat_model(_settings(name))
        for name in ("anthropic:claude-sonnet-4-5", "google_genai:gemini-2.5-flash", "ollama:llama3.1")
    }
    assert type(built["anthropic:claude-sonnet-4-5"]).__name__ == "ChatAnthropic"
    assert built["anthropic:claude-sonnet-4-5"].model == "claude-sonnet-4-5"
    assert built["anthropic:claude-sonnet-4-5"].max_retries == 0  # our backoff is the only retry loop
    assert type(built["google_genai:gemini-2.5-flash"]).__name__ == "ChatGoogleGenerativeAI"
    assert type(built["ollama:llama3.1"]).__name__ == "ChatOllama"
    served = make_chat_model(_settings("qwen2.5:7b", openai_base_url="http://127.0.0.1:9/v1"))
    assert type(served).__name__ == "ChatOpenAI" and served.model_name == "qwen2.5:7b"
    openai = make_chat_model(_settings("openai:gpt-4o-mini", openai_api_key=SecretStr("sk-test")))
    assert type(openai).__name__ == "ChatOpenAI" and openai.model_name == "gpt-4o-mini"


def test_a_provider_whose_package_is_missing_is_one_clear_error() -> None:
    pytest.importorskip("langchain")
    with pytest.raises(ProviderError) as missing:
        make_chat_model(_settings("xai:grok-4"))  # langchain-xai is not installed here
    assert missing.value.kind == "missing_key" and "xai:grok-4" in str(missing.value)


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://127.0.0.1/v1/messages")


def _response(status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body or {}, headers=headers or {}, request=_request())


ANTHROPIC_ERRORS = [
    (anthropic.AuthenticationError("bad key", response=_response(401), body=None), "auth"),
    (anthropic.PermissionDeniedError("denied", response=_response(403), body=None), "permission"),
    (anthropic.NotFoundError("model: claude-x", response=_response(404), body=None), "model_not_found"),
    (
        anthropic.RateLimitError("slow down", response=_response(429, headers={"retry-after": "3"}), body=None),
        "rate_limited",
    ),
    (anthropic.InternalServerError("boom", response=_response(500), body=None), "server_error"),
    (
        anthropic.BadRequestError(
            "prompt is too long: 250000 tokens > 200000 maximum", response=_response(400), body=None
        ),
        "context_length",
    ),
    (anthropic.BadRequestError("tools: bad schema", response=_response(400), body=None), "bad_request"),
    (anthropic.APITimeoutError(request=_request()), "timeout"),
    (anthropic.APIConnectionError(request=_request()), "unreachable"),
]
GOOGLE_ERRORS = [
    (
        genai_errors.ClientError(429, {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}),
        "rate_limited",
    ),
    (
        genai_errors.ClientError(
            401, {"error": {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}}
        ),
        "auth",
    ),
    (
        genai_errors.ClientError(
            400,
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (2000000) exceeds the "
                    "maximum number of tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            },
        ),
        "context_length",
    ),
    (
        genai_errors.ServerError(503, {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}),
        "server_error",
    ),
]
OLLAMA_ERRORS = [
    (ollama.ResponseError("model 'llama9' not found", 404), "model_not_found"),
    (ollama.ResponseError("server busy", 503), "server_error"),
    (ConnectionError("Failed to connect to Ollama"), "unreachable"),
]


@pytest.mark.parametrize(
    ("exc", "kind"),
    ANTHROPIC_ERRORS + GOOGLE_ERRORS + OLLAMA_ERRORS,
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v,
)
def test_each_providers_exceptions_are_typed_provider_errors(exc: BaseException, kind: str) -> None:
    found = classify_error(exc, "endpoint")
    assert found is not None and found.kind == kind, (exc, found)


def test_wrapped_provider_errors_are_found_through_their_cause() -> None:
    try:
        try:
            raise anthropic.RateLimitError("slow", response=_response(429), body=None)
        except Exception as inner:
            raise RuntimeError("the wrapper's own words") from inner
    except RuntimeError as outer:
        found = classify_error(outer, "endpoint")
    assert found is not None and found.kind == "rate_limited"


def test_a_reply_that_is_not_a_provider_failure_is_not_classified() -> None:
    assert classify_error(ValueError("Expecting value: line 1 column 1"), "endpoint") is None
    assert classify_error(json.JSONDecodeError("x", "doc", 0), "endpoint") is None


# -- the real provider clients against a stand-in server on 127.0.0.1 ------------------------------------------


class Answer(BaseModel):
    answer: str


@pytest.fixture
def status_server() -> Iterator[tuple[str, list[int]]]:
    """A server that answers every request with the status at the head of ``statuses`` (then the last one)."""
    statuses: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's name
            self.rfile.read(int(self.headers.get("content-length") or 0))
            status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
            body = json.dumps(
                {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                    "message": "invalid key",
                }
            ).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", statuses
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("provider", ["anthropic", "ollama"])
def test_a_role_on_a_provider_model_stops_with_the_typed_error(
    provider: str, status_server: tuple[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, statuses = status_server
    statuses.append(401)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
    monkeypatch.setenv("ANTHROPIC_API_URL", url)
    monkeypatch.setenv("OLLAMA_HOST", url)
    llm = make_chat_model(_settings(f"{provider}:some-model"))
    if provider == "anthropic":
        llm.anthropic_api_url = url
    else:
        llm.base_url = url
    with run_scope(LogicMapSettings(retry_budget_s=0)), pytest.raises(ProviderError) as stopped:
        run_role(llm, role="probe", messages=[], schema=Answer, fallback=lambda: Answer(answer="fallback"))
    assert stopped.value.kind == "auth", stopped.value
