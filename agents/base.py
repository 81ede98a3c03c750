"""How every LLM role runs: typed output, validation, one retry with the error, deterministic fallback.

Also the cost record (LLM calls, tokens, wall time) that every run reports.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, Field, ValidationError

__all__ = [
    "Cost",
    "FallbackRecord",
    "RoleOutcome",
    "add_cost",
    "parse_json_reply",
    "run_role",
]

T = TypeVar("T", bound=BaseModel)


class Cost(BaseModel):
    """What a run spent. Tokens are the provider's counts; ``tokens_estimated`` when it gave none."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    wall_time_s: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            llm_calls=self.llm_calls + other.llm_calls,
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


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_reply(message: BaseMessage) -> Any:
    """The JSON a model replied with: a forced tool call's arguments, else the first JSON value in its text."""
    tool_calls = getattr(message, "tool_calls", None) or []
    if tool_calls:
        return tool_calls[0]["args"]
    content = message.content
    if isinstance(content, list):
        content = "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    text = str(content or "").strip()
    if not text:
        raise ValueError("empty reply")
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    decoder = json.JSONDecoder()
    for index, char in enumerate(text):
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(text[index:])
                return value
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON object in reply: {text[:200]!r}")


def _usage(message: BaseMessage, messages: Sequence[BaseMessage]) -> tuple[int, int, bool]:
    usage = getattr(message, "usage_metadata", None)
    if usage:
        return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), False
    prompt_chars = sum(len(str(m.content)) for m in messages)
    reply_chars = len(str(message.content)) + len(json.dumps(getattr(message, "tool_calls", []) or [], default=str))
    return prompt_chars // 4, reply_chars // 4, True


def _bind(llm: BaseChatModel, schema: type[BaseModel], method: str) -> Any:
    """The model set up to return the schema; models that cannot bind fall back to prompt-only JSON."""
    try:
        if method == "function_calling":
            return llm.bind_tools([schema], tool_choice=schema.__name__)
        if method == "json_schema":
            return llm.bind(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": False},
                }
            )
        if method == "json_mode":
            return llm.bind(response_format={"type": "json_object"})
    except (NotImplementedError, AttributeError, TypeError):
        pass
    return llm


def _retry_config(config: dict[str, Any], attempt: int) -> dict[str, Any]:
    """A retried call's config: tagged ``retry`` with its ``attempt`` number, so traces tell it from the first."""
    return {**config, "tags": [*config["tags"], "retry"], "metadata": {**config["metadata"], "attempt": attempt}}


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
) -> RoleOutcome[T]:
    """Ask the model for a ``schema`` object; validate; retry once with the errors; else fall back.

    Never raises for a bad model reply or a failed call: the fallback is used and recorded.
    """
    started = time.perf_counter()
    cost = Cost()
    if llm is None:
        return RoleOutcome(
            output=fallback(),
            cost=cost,
            fallback=FallbackRecord(role=role, reason="no chat model configured"),
        )
    bound = _bind(llm, schema, method)
    config = {"run_name": role, "tags": [f"role:{role}", *tags], "metadata": dict(metadata or {})}
    conversation = list(messages)
    errors: list[str] = []
    attempts = 0
    for attempt in range(2):
        attempts += 1
        try:
            reply = bound.invoke(conversation, config=config if attempt == 0 else _retry_config(config, attempt + 1))
        except Exception as exc:  # noqa: BLE001 - a failed call is a failed attempt, recorded below
            errors.append(f"attempt {attempt + 1}: model call failed: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        prompt_tokens, completion_tokens, estimated = _usage(reply, conversation)
        cost = cost + Cost(
            llm_calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, tokens_estimated=estimated
        )
        problems: list[str]
        try:
            data = parse_json_reply(reply)
            output = schema.model_validate(data)
            problems = validate(output) if validate else []
        except (ValueError, ValidationError, TypeError) as exc:
            problems = [str(exc)[:1000]]
        if not problems:
            cost.wall_time_s = time.perf_counter() - started
            return RoleOutcome(output=output, cost=cost, attempts=attempts)
        errors.append(f"attempt {attempt + 1}: " + "; ".join(problems)[:1500])
        shown = reply.content if reply.content else json.dumps(getattr(reply, "tool_calls", []), default=str)
        conversation = [
            *messages,
            AIMessage(content=str(shown)[:4000]),
            HumanMessage(
                content="Your reply was not valid:\n- "
                + "\n- ".join(problems)[:2000]
                + f"\nReply again with only one JSON object matching the {schema.__name__} schema."
            ),
        ]
    cost.wall_time_s = time.perf_counter() - started
    return RoleOutcome(
        output=fallback(),
        cost=cost,
        fallback=FallbackRecord(role=role, reason="invalid model output after one retry", errors=errors),
        attempts=attempts,
    )
