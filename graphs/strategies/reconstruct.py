"""MRAgent's active reconstruction: an LLM bound to the memory tools navigates cues, events and facts, then answers.

Each turn is navigate mode (tool calls run by a ToolNode, at most 10 per turn) or answer mode (a typed
answer with cited ids and confidence). After every tool round a prune step keeps only the active-set
items that support the question (the pruner role, or its similarity rule) and routes to navigate again
or to the answer; after 8 turns a final answer is forced. Without a model the same graph runs a
deterministic navigator and the pruning rule over the same tools: every node asks the run's policy object
(``agents.reconstruct_policy``, chosen from the run's pinned policy) instead of testing the policy's name.
Studio loads ``graph`` from this module.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from langgraph.types import Overwrite
from pydantic import ConfigDict, ValidationError, with_config

from logicmap.agents.answerers import answer_from_active_set
from logicmap.agents.base import Cost, FallbackRecord, parse_json_reply
from logicmap.agents.reconstruct_policy import NavigatorTurn, ReconstructPolicy, rank_events, reconstruct_policy
from logicmap.graphs.runtime.pin import pin_run, pinned_snapshot, pinned_store, snapshot_of
from logicmap.graphs.runtime.resources import Resources, resources_of, run_context
from logicmap.graphs.runtime.result import AnswerResult, EvidenceItem, rank_turns
from logicmap.graphs.runtime.tracing import traced_graph
from logicmap.graphs.strategies.strategy import (
    AnswerOutput,
    QuestionInput,
    StrategyContext,
    StrategyState,
    cited_turn_texts,
    finish_run,
    graph_strategy,
)
from logicmap.memory.indexes.cue_index import CueIndex
from logicmap.memory.language.text import NO_ANSWER, printable
from logicmap.memory.records.records import Cue
from logicmap.memory.store import NamespaceSnapshot
from logicmap.prompts import reconstruct as prompt
from logicmap.prompts.reconstruct import ANSWER_TOOL, ReconstructedAnswer
from logicmap.tools import EXTRA_TOOLS, MRAGENT_TOOLS, create_memory_toolkit
from logicmap.tools.events import search_event_ids

__all__ = [
    "ReconstructContext",
    "ReconstructInput",
    "ReconstructOutput",
    "ReconstructState",
    "after_answer",
    "after_navigate",
    "after_prune",
    "answer",
    "build_reconstruct_graph",
    "builder",
    "force_answer",
    "graph",
    "memory_tools",
    "merge_active",
    "navigate",
    "prune",
    "run_tools",
    "seed",
    "take_answer",
]


# Field docstrings are the descriptions Studio's forms show (pydantic's ``use_attribute_docstrings``).
@with_config(ConfigDict(use_attribute_docstrings=True))
@dataclass
class ReconstructContext(StrategyContext):
    """Per-run budgets of the reconstruction graph (MRAgent defaults: 8 turns, 10 tool calls per turn)."""

    max_turns: int = 8
    """Most reasoning turns before the final answer is forced."""
    max_tool_calls_per_turn: int = 10
    """Most memory-tool calls run per turn (extra calls are dropped and reported to the model)."""
    k: int = 5
    """Events per search: the no-LLM navigator's searches and the forced answer's top-k when nothing was reached."""
    seed_events: int = 5
    """Events the question's cues lead to that start the active set."""
    max_evidence: int = 12
    """Most active-set items shown to the final answer."""
    max_active: int = 12
    """Most items the pruning rule keeps in the active set after a tool round (the pruner's fallback, the no-LLM policy)."""
    prune_floor: float = 0.1
    """Items less similar to the question than this are dropped by the pruning rule."""
    extra_tools: bool = False
    """Also give the model the project's extra tools (search_events, get_event, get_neighbors,
    events_in_time_range, topic_events), which the MRAgent paper does not have. Off: exactly the paper's seven."""
    faithful: bool = False
    """The paper's configuration: its QA and Tool-Use Prompt (Appendix E: the answer rules, no abstention) for the
    navigator and the forced answer, and its routing step (Eq. 9): after a tool round only the NEW candidates are
    judged and the reconstructed context stays, H(t+1) = H(t) u Z(t+1), with the answer left to the navigator.
    ``reconstruct:faithful`` in the registry's variants."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class ReconstructInput(QuestionInput):
    """What a caller supplies. The namespace is the run's (context or config), never part of the input."""


