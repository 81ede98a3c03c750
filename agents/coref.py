"""Coreference judge role: one batched call per session for all (new, stored) event pairs.

Fallback (and no-LLM policy): same event only at near-identical similarity, else an elaboration link.
``judge_pairs_paper`` is the paper's judge (``IngestContext.faithful``): one call per pair with the Event
Coreference & Overlap Prompt; its fallback is the same rule for a pair at the merge threshold or above, and
"neither" below it (similarity alone cannot tell a logical relation).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome, run_role
from logicmap.prompts import coref as prompt
from logicmap.prompts.coref import CorefVerdict, CorefVerdicts, PaperCorefVerdict

__all__ = ["CandidatePair", "judge_pairs", "judge_pairs_paper", "similarity_verdicts"]

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
    text = "\n\n".join(f"Pair {i}:\nNEW: {p.new_text}\nSTORED: {p.stored_text}" for i, p in enumerate(pairs))
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


def _paper_fallback(pair: CandidatePair, threshold: float) -> PaperCorefVerdict:
    if pair.similarity >= threshold:
        rule = similarity_verdicts([pair]).verdicts[0]
        return PaperCorefVerdict(
            same_event=rule.same_event,
            has_overlap=rule.has_overlap,
            relation_type=rule.relation_type,
            reasoning="similarity rule",
        )
    return PaperCorefVerdict(
        same_event=False, has_overlap=False, relation_type=None, reasoning="similarity rule: below the threshold"
    )


def _validate_paper(verdict: PaperCorefVerdict) -> list[str]:
    """The prompt's keys read together: an overlap that is not the same event suggests its relation type."""
    if verdict.has_overlap and not verdict.same_event and not (verdict.relation_type or "").strip():
        return ["has_overlap is true: suggest the relation_type"]
    return []


def judge_pairs_paper(
    llm: BaseChatModel | None,
    pairs: Sequence[CandidatePair],
    *,
    threshold: float,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[CorefVerdicts]:
    """The paper's judge: each new event and its most similar stored event e* in a call of their own (the
    Coreference & Overlap Prompt); every pair's typed verdict, retried once, else its recorded fallback. The
    verdicts come back numbered as the pairs, like ``judge_pairs``'s; the fallbacks of the pairs are one record."""
    verdicts: list[CorefVerdict] = []
    cost = Cost()
    errors: list[str] = []
    for i, pair in enumerate(pairs):
        outcome = run_role(
            llm,
            role="coref_judge",
            messages=prompt.build_paper_messages(pair.new_text, pair.stored_text),
            schema=PaperCorefVerdict,
            validate=_validate_paper,
            fallback=partial(_paper_fallback, pair, threshold),
            method=method,
            tags=tags,
            metadata={**(metadata or {}), "prompt_version": prompt.PAPER_VERSION, "pair": i},
        )
        cost = cost + outcome.cost
        if outcome.fallback is not None:
            errors.extend(f"pair {i}: {e}" for e in (outcome.fallback.errors or [outcome.fallback.reason]))
        v = outcome.output
        verdicts.append(
            CorefVerdict(pair=i, same_event=v.same_event, has_overlap=v.has_overlap, relation_type=v.relation_type)
        )
    fallback = (
        FallbackRecord(role="coref_judge", reason="a pair's verdict fell back to the similarity rule", errors=errors)
        if errors
        else None
    )
    return RoleOutcome(output=CorefVerdicts(verdicts=verdicts), cost=cost, fallback=fallback)
