"""LoGo-GRPO training data for the Memory-R2 memory manager: global rollout groups and local snapshot groups.

Rewards are answer F1 on the QA set minus a compression penalty; advantages are group-relative;
rows are JSONL in TRL's conversational prompt/completion format.

Reward of a final fact memory M over a horizon of sessions:

    reward = mean token F1 of the answers to the horizon's QA pairs from M
             - lambda * min(1, |M| / N)

where |M| is the number of live facts and N the number of facts the extractor produced over the
horizon (the size M would have if the manager ADDed everything). So the penalty is 0 for an empty
memory and lambda (0.3) for keep-everything, whatever the conversation's length, and stays on the
scale of F1. Advantages follow TRL's GRPO: (r - group mean) / (group std + 1e-4), with the unbiased
(n - 1) std; a group whose rewards are all equal gets advantage 0 for every member.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from logicmap.agents.answerers import answer_from_best_fact
from logicmap.agents.base import Cost
from logicmap.agents.r2 import (
    ManagerOutcome,
    answer_from_facts,
    candidates_from,
    extract_facts,
    fact_key,
    manage_memory,
    parse_completion,
)
from logicmap.evals.metrics import token_f1
from logicmap.memory.files.loaders import Conversation, QAItem
from logicmap.memory.records.r2 import CandidateFact, EditReport, FactMemory, FactRecord, InvalidEditBatch
from logicmap.memory.records.records import stable_hash

__all__ = [
    "ADVANTAGE_EPS",
    "BuildStats",
    "LoGoConfig",
    "LoGoDataset",
    "LoGoRewardHook",
    "RewardBreakdown",
    "Rollout",
    "SessionFacts",
    "answer_every_match",
    "build_logo_grpo_dataset",
    "compression_penalty",
    "curriculum_horizons",
    "extract_sessions",
    "group_advantages",
    "INVALID_REWARD",
    "local_reward",
    "local_session_points",
    "qa_within",
    "run_rollout",
    "score_memory",
    "write_dataset",
]

ADVANTAGE_EPS = 1e-4  # TRL's GRPOTrainer adds the same epsilon to the group std
INVALID_REWARD = -1.0  # a completion the role's validation rejects: below every valid reward (those lie in [-0.3, 1])
DEFAULT_STAGES = (8, 16, 32)
CONTEXT_FORMAT = "logicmap.logo-grpo-context/1"
ADVERSARIAL = 5


# -- rewards, advantages, curriculum -------------------------------------------------------------


def compression_penalty(memory_size: int, normalizer: int, weight: float = 0.3) -> float:
    """``weight * min(1, memory_size / normalizer)``: 0 for an empty memory, ``weight`` when it keeps
    every extracted fact (``normalizer`` = facts the extractor produced over the horizon)."""
    if normalizer <= 0 or memory_size <= 0:
        return 0.0
    return weight * min(1.0, memory_size / normalizer)


def group_advantages(rewards: Sequence[float], eps: float = ADVANTAGE_EPS) -> list[float]:
    """Group-relative advantages ``(r - mean) / (std + eps)`` with the unbiased std, as TRL computes them.

    A group of one, or of equal rewards, has advantage 0 everywhere (no signal, no division blow-up).
    """
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    if n == 1 or max(rewards) == min(rewards):
        return [0.0] * n
    std = (sum((r - mean) ** 2 for r in rewards) / (n - 1)) ** 0.5
    return [(r - mean) / (std + eps) for r in rewards]


def curriculum_horizons(n_sessions: int, stages: Sequence[int] = DEFAULT_STAGES) -> list[int]:
    """The horizon schedule: each stage below the conversation's length, then the last stage capped
    at the length. 40 sessions -> [8, 16, 32]; 20 -> [8, 16, 20]; 5 -> [5]."""
    if n_sessions <= 0:
        return []
    ordered = sorted(set(int(s) for s in stages if int(s) > 0))
    if not ordered:
        return [n_sessions]
    horizons = [s for s in ordered if s < n_sessions]
    horizons.append(min(n_sessions, ordered[-1]))
    return sorted(set(horizons))


def local_session_points(horizon: int, points: int) -> list[int]:
    """``points`` session indices spread evenly over ``[0, horizon)``, first and last included."""
    if horizon <= 0 or points <= 0:
        return []
    if points >= horizon:
        return list(range(horizon))
    if points == 1:
        return [horizon - 1]
    return sorted({round(i * (horizon - 1) / (points - 1)) for i in range(points)})


def qa_within(
    qa: Sequence[QAItem],
    session_of_turn: dict[str, str],
    session_ids: Sequence[str],
    *,
    include_adversarial: bool = False,
) -> list[QAItem]:
    """QA pairs answerable within the horizon: every evidence turn is in one of its sessions."""
    allowed = set(session_ids)
    kept = []
    for item in qa:
        if str(item.category) == str(ADVERSARIAL) and not include_adversarial:
            continue
        if not item.evidence or not all(session_of_turn.get(e) in allowed for e in item.evidence):
            continue
        kept.append(item)
    return kept


class RewardBreakdown(BaseModel):
    reward: float
    f1: float
    memory_size: int
    normalizer: int
    penalty: float
    questions: int


AnswerFn = Callable[[str, FactMemory], str]


def score_memory(
    memory: FactMemory, qa: Sequence[QAItem], *, normalizer: int, weight: float, answer: AnswerFn
) -> RewardBreakdown:
    """Mean answer F1 over the QA pairs (0 when there are none) minus the compression penalty."""
    scores = [token_f1(answer(item.question, memory), item.answer, item.category) for item in qa]
    f1 = sum(scores) / len(scores) if scores else 0.0
    penalty = compression_penalty(memory.size, normalizer, weight)
    return RewardBreakdown(
        reward=f1 - penalty, f1=f1, memory_size=memory.size, normalizer=normalizer, penalty=penalty, questions=len(qa)
    )


def answer_every_match(question: str, facts: Sequence[FactRecord]) -> str:
    """An extractive answer that memory content alone cannot game: the answers (``answer_from_best_fact``) of
    *every* fact on the question's subject and attribute (``agents.r2.fact_key``), in memory order, each word once.
    A memory that kept a stale value beside the current one (a stale ADD where the fact changed) answers both, and
    token F1 drops with the precision; a memory without the fact scores 0 as before. A question without a key, or
    with no fact of its key: ``answer_from_best_fact`` over all facts. The benchmark's answer step
    (``bench_logo_learning``), in training and on held-out conversations; no strategy answers with it."""
    key = fact_key(question)
    matching = [f for f in facts if key is not None and fact_key(f.text) == key]
    if not matching:
        return answer_from_best_fact(question, facts)
    words = [w for f in matching for w in answer_from_best_fact(question, [f]).split()]
    return " ".join(dict.fromkeys(words))


def local_reward(
    memory_after: FactMemory,
    qa: Sequence[QAItem],
    session_of_turn: dict[str, str],
    sessions_so_far: Sequence[str],
    *,
    normalizer: int,
    weight: float,
    answer: AnswerFn,
    include_adversarial: bool = False,
) -> RewardBreakdown:
    """THE local LoGo reward (the one definition; the trainer ``logo_train.local_group``, this module's dataset
    builder and ``LoGoRewardHook`` all call it): the outcome of a step is the memory right after it, scored like
    the global reward over the QA pairs whose evidence lies in the sessions so far (``sessions_so_far``, the
    step's session last; ``normalizer``: the facts extracted over them). Memory-R2 rewards a local re-sample by
    that step's outcome without saying more (our text is a review page); scoring the memory the step leaves,
    rather than continuing to the horizon with another policy, keeps every later decision out of its credit."""
    scoped = qa_within(qa, session_of_turn, sessions_so_far, include_adversarial=include_adversarial)
    return score_memory(memory_after, scoped, normalizer=normalizer, weight=weight, answer=answer)


# -- extraction and rollouts ---------------------------------------------------------------------


@dataclass(frozen=True)
class SessionFacts:
    """A session's extracted facts: extraction does not depend on memory, so it runs once."""

    index: int
    session_id: str
    date: str | None
    candidates: tuple[CandidateFact, ...]


def extract_sessions(
    conversation: Conversation, llm: BaseChatModel | None = None, *, method: str = "function_calling"
) -> tuple[list[SessionFacts], Cost, int]:
    """Facts of every session, the extraction cost and how many sessions used the fallback."""
    sessions, cost, fallbacks = [], Cost(), 0
    for index, session in enumerate(conversation.sessions):
        outcome = extract_facts(
            llm,
            session.turns,
            session_date=session.timestamp.date().isoformat() if session.timestamp else session.timestamp_text,
            speakers=conversation.speakers,
            method=method,
            tags=("logo-grpo",),
        )
        cost = cost + outcome.cost
        fallbacks += outcome.fallback is not None
        sessions.append(
            SessionFacts(
                index=index,
                session_id=session.session_id,
                date=session.timestamp_text,
                candidates=tuple(candidates_from(outcome.output)),
            )
        )
    return sessions, cost, fallbacks


@dataclass
class StepRecord:
    session_index: int
    session_id: str
    state_before: FactMemory
    outcome: ManagerOutcome
    report: EditReport | None
    candidates: tuple[CandidateFact, ...]


@dataclass
class Rollout:
    steps: list[StepRecord]
    memory: FactMemory
    cost: Cost = field(default_factory=Cost)
    skipped: int = 0
    reward: RewardBreakdown | None = None


def run_rollout(
    memory: FactMemory,
    sessions: Sequence[SessionFacts],
    *,
    llm: BaseChatModel | None = None,
    rng: random.Random | None = None,
    temperature: float = 0.0,
    sampled_steps: int | None = None,
    method: str = "function_calling",
    on_invalid: Literal["skip", "fallback"] = "skip",
) -> Rollout:
    """Run the manager over ``sessions`` on ``memory`` (changed in place; pass a snapshot to keep the
    original). The first ``sampled_steps`` steps (all when None) sample at ``temperature``; the rest
    are greedy. Each step records a snapshot of the memory it started from."""
    rollout = Rollout(steps=[], memory=memory)
    for n, facts in enumerate(sessions):
        sampling = sampled_steps is None or n < sampled_steps
        before = memory.snapshot()
        outcome = manage_memory(
            llm,
            memory,
            facts.candidates,
            method=method,
            on_invalid=on_invalid,
            rng=rng if sampling else None,
            temperature=temperature if sampling else 0.0,
            tags=("logo-grpo",),
        )
        rollout.cost = rollout.cost + outcome.cost
        report = None
        if outcome.skipped:
            rollout.skipped += 1
        else:
            try:
                report = memory.apply(outcome.edits, facts.candidates)
            except InvalidEditBatch:  # validated by the role already; a guard, never half-applied
                rollout.skipped += 1
        rollout.steps.append(StepRecord(facts.index, facts.session_id, before, outcome, report, facts.candidates))
    return rollout


# -- the dataset ---------------------------------------------------------------------------------


@dataclass
class LoGoConfig:
    """How the dataset is built. Defaults follow the Memory-R2 paper where it has one."""

    group_size: int = 4
    compression_penalty: float = 0.3
    temperature: float = 1.0
    local_points: int = 4
    local_sessions: tuple[int, ...] | None = None  # session indices; None: ``local_points`` spread evenly
    curriculum: bool = False
    curriculum_stages: tuple[int, ...] = DEFAULT_STAGES
    answerer: Literal["auto", "llm", "extractive"] = "auto"
    answer_top_k: int = 3
    include_adversarial: bool = False
    seed: int = 0
    method: str = "function_calling"
    on_invalid: Literal["skip", "fallback"] = "skip"


class BuildStats(BaseModel):
    conversation_id: str
    sessions: int
    horizons: list[int]
    group_size: int
    rollouts_global: int = 0
    rollouts_local: int = 0
    manager_steps: int = 0
    llm_calls: int = 0
    llm_calls_by_role: dict[str, int] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    rows: int = 0
    groups_global: int = 0
    groups_local: int = 0
    flat_groups: int = 0
    skipped_batches: int = 0
    extraction_fallbacks: int = 0
    policy: str = "heuristic"
    answerer: str = "extractive"
    mean_reward: float = 0.0
    min_reward: float = 0.0
    max_reward: float = 0.0

    @property
    def rollouts(self) -> int:
        return self.rollouts_global + self.rollouts_local


class LoGoDataset(BaseModel):
    rows: list[dict[str, Any]]
    stats: BuildStats
    context: dict[str, Any]


def _seed(*parts: object) -> int:
    return int(stable_hash(*(str(p) for p in parts), length=12), 16)


def _session_of_turn(conversation: Conversation) -> dict[str, str]:
    return {t.dia_id: s.session_id for s in conversation.sessions for t in s.turns}


class _Builder:
    def __init__(self, conversation: Conversation, llm: BaseChatModel | None, config: LoGoConfig) -> None:
        self.conv, self.llm, self.config = conversation, llm, config
        self.namespace = "r2-" + stable_hash(conversation.conversation_id, length=8)
        self.costs: dict[str, Cost] = {"extract": Cost(), "manage": Cost(), "answer": Cost()}
        self.answerer = (
            "llm" if config.answerer == "llm" or (config.answerer == "auto" and llm is not None) else "extractive"
        )
        self._reward_cache: dict[tuple[Any, ...], RewardBreakdown] = {}
        self.stats = BuildStats(
            conversation_id=conversation.conversation_id,
            sessions=len(conversation.sessions),
            horizons=[],
            group_size=config.group_size,
            policy="llm" if llm is not None else "heuristic",
            answerer=self.answerer,
        )

    def answer(self, question: str, memory: FactMemory) -> str:
        if self.answerer == "extractive":
            return answer_from_best_fact(question, memory.live())
        outcome = answer_from_facts(
            self.llm, question, memory.live(), k=self.config.answer_top_k, method=self.config.method
        )
        self.costs["answer"] = self.costs["answer"] + outcome.cost
        return outcome.output.answer

    def score(self, memory: FactMemory, qa: Sequence[QAItem], normalizer: int) -> RewardBreakdown:
        # Identical memories get identical rewards: rollouts that converge cost no extra answering calls.
        key = (tuple((r.id, r.text) for r in memory.live()), tuple(q.question_id for q in qa), normalizer)
        if key not in self._reward_cache:
            self._reward_cache[key] = score_memory(
                memory, qa, normalizer=normalizer, weight=self.config.compression_penalty, answer=self.answer
            )
        return self._reward_cache[key]

    def score_local(self, memory: FactMemory, session_index: int, normalizer: int) -> RewardBreakdown:
        key = (tuple((r.id, r.text) for r in memory.live()), "local", session_index, normalizer)
        if key not in self._reward_cache:
            self._reward_cache[key] = local_reward(
                memory,
                self.conv.qa,
                _session_of_turn(self.conv),
                [s.session_id for s in self.conv.sessions[: session_index + 1]],
                normalizer=normalizer,
                weight=self.config.compression_penalty,
                answer=self.answer,
                include_adversarial=self.config.include_adversarial,
            )
        return self._reward_cache[key]

    def rollout(
        self, memory: FactMemory, sessions: Sequence[SessionFacts], rng: random.Random | None, sampled: int | None
    ) -> Rollout:
        result = run_rollout(
            memory,
            sessions,
            llm=self.llm,
            rng=rng,
            temperature=self.config.temperature,
            sampled_steps=sampled,
            method=self.config.method,
            on_invalid=self.config.on_invalid,
        )
        self.costs["manage"] = self.costs["manage"] + result.cost
        self.stats.manager_steps += sum(1 for s in result.steps if s.candidates)
        self.stats.skipped_batches += result.skipped
        return result

    def _group_rows(
        self, results: Sequence[Any], *, group_id: str, level: str, stage: int, horizon: int
    ) -> tuple[list[dict[str, Any]], list[float]]:
        """One GRPO group's rows and rewards: each member's advantage against the group goes on every step it
        sampled (global: the whole rollout) or on its one edited step (local: the rest was greedy)."""
        rewards = [r.reward.reward for r in results if r.reward]
        self.stats.flat_groups += len(set(rewards)) <= 1
        rows = []
        for member, (result, advantage) in enumerate(zip(results, group_advantages(rewards), strict=True)):
            for step in result.steps if level == "global" else result.steps[:1]:
                if step.outcome.skipped or (level == "global" and not step.candidates):
                    continue
                rows.append(
                    self.row(
                        step,
                        advantage=advantage,
                        reward=result.reward,
                        group_id=group_id,
                        level=level,
                        member=member,
                        stage=stage,
                        horizon=horizon,
                    )
                )
        return rows, rewards

    def row(
        self,
        step: StepRecord,
        *,
        advantage: float,
        reward: RewardBreakdown,
        group_id: str,
        level: str,
        member: int,
        stage: int,
        horizon: int,
    ) -> dict[str, Any]:
        return {
            "prompt": step.outcome.messages,
            "completion": [{"role": "assistant", "content": step.outcome.completion}],
            "advantage": advantage,
            "reward": reward.reward,
            "f1": reward.f1,
            "memory_size": reward.memory_size,
            "penalty": reward.penalty,
            "group_id": group_id,
            "level": level,
            "member": member,
            "stage": stage,
            "horizon": horizon,
            "conversation_id": self.conv.conversation_id,
            "session_id": step.session_id,
            "session_index": step.session_index,
            "state": step.state_before.to_json(),
            "candidates": json.dumps([c.model_dump(mode="json") for c in step.candidates], ensure_ascii=False),
        }

    def build(self) -> LoGoDataset:
        started = time.perf_counter()
        cfg = self.config
        if cfg.group_size < 1:
            raise ValueError("group size must be at least 1")
        sessions, extract_cost, extraction_fallbacks = extract_sessions(self.conv, self.llm, method=cfg.method)
        self.costs["extract"] = extract_cost
        self.stats.extraction_fallbacks = extraction_fallbacks
        horizons = curriculum_horizons(len(sessions), cfg.curriculum_stages) if cfg.curriculum else [len(sessions)]
        self.stats.horizons = horizons
        turn_session = _session_of_turn(self.conv)
        rows: list[dict[str, Any]] = []
        rewards_seen: list[float] = []
        for stage, horizon in enumerate(horizons):
            window = sessions[:horizon]
            qa = qa_within(
                self.conv.qa, turn_session, [s.session_id for s in window], include_adversarial=cfg.include_adversarial
            )
            normalizer = sum(len(s.candidates) for s in window)
            # (a) global group: G full rollouts from an empty memory, every step sampled.
            group_id = f"{self.conv.conversation_id}/h{horizon}/global"
            rollouts = []
            for member in range(cfg.group_size):
                rng = random.Random(_seed(cfg.seed, group_id, member))
                result = self.rollout(FactMemory(self.namespace), window, rng, None)
                result.reward = self.score(result.memory, qa, normalizer)
                rollouts.append(result)
            self.stats.rollouts_global += len(rollouts)
            self.stats.groups_global += 1
            group_rows, rewards = self._group_rows(
                rollouts, group_id=group_id, level="global", stage=stage, horizon=horizon
            )
            rows += group_rows
            rewards_seen += rewards
            # (b) local groups: from the first global rollout's snapshot before session s, G sampled
            # edit lists for s, each rewarded by the step's outcome (``local_reward``).
            reference = rollouts[0]
            points = (
                cfg.local_sessions
                if cfg.local_sessions is not None
                else local_session_points(horizon, cfg.local_points)
            )
            for s in [p for p in points if 0 <= p < horizon]:
                if not window[s].candidates:
                    continue
                group_id = f"{self.conv.conversation_id}/h{horizon}/local/s{s}"
                start = reference.steps[s].state_before
                members = []
                for member in range(cfg.group_size):
                    rng = random.Random(_seed(cfg.seed, group_id, member))
                    result = self.rollout(start.snapshot(), window[s : s + 1], rng, 1)
                    result.reward = self.score_local(result.memory, s, sum(len(w.candidates) for w in window[: s + 1]))
                    members.append(result)
                self.stats.rollouts_local += len(members)
                self.stats.groups_local += 1
                group_rows, rewards = self._group_rows(
                    members, group_id=group_id, level="local", stage=stage, horizon=horizon
                )
                rows += group_rows
                rewards_seen += rewards
        total = self.costs["extract"] + self.costs["manage"] + self.costs["answer"]
        self.stats.llm_calls = total.llm_calls
        self.stats.llm_calls_by_role = {role: c.llm_calls for role, c in self.costs.items()}
        self.stats.prompt_tokens, self.stats.completion_tokens = total.prompt_tokens, total.completion_tokens
        self.stats.rows = len(rows)
        if rewards_seen:
            self.stats.mean_reward = sum(rewards_seen) / len(rewards_seen)
            self.stats.min_reward, self.stats.max_reward = min(rewards_seen), max(rewards_seen)
        self.stats.wall_time_s = time.perf_counter() - started
        context = {
            "format": CONTEXT_FORMAT,
            "conversation_id": self.conv.conversation_id,
            "namespace": self.namespace,
            "config": asdict(cfg),
            "horizons": horizons,
            "sessions": [
                {
                    "index": s.index,
                    "session_id": s.session_id,
                    "date": s.date,
                    "candidates": [c.model_dump(mode="json") for c in s.candidates],
                }
                for s in sessions
            ],
            "session_of_turn": turn_session,
            "qa": [q.model_dump(mode="json") for q in self.conv.qa],
        }
        return LoGoDataset(rows=rows, stats=self.stats, context=context)


def build_logo_grpo_dataset(
    conversation: Conversation, *, llm: BaseChatModel | None = None, config: LoGoConfig | None = None
) -> LoGoDataset:
    """Global and local LoGo-GRPO groups for one conversation, as training rows plus build figures.

    Without a chat model the deterministic manager samples among valid alternatives (seeded), so
    the dataset is reproducible and groups still differ.
    """
    return _Builder(conversation, llm, config or LoGoConfig()).build()


def write_dataset(dataset: LoGoDataset, out: str | Path) -> tuple[Path, Path]:
    """Rows to ``out`` (JSONL, one row a line) and the reward hook's context beside it (``.context.json``)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row in dataset.rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    context_path = out.with_name(out.stem + ".context.json")
    context_path.write_text(json.dumps(dataset.context, ensure_ascii=False, indent=1), encoding="utf-8")
    return out, context_path


# -- online reward for a GRPO trainer ------------------------------------------------------------


def _read_context(path: Path) -> dict[str, Any]:
    """A context file's JSON object (``ValueError`` when the file holds something else)."""
    loaded = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise ValueError(f"not a LoGo-GRPO context file: {path} holds no JSON object")
    return loaded


class LoGoRewardHook:
    """A TRL ``GRPOTrainer`` reward function computing the local LoGo reward of generated edits.

    TRL calls it with the generated ``completions`` and, as keyword lists, the dataset's other
    columns; it uses ``state``, ``candidates``, ``session_index`` and ``horizon``. Each completion is
    validated against its row's snapshot (invalid -> ``invalid_reward``), applied, and scored by
    ``local_reward`` (the memory right after the step), as the dataset's local rewards are.
    """

    __name__ = "logo_local_reward"  # TRL logs a reward function under its __name__

    def __init__(
        self,
        context: dict[str, Any] | str | Path,
        *,
        llm: BaseChatModel | None = None,
        invalid_reward: float = INVALID_REWARD,
    ) -> None:
        if not isinstance(context, dict):
            context = _read_context(Path(context))
        if context.get("format") != CONTEXT_FORMAT:
            raise ValueError(f"not a LoGo-GRPO context file (format {context.get('format')!r})")
        self.context = context
        self.llm = llm
        self.invalid_reward = invalid_reward
        config = context.get("config", {})
        self.weight = float(config.get("compression_penalty", 0.3))
        self.include_adversarial = bool(config.get("include_adversarial", False))
        self.sessions = [
            SessionFacts(
                index=s["index"],
                session_id=s["session_id"],
                date=s.get("date"),
                candidates=tuple(CandidateFact.model_validate(c) for c in s["candidates"]),
            )
            for s in context["sessions"]
        ]
        self.qa = [QAItem.model_validate(q) for q in context["qa"]]
        self.session_of_turn = dict(context["session_of_turn"])
        self.answerer = "llm" if llm is not None and config.get("answerer") in ("auto", "llm") else "extractive"

    def _answer(self, question: str, memory: FactMemory) -> str:
        if self.answerer == "extractive":
            return answer_from_best_fact(question, memory.live())
        return answer_from_facts(self.llm, question, memory.live()).output.answer

    def score_completion(
        self, completion: Any, *, state: str, candidates: str, session_index: int, horizon: int
    ) -> float:
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        memory = FactMemory.from_json(state)
        facts = [CandidateFact.model_validate(c) for c in json.loads(candidates)]
        try:
            memory.apply(parse_completion(text), facts)
        except (ValueError, InvalidEditBatch):
            return self.invalid_reward
        window = self.sessions[: min(horizon, session_index + 1)]
        return local_reward(
            memory,
            self.qa,
            self.session_of_turn,
            [s.session_id for s in window],
            normalizer=sum(len(s.candidates) for s in window),
            weight=self.weight,
            answer=self._answer,
            include_adversarial=self.include_adversarial,
        ).reward

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        *,
        state: Sequence[str],
        candidates: Sequence[str],
        session_index: Sequence[int],
        horizon: Sequence[int],
        **_: Any,
    ) -> list[float]:
        return [
            self.score_completion(c, state=st, candidates=cd, session_index=int(si), horizon=int(h))
            for c, st, cd, si, h in zip(completions or [], state, candidates, session_index, horizon, strict=True)
        ]
