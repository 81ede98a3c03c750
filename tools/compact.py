"""The compact profile: two tools, ``manage_memory`` and ``search_memory``, as LangMem hands an agent.

``create_memory_toolkit(namespace, profile="compact")`` gives these instead of the full set (fewer schema tokens in
every prompt, fewer choices for a small model). ``search_memory`` runs LogicMap's event retrieval (dense and BM25
fused, ``events.search_event_ids``) and shows the turns of the events it finds, each with its id;
``manage_memory`` creates a memory (through the injected ``ingest``, as ``remember``), or updates or deletes one by
that id (through the injected ``editor``, as ``update_memory`` and ``forget_memory``). The namespace is the run's,
never a tool argument.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langchain_core.tools import StructuredTool
from pydantic import Field

from logicmap.memory.store import StoragePort
from logicmap.memory.store.errors import UnknownMemoryError
from logicmap.tools.common import (
    MemoryAccess,
    MemoryToolConfigError,
    ToolArgs,
    ToolArgumentError,
    ToolResult,
    call_namespace,
    check_configured_namespace,
    make_memory_tool,
    turn_record,
)
from logicmap.tools.events import MAX_K, search_event_ids
from logicmap.tools.forget import MemoryEditor
from logicmap.tools.remember import SessionIngester, store_statement

__all__ = [
    "COMPACT_TOOLS",
    "ManageMemoryArgs",
    "SearchMemoryArgs",
    "create_manage_memory_tool",
    "create_search_memory_tool",
]

COMPACT_TOOLS = ("manage_memory", "search_memory")
MAX_TURN_TEXT = 400


class ManageMemoryArgs(ToolArgs):
    content: str | None = Field(None, max_length=4000, description="The memory's text (for create and update).")
    action: Literal["create", "update", "delete"] = Field("create", description="create, update or delete.")
    id: str | None = Field(None, max_length=200, description="The memory id to update or delete (from search_memory).")


class SearchMemoryArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=500, description="What to look for.")
    limit: int | None = Field(None, ge=1, le=MAX_K, description="How many memories to return (1-20).")


def create_search_memory_tool(
    namespace: str | None,
    *,
    store: StoragePort,
    embeddings: Embeddings | None = None,
    k: int = 5,
    name: str = "search_memory",
    require_namespace: bool = True,
) -> StructuredTool:
    """``search_memory(query, limit)``: the stored memories (turns) most related to a query, each with its id."""
    access = MemoryAccess.checked(namespace, store, embeddings, require=require_namespace)
    default_k = max(1, min(int(k), MAX_K))

    def search_memory(query: str, limit: int | None = None) -> ToolResult:
        """Search long-term memory. Returns memories with their ids, best first."""
        snapshot = access.snapshot()
        wanted = limit or default_k
        hits = search_event_ids(snapshot, query, wanted, embeddings=access.embeddings)
        lines: list[str] = []
        records: list[dict[str, Any]] = []
        for eid, score in hits:
            event = snapshot.events[eid]
            for turn_id in event.turn_ids:
                turn = snapshot.turns.get(turn_id)
                if turn is None or any(r["id"] == turn_id for r in records) or len(records) >= wanted:
                    continue
                when = turn.session_time.date().isoformat() if turn.session_time else "undated"
                text = turn.text if len(turn.text) <= MAX_TURN_TEXT else turn.text[: MAX_TURN_TEXT - 1] + "…"
                lines.append(f"{len(records) + 1}. [{turn_id}] ({when}) {turn.speaker}: {text}")
                records.append(turn_record(turn, event_id=eid, score=round(score, 5), rank=len(records) + 1))
        if not records:
            return f"No memories match {query!r}.", []
        return f"Memories for {query!r}:\n" + "\n".join(lines), records

    return make_memory_tool(name, SearchMemoryArgs, search_memory)


def create_manage_memory_tool(
    namespace: str | None,
    *,
    ingest: SessionIngester,
    editor: MemoryEditor | None = None,
    name: str = "manage_memory",
    clock: Callable[[], datetime] = datetime.now,
) -> StructuredTool:
    """``manage_memory(content, action, id)``: create a memory, or update or delete one by id (with an ``editor``)."""
    if not callable(ingest):
        raise MemoryToolConfigError("manage_memory needs an ingest callable: ingest(session, namespace)")
    if editor is not None and not (
        callable(getattr(editor, "forget", None)) and callable(getattr(editor, "update", None))
    ):
        raise MemoryToolConfigError("manage_memory's editor needs forget and update (graphs.forget.memory_editor)")
    check_configured_namespace(namespace)

    def manage_memory(
        content: str | None = None, action: str = "create", id: str | None = None
    ) -> ToolResult:  # LangMem's argument name
        """Create, update or delete a memory in long-term memory. Create stores something worth remembering (a
        fact, plan, preference or event the user stated), in the user's words; update corrects a memory that is
        wrong or changed; delete forgets one the user asks to forget. Update and delete take the memory's id."""
        if action == "create":
            if id:
                raise ToolArgumentError(f"create takes no id: to change memory {id!r} call with action='update'.")
            return store_statement(namespace, content or "", "user", None, ingest=ingest, clock=clock)
        if editor is None:
            raise ToolArgumentError(f"This memory only accepts new memories: {action} is not allowed here.")
        if not id or not id.strip():
            raise ToolArgumentError(f"{action} needs the memory's id: find it with search_memory and call again.")
        target = call_namespace(namespace)
        try:
            if action == "delete":
                editor.forget(target, [id.strip()])
                return f"Deleted memory {id.strip()}.", [{"kind": "forget", "turn_ids": [id.strip()]}]
            if not content or not content.strip():
                raise ToolArgumentError("update needs the new content: to remove a memory call with action='delete'.")
            editor.update(target, id.strip(), content)
        except UnknownMemoryError as exc:
            raise ToolArgumentError(f"{exc}. Find the memory's id with search_memory and call again.") from None
        return f"Updated memory {id.strip()}.", [{"kind": "update", "turn_id": id.strip()}]

    return make_memory_tool(name, ManageMemoryArgs, manage_memory)
