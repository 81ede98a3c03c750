"""Relation extractor role: typed relations between a session's events, validated against the session.

Fallback (and no-LLM policy): a temporal_before chain in conversation order.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import Cost, RoleOutcome, run_role
from logicmap.memory.records import Turn
from logicmap.prompts import relate as prompt
from logicmap.prompts.relate import ExtractedRelation, RelationSet

__all__ = ["chain_relations", "extract_relations", "validate_relations"]


def chain_relations(event_keys: Sequence[str], turn_ids: Sequence[Sequence[str]]) -> RelationSet:
    """``E1 temporal_before E2 temporal_before E3 ...``, each edge citing the turns of both ends."""
    return RelationSet(
        relations=[
            ExtractedRelation(source=a, target=b, label="temporal_before", turn_ids=[*turn_ids[i][-1:], *turn_ids[i + 1][:1]])
            for i, (a, b) in enumerate(zip(event_keys, event_keys[1:]))
        ]
    )


def validate_relations(result: RelationSet, event_keys: Sequence[str], turns: Sequence[Turn]) -> list[str]:
    keys = set(event_keys)
    known_turns = {t.dia_id for t in turns}
    problems = []
    for i, rel in enumerate(result.relations):
        if rel.source not in keys or rel.target not in keys:
            problems.append(f"relation {i}: endpoints must be events of this session {sorted(keys)}, got {rel.source!r} -> {rel.target!r}")
        elif rel.source == rel.target:
            problems.append(f"relation {i}: an event cannot relate to itself")
        if not rel.label.strip():
            problems.append(f"relation {i}: empty label")
        unknown = [t for t in rel.turn_ids if t not in known_turns]
        if unknown:
            problems.append(f"relation {i}: unknown turn ids {unknown}")
    return problems


def extract_relations(
    llm: BaseChatModel | None,
    events_text: str,
    event_keys: Sequence[str],
    event_turns: Sequence[Sequence[str]],
    turns: Sequence[Turn],
    *,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict | None = None,
) -> RoleOutcome[RelationSet]:
    if len(event_keys) < 2:  # nothing to relate: no call spent
        return RoleOutcome(output=RelationSet(relations=[]), cost=Cost())
    outcome = run_role(
        llm,
        role="relation_extractor",
        messages=prompt.build_messages(events_text, "\n".join(t.render() for t in turns)),
        schema=RelationSet,
        validate=lambda r: validate_relations(r, event_keys, turns),
        fallback=lambda: chain_relations(event_keys, event_turns),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    # Normalise labels so the same relation is spelled one way.
    for rel in outcome.output.relations:
        rel.label = rel.label.strip().lower().replace(" ", "_").replace("-", "_")
    return outcome
