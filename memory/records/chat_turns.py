"""What a chat turn is to memory: a user's statement is evidence; a user's question, and a model's reply not
trusted, are kept as context only (``Turn.evidence`` False), and recall never returns them.

``is_question`` decides at write time (no model); ``recall_turn_ids`` is the one list of a snapshot's turns that
turn-level retrieval (BM25, dense, the graph-feature reranker) may return, computed once per snapshot.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from logicmap.memory.language.text import split_sentences

if TYPE_CHECKING:
    from logicmap.memory.store import NamespaceSnapshot

__all__ = ["is_question", "recall_turn_ids"]

# An unpunctuated message asks when it opens like a question ("where do I live", "do you know my name").
_ASKS = re.compile(
    r"(what|when|where|who|whom|whose|which|why|how|do|does|did|is|are|am|was|were|can|could|should|would|will|"
    r"have|has|tell me|remind me|any idea)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")


def _asks(sentence: str) -> bool:
    stripped = sentence.strip().rstrip("\"')]")
    if stripped.endswith("?"):
        return True
    return not stripped.endswith((".", "!")) and _ASKS.match(stripped) is not None


def is_question(text: str) -> bool:
    """Whether a user's message only asks: every sentence of it with three words or more is a question (a
    greeting such as "Hi!" does not count). "Where do I live?" asks; "Where do I live? I moved to Lisbon."
    tells, and is memory."""
    sentences = [s for s in split_sentences(text) if s.strip()]
    if not sentences:
        return False
    said = [s for s in sentences if len(_WORD.findall(s)) >= 3] or sentences
    return all(_asks(s) for s in said)


def recall_turn_ids(snapshot: NamespaceSnapshot) -> list[str]:
    """The ids of the turns recall may return (``Turn.evidence``), in ``snapshot.turns`` order; built once per
    snapshot. A namespace made from conversation files holds no other kind, so this is all of its turns."""
    return snapshot.derived(_recall_turn_ids)


def _recall_turn_ids(snapshot: NamespaceSnapshot) -> list[str]:
    return [tid for tid, turn in snapshot.turns.items() if turn.evidence]
