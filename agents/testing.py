"""Scripted chat models for tests and benchmarks: replies from a script, optional fixed latency.

``bind_tools`` returns the model itself, so tool-calling agents and forced tool calls work with it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = ["ScriptedChatModel"]

Reply = str | dict[str, Any] | AIMessage


class ScriptedChatModel(BaseChatModel):
    """Replies come from ``routes`` (first key found in the system prompt), else ``replies``, else ``respond``.

    A dict reply is sent as JSON text; an ``AIMessage`` is sent as it is (tool calls included). When a
    script runs out, ``default`` is sent. Every call is recorded in ``calls``; ``delay`` sleeps first.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: list[Any] = Field(default_factory=list)
    routes: dict[str, list[Any]] = Field(default_factory=dict)
    respond: Callable[[Sequence[BaseMessage]], Reply] | None = None
    default: Any = ""
    delay: float = 0.0
    report_usage: bool = True
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _next(self, messages: Sequence[BaseMessage]) -> Reply:
        system = str(messages[0].content) if messages else ""
        with self._lock:
            self.calls.append(list(messages))
            for key, script in self.routes.items():
                if key in system:
                    routed: Reply = script.pop(0) if script else self.default
                    return routed
            if self.replies:
                queued: Reply = self.replies.pop(0)
                return queued
        if self.respond is not None:
            return self.respond(messages)
        fallback: Reply = self.default
        return fallback

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.delay:
            time.sleep(self.delay)
        reply = self._next(messages)
        if isinstance(reply, AIMessage):
            message = reply.model_copy()
        else:
            text = json.dumps(reply) if isinstance(reply, (dict, list)) else str(reply)
            message = AIMessage(content=text)
        if self.report_usage and not message.usage_metadata:
            prompt = sum(len(str(m.content)) for m in messages) // 4
            completion = max(1, len(str(message.content)) // 4)
            message.usage_metadata = {
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return ChatResult(generations=[ChatGeneration(message=message)])
