"""An instant scripted model for benchmarks: a valid JSON reply for each LLM role, built from the prompt.

Roles it knows get replies that pass their validation; any other role gets the smallest object its schema allows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from logicmap.agents.testing import ScriptedChatModel

__all__ = ["make_scripted_model", "minimal_instance", "role_of", "scripted_reply"]

_TYPE = re.compile(r"JSON object of type (\w+) matching this JSON schema, and nothing else:\n(\{.*\})", re.DOTALL)
_TURN_LINE = re.compile(r"^\[([^\]\s]+)\] ", re.MULTILINE)
_EVENT_KEY = re.compile(r"^(E\d+): ", re.MULTILINE)
_PAIR = re.compile(r"^Pair (\d+):", re.MULTILINE)
_TOPIC_ID = re.compile(r"^(T\d+) \(\d+ events\):", re.MULTILINE)
_NEIGHBOUR = re.compile(r"^- (\S+) \[", re.MULTILINE)


def _human(messages: Sequence[BaseMessage]) -> str:
    """The task text: the first human message (a retry appends the errors after it)."""
    for message in messages:
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


def _segmentation(text: str) -> dict[str, Any]:
    ids = list(dict.fromkeys(_TURN_LINE.findall(text)))
    groups = [ids[i : i + 4] for i in range(0, len(ids), 4)] or [[]]
    return {
        "events": [
            {
                "summary": f"Conversation about turns {g[0]} to {g[-1]}." if g else "Conversation.",
                "turn_ids": g,
                "participants": [],
            }
            for g in groups
        ]
    }


_TURN_FULL = re.compile(r"^\[([^\]\s]+)\] ([^:\n]+): (.*)$", re.MULTILINE)
_NAME_WORD = re.compile(r"\b[A-Z][a-z]{2,}\b")


def _turn_lines(text: str) -> list[tuple[str, str, str]]:
    """``(dia id, speaker, text)`` of each turn line of a prompt."""
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in _TURN_FULL.finditer(text)]


_NOT_NAMES = frozenset("that this these those they then there what when where which who how and but also just".split())


def _names(speaker: str, said: str) -> list[str]:
    """Capitalised words of a turn (not its speaker, not a sentence's opening pronoun), in order: the scripted
    model's idea of what the turn names."""
    return [w for w in dict.fromkeys(_NAME_WORD.findall(said)) if w != speaker and w.lower() not in _NOT_NAMES]


def _facts(text: str) -> dict[str, Any]:
    """One ``mentions`` fact per name a turn says (a valid FactExtraction for the turns shown)."""
    return {
        "facts": [
            {"head": speaker, "relation": "mentions", "tail": name, "turn_ids": [tid]}
            for tid, speaker, said in _turn_lines(text)
            for name in _names(speaker, said)[:2]
        ]
    }


def _cues(text: str) -> dict[str, Any]:
    """One memory unit per turn that names something: the names are its cues (said verbatim)."""
    units = []
    for tid, speaker, said in _turn_lines(text):
        names = _names(speaker, said)
        if names:
            units.append(
                {
                    "turn_id": tid,
                    "content": f"{speaker} mentions {', '.join(names[:3])}.",
                    "tags": ["mention"],
                    "cues": [{"cue": n, "kind": "entity"} for n in names[:3]],
                }
            )
    return {"units": units, "person_facts": []}


def _analysis(*builders: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """The session analyst's reply: the parts the separate roles would give for the same turns."""
    return lambda text: {key: value for build in builders for key, value in build(text).items()}


def _relations(text: str) -> dict[str, Any]:
    keys = list(dict.fromkeys(_EVENT_KEY.findall(text)))
    return {
        "relations": [
            {"source": a, "target": b, "label": "temporal_before", "turn_ids": []}
            for a, b in zip(keys, keys[1:], strict=False)
        ]
    }


def _coref(text: str) -> dict[str, Any]:
    return {
        "verdicts": [
            {"pair": int(n), "same_event": False, "has_overlap": True, "relation_type": "elaboration"}
            for n in _PAIR.findall(text)
        ]
    }


def _topics(text: str) -> dict[str, Any]:
    return {
        "topics": [
            {"topic": t, "label": f"scripted topic {t}", "description": f"The events of topic {t}."}
            for t in dict.fromkeys(_TOPIC_ID.findall(text))
        ]
    }


def _plan(text: str) -> dict[str, Any]:
    question = text.replace("Question:", "").strip() or "the question"
    return {"subgoals": [f"who is involved: {question}", f"what happened: {question}"]}


def _starts(text: str) -> dict[str, Any]:
    block = re.split(r"Candidates:\n|CANDIDATE NODES[^\n]*:\n", text, maxsplit=1)[-1]
    ids = [line.split(": ", 1)[0] for line in block.splitlines() if ": " in line]
    return {"event_ids": ids[:3]}


def _plan_and_starts(text: str) -> dict[str, Any]:
    """The planner's call that also picks the starts: the same two rules in one reply."""
    question, _, candidates = text.partition("\nCandidates:\n")
    return {**_plan(question), "start_ids": _starts(f"Candidates:\n{candidates}")["event_ids"]}


def _explore(text: str) -> dict[str, Any]:
    neighbours = _NEIGHBOUR.findall(text.split("Neighbours:", 1)[-1])
    return {"action": "EXPAND", "next_events": list(dict.fromkeys(neighbours))[:2], "satisfied_subgoals": []}


def _explore_batch(text: str) -> dict[str, Any]:
    decisions = []
    blocks = re.split(r"^Event (\S+):$", text, flags=re.MULTILINE)
    # re.split with one group: [head, id1, body1, id2, body2, ...]
    for eid, body in zip(blocks[1::2], blocks[2::2], strict=False):
        neighbours = _NEIGHBOUR.findall(body.split("Neighbours:", 1)[-1])
        decisions.append(
            {
                "event_id": eid,
                "action": "EXPAND",
                "next_events": list(dict.fromkeys(neighbours))[:2],
                "satisfied_subgoals": [],
            }
        )
    return {"decisions": decisions}


_BUILDERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "Segmentation": _segmentation,
    "RelationSet": _relations,
    "FactExtraction": _facts,
    "CueExtraction": _cues,
    "SessionAnalysis": _analysis(_segmentation, _facts, _cues),
    "SegmentationWithFacts": _analysis(_segmentation, _facts),
    "SegmentationWithCues": _analysis(_segmentation, _cues),
    "CorefVerdicts": _coref,
    "TopicAbstractSet": _topics,
    "Plan": _plan,
    "PlanAndStarts": _plan_and_starts,
    "RefinedQuery": lambda text: {"query": text.splitlines()[0].replace("Question:", "").strip() or "query"},
    "StartPicks": _starts,
    "ExplorerDecision": _explore,
    "BatchDecision": _explore_batch,
    "Answer": lambda text: {"answer": "scripted answer", "cited_ids": []},
    "JudgeVerdict": lambda text: {"reasoning": "scripted", "label": "CORRECT"},
}


def minimal_instance(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The smallest value a JSON schema accepts: required fields only, empty lists, first enum values."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return minimal_instance(defs[schema["$ref"].split("/")[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return minimal_instance(options[0], defs)
    kind: Any = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: minimal_instance(props[name], defs) for name in schema.get("required", []) if name in props}
    if kind == "array":
        return [minimal_instance(schema.get("items", {}), defs) for _ in range(int(schema.get("minItems", 0)))]
    return {"string": "none", "integer": 0, "number": 0.0, "boolean": False, "null": None}.get(kind, "none")


def role_of(messages: Sequence[BaseMessage]) -> str:
    """Which role sent ``messages``: the reply type its system prompt names (``Plan``, ``ExplorerDecision``, ...),
    else ``other`` (a tool-calling agent's turn)."""
    found = _TYPE.search(str(messages[0].content)) if messages else None
    return found.group(1) if found else "other"


def scripted_reply(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """A reply for whatever role sent ``messages``, found from the schema named in its system prompt."""
    system = str(messages[0].content) if messages else ""
    found = _TYPE.search(system)
    if not found:
        return {}
    name, schema_text = found.group(1), found.group(2)
    builder = _BUILDERS.get(name)
    if builder is not None:
        return builder(_human(messages))
    try:
        reply: dict[str, Any] = minimal_instance(json.loads(schema_text))
        return reply
    except (json.JSONDecodeError, KeyError, IndexError):
        return {}


def make_scripted_model(delay: float = 0.0) -> ScriptedChatModel:
    """A model that answers every role at once (or after ``delay`` seconds, like a remote model)."""
    return ScriptedChatModel(respond=scripted_reply, delay=delay)
