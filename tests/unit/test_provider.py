"""Provider failures in ``agents.provider`` and ``agents.base.run_role``: classification, backoff, the shared rate
gate, deadlines, retry feedback and cost. Real openai exception classes, scripted chat models, no network."""

from __future__ import annotations

import random
import time
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from logicmap.agents.base import Cost, run_role
from logicmap.agents.models import make_chat_model
from logicmap.agents.provider import (
    DeadlineExceeded,
    ProviderError,
    RetryPolicy,
    RunScope,
    backoff_delay,
    call_with_retries,
    classify_error,
    rate_gate,
    retry_after_seconds,
    run_scope,
)
from logicmap.agents.testing import ScriptedChatModel
from logicmap.settings import LogicMapSettings

URL = "http://127.0.0.1:9/v1"


class Pick(BaseModel):
    name: str
    count: int


def status_error(status: int, message: str = "nope", code: str | None = None, headers: dict[str, str] | None = None):
    request = httpx.Request("POST", f"{URL}/chat/completions")
    response = httpx.Response(
        status, headers=headers or {}, request=request, json={"error": {"message": message, "code": code}}
    )
    cls = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        429: openai.RateLimitError,
    }.get(status, openai.InternalServerError)
    return cls(message, response=response, body={"error": {"message": message, "code": code}})


@pytest.fixture(autouse=True)
def _clear_gate() -> Any:
    rate_gate.clear()
    yield
    rate_gate.clear()


@pytest.mark.parametrize(
    ("exc", "kind", "transient"),
    [
        (status_error(401, "Incorrect API key"), "auth", False),
        (status_error(403), "permission", False),
        (status_error(404, "The model `x` does not exist"), "model_not_found", False),
        (status_error(400, "tool_choice is not supported"), "bad_request", False),
        (
            status_error(400, "maximum context length is 8192 tokens", "context_length_exceeded"),
            "context_length",
            False,
        ),
        (status_error(429), "rate_limited", True),
        (status_error(503), "server_error", True),
        (openai.APITimeoutError(request=httpx.Request("POST", URL)), "timeout", True),
        (openai.APIConnectionError(request=httpx.Request("POST", URL)), "unreachable", True),
        (ConnectionRefusedError("refused"), "unreachable", True),
    ],
)
def test_provider_failures_are_classified_by_cause(exc: Exception, kind: str, transient: bool) -> None:
    error = classify_error(exc, URL)
    assert error is not None and error.kind == kind and error.transient is transient
    assert URL in str(error) and "\n" not in str(error)


def test_a_reply_that_could_not_be_read_is_not_a_provider_error() -> None:
    assert classify_error(ValueError("no JSON"), URL) is None
    assert classify_error(IndexError("list index out of range"), URL) is None


def test_retry_after_headers_are_read_in_milliseconds_seconds_and_dates() -> None:
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after_seconds(httpx.Headers({"retry-after": "2"})) == 2.0
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= retry_after_seconds(httpx.Headers({"retry-after": later})) <= 31
    assert retry_after_seconds(httpx.Headers({})) is None
    assert classify_error(status_error(429, headers={"retry-after": "3"}), URL).retry_after == 3.0


def test_backoff_is_full_jitter_under_a_doubling_cap_and_never_below_retry_after() -> None:
    policy = RetryPolicy(base_s=0.5, cap_s=4.0)
    delays = [[backoff_delay(r, policy, random.Random(seed)) for r in range(6)] for seed in range(50)]
    for retry, ceiling in enumerate([0.5, 1, 2, 4, 4, 4]):
        column = [d[retry] for d in delays]
        assert all(0 <= d <= ceiling for d in column) and max(column) > ceiling / 2  # spread over the range
    assert backoff_delay(0, policy, random.Random(1)) == backoff_delay(0, policy, random.Random(1))  # seeded
    assert backoff_delay(0, policy, random.Random(1), retry_after=2.0) == 2.0


def _failing(errors: list[Exception], result: str = "ok") -> tuple[Any, list[float | None]]:
    seen: list[float | None] = []

    def call(timeout: float | None) -> str:
        seen.append(timeout)
        if errors:
            raise errors.pop(0)
        return result

    return call, seen


def test_transient_errors_are_retried_honouring_retry_after_and_hold_back_other_callers() -> None:
    scope = RunScope(policy=RetryPolicy(budget_s=5, base_s=0.01), rng=random.Random(0))
    call, seen = _failing([status_error(429, headers={"retry-after-ms": "200"}), status_error(503)])
    started = time.monotonic()
    assert call_with_retries(call, endpoint=URL, scope=scope) == "ok"
    assert len(seen) == 3 and time.monotonic() - started >= 0.2
    rate_gate.hold(URL, 0.3)  # another caller's 429: this caller waits it out before its first request
    started = time.monotonic()
    call_with_retries(_failing([])[0], endpoint=URL, scope=scope)
    assert time.monotonic() - started >= 0.3


def test_retries_stop_at_the_budget_with_one_line_naming_the_cause() -> None:
    scope = RunScope(policy=RetryPolicy(budget_s=0.3, base_s=0.1), rng=random.Random(0))
    call, seen = _failing([status_error(429, headers={"retry-after-ms": "150"}) for _ in range(20)])
    with pytest.raises(ProviderError) as caught:
        call_with_retries(call, endpoint=URL, scope=scope)
    assert caught.value.kind == "rate_limited" and 2 <= len(seen) <= 3
    assert "kept rate-limiting (429)" in str(caught.value) and "LOGICMAP_RETRY_BUDGET_S" in str(caught.value)


def test_configuration_errors_are_not_retried() -> None:
    call, seen = _failing([status_error(401, "Incorrect API key")])
    with pytest.raises(ProviderError, match="rejected the API key"):
        call_with_retries(call, endpoint=URL, scope=RunScope())
    assert len(seen) == 1


