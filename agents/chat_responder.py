"""The chatbot's responder: the reply a user reads, asked for as plain text so its tokens can stream.

Unlike the other roles it is not a JSON object: a streamed JSON reply would reach a chat window as fragments
of a tool call. It still validates (a reply must not be empty), retries once and falls back, like ``run_role``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome
from logicmap.agents.provider import ProviderError, call_with_retries, endpoint_of
from logicmap.prompts.chat import ChatReply

__all__ = ["ChatReplyOutcome", "reply_text"]

ROLE = "chat_responder"


class ChatReplyOutcome(RoleOutcome[ChatReply]):
    """The responder's outcome; ``message_id`` is the model message's id (its streamed chunks carry it)."""

    message_id: str | None = None


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, list):
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    text = str(content or "").strip()
    if text.startswith("{"):  # a model used to JSON roles may still wrap its reply: unwrap it
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(data, dict) and isinstance(data.get("reply"), str):
            return data["reply"].strip()
    return text


def _cost(message: BaseMessage, messages: Sequence[BaseMessage]) -> Cost:
    usage = getattr(message, "usage_metadata", None)
    if usage:
        return Cost(llm_calls=1, prompt_tokens=int(usage.get("input_tokens", 0)),
                    completion_tokens=int(usage.get("output_tokens", 0)))  # fmt: skip
    prompt_chars = sum(len(str(m.content)) for m in messages)
    return Cost(llm_calls=1, prompt_tokens=prompt_chars // 4, completion_tokens=len(str(message.content)) // 4,
                tokens_estimated=True)  # fmt: skip


def _request(llm: BaseChatModel, conversation: list[BaseMessage], config: dict[str, Any], endpoint: str,
             cost: Cost) -> BaseMessage:
    """One reply, transient provider errors (429, 5xx, timeouts) retried within the run's budget."""

    def call(timeout: float | None) -> BaseMessage:
        cost.http_requests += 1
        extra = {"timeout": timeout} if timeout is not None and hasattr(llm, "root_client") else {}
        return llm.invoke(conversation, config=config, **extra)

    return call_with_retries(call, endpoint=endpoint)


def reply_text(
    llm: BaseChatModel | None,
    messages: list[BaseMessage],
    *,
    fallback: Callable[[], ChatReply],
    used_memory_ids: Sequence[str] = (),
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> ChatReplyOutcome:
    """Ask the model for the reply as plain text (streamed when the caller streams); retry an empty reply once
    with a nudge; else ``fallback()``, recorded. Never raises for a bad reply or a failed call."""
    started = time.perf_counter()
    if llm is None:
        return ChatReplyOutcome(output=fallback(), cost=Cost(),
                                fallback=FallbackRecord(role=ROLE, reason="no chat model configured"))  # fmt: skip
    config = {"run_name": ROLE, "tags": [f"role:{ROLE}", *tags], "metadata": dict(metadata or {})}
    conversation, cost, errors = list(messages), Cost(), []
    endpoint = endpoint_of(llm)
    for attempt in range(2):
        try:
            message = _request(llm, conversation, config, endpoint, cost)
        except ProviderError:
            raise  # a broken key, an unreachable server, a deadline: the run stops, never a silent fallback
        except Exception as exc:  # noqa: BLE001 - a failed call is a failed attempt, recorded below
            errors.append(f"attempt {attempt + 1}: model call failed: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        cost = cost + _cost(message, conversation)
        cost.usable_replies += 1 if _text(message) else 0
        text = _text(message)
        if text:
            cost.wall_time_s = time.perf_counter() - started
            return ChatReplyOutcome(output=ChatReply(reply=text, used_memory_ids=list(used_memory_ids)), cost=cost,
                                    attempts=attempt + 1, message_id=message.id)  # fmt: skip
        errors.append(f"attempt {attempt + 1}: the reply is empty")
        conversation = [
            *messages,
            AIMessage(content=""),
            HumanMessage(content="Your reply was empty. Reply to the last message in plain text."),
        ]
    cost.wall_time_s = time.perf_counter() - started
    return ChatReplyOutcome(
        output=fallback(),
        cost=cost,
        attempts=2,
        fallback=FallbackRecord(role=ROLE, reason="no usable reply after one retry", errors=errors),
    )