@with_config(ConfigDict(use_attribute_docstrings=True))
class ReconstructOutput(AnswerOutput, total=False):
    """What a reconstruction run returns: the answer, its evidence, what it cost."""

    final: ReconstructedAnswer | None
    """The answer with the event and turn ids (dia ids) it cites and its confidence."""
    active: list[EvidenceItem]
    """The evidence the navigation reached and the prune steps kept (events, facts, turns), each with the turns it cites."""
    pruned: Annotated[list[dict[str, Any]], operator.add]
    """One entry per prune step: the turn, the items kept and dropped, and who decided (model or rule)."""
    mode: str
    """answered (the model's answer was valid, or the pruner found the kept set enough), heuristic, or forced
    (budgets spent or invalid answer)."""


def merge_active(left: list[EvidenceItem] | None, right: list[EvidenceItem] | None) -> list[EvidenceItem]:
    """Reducer of the active set: items keyed by (kind, id), first position kept, best score kept."""
    merged: dict[tuple[str, str], EvidenceItem] = {}
    for item in [*(left or []), *(right or [])]:
        key = (item.kind, item.id)
        if key in merged:
            old = merged[key]
            if (item.score or 0.0) > (old.score or 0.0):
                merged[key] = old.model_copy(update={"score": item.score})
        else:
            merged[key] = item
    return list(merged.values())


class ReconstructState(StrategyState, total=False):
    """The navigation; ``namespace`` is the run's, resolved once by ``seed`` (never an input)."""

    messages: Annotated[list[AnyMessage], add_messages]
    seed_cues: list[str]
    query_keywords: list[str] | None
    active: Annotated[list[EvidenceItem], merge_active]
    turns: int
    tool_calls: int
    dropped_calls: int
    dropped_last: int
    trace: Annotated[list[dict[str, Any]], operator.add]
    pruned: Annotated[list[dict[str, Any]], operator.add]
    route: str
    final: ReconstructedAnswer | None
    mode: str
    held: list[str]
    """``faithful``: the reconstructed context H(t), as ``kind id`` keys of the active set (never pruned)."""


def _ctx(runtime: Runtime[ReconstructContext] | None) -> ReconstructContext:
    return run_context(runtime, ReconstructContext)


def _policy(pin: Mapping[str, Any], runtime: Runtime[ReconstructContext] | None) -> ReconstructPolicy:
    """The run's policy object (``agents.reconstruct_policy``) from its pinned policy name; a node called alone on a
    hand-made state without a pin uses its context's (resolved) policy."""
    return reconstruct_policy(pin.get("policy") or _ctx(runtime).policy, resources_of(runtime).llm)


# -- evidence ---------------------------------------------------------------------------------------


def _items_from_artifact(artifact: Any, snapshot: NamespaceSnapshot) -> list[EvidenceItem]:
    items: list[EvidenceItem] = []
    for record in artifact if isinstance(artifact, list) else []:
        if not isinstance(record, dict):
            continue
        kind = record.get("kind")
        if kind == "event" and record.get("id") in snapshot.events:
            event = snapshot.events[record["id"]]
            items.append(
                EvidenceItem(
                    kind="event",
                    id=event.id,
                    text=event.render(),
                    turn_ids=list(event.turn_ids),
                    time=event.time,
                    score=record.get("score"),
                )
            )
        elif kind == "turn" and record.get("id") in snapshot.turns:
            turn = snapshot.turns[record["id"]]
            when = turn.session_time.date().isoformat() if turn.session_time else None
            items.append(
                EvidenceItem(kind="turn", id=turn.dia_id, text=turn.render(), turn_ids=[turn.dia_id], time=when)
            )
        elif kind == "personal_fact":
            items.append(
                EvidenceItem(
                    kind="fact",
                    id=str(record.get("id")),
                    text=str(record.get("content", "")),
                    turn_ids=list(record.get("turn_ids") or []),
                )
            )
    return items


def _evidence_text(active: list[EvidenceItem], snapshot: NamespaceSnapshot, limit: int) -> str:
    lines = []
    for item in active[:limit]:
        lines.append(f"[{item.kind} {item.id}{', ' + item.time if item.time else ''}] {item.text[:300]}")
        if item.kind == "event":
            lines.extend(f"    {snapshot.turns[t].render()}" for t in item.turn_ids[:6] if t in snapshot.turns)
    return "\n".join(lines)


