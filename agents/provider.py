"""Provider and transport failures of chat model calls: typed errors, retries with backoff, deadlines.

A role falls back only on output its model really produced; everything here stops the run instead.
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, TypeVar, cast

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_before_delay
from tenacity.stop import stop_base

from logicmap.memory.runtime.deadline import (
    DEADLINE_HINT,
    RunDeadline,
    RunDeadlineExceeded,
    current_deadline,
    deadline_scope,
)

__all__ = [
    "CONTEXT_WINDOW_SETTING",
    "DeadlineExceeded",
    "ProviderError",
    "ProviderErrorKind",
    "RateGate",
    "RetryPolicy",
    "RunScope",
    "backoff_delay",
    "call_with_retries",
    "classify_error",
    "current_scope",
    "endpoint_of",
    "rate_gate",
    "retry_after_seconds",
    "run_scope",
]

R = TypeVar("R")

ProviderErrorKind = Literal[
    "missing_key",
    "auth",
    "permission",
    "model_not_found",
    "bad_request",
    "context_length",
    "rate_limited",
    "server_error",
    "timeout",
    "unreachable",
    "deadline",
]

# Kinds a later attempt may cure (within the retry budget); the others stop at once.
TRANSIENT: frozenset[str] = frozenset({"rate_limited", "server_error", "timeout", "unreachable"})

# A refused connection is more often a wrong URL than a restarting server: give up sooner.
UNREACHABLE_MAX_REQUESTS = 3

# The setting that bounds how much of a session one prompt carries (named in context-length errors).
CONTEXT_WINDOW_SETTING = "LOGICMAP_CONTEXT_TOKENS"

_HINTS: dict[str, str] = {
    "missing_key": "",
    "auth": "check LOGICMAP_OPENAI_API_KEY",
    "permission": "check the key's permissions for this model",
    "model_not_found": "check LOGICMAP_CHAT_MODEL",
    "bad_request": "if the server rejects forced tool calls, set LOGICMAP_STRUCTURED_OUTPUT=json_mode or prompt",
    "context_length": f"lower {CONTEXT_WINDOW_SETTING} to send less of a session per prompt",
    "rate_limited": "raise LOGICMAP_RETRY_BUDGET_S or lower the request rate",
    "server_error": "the server kept failing; re-run later to resume",
    "timeout": "raise LOGICMAP_REQUEST_TIMEOUT if the model is just slow",
    "unreachable": "check LOGICMAP_OPENAI_BASE_URL and that the server is running",
    "deadline": DEADLINE_HINT,
}


class ProviderError(RuntimeError):
    """A chat model call that failed for a reason other than its output: the run stops, nothing partial is kept.

    ``kind`` names the cause; ``transient`` kinds were retried within the budget before this was raised.
    """

    def __init__(
        self,
        kind: ProviderErrorKind,
        message: str,
        *,
        endpoint: str = "",
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        hint = _HINTS.get(kind, "")
        super().__init__(f"{message}{f' ({hint})' if hint else ''}")
        self.kind = kind
        self.detail = message
        self.endpoint = endpoint
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT


class DeadlineExceeded(ProviderError, RunDeadlineExceeded):
    """The run's deadline (``LOGICMAP_RUN_DEADLINE_S``) passed: before the model answered, or in a no-LLM loop
    (``memory.runtime.deadline.check_deadline``); ``endpoint`` is empty then."""

    def __init__(self, message: str, *, endpoint: str = "") -> None:
        super().__init__("deadline", message, endpoint=endpoint)


# -- classification ----------------------------------------------------------------------------------


def endpoint_of(llm: Any) -> str:
    """Where a chat model sends its requests: its base URL, OpenAI's for ChatOpenAI without one, else its type."""
    base = getattr(llm, "openai_api_base", None)
    if base:
        return str(base).rstrip("/")
    if type(llm).__module__.startswith("langchain_openai"):
        return "https://api.openai.com/v1"
    return type(llm).__name__


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` in seconds or as an HTTP date."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            parsed = email.utils.parsedate_tz(value) if name == "retry-after" else None
            if parsed is not None:
                return max(0.0, float(email.utils.mktime_tz(parsed) - time.time()))
    return None


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:200]
    return str(getattr(exc, "message", None) or exc)[:200]


def _status_kind(status: int, text: str) -> ProviderErrorKind:
    if any(
        sign in text
        for sign in (
            "context_length_exceeded",
            "maximum context length",
            "context window",
            "prompt is too long",
            "exceeds the maximum number of tokens",
        )
    ):
        return "context_length"
    if status == 401:
        return "auth"
    if status == 403:
        return "permission"
    if status == 404:
        return "model_not_found"
    if status == 429:
        return "rate_limited"
    if status >= 500 or status in (408, 409):
        return "server_error"
    return "bad_request"


_VERBS: dict[str, str] = {
    "auth": "rejected the API key",
    "permission": "denied access",
    "model_not_found": "does not know the model",
    "bad_request": "rejected the request",
    "context_length": "says the prompt exceeds the model's context window",
    "rate_limited": "kept rate-limiting",
    "server_error": "kept failing",
}


def _status_error(exc: BaseException, status: int, text: str, endpoint: str) -> ProviderError:
    kind = _status_kind(status, text)
    retry_after = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))
    message = f"the chat model at {endpoint} {_VERBS[kind]} ({status}): {_server_message(exc)}"
    return ProviderError(kind, message, endpoint=endpoint, status=status, retry_after=retry_after)


def _timed_out(endpoint: str) -> ProviderError:
    return ProviderError("timeout", f"the chat model at {endpoint} did not answer in time", endpoint=endpoint)


def _unreachable(endpoint: str, reason: BaseException) -> ProviderError:
    return ProviderError(
        "unreachable", f"cannot reach the chat model at {endpoint}: {str(reason)[:160]}", endpoint=endpoint
    )


def classify_error(exc: BaseException, endpoint: str) -> ProviderError | None:
    """The provider error behind an exception from a chat model call, or ``None`` when it is not one.

    ``None`` means the call may have produced output that simply failed to parse (a malformed reply);
    such failures are the role's to retry and fall back on.
    """
    if isinstance(exc, ProviderError):
        return exc
    try:
        import openai
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        openai = None  # type: ignore[assignment]  # optional module: None marks it absent
    if openai is not None and isinstance(exc, openai.APIStatusError):
        return _status_error(exc, int(exc.status_code), f"{exc} {getattr(exc, 'code', '') or ''}", endpoint)
    found = _any_provider_error(exc, endpoint)
    if found is not None:
        return found
    if openai is not None and isinstance(exc, openai.APITimeoutError) or isinstance(exc, TimeoutError):
        return _timed_out(endpoint)
    if openai is not None and isinstance(exc, openai.APIConnectionError) or isinstance(exc, ConnectionError):
        cause: BaseException = exc
        while cause.__cause__ is not None:  # langchain's and openai's wrappers hide the transport's own reason
            cause = cause.__cause__
        return _unreachable(endpoint, cause)
    return _httpx_error(exc, endpoint)


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception of a provider's SDK carries (Anthropic, Ollama: ``status_code``; Google's
    genai: ``code``), when it carries one."""
    for name in ("status_code", "code", "status"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _any_provider_error(exc: BaseException, endpoint: str) -> ProviderError | None:
    """Status errors of any provider SDK (a chat model built by ``init_chat_model``), and SDK timeout and
    connection errors by their type names (``APITimeoutError``, ``APIConnectionError``, ``ConnectError``...)."""
    module = type(exc).__module__.split(".")[0]
    if module in ("openai", "httpx"):
        return None  # classified by their own rules
    status, cause = _status_of(exc), exc.__cause__
    while status is None and cause is not None:  # a wrapper (LangChain's, the caller's) around the SDK's error
        if _status_of(cause) is not None:
            status, exc = _status_of(cause), cause
        cause = cause.__cause__
    if status is not None and status >= 400:
        return _status_error(exc, status, f"{exc} {getattr(exc, 'message', '') or ''}".lower(), endpoint)
    if module == "builtins":
        return None  # TimeoutError and ConnectionError: classified below
    names = {klass.__name__ for klass in type(exc).__mro__}
    if any("Timeout" in name for name in names):
        return _timed_out(endpoint)
    if names & {"APIConnectionError", "ConnectError", "ConnectionError", "ConnectionRefusedError"}:
        return _unreachable(endpoint, exc)
    return None


def _httpx_error(exc: BaseException, endpoint: str) -> ProviderError | None:
    try:
        import httpx
    except ImportError:  # pragma: no cover
        return None
    if isinstance(exc, httpx.TimeoutException):
        return _timed_out(endpoint)
    if isinstance(exc, httpx.TransportError):
        return _unreachable(endpoint, exc)
    return None


# -- backoff, the shared rate gate, the run's deadline -------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures of one call are retried: full-jitter exponential backoff within a time budget."""

    budget_s: float = 60.0
    base_s: float = 0.5
    cap_s: float = 30.0
    max_requests: int = 8

    @classmethod
    def from_settings(cls, settings: Any) -> RetryPolicy:
        return cls(
            budget_s=float(settings.retry_budget_s),
            base_s=float(settings.retry_base_s),
            max_requests=int(settings.retry_max_requests),
        )


def backoff_delay(retry: int, policy: RetryPolicy, rng: random.Random, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``retry`` (0-based): full jitter over ``base * 2**retry`` (capped),
    never less than what the server asked for (tenacity's ``wait_random_exponential`` draws from the global
    ``random`` and cannot see Retry-After)."""
    ceiling = min(policy.cap_s, policy.base_s * (2**retry))
    return max(retry_after or 0.0, rng.uniform(0.0, ceiling))


class RateGate:
    """Process-wide "not before" times per endpoint: a 429 holds back every caller of that endpoint,
    so parallel roles wait out one rate limit together instead of each hammering the server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._not_before: dict[str, float] = {}

    def hold(self, endpoint: str, seconds: float) -> None:
        until = time.monotonic() + seconds
        with self._lock:
            self._not_before[endpoint] = max(self._not_before.get(endpoint, 0.0), until)

    def wait_time(self, endpoint: str) -> float:
        with self._lock:
            return max(0.0, self._not_before.get(endpoint, 0.0) - time.monotonic())

    def clear(self) -> None:
        with self._lock:
            self._not_before.clear()


rate_gate = RateGate()


@dataclass
class RunScope(RunDeadline):
    """A run's limits: its deadline (``memory.runtime.deadline.RunDeadline``) and the retry policy of its calls."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    request_timeout: float | None = None
    rng: random.Random = field(default_factory=random.Random)
    question: str | None = None
    """The question this run answers, checked against its limit when the run was entered
    (``graphs.runtime.tracing.question_run``): the run's later hops neither check it again nor open a scope of their own."""

    def expired_error(self, where: str) -> RuntimeError:
        return DeadlineExceeded(f"the run's deadline ({self.deadline_s or 0:g} s) passed {where}")


_default_scope: RunScope | None = None


def current_scope() -> RunScope:
    """The enclosing run's scope (LangGraph copies context into its node threads); outside one (a graph invoked
    directly that takes no question, such as ingest from Studio) the retry policy of the ``LOGICMAP_*`` settings
    and no run deadline; a question run invoked directly gets its own (``graphs.runtime.tracing.TracedGraph``)."""
    global _default_scope
    found = current_deadline()
    if isinstance(found, RunScope):
        return found
    if _default_scope is None:
        from logicmap.settings import LogicMapSettings

        _default_scope = RunScope(policy=RetryPolicy.from_settings(LogicMapSettings()))
    return _default_scope


@contextlib.contextmanager
def run_scope(settings: Any | None = None, *, seed: int | None = None) -> Iterator[RunScope]:
    """Run the enclosed graph invocation with the settings' retry policy and run deadline (restarted by ``restart``)."""
    if settings is None:
        scope = RunScope(rng=random.Random(seed))
    else:
        scope = RunScope(
            policy=RetryPolicy.from_settings(settings),
            request_timeout=settings.request_timeout,
            deadline_s=settings.run_deadline_s,
            rng=random.Random(seed),
        )
    scope.restart()
    with deadline_scope(scope):
        yield scope


def _deadline_error(scope: RunScope, endpoint: str, why: str) -> DeadlineExceeded:
    return DeadlineExceeded(
        f"the run's deadline ({scope.deadline_s:g} s) passed {why} the chat model at {endpoint}", endpoint=endpoint
    )


def _request(
    call: Callable[[float | None], R], scope: RunScope, endpoint: str, on_request: Callable[[], None] | None
) -> R:
    """One request once the endpoint's gate is open, timed out at the run's deadline; its failure classified."""
    wait = rate_gate.wait_time(endpoint)
    if wait > 0:  # a little jitter so the callers held back together do not all resend at once
        wait += scope.rng.uniform(0.0, min(1.0, 0.1 * wait))
        remaining = scope.remaining()
        if remaining is not None and wait >= remaining:
            raise _deadline_error(scope, endpoint, "waiting out a rate limit of")
        time.sleep(wait)
    remaining = scope.remaining()
    if remaining is not None and remaining <= 0:
        raise _deadline_error(scope, endpoint, "before an answer from")
    timeout = None if remaining is None else min(remaining, scope.request_timeout or remaining)
    if on_request is not None:
        on_request()
    try:
        return call(timeout)
    except Exception as exc:
        error = classify_error(exc, endpoint)
        if error is None:
            raise
        remaining = scope.remaining()
        if error.kind == "timeout" and remaining is not None and remaining <= 0.05:
            raise _deadline_error(scope, endpoint, "waiting for") from exc
        if error is exc:
            raise
        raise error from exc


def _failure(state: RetryCallState) -> ProviderError:
    """The failure tenacity is retrying: always a transient ``ProviderError`` (``_transient``)."""
    return cast(ProviderError, state.outcome.exception() if state.outcome else None)


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.transient


class _UnreachableLimit(stop_base):
    """A refused connection stops sooner: after ``UNREACHABLE_MAX_REQUESTS`` requests."""

    def __call__(self, state: RetryCallState) -> bool:
        return _failure(state).kind == "unreachable" and state.attempt_number >= UNREACHABLE_MAX_REQUESTS


def call_with_retries(
    call: Callable[[float | None], R],
    *,
    endpoint: str,
    on_request: Callable[[], None] | None = None,
    scope: RunScope | None = None,
) -> R:
    """``call(timeout)`` until it returns or fails with a non-provider error; transient provider errors
    (429, 5xx, timeouts, connection failures) are retried with backoff within the budget, then raised.

    ``timeout`` is the request's share of the run's deadline (``None``: the client's own timeout). The loop is
    tenacity's (the engine of LangChain's ``Runnable.with_retry``, which cannot express this: see docs/provider.md).
    """
    run = scope or current_scope()

    def backoff(state: RetryCallState) -> float:  # a 429 holds back every caller of the endpoint as long
        error = _failure(state)
        delay = backoff_delay(state.attempt_number - 1, run.policy, run.rng, error.retry_after)
        if error.kind == "rate_limited":
            rate_gate.hold(endpoint, delay)
        return delay

    def within_deadline(state: RetryCallState) -> None:
        remaining = run.remaining()
        if remaining is not None and state.upcoming_sleep >= remaining:
            raise _deadline_error(run, endpoint, f"backing off ({_failure(state).kind}) from")

    def give_up(state: RetryCallState) -> NoReturn:
        error, spent = _failure(state), state.seconds_since_start or 0.0
        raise ProviderError(
            error.kind,
            f"{error.detail}, after {state.attempt_number} requests in {spent:.1f} s",
            endpoint=endpoint,
            status=error.status,
        ) from (error.__cause__ or error)

    retrying = Retrying(
        retry=retry_if_exception(_transient),
        wait=backoff,
        before_sleep=within_deadline,
        retry_error_callback=give_up,
        stop=stop_after_attempt(run.policy.max_requests) | stop_before_delay(run.policy.budget_s) | _UnreachableLimit(),
    )
    return retrying(lambda: _request(call, run, endpoint, on_request))
