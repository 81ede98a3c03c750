"""MRAgent's policy: the decisions of the reconstruction graph (``graphs.strategies.reconstruct``) that differ between a run
with a chat model and a run without one, as one object per run.

``reconstruct_policy(name, llm)`` is the one place that reads the run's pinned policy name: ``LLMReconstructPolicy``
asks the model (the query cue role, the navigator bound to the memory tools, the pruner, the final answer) and
records every fallback; ``RuleReconstructPolicy`` is the no-LLM policy (the lexical cue matcher, the deterministic
navigator below, the pruning rule, ``answers.answer_from_active_set``), whose rules are the policy, not fallbacks.
A run whose policy is ``llm`` but has no chat model gets the rule policy, which records that once (at the seed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from logicmap.agents.active_pruner import prune_active, select_candidates
from logicmap.agents.answerers import ActiveItem, answer_from_active_set, asks_when
from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome, run_role
from logicmap.agents.provider import ProviderError, call_with_retries, endpoint_of
from logicmap.agents.query_cues import QueryCueOutcome, extract_query_cues
from logicmap.memory.indexes.cue_extraction import resolve_aspects
from logicmap.memory.indexes.cue_index import CueIndex
from logicmap.memory.store import NamespaceSnapshot
from logicmap.prompts import reconstruct as prompt
from logicmap.prompts.reconstruct import ANSWER_TOOL, ReconstructedAnswer
from logicmap.prompts.reconstruct_prune import PruneDecision

__all__ = [
    "LLMReconstructPolicy",
    "NavigatorStep",
    "NavigatorTurn",
    "ReconstructPolicy",
    "RuleReconstructPolicy",
    "message_cost",
    "rank_events",
    "reconstruct_policy",
    "rule_navigator_reply",
    "within_call_budget",
]

NO_MODEL = FallbackRecord(role="navigator", reason="no chat model configured: deterministic navigation used")
"""What a run with the ``llm`` policy and no chat model records (once, at the seed)."""


@dataclass(frozen=True)
class NavigatorTurn:
    """What the navigator sees on one reasoning turn."""

    question: str
    turn: int
    """This turn's number (the first is 1)."""
    messages: Sequence[BaseMessage]
    active: Sequence[ActiveItem]
    seed_cues: Sequence[str]
    snapshot: NamespaceSnapshot
    k: int
    max_turns: int
    max_tool_calls: int
    paper_prompts: bool = False
    """The paper's QA and Tool-Use Prompt (``ReconstructContext.faithful``): its ``submit_answer`` schema."""


@dataclass(frozen=True)
class NavigatorStep:
    """One turn's reply: tool calls or an answer. ``cost`` is None when no model was asked; ``failure`` is set
    (and ``reply`` None) when the model call failed, which forces the final answer."""

    reply: AIMessage | None
    cost: Cost | None = None
    dropped: int = 0
    failure: FallbackRecord | None = None


