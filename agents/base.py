"""How every LLM role runs: typed output, validation, one retry with the error, deterministic fallback.

Also the cost record (requests, replies, tokens, wall time) that every run reports. Provider failures are
not bad output: they raise ``ProviderError`` (``agents.provider``) and stop the run.

Built on LangChain: the request is ``llm.with_structured_output(schema, method=..., include_raw=True)`` (a
JSON-prompt path for ``method="prompt"`` and models without tool calling), text replies are read with
``parse_json_markdown``, tokens come from the reply's ``usage_metadata``, and run names, tags and metadata go
through ``with_config``. Ours: the retry with the errors shown to the model, the recorded fallback, the reading
of replies LangChain's parsers reject or misread (cut off, filtered, a tool call with invalid JSON, JSON in
prose) and the cost of replies that raised before a message was built.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tracers.context import register_configure_hook
from langchain_core.utils.json import parse_json_markdown
from pydantic import BaseModel, Field, ValidationError

from logicmap.agents.provider import DeadlineExceeded, ProviderError, call_with_retries, endpoint_of

__all__ = [
    "Cost",
    "DeadlineExceeded",
    "FallbackRecord",
    "PartsOutcome",
    "ProviderError",
    "RoleOutcome",
    "RolePart",
    "add_cost",
    "parse_json_reply",
    "request_reply",
    "retry_config",
    "run_role",
    "run_role_parts",
]

T = TypeVar("T", bound=BaseModel)
_AnyRunnable = Runnable[Any, Any]


class Cost(BaseModel):
    """What a run spent. Tokens are the provider's counts; ``tokens_estimated`` when it gave none.

    ``http_requests`` counts every request sent, retries after 429s, 5xx and timeouts included; ``llm_calls``
    the replies that came back (what the provider bills: unparseable, cut-off and filtered ones too, and their
    tokens are counted); ``usable_replies`` those that parsed and validated.
    """

    llm_calls: int = 0
    http_requests: int = 0
    usable_replies: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    wall_time_s: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            llm_calls=self.llm_calls + other.llm_calls,
            http_requests=self.http_requests + other.http_requests,
            usable_replies=self.usable_replies + other.usable_replies,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            tokens_estimated=self.tokens_estimated or other.tokens_estimated,
            wall_time_s=self.wall_time_s + other.wall_time_s,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def add_cost(left: Cost | None, right: Cost | None) -> Cost:
    """LangGraph reducer: costs of parallel branches add up."""
    return (left or Cost()) + (right or Cost())


class FallbackRecord(BaseModel):
    """A role that did not get a valid answer from its model and used its deterministic fallback."""

    role: str
    reason: str
    errors: list[str] = Field(default_factory=list)


class RoleOutcome(BaseModel, Generic[T]):
    output: T
    cost: Cost
    fallback: FallbackRecord | None = None
    attempts: int = 0


@dataclass(frozen=True)
class _Reply:
    """One reply as ``with_structured_output(include_raw=True)`` gives it: the message, LangChain's parse of it
    (``None`` on the JSON-prompt path, or when the model answered without calling the tool) and its parse error."""

    raw: BaseMessage
    parsed: Any = None
    parsing_error: BaseException | None = None


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, list):
        content = "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content or "").strip()


def _json_in_text(text: str) -> Any:
    """The JSON of a text reply: LangChain's ``parse_json_markdown`` (the whole text, or a ```json fence), else the
    first JSON value inside prose ("Here it is: {...}", which small local models write and LangChain does not read).

    The parse is strict (``json.loads``): LangChain's default parser completes cut-off JSON, which must stay invalid.
    """
    try:
        value = parse_json_markdown(text, parser=json.loads)
    except ValueError:
        value = None
    if isinstance(value, (dict, list)):
        return value
    decoder = json.JSONDecoder()
    for index, char in enumerate(text):
        if char in "{[":
            try:
                return decoder.raw_decode(text[index:])[0]
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON object in reply: {text[:200]!r}")


def parse_json_reply(message: BaseMessage) -> Any:
    """The JSON a model replied with: a forced tool call's arguments, else the JSON in its text (``_json_in_text``)."""
    tool_calls = getattr(message, "tool_calls", None) or []
    if tool_calls:
        return tool_calls[0]["args"]
    invalid = getattr(message, "invalid_tool_calls", None) or []
    if invalid and not message.content:
        call = invalid[0]
        error = str(call.get("error") or "not valid JSON")
        error = error.split("Received JSONDecodeError")[-1].strip() or error
        raise ValueError(
            f"the arguments of your {call.get('name') or 'tool'} call are not valid JSON ({error[:300]}); "
            f"they were: {str(call.get('args') or '')[:1500]!r}"
        )
    text = _text(message)
    if not text:
        raise ValueError("empty reply")
    return _json_in_text(text)


