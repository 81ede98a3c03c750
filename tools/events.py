"""Tools over the event graph: search, get, neighbours, time range, topic members.

Each factory binds a namespace, a store (and an embedder for search) that the LLM never sees.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.tools import StructuredTool
from pydantic import Field

from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.language.text import printable
from logicmap.memory.retrieval.retrieval import event_index, reciprocal_rank_fusion
from logicmap.memory.store import NamespaceSnapshot, StoragePort
from logicmap.tools.common import (
    MemoryAccess,
    ToolArgs,
    ToolArgumentError,
    ToolResult,
    event_interval,
    event_line,
    event_record,
    make_memory_tool,
    parse_date_bound,
    turn_record,
)

__all__ = [
    "EventsInTimeRangeArgs",
    "GetEventArgs",
    "GetNeighborsArgs",
    "SearchEventsArgs",
    "TopicEventsArgs",
    "create_events_in_time_range_tool",
    "create_get_event_tool",
    "create_get_neighbors_tool",
    "create_search_events_tool",
    "create_topic_events_tool",
    "search_event_ids",
]

MAX_K = 20
MAX_LISTED = 20


class SearchEventsArgs(ToolArgs):
    query: str = Field(
        min_length=1, max_length=500, description="What to look for, in words (names, things, what happened)."
    )
    k: int | None = Field(None, ge=1, le=MAX_K, description="How many events to return (1-20; default set by the app).")
    diverse_topics: bool = Field(False, description="Prefer events from different topics over near-duplicates.")


class GetEventArgs(ToolArgs):
    event_id: str = Field(min_length=1, max_length=64, description="An event id such as 'S3-E2'.")


class GetNeighborsArgs(ToolArgs):
    event_id: str = Field(min_length=1, max_length=64, description="An event id such as 'S3-E2'.")
    relation_types: list[str] | None = Field(
        None,
        max_length=10,
        description="Only these relation labels (e.g. ['causal', 'temporal_before']); all when omitted.",
    )
    direction: Literal["out", "in", "both"] = Field(
        "both", description="'out': what this event leads to; 'in': what leads to it; 'both' (default)."
    )


class EventsInTimeRangeArgs(ToolArgs):
    start: str = Field(min_length=1, max_length=40, description="First day: YYYY-MM-DD, YYYY-MM or YYYY.")
    end: str | None = Field(
        None, max_length=40, description="Last day (same forms); defaults to the end of `start`'s period."
    )


class TopicEventsArgs(ToolArgs):
    topic_id: str = Field(
        min_length=1, max_length=32, description="A topic id such as 'T2' (search_events shows each event's topic)."
    )


def search_event_ids(
    snapshot: NamespaceSnapshot, query: str, k: int, *, embeddings: Embeddings | None, diverse_topics: bool = False
) -> list[tuple[str, float]]:
    """Events for a query: dense and BM25 rankings fused by reciprocal rank (BM25 only without an embedder)."""
    graph = EventGraph.of(snapshot)
    if not graph.ids:
        return []
    pool = min(len(graph.ids), max(k * 4, 20))
    rankings: list[list[str]] = []
    if embeddings is not None:
        rankings.append([eid for eid, _ in graph.top_k(embeddings.embed_query(query), pool)])
    scores = event_index(snapshot).scores(query)  # rows in snapshot.events order, which graph.ids keeps
    order = np.argsort(-scores, kind="stable")[:pool]
    rankings.append([graph.ids[i] for i in order if scores[i] > 0])
    fused = reciprocal_rank_fusion([r for r in rankings if r])
    if not diverse_topics:
        return fused[:k]
    picked, seen_topics, rest = [], set(), []
    for eid, score in fused:
        topic = graph.topic_of.get(eid)
        if topic is None or topic not in seen_topics:
            seen_topics.add(topic)
            picked.append((eid, score))
        else:
            rest.append((eid, score))
    return (picked + rest)[:k]


def create_search_events_tool(
    namespace: str | None,
    *,
    store: StoragePort,
    embeddings: Embeddings | None = None,
    k: int = 5,
    name: str = "search_events",
    require_namespace: bool = True,
) -> StructuredTool:
    """``search_events(query, k, diverse_topics)``: the events most related to a query."""
    access = MemoryAccess.checked(namespace, store, embeddings, require=require_namespace)
    default_k = max(1, min(int(k), MAX_K))

    def search_events(query: str, k: int | None = None, diverse_topics: bool = False) -> ToolResult:
        """Search the conversation memory for events (things that happened or were discussed) related to a
        query. Returns event ids, dates, cited turn ids and summaries, best first. Use get_event to read one."""
        snapshot = access.snapshot()
        hits = search_event_ids(
            snapshot, query, k or default_k, embeddings=access.embeddings, diverse_topics=diverse_topics
        )
        if not hits:
            return f"No events match {query!r}. Try other words, or query_tag_events with a name or place.", []
        lines = [f"{i + 1}. {event_line(snapshot.events[eid], snapshot)}" for i, (eid, _) in enumerate(hits)]
        records = [
            event_record(snapshot.events[eid], score=round(score, 5), rank=i + 1) for i, (eid, score) in enumerate(hits)
        ]
        return f"Events for {query!r}:\n" + "\n".join(lines), records

    return make_memory_tool(name, SearchEventsArgs, search_events)


def create_get_event_tool(
    namespace: str | None, *, store: StoragePort, name: str = "get_event", require_namespace: bool = True
) -> StructuredTool:
    """``get_event(event_id)``: an event with its turns verbatim and its neighbours."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def get_event(event_id: str) -> ToolResult:
        """Read one event in full: its summary, date, participants, the exact turns it comes from, and the
        ids of related events."""
        snapshot = access.snapshot()
        event = access.event(snapshot, event_id)
        graph = EventGraph.of(snapshot)
        turns = graph.turns_of(event.id)
        neighbors = graph.neighbors(event.id)
        lines = [
            event_line(event, snapshot, limit=2000),
            f"participants: {', '.join(event.participants) or 'unknown'}; time phrase: {event.time_phrase or '-'}",
            "turns:",
            *[f"  {t.render()}" for t in turns],
        ]
        if neighbors:
            lines.append("related: " + ", ".join(f"{n.event_id} ({n.label}, {n.direction})" for n in neighbors[:12]))
        return "\n".join(lines), [event_record(event), *[turn_record(t, event_id=event.id) for t in turns]]

    return make_memory_tool(name, GetEventArgs, get_event)


