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

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome, request_reply, retry_config
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
        reply = data.get("reply") if isinstance(data, dict) else None
        if isinstance(reply, str):
            return reply.strip()
    return text


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
    with a nudge; else ``fallback()``, recorded. A bad reply never raises; a provider failure raises
    ``ProviderError`` (``agents.base.request_reply``, the request path every role shares)."""
    started = time.perf_counter()
    if llm is None:
        return ChatReplyOutcome(
            output=fallback(), cost=Cost(), fallback=FallbackRecord(role=ROLE, reason="no chat model configured")
        )
    config = {"run_name": ROLE, "tags": [f"role:{ROLE}", *tags], "metadata": dict(metadata or {})}
    conversation, cost, errors = list(messages), Cost(), []
    for attempt in range(2):
        # Transient provider errors are retried inside; a provider failure (bad key, unreachable server,
        # deadline) raises ``ProviderError``: the run stops, never a silent fallback.
        attempt_config = config if attempt == 0 else retry_config(config, attempt + 1)
        message, problem, _ = request_reply(llm, conversation, attempt_config, llm, cost)
        if message is None:
            errors.append(f"attempt {attempt + 1}: {problem}")
            continue
        text = _text(message)
        if text:
            cost.usable_replies += 1
            cost.wall_time_s = time.perf_counter() - started
            return ChatReplyOutcome(
                output=ChatReply(reply=text, used_memory_ids=list(used_memory_ids)),
                cost=cost,
                attempts=attempt + 1,
                message_id=message.id,
            )
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
