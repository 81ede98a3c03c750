"""``agents.provider.call_with_retries`` on tenacity: each limit stops the loop where it did before (requests per
call, three for a refused connection, the run's deadline during a backoff or a request), the last error keeps its
kind and status, and what is not a transient provider error is raised after one request. Real openai and httpx
exception classes, no network."""

from __future__ import annotations

import random
import time
from typing import Any

import httpx
import openai
import pytest

from logicmap.agents.provider import (
    UNREACHABLE_MAX_REQUESTS,
    DeadlineExceeded,
    ProviderError,
    RetryPolicy,
    RunScope,
    call_with_retries,
    rate_gate,
)

URL = "http://127.0.0.1:9/v1"


def status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx.Request("POST", f"{URL}/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request, json={"error": {"message": "busy"}})
    cls = openai.RateLimitError if status == 429 else openai.InternalServerError
    return cls("busy", response=response, body={"error": {"message": "busy"}})


def failing(make: Any, times: int = 1000) -> tuple[Any, list[float | None]]:
    """A call failing ``times`` times with ``make()``, then answering "ok"; the timeouts it was given."""
    seen: list[float | None] = []

    def call(timeout: float | None) -> str:
        seen.append(timeout)
        if len(seen) <= times:
            raise make()
        return "ok"

    return call, seen


@pytest.fixture(autouse=True)
def _clear_gate() -> Any:
    rate_gate.clear()
    yield
    rate_gate.clear()


def scope(**policy: Any) -> RunScope:
    return RunScope(policy=RetryPolicy(**{"budget_s": 60, "base_s": 0.001, **policy}), rng=random.Random(0))


def test_server_errors_stop_at_max_requests_with_the_last_status() -> None:
    call, seen = failing(lambda: status_error(503))
    with pytest.raises(ProviderError) as caught:
        call_with_retries(call, endpoint=URL, scope=scope(max_requests=4))
    error = caught.value
    assert len(seen) == 4 and error.kind == "server_error" and error.status == 503 and error.endpoint == URL
    assert "kept failing (503)" in str(error) and ", after 4 requests in " in str(error)
    assert isinstance(error.__cause__, openai.InternalServerError)


def test_a_refused_connection_gives_up_after_three_requests_whatever_the_budget() -> None:
    call, seen = failing(lambda: openai.APIConnectionError(request=httpx.Request("POST", URL)))
    with pytest.raises(ProviderError) as caught:
        call_with_retries(call, endpoint=URL, scope=scope(max_requests=8))
    assert len(seen) == UNREACHABLE_MAX_REQUESTS == 3 and caught.value.kind == "unreachable"
    assert f"after {UNREACHABLE_MAX_REQUESTS} requests" in str(caught.value)


def test_transient_errors_are_absorbed_and_the_answer_returned() -> None:
    call, seen = failing(lambda: status_error(503), times=2)
    assert call_with_retries(call, endpoint=URL, scope=scope(max_requests=3)) == "ok" and len(seen) == 3


def test_errors_that_are_not_transient_provider_errors_are_raised_after_one_request() -> None:
    call, seen = failing(lambda: ValueError("no JSON in the reply"))
    with pytest.raises(ValueError, match="no JSON"):
        call_with_retries(call, endpoint=URL, scope=scope())
    assert len(seen) == 1
    own = ProviderError("context_length", "too long")
    call, seen = failing(lambda: own)
    with pytest.raises(ProviderError) as caught:
        call_with_retries(call, endpoint=URL, scope=scope())
    assert caught.value is own and len(seen) == 1


def test_a_retry_after_past_the_deadline_stops_at_once_and_still_holds_back_other_callers() -> None:
    run = scope()
    run.deadline_s = 1.0
    run.restart()
    call, seen = failing(lambda: status_error(429, {"retry-after": "5"}))
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"backing off \(rate_limited\) from the chat model at"):
        call_with_retries(call, endpoint=URL, scope=run)
    assert len(seen) == 1 and time.monotonic() - started < 0.9
    assert rate_gate.wait_time(URL) > 4  # the 429 held the endpoint for the other callers


def test_a_closed_gate_past_the_deadline_sends_nothing() -> None:
    run = scope()
    run.deadline_s = 0.5
    run.restart()
    rate_gate.hold(URL, 5)
    call, seen = failing(lambda: status_error(503))
    with pytest.raises(DeadlineExceeded, match="waiting out a rate limit of"):
        call_with_retries(call, endpoint=URL, scope=run)
    assert seen == []


def test_a_timeout_at_the_deadline_is_the_deadline() -> None:
    run = scope()
    run.deadline_s = 0.2
    run.restart()

    def slow(timeout: float | None) -> str:
        assert timeout is not None and timeout <= 0.2  # the request's share of the deadline
        time.sleep(timeout)
        raise openai.APITimeoutError(request=httpx.Request("POST", URL))

    with pytest.raises(DeadlineExceeded, match="waiting for the chat model at"):
        call_with_retries(slow, endpoint=URL, scope=run)