class ReconstructPolicy(Protocol):
    """The decisions of one reconstruction run that depend on its policy (one method per decision point)."""

    def query_cues(self, question: str, index: CueIndex, *, method: str, tags: Sequence[str]) -> QueryCueOutcome:
        """EXTRACTCUES (Algorithm 1, line 1): the question's cues."""
        ...

    def missing_model(self) -> FallbackRecord | None:
        """What the seed records because the run asked for the model and has none."""
        ...

    def navigate(
        self, turn: NavigatorTurn, tools: Callable[[], Sequence[BaseTool]], config: Mapping[str, Any]
    ) -> NavigatorStep:
        """One reasoning turn: the memory tools to call, or the answer."""
        ...

    def budget_note(self, turns_left: int, dropped_last: int, max_tool_calls: int) -> list[HumanMessage]:
        """What the navigator is told after a tool round (its budgets)."""
        ...

    def tool_extras(self, asked: bool) -> bool:
        """Whether the tool node runs the project's extra tools (``asked``: the run's ``extra_tools``)."""
        ...

    def prune(
        self,
        question: str,
        memories: Sequence[tuple[str, str]],
        *,
        embeddings: Embeddings,
        floor: float,
        limit: int,
        question_date: str | None,
        method: str,
        tags: Sequence[str],
    ) -> RoleOutcome[PruneDecision]:
        """Which active-set items stay after a tool round, and whether they are enough to answer."""
        ...

    def select(
        self,
        question: str,
        context_text: str,
        candidates: Sequence[tuple[str, str]],
        *,
        embeddings: Embeddings,
        floor: float,
        limit: int,
        question_date: str | None,
        method: str,
        tags: Sequence[str],
    ) -> RoleOutcome[PruneDecision]:
        """The paper's routing step (``faithful``): which of a tool round's new candidates join the context."""
        ...

    def pruned_by(self, outcome: RoleOutcome[PruneDecision]) -> str:
        """Who decided a prune step: ``model`` or ``rule`` (recorded in the prune trace)."""
        ...

    def answered_mode(self) -> str:
        """The run's mode when the navigator's own answer was valid."""
        ...

    def final_answer(
        self,
        messages: list[BaseMessage],
        *,
        validate: Callable[[ReconstructedAnswer], list[str]],
        fallback: Callable[[], ReconstructedAnswer],
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[ReconstructedAnswer]:
        """The answer from the active set (budgets spent, or no valid answer)."""
        ...

    def recorded(self, fallback: FallbackRecord | None) -> list[FallbackRecord]:
        """The fallbacks a role's outcome adds to the run's record."""
        ...


# -- the rule policy: no chat model ------------------------------------------------------------------


def rank_events(messages: Sequence[BaseMessage], active: Sequence[ActiveItem]) -> list[str]:
    """Events of the active set ranked: search results by reciprocal rank, plus a flat share for every
    other list an event appears in (cue lists are in time order, so their positions mean nothing)."""
    scores: dict[str, float] = {}
    flat = 0.5 / 61
    for item in active:
        if item.kind == "event":
            scores[item.id] = scores.get(item.id, 0.0) + flat
    for message in messages:
        if not isinstance(message, ToolMessage) or not isinstance(message.artifact, list):
            continue
        ids = list(dict.fromkeys(r["id"] for r in message.artifact if isinstance(r, dict) and r.get("kind") == "event"))
        for rank, eid in enumerate(ids):
            share = 1.0 / (61 + rank) if message.name == "search_events" else flat
            scores[eid] = scores.get(eid, 0.0) + share
    return sorted(scores, key=lambda e: -scores[e])


def _call(name: str, args: dict[str, Any], turn: int, index: int) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"heuristic-{turn}-{index}", "type": "tool_call"}


def rule_navigator_reply(turn: NavigatorTurn) -> AIMessage:
    """What a careful reader would do with the tools: search and follow cues, read the best events, answer."""
    question, active, index = turn.question, turn.active, CueIndex.of(turn.snapshot)
    calls: list[dict[str, Any]] = []
    if turn.turn == 1:
        calls.append(_call("search_events", {"query": question, "k": turn.k}, turn.turn, 0))
        people = {p.lower() for p in index.known_people()}
        # A person's name leads to most events; follow the other cues (seed cues list persons last).
        cues = [c for c in turn.seed_cues if c.lower() not in people] or list(turn.seed_cues[:1])
        for cue in cues[:3]:
            calls.append(_call("query_tag_events", {"cue": cue}, turn.turn, len(calls)))
        aspects = [a for a in resolve_aspects(question) if a != "preference"] or resolve_aspects(question)
        for person in index.known_people():
            if person.lower() in question.lower() and aspects and index.person_facts(person, aspects[0]):
                calls.append(
                    _call("query_personal_aspect", {"person": person, "aspect": aspects[0]}, turn.turn, len(calls))
                )
                break
    elif turn.turn == 2:
        ranked = rank_events(turn.messages, active)
        for eid in ranked[:2]:
            calls.append(_call("get_event", {"event_id": eid}, turn.turn, len(calls)))
            if asks_when(question):
                calls.append(_call("query_conversation_time", {"event_id": eid}, turn.turn, len(calls)))
    calls = calls[: turn.max_tool_calls]
    if calls and turn.turn < turn.max_turns:
        return AIMessage(content="", tool_calls=calls)
    ranked = rank_events(turn.messages, active)
    result = answer_from_active_set(question, active, turn.snapshot, ranked_events=ranked, cues=list(turn.seed_cues))
    return AIMessage(content="", tool_calls=[_call(ANSWER_TOOL, result.model_dump(), turn.turn, 0)])


