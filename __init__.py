"""LogicMap: long-term memory for conversational agents, built on LangGraph.

The repository's top-level folders install as one package, ``logicmap``: ``logicmap.memory`` (records,
store, indexes), ``logicmap.agents`` (one LLM role per module), ``logicmap.graphs`` (one StateGraph per
method), ``logicmap.tools`` (typed memory tools), ``logicmap.prompts`` and ``logicmap.evals``; ``logicmap.settings``
(``LogicMapSettings``, read from ``LOGICMAP_*`` variables: models, storage, topics) sits beside them at the root.

The short public API lives here and is imported lazily, so ``import logicmap`` loads no model::

    from logicmap import ingest_conversation, answer, sample_path

    ingest_conversation(sample_path(), "maya", policy="heuristic")
    print(answer("compass", "Why did Maya move to Lisbon?", "maya", policy="heuristic").answer)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logicmap.data import sample_path
    from logicmap.graphs.chat.chatbot import ChatContext, build_chatbot_graph
    from logicmap.graphs.chat.messages import MessageFormatError, MessagesReport, aadd_messages, add_messages
    from logicmap.graphs.ingest.ingest import IngestReport, aingest_conversation, ingest_conversation
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem
    from logicmap.graphs.strategies.registry import STRATEGIES, aanswer, answer
    from logicmap.graphs.surfaces.basestore import LogicMapStore
    from logicmap.graphs.writes.forget import (
        ForgetReport,
        MemoryPage,
        UnknownMemoryError,
        adelete_namespace,
        aforget,
        aget_memory,
        alist_memories,
        apurge,
        aupdate_memory,
        delete_namespace,
        forget,
        get_memory,
        list_memories,
        purge,
        update_memory,
    )
    from logicmap.settings import LogicMapSettings
    from logicmap.tools import create_memory_toolkit


__all__ = [
    "STRATEGIES",
    "AnswerResult",
    "ChatContext",
    "EvidenceItem",
    "ForgetReport",
    "IngestReport",
    "LogicMapSettings",
    "LogicMapStore",
    "MemoryPage",
    "MessageFormatError",
    "MessagesReport",
    "Resources",
    "UnknownMemoryError",
    "aadd_messages",
    "aanswer",
    "add_messages",
    "adelete_namespace",
    "aforget",
    "aget_memory",
    "aingest_conversation",
    "alist_memories",
    "answer",
    "apurge",
    "aupdate_memory",
    "build_chatbot_graph",
    "create_memory_toolkit",
    "delete_namespace",
    "forget",
    "get_memory",
    "ingest_conversation",
    "list_memories",
    "purge",
    "sample_path",
    "update_memory",
]

# Public name -> the module that defines it (tests/unit/test_package.py checks it names every name of __all__).
_EXPORTS = {
    "STRATEGIES": "logicmap.graphs.strategies.registry",
    "AnswerResult": "logicmap.graphs.runtime.result",
    "ChatContext": "logicmap.graphs.chat.chatbot",
    "EvidenceItem": "logicmap.graphs.runtime.result",
    "IngestReport": "logicmap.graphs.ingest.ingest",
    "LogicMapSettings": "logicmap.settings",
    "LogicMapStore": "logicmap.graphs.surfaces.basestore",
    "Resources": "logicmap.graphs.runtime.resources",
    "answer": "logicmap.graphs.strategies.registry",
    "aanswer": "logicmap.graphs.strategies.registry",
    "aingest_conversation": "logicmap.graphs.ingest.ingest",
    "build_chatbot_graph": "logicmap.graphs.chat.chatbot",
    "create_memory_toolkit": "logicmap.tools",
    "ingest_conversation": "logicmap.graphs.ingest.ingest",
    "forget": "logicmap.graphs.writes.forget",
    "aforget": "logicmap.graphs.writes.forget",
    "delete_namespace": "logicmap.graphs.writes.forget",
    "adelete_namespace": "logicmap.graphs.writes.forget",
    "list_memories": "logicmap.graphs.writes.forget",
    "alist_memories": "logicmap.graphs.writes.forget",
    "get_memory": "logicmap.graphs.writes.forget",
    "aget_memory": "logicmap.graphs.writes.forget",
    "update_memory": "logicmap.graphs.writes.forget",
    "aupdate_memory": "logicmap.graphs.writes.forget",
    "purge": "logicmap.graphs.writes.forget",
    "apurge": "logicmap.graphs.writes.forget",
    "ForgetReport": "logicmap.graphs.writes.forget",
    "MemoryPage": "logicmap.graphs.writes.forget",
    "UnknownMemoryError": "logicmap.graphs.writes.forget",
    "add_messages": "logicmap.graphs.chat.messages",
    "aadd_messages": "logicmap.graphs.chat.messages",
    "MessageFormatError": "logicmap.graphs.chat.messages",
    "MessagesReport": "logicmap.graphs.chat.messages",
    "sample_path": "logicmap.data",
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