def _validate_answer(result: ReconstructedAnswer, snapshot: NamespaceSnapshot) -> list[str]:
    problems = []
    if not result.answer.strip():
        problems.append("the answer is empty")
    unknown_events = [e for e in result.cited_event_ids if e not in snapshot.events]
    if unknown_events:
        problems.append(f"unknown event ids {unknown_events}; cite ids shown in the memories, like 'S3-E2'")
    unknown_turns = [t for t in result.cited_turn_ids if t not in snapshot.turns]
    if unknown_turns:
        problems.append(f"unknown turn ids {unknown_turns}; cite dia ids shown in the memories, like 'D3:5'")
    return problems


# -- helpers of the nodes -----------------------------------------------------------------------------


def memory_tools(namespace: str, res: Resources, store: Any = None, *, extras: bool = True) -> list[BaseTool]:
    """The typed memory tools of ``namespace`` over ``store`` (a run's pinned view, ``graphs.runtime.pin.pinned_store``;
    unset = the run's store, whose newest snapshot every call reads) and the run's embedder: MRAgent's seven
    (``MRAGENT_TOOLS``, the paper's Table 4) and, with ``extras``, the project's extra tools (``EXTRA_TOOLS``).

    Built per call: a toolkit is cheap.
    """
    names = [*MRAGENT_TOOLS, *(EXTRA_TOOLS if extras else ())]
    tools = create_memory_toolkit(
        namespace, store=res.store if store is None else store, embeddings=res.embeddings, include=names
    )
    return sorted(tools, key=lambda t: names.index(t.name))  # the paper's order (Table 4), then the extras


def _topics_text(snapshot: NamespaceSnapshot, active: list[EvidenceItem]) -> str:
    """The topic nodes the seeded events belong to, one line each (for ``query_topic_events``)."""
    seeded = {item.id for item in active if item.kind == "event"}
    lines = []
    for topic in snapshot.topics.values():
        members = [m for m in topic.members if m in snapshot.events]
        if seeded.intersection(members):
            # The LLM's abstraction when ingest made one (MRAgent, Eq. 18), else the first event's summary.
            label = printable(topic.label, one_line=True) if topic.label else snapshot.events[members[0]].summary[:80]
            lines.append(f"{topic.id}: {label} ({len(members)} events)")
    return "\n".join(lines)


def _seed_active(snapshot: NamespaceSnapshot, cues: list[Cue], limit: int) -> list[EvidenceItem]:
    """The events the question's cues lead to, best first (persons weigh half: they lead everywhere)."""
    index = CueIndex.of(snapshot)
    weight: dict[str, float] = {}
    for cue in cues:
        for tag in index.event_tags(cue):
            if tag.target_id in snapshot.events:
                weight[tag.target_id] = weight.get(tag.target_id, 0.0) + (0.5 if cue.kind == "person" else 1.0)
    order = {eid: i for i, eid in enumerate(snapshot.events)}
    seeded = sorted(weight, key=lambda e: (-weight[e], order[e]))[:limit]
    return [
        EvidenceItem(
            kind="event",
            id=e,
            text=snapshot.events[e].render(),
            turn_ids=list(snapshot.events[e].turn_ids),
            time=snapshot.events[e].time,
            score=weight[e],
        )
        for e in seeded
    ]


def _invalid_call_messages(last: BaseMessage) -> list[ToolMessage]:
    """Arguments that were not even valid JSON: tell the model instead of failing (a ToolMessage per call)."""
    return [
        ToolMessage(
            content=f"Your call to {bad.get('name') or 'a tool'} had arguments that are not valid JSON "
            f"({(bad.get('error') or 'unparseable')[:200]}): {str(bad.get('args'))[:200]!r}. Call it again with a JSON object.",
            tool_call_id=bad.get("id") or "invalid",
            name=bad.get("name") or "unknown",
            status="error",
        )
        for bad in getattr(last, "invalid_tool_calls", None) or []
    ]


