"""Memory-R2 answer agent's memory distillation: which of the retrieved memories bear on the question.

Typed output (``MemorySelection``), validated against the ids it was shown, one retry, then the deterministic
fallback (and the no-LLM policy): the most similar memories, in retrieval order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.memory.records.r2 import FactRecord
from logicmap.prompts import r2_distill
from logicmap.prompts.r2_distill import MemorySelection

__all__ = ["distill_memories", "top_by_similarity"]


def top_by_similarity(memories: Sequence[FactRecord], keep: int) -> MemorySelection:
    """The first ``keep`` memories (they come most similar first): the role's fallback."""
    return MemorySelection(selected=[m.id for m in memories[: max(0, keep)]])


def distill_memories(
    llm: BaseChatModel | None,
    question: str,
    memories: Sequence[FactRecord],
    *,
    keep: int = 10,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[MemorySelection]:
    """The ids of the retrieved ``memories`` (most similar first) that bear on ``question``; duplicates dropped.

    Fallback: the ``keep`` most similar. Ids the model did not see are a problem it is asked to fix.
    """
    shown = {m.id for m in memories}

    def validate(result: MemorySelection) -> list[str]:
        unknown = [i for i in result.selected if i not in shown]
        return [f"ids {unknown[:10]} are not among the retrieved memories; use only ids shown"] if unknown else []

    outcome = run_role(
        llm,
        role="r2_distiller",
        messages=r2_distill.build_messages(question, "\n".join(m.render() for m in memories)),
        schema=MemorySelection,
        validate=validate,
        fallback=lambda: top_by_similarity(memories, keep),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": r2_distill.VERSION},
    )
    selected = list(dict.fromkeys(outcome.output.selected))
    return outcome.model_copy(update={"output": MemorySelection(selected=selected)})