def _usage(message: BaseMessage, messages: Sequence[BaseMessage]) -> tuple[int, int, bool]:
    """``(prompt, completion, estimated)`` tokens: the reply's ``usage_metadata``, else ~4 characters a token."""
    usage = getattr(message, "usage_metadata", None)
    if usage:
        return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), False
    prompt_chars = sum(len(str(m.content)) for m in messages)
    reply_chars = len(str(message.content)) + len(json.dumps(getattr(message, "tool_calls", []) or [], default=str))
    return prompt_chars // 4, reply_chars // 4, True


class _UsageProbe(BaseCallbackHandler):
    """Sees a request's raw result: the provider's usage even when no message could be built from it (a reply with
    ``choices: []``), which neither ``usage_metadata`` nor LangChain's ``UsageMetadataCallbackHandler`` reports."""

    def __init__(self) -> None:
        self.replied = False
        self.token_usage: dict[str, Any] | None = None
        self.choices = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.replied = True
        self.token_usage = (response.llm_output or {}).get("token_usage") or self.token_usage
        self.choices = sum(len(g) for g in response.generations)


# While a request runs, LangChain adds its probe to every callback manager it configures (the enclosing run's
# callbacks stay as they are, so the trace stays nested); the hook that ``get_usage_metadata_callback`` uses.
_PROBE: ContextVar[_UsageProbe | None] = ContextVar("logicmap_usage_probe", default=None)
register_configure_hook(_PROBE, inheritable=True)


def _failure_usage(exc: BaseException, probe: _UsageProbe) -> tuple[int, int] | None:
    """Billed tokens of a reply that raised while being read (a cut-off json_schema reply, ``choices: []``)."""
    usage: Any = probe.token_usage
    completion = getattr(exc, "completion", None)
    if usage is None and completion is not None and getattr(completion, "usage", None) is not None:
        usage = completion.usage.model_dump()
    if not usage:
        return None
    return int(usage.get("prompt_tokens", 0) or 0), int(usage.get("completion_tokens", 0) or 0)


def _failure_problem(exc: BaseException, probe: _UsageProbe) -> tuple[str, str]:
    """``(problem for the model, what it replied)`` for a reply that raised while being read."""
    completion = getattr(exc, "completion", None)
    choices = getattr(completion, "choices", None) or []
    text = str(getattr(choices[0].message, "content", "") or "") if choices else ""
    name = type(exc).__name__
    if name == "LengthFinishReasonError":
        return (
            "your reply was cut off at the output token limit (finish_reason=length) before the JSON was "
            "complete; reply with a shorter JSON object",
            text,
        )
    if name == "ContentFilterFinishReasonError":
        return "your reply was stopped by the provider's content filter (finish_reason=content_filter)", text
    if probe.replied and probe.choices == 0:
        return "the server's reply held no choices (no message at all)", ""
    return f"the model call failed: {name}: {str(exc)[:300]}", ""


def _finish_problem(reply: BaseMessage) -> str | None:
    finish = (getattr(reply, "response_metadata", None) or {}).get("finish_reason")
    if finish == "length":
        return (
            "your reply was cut off at the output token limit (finish_reason=length); reply with a shorter JSON object"
        )
    if finish == "content_filter":
        return "your reply was stopped by the provider's content filter (finish_reason=content_filter)"
    return None


def _shown(reply: BaseMessage) -> str:
    """What the model replied, as the retry shows it back: text, else tool-call arguments (raw when invalid)."""
    if reply.content:
        return str(reply.content)
    tool_calls = getattr(reply, "tool_calls", None) or []
    if tool_calls:
        return json.dumps([c["args"] for c in tool_calls], default=str)
    invalid = getattr(reply, "invalid_tool_calls", None) or []
    return "\n".join(str(c.get("args") or "") for c in invalid)


def _is_openai(llm: Any) -> bool:
    """An OpenAI client (``ChatOpenAI``): it takes a per-request ``timeout`` and OpenAI's ``response_format``."""
    return hasattr(llm, "root_client")


def _named(llm: BaseChatModel, role: str) -> BaseChatModel:
    """The model under the role's name: ``with_config(run_name=...)`` names only the outer run of a structured-output
    runnable, and the model's own run (the one that bills) should carry the role's name in a trace too."""
    if not isinstance(llm, BaseChatModel) or llm.name == role:
        return llm
    named = llm.model_copy(update={"name": role})
    named.__dict__.pop("_serialized", None)  # BaseChatModel caches its serialized form, name included
    return named