@dataclass(frozen=True)
class RuleReconstructPolicy:
    """The no-LLM policy: every decision by its rule, no fallback recorded (the rule is the policy).
    ``missing``: the run asked for the model and has none (the seed records it once)."""

    missing: bool = False

    def query_cues(self, question: str, index: CueIndex, *, method: str, tags: Sequence[str]) -> QueryCueOutcome:
        return extract_query_cues(None, question, index, method=method, tags=tags)

    def missing_model(self) -> FallbackRecord | None:
        return NO_MODEL if self.missing else None

    def navigate(
        self, turn: NavigatorTurn, tools: Callable[[], Sequence[BaseTool]], config: Mapping[str, Any]
    ) -> NavigatorStep:
        return NavigatorStep(reply=rule_navigator_reply(turn))

    def budget_note(self, turns_left: int, dropped_last: int, max_tool_calls: int) -> list[HumanMessage]:
        return []

    def tool_extras(self, asked: bool) -> bool:
        # The rule navigator searches with search_events and reads with get_event (extras).
        return True

    def prune(
        self,
        question: str,
        memories: Sequence[tuple[str, str]],
        *,
        embeddings: Embeddings,
        floor: float,
        limit: int,
        question_date: str | None,
        method: str,
        tags: Sequence[str],
    ) -> RoleOutcome[PruneDecision]:
        return prune_active(
            None,
            question,
            memories,
            embeddings=embeddings,
            floor=floor,
            limit=limit,
            question_date=question_date,
            method=method,
            tags=tags,
        )

    def select(
        self,
        question: str,
        context_text: str,
        candidates: Sequence[tuple[str, str]],
        *,
        embeddings: Embeddings,
        floor: float,
        limit: int,
        question_date: str | None,
        method: str,
        tags: Sequence[str],
    ) -> RoleOutcome[PruneDecision]:
        return select_candidates(
            None,
            question,
            context_text,
            candidates,
            embeddings=embeddings,
            floor=floor,
            limit=limit,
            question_date=question_date,
            method=method,
            tags=tags,
        )

    def pruned_by(self, outcome: RoleOutcome[PruneDecision]) -> str:
        return "rule"

    def answered_mode(self) -> str:
        return "heuristic"

    def final_answer(
        self,
        messages: list[BaseMessage],
        *,
        validate: Callable[[ReconstructedAnswer], list[str]],
        fallback: Callable[[], ReconstructedAnswer],
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[ReconstructedAnswer]:
        return run_role(
            None,
            role="reconstruct_answer",
            messages=messages,
            schema=ReconstructedAnswer,
            validate=validate,
            fallback=fallback,
            method=method,
            tags=tags,
            metadata=metadata,
        )

    def recorded(self, fallback: FallbackRecord | None) -> list[FallbackRecord]:
        return []


# -- the LLM policy ---------------------------------------------------------------------------------


def message_cost(reply: BaseMessage, messages: Sequence[BaseMessage]) -> Cost:
    """One navigator call's cost: the reply's usage metadata, else estimated from the characters (4 per token)."""
    usage = getattr(reply, "usage_metadata", None)
    if usage:
        return Cost(
            llm_calls=1,
            prompt_tokens=int(usage.get("input_tokens", 0)),
            completion_tokens=int(usage.get("output_tokens", 0)),
        )
    prompt_chars = sum(len(str(m.content)) for m in messages)
    reply_chars = len(str(reply.content)) + len(json.dumps(getattr(reply, "tool_calls", []) or [], default=str))
    return Cost(llm_calls=1, prompt_tokens=prompt_chars // 4, completion_tokens=reply_chars // 4, tokens_estimated=True)


def within_call_budget(reply: AIMessage, limit: int) -> tuple[AIMessage, int]:
    """``reply`` with at most ``limit`` tool calls (an answer is never cut) and how many were dropped."""
    calls = list(reply.tool_calls)
    if any(c["name"] == ANSWER_TOOL for c in calls) or len(calls) <= limit:
        return reply, 0
    capped = AIMessage(
        content=reply.content,
        tool_calls=calls[:limit],
        invalid_tool_calls=reply.invalid_tool_calls,
        id=reply.id,
        usage_metadata=reply.usage_metadata,
        response_metadata=reply.response_metadata,
    )
    return capped, len(calls) - limit


def _invoke_navigator(
    bound: Any, messages: list[BaseMessage], config: dict[str, Any], openai_client: bool, timeout: float | None
) -> BaseMessage:
    """One navigator request; ``timeout`` is its share of the run's deadline (OpenAI clients only)."""
    extra = {"timeout": timeout} if timeout is not None and openai_client else {}
    reply: BaseMessage = bound.invoke(messages, config=config, **extra)
    return reply


@dataclass(frozen=True)
class LLMReconstructPolicy:
    """The LLM policy: every decision asks ``llm``; a role that falls back records it."""

    llm: BaseChatModel

    def query_cues(self, question: str, index: CueIndex, *, method: str, tags: Sequence[str]) -> QueryCueOutcome:
        return extract_query_cues(self.llm, question, index, method=method, tags=tags)

    def missing_model(self) -> FallbackRecord | None:
        return None

    def navigate(
        self, turn: NavigatorTurn, tools: Callable[[], Sequence[BaseTool]], config: Mapping[str, Any]
    ) -> NavigatorStep:
        """The model bound to the memory tools (and the answer tool) replies; a provider failure stops the run,
        any other failed call forces the final answer."""
        bound = self.llm.bind_tools([*tools(), prompt.answer_tool_spec(paper=turn.paper_prompts)])
        messages = list(turn.messages)
        call_config = {
            **config,
            "run_name": "navigator",
            "tags": [*(config.get("tags") or []), "role:navigator"],
            "metadata": {**(config.get("metadata") or {}), "prompt_version": prompt.VERSION, "turn": turn.turn},
        }
        try:
            reply = call_with_retries(
                partial(_invoke_navigator, bound, messages, call_config, hasattr(self.llm, "root_client")),
                endpoint=endpoint_of(self.llm),
            )
        except ProviderError:
            raise  # a provider failure stops the run; only a reply that could not be read forces the final answer
        except Exception as exc:  # a failed call ends navigation; the final answer is forced
            return NavigatorStep(
                reply=None,
                failure=FallbackRecord(
                    role="navigator", reason="model call failed", errors=[f"{type(exc).__name__}: {str(exc)[:300]}"]
                ),
            )
        cost = message_cost(reply, messages)
        answer = reply if isinstance(reply, AIMessage) else AIMessage(content=str(reply.content))
        capped, dropped = within_call_budget(answer, turn.max_tool_calls)
        return NavigatorStep(reply=capped, cost=cost, dropped=dropped)

    def budget_note(self, turns_left: int, dropped_last: int, max_tool_calls: int) -> list[HumanMessage]:
        return [HumanMessage(content=prompt.budget_note(turns_left, dropped_last, max_tool_calls))]

    def tool_extras(self, asked: bool) -> bool:
        return asked

    def prune(
        self,
        question: str,
        memories: Sequence[tuple[str, str]],
        *,
        embeddings: Embeddings,
        floor: float,
        limit: int,
        question_date: str | None,
        method: str,
        tags: Sequence[str],
    ) -> RoleOutcome[PruneDecision]:
        return prune_active(
            self.llm,
            question,
            memories,
            embeddings=embeddings,
            floor=floor,
            limit=limit,
            question_date=question_date,
            method=method,
            tags=tags,
        )

    def select(
        self,
        question: str,
        context_text: str,
        candidates: Sequence[tuple[str, str]],
        *,
        embeddings: Embeddings,
        floor: float,
        limit: int,
        question_date: str | None,
        method: str,
        tags: Sequence[str],
    ) -> RoleOutcome[PruneDecision]:
        return select_candidates(
            self.llm,
            question,
            context_text,
            candidates,
            embeddings=embeddings,
            floor=floor,
            limit=limit,
            question_date=question_date,
            method=method,
            tags=tags,
        )

    def pruned_by(self, outcome: RoleOutcome[PruneDecision]) -> str:
        return "model" if outcome.fallback is None else "rule"

    def answered_mode(self) -> str:
        return "answered"

    def final_answer(
        self,
        messages: list[BaseMessage],
        *,
        validate: Callable[[ReconstructedAnswer], list[str]],
        fallback: Callable[[], ReconstructedAnswer],
        method: str,
        tags: Sequence[str],
        metadata: dict[str, Any],
    ) -> RoleOutcome[ReconstructedAnswer]:
        return run_role(
            self.llm,
            role="reconstruct_answer",
            messages=messages,
            schema=ReconstructedAnswer,
            validate=validate,
            fallback=fallback,
            method=method,
            tags=tags,
            metadata=metadata,
        )

    def recorded(self, fallback: FallbackRecord | None) -> list[FallbackRecord]:
        return [fallback] if fallback is not None else []


def reconstruct_policy(name: str, llm: BaseChatModel | None) -> ReconstructPolicy:
    """The run's policy object from its pinned policy name (``llm`` or ``heuristic``): the LLM policy when the run
    asked for the model and has one, else the rule policy (recording the missing model when it was asked for)."""
    if name == "heuristic" or llm is None:
        return RuleReconstructPolicy(missing=name != "heuristic")
    return LLMReconstructPolicy(llm)
