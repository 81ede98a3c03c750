"""LogicMap: long-term memory for conversational agents, built on LangGraph.

The repository's top-level folders install as one package, ``logicmap``: ``logicmap.memory`` (records,
store, indexes), ``logicmap.agents`` (one LLM role per module), ``logicmap.graphs`` (one StateGraph per
method), ``logicmap.tools`` (typed memory tools), ``logicmap.prompts`` and ``logicmap.evals``.

The short public API lives here and is imported lazily, so ``import logicmap`` loads no model::

    from logicmap import ingest_conversation, answer, create_memory_toolkit

    ingest_conversation("conversation.json", "maya", policy="heuristic")
    print(answer("compass", "Why did Maya move to Lisbon?", "maya", policy="heuristic").answer)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logicmap.graphs.chatbot import ChatContext, build_chatbot_graph
    from logicmap.graphs.ingest import IngestReport, ingest_conversation
    from logicmap.graphs.resources import Resources
    from logicmap.graphs.result import AnswerResult, EvidenceItem
    from logicmap.graphs.strategies import STRATEGIES, answer
    from logicmap.memory.config import LogicMapSettings
    from logicmap.tools import create_memory_toolkit

__all__ = [
    "STRATEGIES",
    "AnswerResult",
    "ChatContext",
    "EvidenceItem",
    "IngestReport",
    "LogicMapSettings",
    "Resources",
    "answer",
    "build_chatbot_graph",
    "create_memory_toolkit",
    "ingest_conversation",
]

# Public name -> the module that defines it.
_EXPORTS = {
    "STRATEGIES": "logicmap.graphs.strategies",
    "AnswerResult": "logicmap.graphs.result",
    "ChatContext": "logicmap.graphs.chatbot",
    "EvidenceItem": "logicmap.graphs.result",
    "IngestReport": "logicmap.graphs.ingest",
    "LogicMapSettings": "logicmap.memory.config",
    "Resources": "logicmap.graphs.resources",
    "answer": "logicmap.graphs.strategies",
    "build_chatbot_graph": "logicmap.graphs.chatbot",
    "create_memory_toolkit": "logicmap.tools",
    "ingest_conversation": "logicmap.graphs.ingest",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'logicmap' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
