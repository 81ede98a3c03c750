"""Chat responder prompt: the thread so far plus the memories recalled for the last message -> a reply.

The reply is plain text (so a chat window can stream its tokens); ``ChatReply`` is its typed form.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import BaseModel, Field

__all__ = ["VERSION", "ChatReply", "build_messages"]

VERSION = "chat-v2"


class ChatReply(BaseModel):
    reply: str = Field(description="What the assistant says next, in plain conversational text.")
    used_memory_ids: list[str] = Field(
        default_factory=list, description="Ids of the recalled memories the reply rests on (those recall cited)."
    )


def build_messages(
    history: Sequence[BaseMessage], memories_text: str, *, user_name: str, recalled_answer: str | None
) -> list[BaseMessage]:
    system = (
        f"You are a helpful assistant with long-term memory of earlier conversations with {user_name}. "
        "Below are memories recalled for the last message. Use them when they are relevant, quote "
        "names, dates and numbers exactly, and never invent memories; if the memories do not cover a "
        "question about the past, say you do not remember.\n"
        + (f"Memory's answer to the last message: {recalled_answer}\n" if recalled_answer else "")
        + f"Recalled memories:\n{memories_text or '(none)'}\n"
        + "Reply with only the message to send, in plain conversational text: no JSON, no memory ids."
    )
    return [SystemMessage(content=system), *history]