def _structured(llm: BaseChatModel, schema: type[BaseModel], method: str, timeout: float | None) -> _AnyRunnable | None:
    """``llm.with_structured_output(schema, method=method, include_raw=True)``; ``None`` for the JSON-prompt path:
    ``method="prompt"``, or a model without structured output (no tool calling: LangChain's fake chat models).

    json_schema on an OpenAI client sends the schema as a non-strict ``response_format``, as this module always
    has: given the pydantic class, the OpenAI SDK makes it strict, which demands every field and refuses defaults.
    """
    if method == "prompt":
        return None
    target: Any = schema
    if method == "json_schema" and _is_openai(llm):
        target = {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": False}
    extra = {"timeout": timeout} if timeout is not None else {}
    try:
        return llm.with_structured_output(target, method=method, include_raw=True, **extra)
    except (NotImplementedError, ValueError, TypeError, AttributeError):
        return None


def _runnable(
    llm: BaseChatModel, schema: type[BaseModel], method: str, role: str
) -> Callable[[float | None], _AnyRunnable]:
    """What a role sends a request through, given the request's timeout (``None``: the client's own). The timeout
    is bound into the structured-output runnable, so one is built per distinct timeout (mostly just one)."""
    named = _named(llm, role)
    built: dict[float | None, _AnyRunnable | None] = {}

    def make(timeout: float | None) -> _AnyRunnable:
        if timeout not in built:
            built[timeout] = _structured(named, schema, method, timeout)
        structured = built[timeout]
        if structured is not None:
            return structured
        return named if timeout is None else named.bind(timeout=timeout)

    return make


def _request(
    make: Callable[[float | None], _AnyRunnable],
    conversation: list[BaseMessage],
    config: dict[str, Any],
    llm: BaseChatModel,
    cost: Cost,
) -> tuple[_Reply | None, str, str]:
    """One reply of ``make(timeout)`` run with ``config`` (run name, tags, metadata: ``with_config``), retrying
    transient provider errors; or ``(None, problem, shown)`` when the reply could not be read. Its requests, replies
    and tokens go into ``cost``. Provider errors (``ProviderError``) propagate."""
    endpoint = endpoint_of(llm)
    openai_client = _is_openai(llm)
    probes: list[_UsageProbe] = []

    def call(timeout: float | None) -> Any:
        cost.http_requests += 1
        probes.append(_UsageProbe())
        token = _PROBE.set(probes[-1])
        try:
            runnable = make(timeout if openai_client else None)
            return runnable.with_config(cast(RunnableConfig, config)).invoke(conversation)
        finally:
            _PROBE.reset(token)

    try:
        out = call_with_retries(call, endpoint=endpoint)
    except ProviderError:
        raise
    except Exception as exc:  # a reply that could not be read is a failed attempt, retried by the role
        probe = probes[-1] if probes else _UsageProbe()
        usage = _failure_usage(exc, probe)
        if probe.replied or usage is not None or getattr(exc, "completion", None) is not None:
            cost.llm_calls += 1
        if usage is not None:
            cost.prompt_tokens += usage[0]
            cost.completion_tokens += usage[1]
        problem, shown = _failure_problem(exc, probe)
        return None, problem, shown
    reply = _Reply(raw=out) if isinstance(out, BaseMessage) else _Reply(**out)
    prompt_tokens, completion_tokens, estimated = _usage(reply.raw, conversation)
    cost.llm_calls += 1
    cost.prompt_tokens += prompt_tokens
    cost.completion_tokens += completion_tokens
    cost.tokens_estimated = cost.tokens_estimated or estimated
    return reply, "", ""


def request_reply(
    bound: Any, conversation: list[BaseMessage], config: dict[str, Any], llm: BaseChatModel, cost: Cost
) -> tuple[BaseMessage | None, str, str]:
    """One reply of ``bound`` (a chat model, or one bound to tools) run with ``config`` (run name, tags, metadata),
    or ``(None, problem, shown)`` when the reply could not be read. Provider errors (``ProviderError``) propagate:
    they stop the run."""

    def make(timeout: float | None) -> _AnyRunnable:
        runnable: _AnyRunnable = bound if timeout is None else bound.bind(timeout=timeout)
        return runnable

    reply, problem, shown = _request(make, conversation, config, llm, cost)
    return (reply.raw if reply is not None else None), problem, shown


def retry_config(config: dict[str, Any], attempt: int) -> dict[str, Any]:
    """A retried call's config: tagged ``retry`` with its ``attempt`` number, so traces tell it from the first."""
    return {**config, "tags": [*config["tags"], "retry"], "metadata": {**config["metadata"], "attempt": attempt}}


def _validation_error(error: BaseException | None) -> ValidationError | None:
    """The schema's validation error behind LangChain's parse error (``PydanticOutputParser`` wraps it)."""
    while error is not None and not isinstance(error, ValidationError):
        error = error.__cause__
    return error


def _typed(reply: _Reply, schema: type[T]) -> T:
    """The reply as a ``schema`` object: LangChain's ``parsed`` (or its validation error) when it was read from a tool
    call; a text reply, a tool call of another name, arguments that are not JSON: read from the raw reply.

    A text reply is read again because LangChain's text parsers (json_mode, Ollama's and Anthropic's json_schema)
    complete cut-off JSON (``parse_partial_json``), which would turn a reply stopped at the token limit into a valid
    object; ``parse_json_reply`` reads it strictly.
    """
    if getattr(reply.raw, "tool_calls", None):
        if isinstance(reply.parsed, schema):
            return reply.parsed
        invalid = _validation_error(reply.parsing_error)
        if invalid is not None:
            raise invalid
    return schema.model_validate(parse_json_reply(reply.raw))


def _read_reply(
    reply: _Reply, schema: type[T], validate: Callable[[T], list[str]] | None
) -> tuple[T | None, list[str]]:
    finish = _finish_problem(reply.raw)
    if finish and "content_filter" in finish:
        return None, [finish]
    try:
        output = _typed(reply, schema)
        problems = validate(output) if validate else []
    except (ValueError, ValidationError, TypeError) as exc:
        output, problems = None, [str(exc)[:1000]]
    if problems and finish:
        problems = [finish, *problems]
    return (output if not problems else None), problems


def _role_config(role: str, tags: Sequence[str], metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {"run_name": role, "tags": [f"role:{role}", *tags], "metadata": dict(metadata or {})}


def run_role(
    llm: BaseChatModel | None,
    *,
    role: str,
    messages: list[BaseMessage],
    schema: type[T],
    fallback: Callable[[], T],
    validate: Callable[[T], list[str]] | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    max_attempts: int = 2,
) -> RoleOutcome[T]:
    """Ask the model for a ``schema`` object; validate; retry once with the errors; else fall back.

    ``max_attempts`` 1 drops the retry (a caller whose call budget has one request left).

    Only a reply the model really produced can fall back (unparseable, invalid, cut off, filtered). A provider
    or transport failure (bad key, unknown model, unreachable server, rate limits or 5xx beyond the retry
    budget, the run's deadline) raises ``ProviderError``, so the run stops and commits nothing partial.
    """
    started = time.perf_counter()
    cost = Cost()
    if llm is None:
        return RoleOutcome(
            output=fallback(),
            cost=cost,
            fallback=FallbackRecord(role=role, reason="no chat model configured"),
        )
    make = _runnable(llm, schema, method, role)
    config = _role_config(role, tags, metadata)
    conversation = list(messages)
    errors: list[str] = []
    attempts = 0
    allowed = max(1, min(2, max_attempts))
    for attempt in range(allowed):
        attempts += 1
        attempt_config = config if attempt == 0 else retry_config(config, attempt + 1)
        reply, problem, shown = _request(make, conversation, attempt_config, llm, cost)
        if reply is None:
            problems = [problem]
        else:
            output, problems = _read_reply(reply, schema, validate)
            if output is not None:
                cost.usable_replies += 1
                cost.wall_time_s = time.perf_counter() - started
                return RoleOutcome(output=output, cost=cost, attempts=attempts)
            shown = _shown(reply.raw)
        errors.append(f"attempt {attempt + 1}: " + "; ".join(problems)[:1500])
        conversation = [
            *messages,
            AIMessage(content=shown[:4000]),
            HumanMessage(
                content="Your reply was not valid:\n- "
                + "\n- ".join(problems)[:2000]
                + f"\nReply again with only one JSON object matching the {schema.__name__} schema."
            ),
        ]
    cost.wall_time_s = time.perf_counter() - started
    reason = "invalid model output" + (" after one retry" if allowed == 2 else "; no retry left in the call budget")
    return RoleOutcome(
        output=fallback(),
        cost=cost,
        fallback=FallbackRecord(role=role, reason=reason, errors=errors),
        attempts=attempts,
    )


@dataclass(frozen=True)
class RolePart:
    """One part of a combined reply: the role it stands for, the reply fields it reads (``schema``'s fields),
    its validation and its own deterministic fallback."""

    role: str
    schema: type[BaseModel]
    fallback: Callable[[], BaseModel]
    validate: Callable[[Any], list[str]] | None = None


class PartsOutcome(BaseModel):
    """A combined call's result: each part's output (by role), the call's cost, one fallback per failed part."""

    outputs: dict[str, Any]
    cost: Cost
    fallbacks: list[FallbackRecord] = Field(default_factory=list)
    attempts: int = 0


def _read_part(data: Any, part: RolePart) -> tuple[BaseModel | None, list[str]]:
    """A part read from the reply's JSON object: its fields validated with its schema and its validator."""
    fields = list(part.schema.model_fields)
    if not isinstance(data, dict):
        return None, [f"the reply is not a JSON object with the fields {fields}"]
    present = {k: data[k] for k in fields if k in data}
    if not present:
        return None, [f"the reply has no {' / '.join(repr(f) for f in fields)} part"]
    try:
        output = part.schema.model_validate(present)
        problems = part.validate(output) if part.validate else []
    except (ValueError, ValidationError, TypeError) as exc:
        output, problems = None, [str(exc)[:1000]]
    return (output if not problems else None), problems


def _read_parts(reply: BaseMessage, parts: Sequence[RolePart]) -> dict[str, tuple[BaseModel | None, list[str]]]:
    finish = _finish_problem(reply)
    if finish and "content_filter" in finish:
        return {p.role: (None, [finish]) for p in parts}
    try:
        data = parse_json_reply(reply)
    except (ValueError, TypeError) as exc:
        return {p.role: (None, [*([finish] if finish else []), str(exc)[:1000]]) for p in parts}
    read = {p.role: _read_part(data, p) for p in parts}
    if finish:
        read = {role: (out, [finish, *problems] if problems else problems) for role, (out, problems) in read.items()}
    return read


def run_role_parts(
    llm: BaseChatModel | None,
    *,
    role: str,
    messages: list[BaseMessage],
    schema: type[BaseModel],
    parts: Sequence[RolePart],
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> PartsOutcome:
    """One call whose reply (``schema``) holds several roles' parts, each validated on its own.

    A part that fails validation is asked for again once (with its errors; the other parts of the first reply
    are kept); a part still invalid then uses its own fallback and records a ``FallbackRecord`` under its own
    role. Provider failures raise ``ProviderError`` as in ``run_role``. The call is tagged ``role:<role>`` and
    ``part:<part role>`` for each part.
    """
    started = time.perf_counter()
    cost = Cost()
    if llm is None:
        return PartsOutcome(
            outputs={p.role: p.fallback() for p in parts},
            cost=cost,
            fallbacks=[FallbackRecord(role=p.role, reason="no chat model configured") for p in parts],
        )
    make = _runnable(llm, schema, method, role)
    config = _role_config(role, [*(f"part:{p.role}" for p in parts), *tags], metadata)
    conversation = list(messages)
    outputs: dict[str, BaseModel] = {}
    errors: dict[str, list[str]] = {p.role: [] for p in parts}
    attempts = 0
    for attempt in range(2):
        attempts += 1
        missing = [p for p in parts if p.role not in outputs]
        attempt_config = config if attempt == 0 else retry_config(config, attempt + 1)
        reply, problem, shown = _request(make, conversation, attempt_config, llm, cost)
        read = {p.role: (None, [problem]) for p in missing} if reply is None else _read_parts(reply.raw, missing)
        kept = {name: out for name, (out, _) in read.items() if out is not None}
        outputs.update(kept)
        cost.usable_replies += 1 if kept else 0
        failed = {name: problems for name, (out, problems) in read.items() if out is None}
        if not failed:
            break
        for name, problems in failed.items():
            errors[name].append(f"attempt {attempt + 1}: " + "; ".join(problems)[:1500])
        shown = _shown(reply.raw) if reply is not None else shown
        listed = "\n".join(f"- {name}: " + "; ".join(problems)[:1000] for name, problems in failed.items())
        conversation = [
            *messages,
            AIMessage(content=shown[:4000]),
            HumanMessage(
                content=f"Parts of your reply were not valid:\n{listed[:2000]}\nReply again with one JSON object "
                f"matching the {schema.__name__} schema, all parts included."
            ),
        ]
    cost.wall_time_s = time.perf_counter() - started
    fallbacks = [
        FallbackRecord(role=p.role, reason="invalid model output after one retry", errors=errors[p.role])
        for p in parts
        if p.role not in outputs
    ]
    for p in parts:
        if p.role not in outputs:
            outputs[p.role] = p.fallback()
    return PartsOutcome(outputs=outputs, cost=cost, fallbacks=fallbacks, attempts=attempts)
