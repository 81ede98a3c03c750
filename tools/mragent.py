"""MRAgent's memory operators as tools: the paper's seven (Table 4), under its names.

cue-tag -> events, event -> time, event -> keywords, event -> context, person -> aspects, (person, aspect) ->
facts, topic -> events.

They read the Cue-Tag-Content layer (memory/records/cues.py) and the turns of a committed snapshot.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import Field

from logicmap.memory.indexes.cue_index import CueIndex, PersonalFact
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.records.records import Turn
from logicmap.memory.store import StoragePort
from logicmap.tools.common import (
    MemoryAccess,
    ToolArgs,
    ToolArgumentError,
    ToolResult,
    event_line,
    event_record,
    make_memory_tool,
    turn_record,
)
from logicmap.tools.events import create_topic_events_tool

__all__ = [
    "QueryConversationTimeArgs",
    "QueryEventContextArgs",
    "QueryEventKeywordsArgs",
    "QueryPersonalAspectArgs",
    "QueryPersonalInformationArgs",
    "QueryTagEventsArgs",
    "create_query_conversation_time_tool",
    "create_query_event_context_tool",
    "create_query_event_keywords_tool",
    "create_query_personal_aspect_tool",
    "create_query_personal_information_tool",
    "create_query_tag_events_tool",
    "create_query_topic_events_tool",
    "fact_record",
]

MAX_EVENTS = 12
MAX_FACTS = 15


class QueryTagEventsArgs(ToolArgs):
    cue: str = Field(
        min_length=1, max_length=100, description="A keyword as it was said: a name, place, thing, activity or time."
    )
    tag: str | None = Field(
        None, max_length=60, description="Only links with this tag, e.g. 'pet', 'work', 'home' (optional)."
    )


class QueryEventKeywordsArgs(ToolArgs):
    event_id: str = Field(min_length=1, max_length=64, description="An event id such as 'S3-E2'.")


class QueryConversationTimeArgs(ToolArgs):
    event_id: str = Field(min_length=1, max_length=64, description="An event id such as 'S3-E2'.")


class QueryEventContextArgs(ToolArgs):
    event_id: str = Field(min_length=1, max_length=64, description="An event id such as 'S3-E2'.")
    window: int = Field(2, ge=0, le=10, description="How many turns before and after the event to include (0-10).")


class QueryPersonalAspectArgs(ToolArgs):
    person: str = Field(min_length=1, max_length=64, description="The person's name as said in the conversation.")
    aspect: str = Field(
        min_length=1,
        max_length=60,
        description="What about them: preference, work, home, family, pet, hobby, food, drink, health, ...",
    )


class QueryPersonalInformationArgs(ToolArgs):
    person: str = Field(min_length=1, max_length=64, description="The person's name as said in the conversation.")


def fact_record(fact: PersonalFact) -> dict[str, Any]:
    return {
        "kind": "personal_fact",
        "id": fact.id,
        "person": fact.person,
        "aspects": fact.aspects,
        "content": fact.content,
        "cues": fact.cues,
        "turn_ids": fact.turn_ids,
    }


def _fact_line(fact: PersonalFact) -> str:
    return f"- [{', '.join(fact.aspects)}] {fact.content} (turn {', '.join(fact.turn_ids) or '?'})"


def _unknown_person(index: CueIndex, person: str) -> ToolArgumentError:
    known = ", ".join(index.known_people()) or "nobody yet"
    return ToolArgumentError(
        f"No facts about {person!r} in memory. People known: {known}. Call again with one of these names."
    )


def create_query_tag_events_tool(
    namespace: str | None, *, store: StoragePort, name: str = "query_tag_events", require_namespace: bool = True
) -> StructuredTool:
    """``query_tag_events(cue, tag)``: events a cue leads to, through its tags."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def query_tag_events(cue: str, tag: str | None = None) -> ToolResult:
        """Follow a cue (a keyword as said: a name, place, thing, activity or time) to the events it is linked
        to, with the tag of each link and the sentence it came from. Give a tag to keep only those links."""
        snapshot = access.snapshot()
        index = CueIndex.of(snapshot)
        matches = index.find_cues(cue, limit=4)
        if not matches:
            raise ToolArgumentError(
                f"No cue {cue!r} in memory. Cues are words as they were said (e.g. "
                f"{', '.join(repr(c.text) for c in list(index.cues.values())[:5]) or 'none yet'}); "
                "try a shorter or different keyword, or use search_events."
            )
        lines: list[str] = []
        records: list[dict[str, Any]] = []
        seen: set[str] = set()
        for found, _score in matches:
            tags = index.event_tags(found, tag)
            if tag and not tags:
                available = sorted({t.tag for t in index.event_tags(found)})
                lines.append(
                    f"Cue {found.text!r} has no link tagged {tag!r}; its tags: {', '.join(available) or 'none'}."
                )
                continue
            for link in tags:
                if link.target_id in seen or link.target_id not in snapshot.events or len(seen) >= MAX_EVENTS:
                    continue
                seen.add(link.target_id)
                event = snapshot.events[link.target_id]
                said = f' — "{link.content}"' if link.content else ""
                lines.append(f"- {found.text} --[{link.tag}]--> {event_line(event, snapshot, limit=160)}{said}")
                records.append(event_record(event, cue=found.text, tag=link.tag, content=link.content))
        if not records and tag:
            raise ToolArgumentError(" ".join(lines) + " Call again with one of these tags, or without a tag.")
        if not records:
            return f"Cue {cue!r} is linked to no events.", []
        return f"Events linked to {cue!r}:\n" + "\n".join(lines), records

    return make_memory_tool(name, QueryTagEventsArgs, query_tag_events)


