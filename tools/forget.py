"""The forgetting tools: ``forget_memory(turn_ids)`` and ``update_memory(turn_id, text)``, for the run's namespace.

Like ``remember``, they write through an object the caller injects (``graphs.writes.forget.memory_editor`` gives one over
``logicmap.forget``), so this package depends on ``memory`` only; the toolkit adds them only when it is given
one (writes allowed). The namespace is the run's, never a tool argument: a model cannot forget another tenant's
memory, and an id of another tenant reads exactly like an unknown id.
"""

from __future__ import annotations

from typing import Any, Protocol

from langchain_core.tools import StructuredTool
from pydantic import Field

from logicmap.memory.store.errors import UnknownMemoryError
from logicmap.tools.common import (
    MemoryToolConfigError,
    ToolArgs,
    ToolArgumentError,
    ToolResult,
    call_namespace,
    check_configured_namespace,
    make_memory_tool,
)

__all__ = ["ForgetArgs", "MemoryEditor", "UpdateArgs", "create_forget_memory_tool", "create_update_memory_tool"]


class MemoryEditor(Protocol):
    """What the forgetting tools write through (``graphs.writes.forget.memory_editor``)."""

    def forget(self, namespace: str, turn_ids: list[str], purge: bool = False) -> Any: ...

    def update(self, namespace: str, turn_id: str, text: str, purge: bool = False) -> Any: ...


_PURGE = "Also remove it from disk for good (when the user asks that nothing of it be kept)."


class ForgetArgs(ToolArgs):
    turn_ids: list[str] = Field(
        min_length=1, max_length=50, description="Ids of the turns to forget (as tools cite them)."
    )
    purge: bool = Field(default=False, description=_PURGE)


class UpdateArgs(ToolArgs):
    turn_id: str = Field(min_length=1, max_length=200, description="Id of the turn to correct.")
    text: str = Field(min_length=1, max_length=4000, description="The turn's corrected text.")
    purge: bool = Field(default=False, description="Also remove the old text from disk for good.")


def _checked(namespace: str | None, editor: Any, what: str) -> None:
    if editor is None or not callable(getattr(editor, what, None)):
        raise MemoryToolConfigError(f"the {what} tool needs a memory editor (graphs.forget.memory_editor)")
    check_configured_namespace(namespace)


def _counts(report: Any) -> str:
    removed = getattr(report, "removed", {}) or {}
    return ", ".join(f"{n} {kind}" for kind, n in removed.items()) or "nothing else"


def create_forget_memory_tool(
    namespace: str | None, *, editor: MemoryEditor, name: str = "forget_memory"
) -> StructuredTool:
    """``forget_memory(turn_ids)``: forget turns of the run's namespace and everything derived only from them."""
    _checked(namespace, editor, "forget")

    def forget_memory(turn_ids: list[str], purge: bool = False) -> ToolResult:
        """Forget turns the user asked you to forget (for example "forget my home address"), with everything
        derived only from them. Find the turn ids first with the search tools."""
        target = call_namespace(namespace)
        try:
            report = (
                editor.forget(target, list(turn_ids), purge=purge) if purge else editor.forget(target, list(turn_ids))
            )
        except UnknownMemoryError as exc:
            raise ToolArgumentError(f"{exc}. Find the turn ids with the search tools and call again.") from None
        done = " and purged them from disk" if purge else ""
        return (
            f"Forgot {len(turn_ids)} turn(s){done}: {_counts(report)}.",
            [{"kind": "forget", "turn_ids": list(turn_ids), **({"purged": True} if purge else {})}],
        )

    return make_memory_tool(name, ForgetArgs, forget_memory)


def create_update_memory_tool(
    namespace: str | None, *, editor: MemoryEditor, name: str = "update_memory"
) -> StructuredTool:
    """``update_memory(turn_id, text)``: correct a turn's text; what was derived from the old text is forgotten."""
    _checked(namespace, editor, "update")

    def update_memory(turn_id: str, text: str, purge: bool = False) -> ToolResult:
        """Correct something stored in memory that the user says is wrong or changed: the turn gets the new
        text, and what was derived from the old text is forgotten."""
        if not text.strip():
            raise ToolArgumentError("The new text is empty: to remove a memory call forget_memory instead.")
        target = call_namespace(namespace)
        try:
            if purge:
                editor.update(target, turn_id, text, purge=True)
            else:
                editor.update(target, turn_id, text)
        except UnknownMemoryError as exc:
            raise ToolArgumentError(f"{exc}. Find the turn id with the search tools and call again.") from None
        done = " (the old text purged from disk)" if purge else ""
        return f"Updated turn {turn_id}{done}.", [
            {"kind": "update", "turn_id": turn_id, **({"purged": True} if purge else {})}
        ]

    return make_memory_tool(name, UpdateArgs, update_memory)
