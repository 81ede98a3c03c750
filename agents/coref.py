"""Coreference judge role: one batched call per session for all (new, stored) event pairs.

Fallback (and no-LLM policy): same event only at near-identical similarity, else an elaboration link.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.prompts import coref as prompt
from logicmap.prompts.coref import CorefVerdict, CorefVerdicts

__all__ = ["CandidatePair", "judge_pairs", "similarity_verdicts"]

SAME_EVENT_SIMILARITY = 0.97


class CandidatePair:
    def __init__(self, new_id: str, new_text: str, stored_id: str, stored_text: str, similarity: float) -> None:
        self.new_id, self.new_text = new_id, new_text
        self.stored_id, self.stored_text = stored_id, stored_text
        self.similarity = similarity


def similarity_verdicts(pairs: Sequence[CandidatePair]) -> CorefVerdicts:
    return CorefVerdicts(
        verdicts=[
            CorefVerdict(
                pair=i,
                same_event=p.similarity >= SAME_EVENT_SIMILARITY,
                has_overlap=p.similarity < SAME_EVENT_SIMILARITY,
                relation_type=None if p.similarity >= SAME_EVENT_SIMILARITY else "elaboration",
            )
            for i, p in enumerate(pairs)
        ]
    )


def _validate(result: CorefVerdicts, n: int) -> list[str]:
    numbers = [v.pair for v in result.verdicts]
    problems = []
    if sorted(numbers) != list(range(n)):
        problems.append(f"give exactly one verdict for each pair 0..{n - 1}, got pairs {numbers}")
    return problems


def judge_pairs(
    llm: BaseChatModel | None,
    pairs: Sequence[CandidatePair],
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[CorefVerdicts]:
    text = "\n\n".join(
        f"Pair {i}:\nNEW: {p.new_text}\nSTORED: {p.stored_text}" for i, p in enumerate(pairs)
    )
    outcome = run_role(
        llm,
        role="coref_judge",
        messages=prompt.build_messages(text),
        schema=CorefVerdicts,
        validate=lambda r: _validate(r, len(pairs)),
        fallback=lambda: similarity_verdicts(pairs),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    outcome.output.verdicts.sort(key=lambda v: v.pair)
    return outcome