def create_query_event_keywords_tool(
    namespace: str | None, *, store: StoragePort, name: str = "query_event_keywords", require_namespace: bool = True
) -> StructuredTool:
    """``query_event_keywords(event_id)``: the cues of an event and their tags."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def query_event_keywords(event_id: str) -> ToolResult:
        """List the keywords (cues) of an event: the names, places, times, activities and things said in it,
        each with its kind and tag. Useful to find what else to look up."""
        snapshot = access.snapshot()
        event = access.event(snapshot, event_id)
        pairs = CueIndex.of(snapshot).keywords_of(event.id)
        if not pairs:
            return f"{event.id} has no keywords indexed.", []
        grouped: dict[str, list[str]] = {}
        records = []
        for cue, tag in pairs:
            grouped.setdefault(f"{cue.text} ({cue.kind})", []).append(tag.tag)
            records.append(
                {
                    "kind": "cue",
                    "id": cue.id,
                    "text": cue.text,
                    "cue_kind": cue.kind,
                    "tag": tag.tag,
                    "event_id": event.id,
                    "content": tag.content,
                }
            )
        lines = [f"Keywords of {event.id}:"] + [
            f"- {cue}: {', '.join(dict.fromkeys(tags))}" for cue, tags in grouped.items()
        ]
        return "\n".join(lines), records

    return make_memory_tool(name, QueryEventKeywordsArgs, query_event_keywords)


def create_query_conversation_time_tool(
    namespace: str | None, *, store: StoragePort, name: str = "query_conversation_time", require_namespace: bool = True
) -> StructuredTool:
    """``query_conversation_time(event_id)``: when an event happened and when it was talked about."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def query_conversation_time(event_id: str) -> ToolResult:
        """Tell when an event happened (its resolved date and the time phrase it came from) and when it was
        talked about (the date and time of each session that mentions it)."""
        snapshot = access.snapshot()
        event = access.event(snapshot, event_id)
        turns = EventGraph.of(snapshot).turns_of(event.id)
        sessions: dict[str, str] = {}
        for turn in turns:
            stamp = turn.session_time.isoformat(timespec="minutes") if turn.session_time else "unknown time"
            label = f"{stamp}" + (f" ({turn.session_time_text})" if turn.session_time_text else "")
            sessions.setdefault(turn.session_id, label)
        happened = event.time or "not stated"
        phrase = f" from the phrase {event.time_phrase!r}" if event.time_phrase else ""
        lines = [
            f"{event.id} happened: {happened}{phrase}.",
            "Talked about in: " + "; ".join(f"session {sid} at {when}" for sid, when in sessions.items()) + ".",
        ]
        if event.time_phrase and event.time:
            lines.append("The date was resolved from the phrase against the session date.")
        record = event_record(event, sessions=sessions)
        return "\n".join(lines), [record]

    return make_memory_tool(name, QueryConversationTimeArgs, query_conversation_time)


