"""Typed LangChain tools over LogicMap memory: the toolkit any agent can be given.

Factories bind a namespace (a name, or a template such as ``"{user_id}"`` resolved per call from the call's
``config["configurable"]``) and a store; ``create_memory_toolkit`` builds the whole set.

Modules: ``common`` (namespace resolution per call, argument limits, errors a model can read), ``events`` (event-graph
search and navigation tools: ``EXTRA_TOOLS``, not in the MRAgent paper), ``mragent`` (MRAgent's seven tools under the
paper's names: ``MRAGENT_TOOLS``), ``remember`` (the write tool),
``forget`` (``forget_memory`` and ``update_memory``, added when writes are allowed), ``compact`` (the compact
profile: ``manage_memory`` and ``search_memory``, as LangMem's two tools).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langchain_core.tools import BaseTool

from logicmap.memory.store import StoragePort
from logicmap.tools.common import (
    MemoryToolConfigError,
    ToolArgumentError,
    ToolNamespaceError,
    ToolNamespaceRequiredError,
)
from logicmap.tools.compact import COMPACT_TOOLS, create_manage_memory_tool, create_search_memory_tool
from logicmap.tools.events import (
    create_events_in_time_range_tool,
    create_get_event_tool,
    create_get_neighbors_tool,
    create_search_events_tool,
    create_topic_events_tool,
)
from logicmap.tools.forget import MemoryEditor, create_forget_memory_tool, create_update_memory_tool
from logicmap.tools.mragent import (
    create_query_conversation_time_tool,
    create_query_event_context_tool,
    create_query_event_keywords_tool,
    create_query_personal_aspect_tool,
    create_query_personal_information_tool,
    create_query_tag_events_tool,
    create_query_topic_events_tool,
)
from logicmap.tools.remember import SessionIngester, create_remember_tool

__all__ = [
    "COMPACT_TOOLS",
    "EVENT_TOOLS",
    "EXTRA_TOOLS",
    "MRAGENT_TOOLS",
    "MemoryEditor",
    "MemoryToolConfigError",
    "SessionIngester",
    "ToolArgumentError",
    "ToolNamespaceError",
    "ToolNamespaceRequiredError",
    "create_events_in_time_range_tool",
    "create_forget_memory_tool",
    "create_get_event_tool",
    "create_get_neighbors_tool",
    "create_manage_memory_tool",
    "create_memory_toolkit",
    "create_query_conversation_time_tool",
    "create_query_event_context_tool",
    "create_query_event_keywords_tool",
    "create_query_personal_aspect_tool",
    "create_query_personal_information_tool",
    "create_query_tag_events_tool",
    "create_query_topic_events_tool",
    "create_remember_tool",
    "create_search_events_tool",
    "create_search_memory_tool",
    "create_topic_events_tool",
    "create_update_memory_tool",
]

EVENT_TOOLS = ("search_events", "get_event", "get_neighbors", "events_in_time_range", "topic_events")
# MRAgent's toolkit exactly as its paper names it (Table 4: seven typed mappings between memory components).
MRAGENT_TOOLS = (
    "query_tag_events",
    "query_conversation_time",
    "query_event_keywords",
    "query_event_context",
    "query_personal_information",
    "query_personal_aspect",
    "query_topic_events",
)
# The project's extra tools (not in the MRAgent paper): similarity search and event-graph navigation.
EXTRA_TOOLS = EVENT_TOOLS


def create_memory_toolkit(
    namespace: str | None,
    *,
    store: StoragePort,
    embeddings: Embeddings | None = None,
    k: int = 5,
    ingest: SessionIngester | None = None,
    include: Sequence[str] | None = None,
    editor: MemoryEditor | None = None,
    profile: Literal["full", "compact"] = "full",
) -> list[BaseTool]:
    """The memory tools for one namespace: the event tools, MRAgent's operators, and ``remember`` when an
    ``ingest`` callable is given. ``include`` keeps only the named tools.

    ``namespace`` is a name, or a template such as ``"{user_id}"`` filled on each call from the call's
    ``config["configurable"]`` (``None``: ``configurable["namespace"]``); a call that names none raises
    ``ToolNamespaceRequiredError``. With ``ingest`` (writes allowed) a brand-new namespace works: reads find
    nothing until ``remember`` stores something. Without it an unknown namespace raises ``ToolNamespaceError``
    (a ``MemoryToolConfigError``), when the toolkit is built for a fixed name, else on the call. With ``editor``
    (``graphs.writes.forget.memory_editor``) as well, ``forget_memory`` and ``update_memory`` write to the same namespace.

    ``profile="compact"``: two tools instead, as LangMem's: ``search_memory``, and ``manage_memory`` (create with
    ``ingest``; update and delete by id with ``editor`` too), on the same retrieval and writes (``tools.compact``).
    """
    if profile not in ("full", "compact"):
        raise MemoryToolConfigError(f"unknown toolkit profile {profile!r}; use 'full' or 'compact'")
    common: dict[str, Any] = {"store": store, "require_namespace": ingest is None}
    if profile == "compact":
        tools = [create_search_memory_tool(namespace, embeddings=embeddings, k=k, **common)]
        if editor is not None and ingest is None:
            raise MemoryToolConfigError("manage_memory writes: give ingest too (writes allowed)")
        if ingest is not None:
            tools.append(create_manage_memory_tool(namespace, ingest=ingest, editor=editor))
        return _included(tools, include)
    tools = [
        create_search_events_tool(namespace, embeddings=embeddings, k=k, **common),
        create_get_event_tool(namespace, **common),
        create_get_neighbors_tool(namespace, **common),
        create_events_in_time_range_tool(namespace, **common),
        create_topic_events_tool(namespace, **common),
        create_query_tag_events_tool(namespace, **common),
        create_query_event_keywords_tool(namespace, **common),
        create_query_conversation_time_tool(namespace, **common),
        create_query_event_context_tool(namespace, **common),
        create_query_personal_aspect_tool(namespace, **common),
        create_query_personal_information_tool(namespace, **common),
        create_query_topic_events_tool(namespace, **common),
    ]
    if ingest is not None:
        tools.append(create_remember_tool(namespace, ingest=ingest))
    if editor is not None:
        if ingest is None:
            raise MemoryToolConfigError("forget_memory and update_memory write: give ingest too (writes allowed)")
        tools += [
            create_forget_memory_tool(namespace, editor=editor),
            create_update_memory_tool(namespace, editor=editor),
        ]
    return _included(tools, include)


def _included(tools: Sequence[BaseTool], include: Sequence[str] | None) -> list[BaseTool]:
    if include is None:
        return list(tools)
    wanted = set(include)
    unknown = wanted - {t.name for t in tools}
    if unknown:
        raise MemoryToolConfigError(f"unknown memory tools {sorted(unknown)}; available: {[t.name for t in tools]}")
    return [t for t in tools if t.name in wanted]
