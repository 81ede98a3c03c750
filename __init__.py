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
    from logicmap.graphs.basestore import LogicMapStore
    from logicmap.graphs.chat_messages import MessageFormatError, MessagesReport, aadd_messages, add_messages
    from logicmap.graphs.chatbot import ChatContext, build_chatbot_graph
    from logicmap.graphs.forget import (
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
    from logicmap.graphs.ingest import IngestReport, aingest_conversation, ingest_conversation
    from logicmap.graphs.resources import Resources
    from logicmap.graphs.result import AnswerResult, EvidenceItem
    from logicmap.graphs.strategies import STRATEGIES, aanswer, answer
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
    "STRATEGIES": "logicmap.graphs.strategies",
    "AnswerResult": "logicmap.graphs.result",
    "ChatContext": "logicmap.graphs.chatbot",
    "EvidenceItem": "logicmap.graphs.result",
    "IngestReport": "logicmap.graphs.ingest",
    "LogicMapSettings": "logicmap.settings",
    "LogicMapStore": "logicmap.graphs.basestore",
    "Resources": "logicmap.graphs.resources",
    "answer": "logicmap.graphs.strategies",
    "aanswer": "logicmap.graphs.strategies",
    "aingest_conversation": "logicmap.graphs.ingest",
    "build_chatbot_graph": "logicmap.graphs.chatbot",
    "create_memory_toolkit": "logicmap.tools",
    "ingest_conversation": "logicmap.graphs.ingest",
    "forget": "logicmap.graphs.forget",
    "aforget": "logicmap.graphs.forget",
    "delete_namespace": "logicmap.graphs.forget",
    "adelete_namespace": "logicmap.graphs.forget",
    "list_memories": "logicmap.graphs.forget",
    "alist_memories": "logicmap.graphs.forget",
    "get_memory": "logicmap.graphs.forget",
    "aget_memory": "logicmap.graphs.forget",
    "update_memory": "logicmap.graphs.forget",
    "aupdate_memory": "logicmap.graphs.forget",
    "purge": "logicmap.graphs.forget",
    "apurge": "logicmap.graphs.forget",
    "ForgetReport": "logicmap.graphs.forget",
    "MemoryPage": "logicmap.graphs.forget",
    "UnknownMemoryError": "logicmap.graphs.forget",
    "add_messages": "logicmap.graphs.chat_messages",
    "aadd_messages": "logicmap.graphs.chat_messages",
    "MessageFormatError": "logicmap.graphs.chat_messages",
    "MessagesReport": "logicmap.graphs.chat_messages",
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