def _found_and_trace(
    state: ReconstructState, last: BaseMessage, out: list[BaseMessage], snapshot: NamespaceSnapshot
) -> tuple[list[EvidenceItem], list[dict[str, Any]]]:
    """The evidence the tool replies brought and one trace entry per reply."""
    found: list[EvidenceItem] = []
    trace = []
    args_by_id = {c["id"]: c["args"] for c in getattr(last, "tool_calls", None) or []}
    for message in out:
        if isinstance(message, ToolMessage):
            found.extend(_items_from_artifact(message.artifact, snapshot))
            trace.append(
                {
                    "turn": state.get("turns", 0),
                    "tool": message.name,
                    "status": message.status,
                    "args": args_by_id.get(message.tool_call_id, {}),
                }
            )
    return found, trace


def _top_events(question: str, k: int, res: Resources, snapshot: NamespaceSnapshot) -> list[EvidenceItem]:
    """The question's top-k events by search, as evidence."""
    found: list[EvidenceItem] = []
    for eid, score in search_event_ids(snapshot, question, k, embeddings=res.embeddings):
        e = snapshot.events[eid]
        found.append(
            EvidenceItem(kind="event", id=eid, text=e.render(), turn_ids=list(e.turn_ids), time=e.time, score=score)
        )
    return found


def _seed_line(kind: str, item_id: str) -> str:
    """The head of an active-set line of the navigator's first prompt (a prune step finds it by this)."""
    return f"- [{kind} {item_id}]"


def _record_key(record: Any) -> tuple[str, str] | None:
    """The active-set key of a tool's artifact record (events, turns, facts about people), else None."""
    if not isinstance(record, dict):
        return None
    kind = {"event": "event", "turn": "turn", "personal_fact": "fact"}.get(str(record.get("kind")))
    return (kind, str(record.get("id"))) if kind else None


def _pruned_message(
    message: BaseMessage, dropped: set[tuple[str, str]], snapshot: NamespaceSnapshot
) -> BaseMessage | None:
    """``message`` without the dropped items (same id, so it replaces the one the model saw); None if untouched."""
    if isinstance(message, HumanMessage):
        lines = str(message.content).split("\n")
        kept = [line for line in lines if not any(line.startswith(_seed_line(*k)) for k in dropped)]
        return message.model_copy(update={"content": "\n".join(kept)}) if len(kept) < len(lines) else None
    if not isinstance(message, ToolMessage) or not isinstance(message.artifact, list):
        return None
    if not any(_record_key(r) in dropped for r in message.artifact):
        return None
    left = [r for r in message.artifact if _record_key(r) not in dropped]
    shown = _items_from_artifact(left, snapshot)
    others = [
        f"- {r.get('kind')} {r.get('text') or r.get('id')}"
        for r in left
        if isinstance(r, dict) and _record_key(r) is None
    ]
    if not shown and not others:
        content = "Pruned: none of these results supports the question."
    else:
        content = "\n".join(
            [
                "What still supports the question (the rest was pruned):",
                _evidence_text(shown, snapshot, len(shown)),
                *others,
            ]
        ).replace("\n\n", "\n")
    return message.model_copy(update={"content": content, "artifact": left})


def _prune_record(
    state: ReconstructState, kept: list[EvidenceItem], dropped: list[EvidenceItem], by: str
) -> dict[str, Any]:
    return {
        "turn": state.get("turns", 0),
        "kept": [f"{i.kind} {i.id}" for i in kept],
        "dropped": [f"{i.kind} {i.id}" for i in dropped],
        "by": by,
    }


# -- nodes ------------------------------------------------------------------------------------------