def create_query_event_context_tool(
    namespace: str | None, *, store: StoragePort, name: str = "query_event_context", require_namespace: bool = True
) -> StructuredTool:
    """``query_event_context(event_id, window)``: the event's turns with the turns around them."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def query_event_context(event_id: str, window: int = 2) -> ToolResult:
        """Read the dialogue around an event: its own turns (marked *) plus `window` turns before and after
        it in the same session, verbatim."""
        snapshot = access.snapshot()
        event = access.event(snapshot, event_id)
        own = set(event.turn_ids)
        lines = [f"Context of {event.id}:"]
        records: list[dict[str, Any]] = [event_record(event)]
        by_session: dict[str, list[Turn]] = {}
        for turn in snapshot.turns.values():
            by_session.setdefault(turn.session_id, []).append(turn)
        for session_id, turns in by_session.items():
            positions = [i for i, t in enumerate(turns) if t.dia_id in own]
            if not positions:
                continue
            lo, hi = max(0, min(positions) - window), min(len(turns), max(positions) + window + 1)
            when = turns[0].session_time.date().isoformat() if turns[0].session_time else "undated"
            lines.append(f"session {session_id} ({when}):")
            for turn in turns[lo:hi]:
                mark = "*" if turn.dia_id in own else " "
                lines.append(f" {mark} {turn.render()}")
                records.append(turn_record(turn, in_event=turn.dia_id in own))
        return "\n".join(lines), records

    return make_memory_tool(name, QueryEventContextArgs, query_event_context)


def create_query_personal_aspect_tool(
    namespace: str | None, *, store: StoragePort, name: str = "query_personal_aspect", require_namespace: bool = True
) -> StructuredTool:
    """``query_personal_aspect(person, aspect)``: facts about one aspect of a person."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def query_personal_aspect(person: str, aspect: str) -> ToolResult:
        """Look up what memory knows about one aspect of a person: preference, work, home, family, pet,
        hobby, food, drink, health, travel, sport... Each fact cites the turn that states it."""
        index = CueIndex.of(access.snapshot())
        name_found = index.find_person(person)
        if name_found is None:
            raise _unknown_person(index, person)
        facts = index.person_facts(name_found, aspect)
        if not facts:
            aspects = ", ".join(index.aspects_of(name_found)) or "none"
            raise ToolArgumentError(
                f"No {aspect!r} facts about {name_found}. Aspects known for {name_found}: {aspects}. "
                "Call again with one of these, or use query_personal_information for everything."
            )
        shown = facts[:MAX_FACTS]
        lines = [f"{name_found} — {aspect}:"] + [_fact_line(f) for f in shown]
        return "\n".join(lines), [fact_record(f) for f in shown]

    return make_memory_tool(name, QueryPersonalAspectArgs, query_personal_aspect)


def create_query_personal_information_tool(
    namespace: str | None,
    *,
    store: StoragePort,
    name: str = "query_personal_information",
    require_namespace: bool = True,
) -> StructuredTool:
    """``query_personal_information(person)``: the aspects memory holds about a person (the paper's
    phi_{c^s -> g^s}: a person cue to its semantic tags); ``query_personal_aspect`` reads their facts."""
    access = MemoryAccess.checked(namespace, store, require=require_namespace)

    def query_personal_information(person: str) -> ToolResult:
        """List the aspects memory knows about a person (preference, work, home, family, pet, hobby...), each with
        how many facts it holds. Then call query_personal_aspect(person, aspect) to read the facts of one."""
        index = CueIndex.of(access.snapshot())
        name_found = index.find_person(person)
        if name_found is None:
            raise _unknown_person(index, person)
        facts = index.person_facts(name_found)
        if not facts:
            return f"No facts about {name_found} yet.", []
        counts: dict[str, int] = {}
        for fact in facts:
            for aspect in fact.aspects or ["other"]:
                counts[aspect] = counts.get(aspect, 0) + 1
        lines = [f"Aspects of {name_found}:"] + [f"- {aspect} ({n} facts)" for aspect, n in counts.items()]
        records = [
            {"kind": "aspect", "person": name_found, "aspect": aspect, "facts": n} for aspect, n in counts.items()
        ]
        return "\n".join(lines), records

    return make_memory_tool(name, QueryPersonalInformationArgs, query_personal_information)


def create_query_topic_events_tool(
    namespace: str | None, *, store: StoragePort, name: str = "query_topic_events", require_namespace: bool = True
) -> StructuredTool:
    """``query_topic_events(topic_id)``: the events of a topic node (the paper's phi_{tau -> e})."""
    return create_topic_events_tool(namespace, store=store, name=name, require_namespace=require_namespace)