def create_get_neighbors_tool(
    namespace: str | None, *, store: StoragePort, name: str = "get_neighbors", require_namespace: bool = True
) -> StructuredTool:
    """``get_neighbors(event_id, relation_types)``: events linked to an event, with the relation labels."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def get_neighbors(
        event_id: str, relation_types: list[str] | None = None, direction: Literal["out", "in", "both"] = "both"
    ) -> ToolResult:
        """List the events linked to an event in the memory graph (causes, motivations, what came before or
        after, shared participants), optionally only some relation labels."""
        snapshot = access.snapshot()
        event = access.event(snapshot, event_id)
        graph = EventGraph.of(snapshot)
        labels = graph.relation_labels()
        wanted = None
        if relation_types:
            wanted = {r.strip().lower().replace(" ", "_") for r in relation_types if r.strip()}
            unknown = sorted(wanted - set(labels))
            if unknown and not wanted & set(labels):
                known = ", ".join(f"{label} ({count})" for label, count in sorted(labels.items())) or "none"
                raise ToolArgumentError(
                    f"No relation labelled {', '.join(unknown)} in this memory. Labels in use: {known}. "
                    "Call again with some of these, or without relation_types for all."
                )
        neighbors = [n for n in graph.neighbors(event.id, wanted) if direction in ("both", n.direction)]
        if not neighbors:
            return f"{event.id} has no linked events" + (f" of types {sorted(wanted)}" if wanted else "") + ".", []
        lines = [f"Events linked to {event.id}:"]
        records: list[dict[str, Any]] = []
        for n in neighbors:
            arrow = (
                f"{event.id} --{n.label}--> {n.event_id}"
                if n.direction == "out"
                else f"{n.event_id} --{n.label}--> {event.id}"
            )
            lines.append(f"- {arrow}: {event_line(snapshot.events[n.event_id], snapshot, limit=200)}")
            records.append(event_record(snapshot.events[n.event_id], relation=n.label, direction=n.direction))
        return "\n".join(lines), records

    return make_memory_tool(name, GetNeighborsArgs, get_neighbors)


def create_events_in_time_range_tool(
    namespace: str | None, *, store: StoragePort, name: str = "events_in_time_range", require_namespace: bool = True
) -> StructuredTool:
    """``events_in_time_range(start, end)``: events whose date falls in a range (inclusive)."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def events_in_time_range(start: str, end: str | None = None) -> ToolResult:
        """List the events that happened between two dates (inclusive), in time order. Dates are YYYY-MM-DD,
        YYYY-MM or YYYY; an event without a resolved date counts at the date of its session."""
        first = parse_date_bound(start, end=False)
        last = parse_date_bound(end if end else start, end=True)
        if last < first:
            raise ToolArgumentError(
                f"The range ends ({last.isoformat()}) before it starts ({first.isoformat()}); swap start and end."
            )
        snapshot = access.snapshot()
        found = []
        for event in snapshot.events.values():
            span = event_interval(event)
            if span is not None and span[0] <= last and span[1] >= first:
                found.append((span[0], event.order, event))
        found.sort(key=lambda item: (item[0], item[1]))
        if not found:
            dated = [s for s in (event_interval(e) for e in snapshot.events.values()) if s]
            cover = f" Memory covers {min(s[0] for s in dated)} to {max(s[1] for s in dated)}." if dated else ""
            return f"No events between {first} and {last}.{cover}", []
        shown = found[:MAX_LISTED]
        lines = [f"Events between {first} and {last} ({len(found)}):"]
        lines += [f"- {event_line(e, snapshot, limit=200)}" for _, _, e in shown]
        if len(found) > len(shown):
            lines.append(f"... and {len(found) - len(shown)} more; narrow the range to see them.")
        return "\n".join(lines), [event_record(e) for _, _, e in shown]

    return make_memory_tool(name, EventsInTimeRangeArgs, events_in_time_range)