def seed(state: ReconstructState, runtime: Runtime[ReconstructContext]) -> dict[str, Any]:
    """The run's namespace resolved; the question's cues and the events they lead to start the active set and
    the navigator's prompt."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    pin = pin_run(runtime, ctx.namespace, ctx.policy)  # namespace, policy, snapshot generation: once per run
    snapshot = pinned_snapshot(pin, runtime)
    question = state["question"]
    # EXTRACTCUES + ACTIVESETINIT (Algorithm 1, lines 1-2): the query cue role's keywords matched to stored cues;
    # the lexical matcher without a model (and as the role's recorded fallback).
    policy = _policy(pin, runtime)
    found = policy.query_cues(question, CueIndex.of(snapshot), method=res.method, tags=["strategy:reconstruct"])
    cues = found.cues
    active = _seed_active(snapshot, cues, ctx.seed_events)
    cues_text = ", ".join(f"{c.text} ({c.kind})" for c in cues)
    active_text = "\n".join(f"{_seed_line(item.kind, item.id)} {item.text[:240]}" for item in active)
    build = prompt.build_paper_navigator_messages if ctx.faithful else prompt.build_navigator_messages
    update: dict[str, Any] = {
        **pin,
        "seed_cues": [c.text for c in cues],
        "active": active,
        "turns": 0,
        "tool_calls": 0,
        "dropped_calls": 0,
        "route": "navigate",
        "final": None,
        "messages": build(
            question,
            question_date=state.get("question_date"),
            cues_text=cues_text,
            active_text=active_text,
            max_turns=ctx.max_turns,
            max_tool_calls=ctx.max_tool_calls_per_turn,
            topics_text=_topics_text(snapshot, active),
        ),
    }
    if found.cost.llm_calls or found.cost.http_requests:
        update["cost"] = found.cost
    if found.fallback is not None:
        update["fallbacks"] = [found.fallback]
    update["query_keywords"] = found.keywords
    if ctx.faithful:  # H(0): the initial active set Z(0) (ACTIVESETINIT)
        update["held"] = [_item_key(item) for item in active]
    missing = policy.missing_model()
    if missing is not None:
        update["fallbacks"] = [missing]
    return update


def navigate(state: ReconstructState, runtime: Runtime[ReconstructContext], config: RunnableConfig) -> dict[str, Any]:
    """One reasoning turn: the model bound to the memory tools (or the deterministic navigator) replies."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    turns = state.get("turns", 0) + 1
    turn = NavigatorTurn(
        question=state["question"],
        turn=turns,
        messages=state.get("messages", []),
        active=state.get("active", []),
        seed_cues=state.get("seed_cues", []),
        snapshot=pinned_snapshot(state, runtime),
        k=ctx.k,
        max_turns=ctx.max_turns,
        max_tool_calls=ctx.max_tool_calls_per_turn,
        paper_prompts=ctx.faithful,
    )
    tools = partial(memory_tools, state["namespace"], res, pinned_store(state, runtime), extras=ctx.extra_tools)
    step = _policy(state, runtime).navigate(turn, tools, config)
    if step.failure is not None or step.reply is None:
        return {"turns": turns, "mode": "forced", "fallbacks": [step.failure] if step.failure else []}
    if step.cost is None:  # no model was asked (the deterministic navigator): nothing spent, no budget to track
        return {"messages": [step.reply], "turns": turns}
    return {
        "messages": [step.reply],
        "turns": turns,
        "cost": step.cost,
        "dropped_last": step.dropped,
        "dropped_calls": state.get("dropped_calls", 0) + step.dropped,
        "mode": "navigate",
    }


def run_tools(state: ReconstructState, runtime: Runtime[ReconstructContext], config: RunnableConfig) -> dict[str, Any]:
    """The model's tool calls run by a ``ToolNode`` over the run's namespace; what they found joins the active set."""
    ctx, res, policy = _ctx(runtime), resources_of(runtime), _policy(state, runtime)
    namespace = state["namespace"]
    last = state["messages"][-1]
    out: list[BaseMessage] = []
    if getattr(last, "tool_calls", None):
        tools = memory_tools(namespace, res, pinned_store(state, runtime), extras=policy.tool_extras(ctx.extra_tools))
        result = ToolNode(tools).invoke({"messages": state["messages"]}, config)
        out.extend(result["messages"] if isinstance(result, dict) else result)
    out.extend(_invalid_call_messages(last))
    found, trace = _found_and_trace(state, last, out, pinned_snapshot(state, runtime))
    out.extend(
        policy.budget_note(
            ctx.max_turns - state.get("turns", 0), state.get("dropped_last", 0), ctx.max_tool_calls_per_turn
        )
    )
    return {"active": found, "tool_calls": state.get("tool_calls", 0) + len(trace), "trace": trace, "messages": out}


