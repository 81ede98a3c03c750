"""A scripted chat model that answers every ingest role from the prompt it gets, and long generated sessions.

``SessionModel`` reads the turn ids and event keys in a prompt and replies with a valid, model-built answer
for that window, so windowed ingest can be checked call by call. With ``limit`` it behaves like a provider
whose context is full: a prompt over ``limit`` characters raises the provider's ``context_length_exceeded``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import Field, PrivateAttr

from logicmap.agents.testing import ScriptedChatModel
from logicmap.memory.files.loaders import Conversation, RawTurn, Session

__all__ = ["ANALYZE", "SEGMENT", "RELATE", "FACTS", "CUES", "TOPICS", "SessionModel", "long_conversation"]

ANALYZE = "analyse one session"  # the session analyst's combined prompt (events, facts, cue units in one reply)
SEGMENT = "split one session"
RELATE = "logical relations"
FACTS = "REAL fact extractor"
CUES = "index one session"
TOPICS = "You abstract topics from clusters"  # MRAgent's topic abstractor (one call per session, Eq. 18)
_TURN = re.compile(r"^\[(?P<id>[^\]]+)\] (?P<speaker>[^:]+):", re.MULTILINE)
_EVENT = re.compile(r"^(E\d+): ", re.MULTILINE)
_TOPIC = re.compile(r"^(T\d+) \(\d+ events\):", re.MULTILINE)


class ContextLengthExceeded(Exception):
    """What an OpenAI-compatible server answers to a prompt longer than the model's context."""


class SessionModel(ScriptedChatModel):
    """Replies for segmenter, relations, facts, cues and topics built from the prompt; ``garbage`` roles get junk.

    The session analyst's combined prompt is counted as role ``analysis``; its reply holds the parts the
    schema asks for, each built as the separate role's reply, and a part whose role is in ``garbage`` is junk
    (``garbage={"analysis"}`` makes the whole reply junk)."""

    limit: int | None = None
    garbage: set[str] = Field(default_factory=set)
    garbage_when: str = ""  # garbage only for prompts that hold this text (e.g. a session's turn ids)
    chunk: int = 3  # turns per segmented event
    role_calls: dict[str, int] = Field(default_factory=dict)
    prompt_sizes: dict[str, list[int]] = Field(default_factory=dict)
    barrier: Any = None  # a threading.Barrier the facts and cues calls wait on (proves they overlap)
    _count_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _next(self, messages: Sequence[BaseMessage]) -> Any:
        system, human = str(messages[0].content), str(messages[-1].content) if len(messages) > 1 else ""
        role = next(
            (
                name
                for name, key in (
                    ("analysis", ANALYZE),
                    ("segmenter", SEGMENT),
                    ("relations", RELATE),
                    ("facts", FACTS),
                    ("cues", CUES),
                    ("topics", TOPICS),
                )
                if key in system
            ),
            "other",
        )
        size = sum(len(str(m.content)) for m in messages)
        with self._count_lock:
            self.role_calls[role] = self.role_calls.get(role, 0) + 1
            self.prompt_sizes.setdefault(role, []).append(size)
            self.calls.append(list(messages))
        if self.limit is not None and size > self.limit:
            raise ContextLengthExceeded(
                f"Error code: 400 - This model's maximum context length is {self.limit} characters; "
                f"the messages have {size} (context_length_exceeded)"
            )
        if role in ("facts", "cues") and self.barrier is not None:
            self.barrier.wait()
        text = str(messages[1].content) if len(messages) > 1 else ""
        if role in self.garbage and self.garbage_when in text:
            return "this is not JSON at all"
        if role == "analysis":
            return self._analysis(system, text)
        return getattr(self, f"_{role}", lambda _t: {})(text if role != "other" else human)

    def _analysis(self, system: str, text: str) -> dict:
        parts = {"segmenter": self._segmenter(text)}
        if "SessionAnalysis" in system or "SegmentationWithFacts" in system:
            parts["facts"] = self._facts(text)
        if "SessionAnalysis" in system or "SegmentationWithCues" in system:
            parts["cues"] = self._cues(text)
        junk = self.garbage if self.garbage_when in text else set()
        reply: dict = {}
        for role, part in parts.items():
            reply.update({key: "this is not JSON at all" for key in part} if role in junk else part)
        return reply

    def _segmenter(self, text: str) -> dict:
        ids = [m.group("id") for m in _TURN.finditer(text)]
        chunks = [ids[i : i + self.chunk] for i in range(0, len(ids), self.chunk)]
        return {"events": [{"summary": f"Model event over {c[0]} to {c[-1]}.", "turn_ids": c} for c in chunks]}

    @staticmethod
    def _relations(text: str) -> dict:
        keys = _EVENT.findall(text.split("\n\nTurns:")[0])
        return {"relations": [{"source": a, "target": b, "label": "causal"} for a, b in zip(keys, keys[1:])]}

    @staticmethod
    def _topics(text: str) -> dict:
        return {
            "topics": [
                {"topic": t, "label": f"model topic {t}", "description": f"The events of {t}."}
                for t in _TOPIC.findall(text)
            ]
        }

    @staticmethod
    def _facts(text: str) -> dict:
        return {
            "facts": [
                {
                    "head": m.group("speaker").strip(),
                    "relation": "mentions",
                    "tail": f"topic {m.group('id')}",
                    "turn_ids": [m.group("id")],
                }
                for m in _TURN.finditer(text)
            ][:5]
        }

    @staticmethod
    def _cues(text: str) -> dict:
        return {
            "units": [
                {
                    "turn_id": m.group("id"),
                    "content": f"{m.group('speaker').strip()} talks about marathon training.",
                    "tags": ["training"],
                    "cues": [{"cue": "marathon", "kind": "activity"}],
                }
                for m in _TURN.finditer(text)
            ],
            "person_facts": [],
        }


def long_conversation(
    turns: int, *, sessions: int = 1, chars: int = 330, conversation_id: str = "long"
) -> Conversation:
    """A conversation of ``sessions`` sessions of ``turns`` turns, each about ``chars`` characters long."""
    people = ["Maya", "Leo"]
    out = []
    start = datetime(2023, 3, 4, 14, 15)
    for s in range(1, sessions + 1):
        raw = []
        for t in range(1, turns + 1):
            body = (
                f"turn {t} of session {s}: I keep training for the marathon in Porto and tried a new route "
                f"past the river number {t % 17}. "
            )
            raw.append(
                RawTurn(dia_id=f"D{s}:{t}", speaker=people[(t - 1) % 2], text=(body * (1 + chars // len(body)))[:chars])
            )
        stamp = start + timedelta(days=7 * (s - 1))
        out.append(
            Session(
                session_id=f"S{s}", timestamp=stamp, timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"), turns=raw
            )
        )
    return Conversation(conversation_id=conversation_id, speakers=people, sessions=out)