def test_the_run_deadline_bounds_each_request_and_the_backoff() -> None:
    scope = RunScope(policy=RetryPolicy(budget_s=60, base_s=0.05), request_timeout=30, deadline_s=0.4)
    scope.restart()
    call, seen = _failing([status_error(503) for _ in range(100)])
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"deadline \(0.4 s\)"):
        call_with_retries(call, endpoint=URL, scope=scope)
    assert time.monotonic() - started < 0.6 and all(t is not None and t <= 0.4 for t in seen)


def test_run_scope_reads_the_settings_and_is_seen_by_callers_inside_it() -> None:
    settings = LogicMapSettings(retry_budget_s=7, run_deadline_s=0)
    with run_scope(settings) as scope:
        assert scope.policy.budget_s == 7 and scope.deadline is None


def test_a_missing_api_key_is_one_line_at_model_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError) as caught:
        make_chat_model(LogicMapSettings(chat_model="gpt-4o-mini"))
    assert caught.value.kind == "missing_key" and "LOGICMAP_OPENAI_API_KEY" in str(caught.value)
    assert make_chat_model(LogicMapSettings(chat_model="m", openai_base_url=URL)).max_retries == 0


# -- run_role ----------------------------------------------------------------------------------------


def _messages() -> list:
    return [SystemMessage(content="Reply with a Pick."), HumanMessage(content="pick one")]


def test_truncated_tool_arguments_are_fed_back_with_the_parse_error() -> None:
    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "Pick",
                "args": '{"name": "a", "cou',
                "id": "c1",
                "error": "Function Pick arguments are not valid JSON. Received JSONDecodeError Unterminated string",
                "type": "invalid_tool_call",
            }
        ],
        response_metadata={"finish_reason": "length"},
    )
    model = ScriptedChatModel(replies=[broken, {"name": "a", "count": 2}])
    outcome = run_role(
        model, role="picker", messages=_messages(), schema=Pick, fallback=lambda: Pick(name="f", count=0)
    )
    assert outcome.fallback is None and outcome.output.count == 2
    shown, feedback = model.calls[1][-2], str(model.calls[1][-1].content)
    assert shown.content == '{"name": "a", "cou'  # the raw arguments, not "[]"
    assert "Unterminated string" in feedback and "finish_reason=length" in feedback and "empty reply" not in feedback
    assert outcome.cost.http_requests == 2 and outcome.cost.llm_calls == 2 and outcome.cost.usable_replies == 1


def test_a_filtered_reply_falls_back_and_says_why() -> None:
    filtered = AIMessage(content='{"name": "a", "count": 1}', response_metadata={"finish_reason": "content_filter"})
    model = ScriptedChatModel(replies=[filtered, filtered])
    outcome = run_role(
        model, role="picker", messages=_messages(), schema=Pick, fallback=lambda: Pick(name="f", count=0)
    )
    assert outcome.fallback is not None and "content_filter" in outcome.fallback.errors[0]
    assert outcome.cost.usable_replies == 0 and outcome.cost.llm_calls == 2


def test_provider_errors_propagate_from_run_role_but_unreadable_replies_fall_back() -> None:
    def unauthorized(messages: Any) -> Any:
        raise status_error(401, "Incorrect API key")

    with pytest.raises(ProviderError, match="rejected the API key"):
        run_role(
            ScriptedChatModel(respond=unauthorized),
            role="picker",
            messages=_messages(),
            schema=Pick,
            fallback=lambda: Pick(name="f", count=0),
        )

    def unreadable(messages: Any) -> Any:
        raise RuntimeError("reply had no choices")

    outcome = run_role(
        ScriptedChatModel(respond=unreadable),
        role="picker",
        messages=_messages(),
        schema=Pick,
        fallback=lambda: Pick(name="f", count=0),
    )
    assert outcome.fallback is not None and "reply had no choices" in outcome.fallback.errors[0]
    assert outcome.cost.http_requests == 2 and outcome.cost.llm_calls == 0


def test_cost_adds_the_new_counters() -> None:
    total = Cost(llm_calls=1, http_requests=3, usable_replies=1) + Cost(llm_calls=2, http_requests=2)
    assert (total.llm_calls, total.http_requests, total.usable_replies) == (3, 5, 1)


def test_the_chat_reports_a_provider_failure_in_one_line_and_goes_on(resources: Any) -> None:
    from logicmap.graphs.chat.chatbot import run_chat

    def unauthorized(messages: Any) -> Any:
        raise status_error(401, "Incorrect API key")

    resources.llm_ = ScriptedChatModel(respond=unauthorized)
    lines, said = iter(["hello there", "/quit"]), []
    code = run_chat(resources, "chat-ns", strategy="dense", input_fn=lambda _: next(lines), output=said.append)
    errors = [line for line in said if line.startswith("error:")]
    assert code == 0 and len(errors) == 1 and "rejected the API key (401)" in errors[0]
    assert not any(line.startswith("bot>") for line in said)


def test_failed_ingestion_jobs_are_kept_and_can_be_retried() -> None:
    from logicmap.graphs.chat.chatbot import IngestionQueue

    outcomes = [ProviderError("auth", "bad key"), None]
    done: list[int] = []

    def job() -> None:
        failure = outcomes.pop(0)
        if failure is not None:
            raise failure
        done.append(1)

    work = IngestionQueue()
    work.submit(job, "turn-1")
    work.flush(5)
    assert [label for label, _ in work.failed] == ["turn-1"] and "bad key" in work.errors[0][1]
    assert work.retry_failed() == 1 and work.flush(5)
    assert done == [1] and not work.failed and not work.errors
