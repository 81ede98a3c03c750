"""Conversations shipped with LogicMap, so examples run wherever the reader is (an installed wheel included).

``sample_path()`` is the bundled sample conversation (5 sessions, 38 turns, 16 questions) that the README, the docs
and ``logicmap demo`` use; the other files are the held-out and long conversations the tests and benchmarks use.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["sample_path"]


def sample_path() -> Path:
    """The path of the bundled sample conversation (``sample_conversation.json``, a LoCoMo-style file)."""
    return Path(str(files(__name__) / "sample_conversation.json"))