def create_topic_events_tool(
    namespace: str | None, *, store: StoragePort, name: str = "topic_events", require_namespace: bool = True
) -> StructuredTool:
    """``topic_events(topic_id)``: the events of one topic of the topic layer."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def topic_events(topic_id: str) -> ToolResult:
        """List the events of one topic (a cluster of related events), in time order."""
        snapshot = access.snapshot()
        topic = snapshot.topics.get(topic_id.strip()) or snapshot.topics.get(topic_id.strip().upper())
        if topic is None:
            known = ", ".join(f"{t.id} ({len(t.members)} events)" for t in snapshot.topics.values()) or "none yet"
            raise ToolArgumentError(f"No topic {topic_id!r}. Topics in this memory: {known}.")
        members = [snapshot.events[m] for m in topic.members if m in snapshot.events]
        members.sort(key=lambda e: (e.order, e.id))
        lines = [f"Topic {topic.id} ({len(members)} events):"]
        if topic.label:  # MRAgent's abstraction (Eq. 18); unlabelled topics (the no-LLM policy) print as before
            about = f" {printable(topic.description, one_line=True)}" if topic.description else ""
            lines = [
                f"Topic {topic.id}: {printable(topic.label, one_line=True)} ({len(members)} events).{about}",
                "Events:",
            ]
        lines += [f"- {event_line(e, snapshot, limit=200)}" for e in members[:MAX_LISTED]]
        if len(members) > MAX_LISTED:
            lines.append(f"... and {len(members) - MAX_LISTED} more.")
        return "\n".join(lines), [event_record(e, topic_id=topic.id) for e in members[:MAX_LISTED]]

    return make_memory_tool(name, TopicEventsArgs, topic_events)