def prune(state: ReconstructState, runtime: Runtime[ReconstructContext]) -> dict[str, Any]:
    """After a tool round: the active set keeps only what supports the question (the pruner role, or its rule
    without a model); dropped items leave the navigator's messages too. The pruner may route to the answer."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    active = list(state.get("active", []))
    if not active:
        return {"route": "navigate"}
    if ctx.faithful:
        return _route_candidates(state, runtime, active)
    snapshot = pinned_snapshot(state, runtime)
    keys = [f"M{i + 1}" for i in range(len(active))]
    policy = _policy(state, runtime)
    outcome = policy.prune(
        state["question"],
        [(key, _evidence_text([item], snapshot, 1)) for key, item in zip(keys, active)],
        embeddings=res.embeddings,
        floor=ctx.prune_floor,
        limit=ctx.max_active,
        question_date=state.get("question_date"),
        method=res.method,
        tags=["strategy:reconstruct"],
    )
    chosen = set(outcome.output.keep)
    kept = [item for key, item in zip(keys, active) if key in chosen]
    dropped = [item for key, item in zip(keys, active) if key not in chosen]
    gone: set[tuple[str, str]] = {(i.kind, i.id) for i in dropped}
    rewritten = [
        m for m in (_pruned_message(m, gone, snapshot) for m in state.get("messages", [])[1:]) if m is not None
    ]
    update: dict[str, Any] = {
        "active": Overwrite(kept),
        "messages": rewritten,
        "cost": outcome.cost,
        "route": "answer" if outcome.output.answer_now and kept else "navigate",
        "pruned": [_prune_record(state, kept, dropped, policy.pruned_by(outcome))],
    }
    recorded = policy.recorded(outcome.fallback)
    if recorded:
        update["fallbacks"] = recorded
    return update


def _item_key(item: EvidenceItem) -> str:
    return f"{item.kind} {item.id}"


def _route_candidates(
    state: ReconstructState, runtime: Runtime[ReconstructContext], active: list[EvidenceItem]
) -> dict[str, Any]:
    """``faithful``'s prune step, the paper's routing (Eq. 9): Z(t+1) = R_LLM(x, H(t), Z~(t+1)) and
    H(t+1) = H(t) u Z(t+1). Only the tool round's new candidates (active items not yet held) are judged, with the
    held context shown; a dropped candidate leaves the active set and the navigator's messages, a held item never
    does; the step never routes to the answer (the navigator's C_LLM decides when the evidence suffices)."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    snapshot = pinned_snapshot(state, runtime)
    held = set(state.get("held") or [])
    context = [item for item in active if _item_key(item) in held]
    new = [item for item in active if _item_key(item) not in held]
    if not new:
        return {"route": "navigate"}
    keys = [f"M{i + 1}" for i in range(len(new))]
    policy = _policy(state, runtime)
    outcome = policy.select(
        state["question"],
        _evidence_text(context, snapshot, len(context)),
        [(key, _evidence_text([item], snapshot, 1)) for key, item in zip(keys, new)],
        embeddings=res.embeddings,
        floor=ctx.prune_floor,
        limit=ctx.max_active,
        question_date=state.get("question_date"),
        method=res.method,
        tags=["strategy:reconstruct"],
    )
    chosen = set(outcome.output.keep)
    kept = [item for key, item in zip(keys, new) if key in chosen]
    dropped = [item for key, item in zip(keys, new) if key not in chosen]
    gone: set[tuple[str, str]] = {(i.kind, i.id) for i in dropped}
    rewritten = [
        m for m in (_pruned_message(m, gone, snapshot) for m in state.get("messages", [])[1:]) if m is not None
    ]
    update: dict[str, Any] = {
        "active": Overwrite([*context, *kept]),
        "messages": rewritten,
        "cost": outcome.cost,
        "route": "navigate",
        "held": [*(state.get("held") or []), *(_item_key(item) for item in kept)],
        "pruned": [_prune_record(state, kept, dropped, policy.pruned_by(outcome))],
    }
    recorded = policy.recorded(outcome.fallback)
    if recorded:
        update["fallbacks"] = recorded
    return update


def take_answer(state: ReconstructState, runtime: Runtime[ReconstructContext]) -> dict[str, Any]:
    """Answer mode: the model's answer, validated against the memory (else the final answer is forced)."""
    snapshot = pinned_snapshot(state, runtime)
    last = state["messages"][-1]
    calls = [c for c in getattr(last, "tool_calls", None) or [] if c["name"] == ANSWER_TOOL]
    problems: list[str]
    try:
        data = calls[0]["args"] if calls else parse_json_reply(last)
        result = ReconstructedAnswer.model_validate(data)
        problems = _validate_answer(result, snapshot)
    except (ValueError, ValidationError, TypeError) as exc:
        result, problems = None, [str(exc)[:500]]
    if not problems and result is not None:
        return {"final": result, "answer": result.answer, "mode": _policy(state, runtime).answered_mode()}
    return {
        "final": None,
        "mode": "forced",
        "fallbacks": [FallbackRecord(role="navigator", reason="invalid answer; final answer forced", errors=problems)],
    }


def force_answer(state: ReconstructState, runtime: Runtime[ReconstructContext]) -> dict[str, Any]:
    """The final answer from the active set (budgets spent or no valid answer); extractive without a model."""
    ctx, res = _ctx(runtime), resources_of(runtime)
    snapshot = pinned_snapshot(state, runtime)
    active = list(state.get("active", []))
    found: list[EvidenceItem] = []
    if not any(item.kind == "event" for item in active):
        # Nothing reached yet (no cue matched, the model never searched): the question's top-k events.
        found = _top_events(state["question"], ctx.k, res, snapshot)
        active = merge_active(active, found)
    ranked = rank_events(state.get("messages", []), active)
    # Ranked events first, so the model and the fallback see the best memories within the evidence budget.
    position = {eid: i for i, eid in enumerate(ranked)}
    ordered = sorted(active, key=lambda i: position.get(i.id, len(position)) if i.kind == "event" else -1)
    policy = _policy(state, runtime)
    build = prompt.build_paper_final_messages if ctx.faithful else prompt.build_final_messages
    outcome = policy.final_answer(
        build(state["question"], _evidence_text(ordered, snapshot, ctx.max_evidence), state.get("question_date")),
        validate=lambda r: _validate_answer(r, snapshot),
        fallback=lambda: answer_from_active_set(
            state["question"], active, snapshot, ranked_events=ranked, cues=state.get("seed_cues", [])
        ),
        method=res.method,
        tags=["strategy:reconstruct"],
        metadata={"prompt_version": prompt.PAPER_VERSION if ctx.faithful else prompt.VERSION},
    )
    fallbacks = policy.recorded(outcome.fallback)
    # The pruner found the kept set enough (and the budgets were not spent): answering is its decision.
    chosen = state.get("route") == "answer" and state.get("turns", 0) < ctx.max_turns and outcome.fallback is None
    return {
        "final": outcome.output,
        "answer": outcome.output.answer,
        "mode": "answered" if chosen else "forced",
        "cost": outcome.cost,
        "fallbacks": fallbacks,
        "active": found,
    }


# -- routers ----------------------------------------------------------------------------------------


def after_navigate(state: ReconstructState) -> Literal["tools", "answer", "force_answer"]:
    if state.get("mode") == "forced":
        return "force_answer"
    last = state["messages"][-1]
    calls = getattr(last, "tool_calls", None) or []
    if any(c["name"] == ANSWER_TOOL for c in calls):
        return "answer"
    if calls or getattr(last, "invalid_tool_calls", None):
        return "tools"
    return "answer"


def after_prune(state: ReconstructState, runtime: Runtime[ReconstructContext]) -> Literal["navigate", "force_answer"]:
    """Navigate again, or answer from the pruned set: the pruner said it is enough, or the turns are spent."""
    if state.get("route") == "answer" or state.get("turns", 0) >= _ctx(runtime).max_turns:
        return "force_answer"
    return "navigate"


def after_answer(state: ReconstructState) -> Literal["force_answer", "finish"]:
    return "finish" if state.get("final") is not None else "force_answer"


# -- the graph --------------------------------------------------------------------------------------

_ConfigNode = Callable[[ReconstructState, Runtime[ReconstructContext], RunnableConfig], dict[str, Any]]


def _config_node(node: _ConfigNode) -> Callable[..., dict[str, Any]]:
    """``node`` as ``add_node`` takes it: LangGraph injects ``runtime`` and ``config`` by parameter name, but its node
    protocols have no (state, runtime, config) form; the signature is checked here instead."""
    return node


def build_reconstruct_graph() -> StateGraph[ReconstructState, ReconstructContext, ReconstructInput, ReconstructOutput]:
    """The reconstruction ``StateGraph`` (uncompiled); nodes read their resources from the run's context."""
    builder = StateGraph(
        ReconstructState,
        context_schema=ReconstructContext,
        input_schema=ReconstructInput,
        output_schema=ReconstructOutput,
    )
    builder.add_node("seed", seed)
    builder.add_node("navigate", _config_node(navigate))
    builder.add_node("tools", _config_node(run_tools))
    builder.add_node("prune", prune)
    builder.add_node("answer", take_answer)
    builder.add_node("force_answer", force_answer)
    builder.add_node("finish", finish)
    builder.add_edge(START, "seed")
    builder.add_edge("seed", "navigate")
    builder.add_conditional_edges("navigate", after_navigate, ["tools", "answer", "force_answer"])
    builder.add_edge("tools", "prune")
    builder.add_conditional_edges("prune", after_prune, ["navigate", "force_answer"])
    builder.add_conditional_edges("answer", after_answer, ["force_answer", "finish"])
    builder.add_edge("force_answer", "finish")
    builder.add_edge("finish", END)
    return builder


def _result(
    question: str, namespace: str, final: dict[str, Any], ctx: ReconstructContext, res: Resources, elapsed: float
) -> AnswerResult:
    snapshot = snapshot_of(res.store, {**final, "namespace": namespace})  # the run's pinned memory
    result: ReconstructedAnswer = final.get("final") or ReconstructedAnswer(answer=NO_ANSWER, confidence=0.0)
    cited: list[EvidenceItem] = []
    for eid in result.cited_event_ids:
        if eid in snapshot.events:
            e = snapshot.events[eid]
            cited.append(
                EvidenceItem(kind="event", id=eid, text=e.render(), turn_ids=list(e.turn_ids), time=e.time, score=1.0)
            )
    for tid in result.cited_turn_ids:
        if tid in snapshot.turns:
            t = snapshot.turns[tid]
            cited.append(
                EvidenceItem(
                    kind="turn",
                    id=tid,
                    text=t.render(),
                    turn_ids=[tid],
                    time=t.session_time.date().isoformat() if t.session_time else None,
                    score=1.0,
                )
            )
    # Cited turns lead the evidence (so cited-turn recall sees them first), then the rest of the active set.
    cited.sort(key=lambda i: i.kind != "turn")
    evidence = merge_active(cited, final.get("active", []))[: max(ctx.max_evidence, len(cited))]
    ranking = rank_turns(snapshot, res.embeddings.embed_query(question), evidence, first=result.cited_turn_ids)
    cost = (final.get("cost") or Cost()).model_copy(update={"wall_time_s": elapsed})
    return AnswerResult(
        strategy="reconstruct",
        namespace=namespace,
        question=question,
        answer=result.answer,
        evidence=evidence,
        cost=cost,
        steps=final.get("turns", 0),
        fallbacks=final.get("fallbacks", []),
        turn_ranking=ranking,
        details={
            "mode": final.get("mode"),
            "confidence": result.confidence,
            "cited_event_ids": result.cited_event_ids,
            "cited_turn_ids": result.cited_turn_ids,
            "seed_cues": final.get("seed_cues", []),
            "query_keywords": final.get("query_keywords"),
            "turns": final.get("turns", 0),
            "tool_calls": final.get("tool_calls", 0),
            "dropped_tool_calls": final.get("dropped_calls", 0),
            "tool_trace": final.get("trace", []),
            "prune_trace": final.get("pruned", []),
            "turn_texts": cited_turn_texts(snapshot, evidence),
        },
    )


def finish(state: ReconstructState, runtime: Runtime[ReconstructContext]) -> dict[str, Any]:
    """The run's ``AnswerResult`` (the graph's ``result`` output, exactly what ``answer()`` returns), built from the
    final state and the run's pinned memory."""
    return finish_run(state, runtime, ReconstructContext, _result)


builder = build_reconstruct_graph()
graph = traced_graph(builder.compile(name="reconstruct"))
STRATEGY = graph_strategy(
    "reconstruct",
    graph,
    ReconstructContext,
    variants=("faithful",),
    tags=lambda ctx: ["faithful"] if ctx.faithful else [],
    recursion_limit=lambda ctx: 12 + 4 * ctx.max_turns,
)
answer = STRATEGY.run
