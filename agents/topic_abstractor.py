"""Topic abstractor role (MRAgent, Eq. 18): the LLM abstracts a label and a description from clustered events.

The topic layer (``memory.indexes.topics``) clusters events by embedding; this role names each cluster whose membership
changed in a session, all of them in one call. Validation: every listed topic exactly once, no other, a short
non-empty label, a non-empty description of bounded length. Fallback (recorded): the key terms of the topic's
most central events as its label and its most central event as its description. The no-LLM policy never calls
it (its topics stay unlabelled, so its memory and answers are unchanged).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import Cost, RoleOutcome, run_role
from logicmap.agents.windowing import ContextBudget, prompt_chars
from logicmap.memory.language.text import FUNCTION_WORDS
from logicmap.prompts import abstract_topics as prompt
from logicmap.prompts.abstract_topics import TopicAbstract, TopicAbstractSet

__all__ = ["ROLE", "TopicCluster", "abstract_topics", "fallback_abstracts", "key_terms", "validate_abstracts"]

ROLE = "topic_abstractor"
MAX_SHOWN_EVENTS = 6  # per topic, the most central first; fewer when the prompt would not fit the context
SHOWN_SUMMARY_CHARS = 160
FALLBACK_EVENTS = 3  # the fallback's key terms come from this many of the most central events
FALLBACK_TERMS = 3
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")


@dataclass(frozen=True)
class TopicCluster:
    """A topic to abstract: its id and its events' summaries, the most central (nearest the centroid) first."""

    topic_id: str
    summaries: tuple[str, ...]


def key_terms(summaries: Sequence[str], limit: int = FALLBACK_TERMS) -> list[str]:
    """The most frequent content words of ``summaries`` (ties: first seen), as written in the first summary that
    has them. Deterministic: the same summaries give the same terms."""
    counts: Counter[str] = Counter()
    spelling: dict[str, str] = {}
    for summary in summaries:
        for word in _WORD.findall(summary):
            low = word.lower()
            if low in FUNCTION_WORDS or len(low) < 3:
                continue
            counts[low] += 1
            spelling.setdefault(low, word)
    order = {w: i for i, w in enumerate(spelling)}
    ranked = sorted(counts, key=lambda w: (-counts[w], order[w]))
    return [spelling[w] for w in ranked[:limit]]


def fallback_abstracts(clusters: Sequence[TopicCluster]) -> TopicAbstractSet:
    """Per topic: the key terms of its most central events as the label, its most central event as the
    description; a topic whose events have no content word gets no entry (it stays unlabelled)."""
    out = []
    for cluster in clusters:
        terms = key_terms(cluster.summaries[:FALLBACK_EVENTS])
        if terms and cluster.summaries:
            out.append(
                TopicAbstract(
                    topic=cluster.topic_id,
                    label=_clip(" ".join(terms), prompt.MAX_LABEL_CHARS),
                    description=_clip(cluster.summaries[0], prompt.MAX_DESCRIPTION_CHARS),
                )
            )
    return TopicAbstractSet(topics=out)


def validate_abstracts(result: TopicAbstractSet, topic_ids: Sequence[str]) -> list[str]:
    expected = list(topic_ids)
    problems = []
    seen: set[str] = set()
    for i, item in enumerate(result.topics):
        if item.topic not in expected:
            problems.append(f"topic {i}: {item.topic!r} is not a listed topic id {expected}")
        elif item.topic in seen:
            problems.append(f"topic {i}: {item.topic!r} is given twice")
        seen.add(item.topic)
        label = item.label.strip()
        if not label:
            problems.append(f"topic {i}: empty label")
        elif len(label.split()) > prompt.MAX_LABEL_WORDS or len(label) > prompt.MAX_LABEL_CHARS:
            problems.append(
                f"topic {i}: label {label[:80]!r} is longer than {prompt.MAX_LABEL_WORDS} words "
                f"or {prompt.MAX_LABEL_CHARS} characters"
            )
        description = item.description.strip()
        if not description:
            problems.append(f"topic {i}: empty description")
        elif len(description) > prompt.MAX_DESCRIPTION_CHARS:
            problems.append(f"topic {i}: description longer than {prompt.MAX_DESCRIPTION_CHARS} characters")
    missing = [t for t in expected if t not in seen]
    if missing:
        problems.append(f"topics without an entry: {missing}")
    return problems


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _topics_text(clusters: Sequence[TopicCluster], shown: int) -> str:
    blocks = []
    for cluster in clusters:
        lines = [f"{cluster.topic_id} ({len(cluster.summaries)} events):"]
        lines += [f"- {_clip(s, SHOWN_SUMMARY_CHARS)}" for s in cluster.summaries[:shown]]
        if len(cluster.summaries) > shown:
            lines.append(f"- ... and {len(cluster.summaries) - shown} more")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def abstract_topics(
    llm: BaseChatModel | None,
    clusters: Sequence[TopicCluster],
    *,
    budget: ContextBudget | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> RoleOutcome[TopicAbstractSet]:
    """One call for every cluster (none when there is no cluster). Fewer events per topic are shown when the
    prompt would not fit ``budget``; the labels are stripped of surrounding space."""
    clusters = [c for c in clusters if c.summaries]
    if not clusters:
        return RoleOutcome(output=TopicAbstractSet(), cost=Cost())
    limit = (budget or ContextBudget()).prompt_chars
    shown = MAX_SHOWN_EVENTS
    messages = prompt.build_messages(_topics_text(clusters, shown))
    while shown > 1 and prompt_chars(messages) > limit:
        shown -= 1
        messages = prompt.build_messages(_topics_text(clusters, shown))
    ids = [c.topic_id for c in clusters]
    outcome = run_role(
        llm,
        role=ROLE,
        messages=messages,
        schema=TopicAbstractSet,
        validate=lambda r: validate_abstracts(r, ids),
        fallback=lambda: fallback_abstracts(clusters),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
    for item in outcome.output.topics:
        item.label, item.description = " ".join(item.label.split()), " ".join(item.description.split())
    return outcome
