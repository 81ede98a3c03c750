"""LoGo-GRPO's credit for an invalid memory operation (an ADD of a fact memory already holds): the local group of that
step re-samples it from the same snapshot, the re-ADD gets the invalid reward there and a negative advantage, and the
GRPO step makes it less likely; the global reward is the paper's trajectory reward (QA F1 minus the compression
penalty of the memory built), not a voided episode, unless asked for.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from logicmap.agents.r2 import manager_messages, messages_as_dicts  # noqa: E402
from logicmap.evals.train.logo_grpo import INVALID_REWARD, group_advantages  # noqa: E402
from logicmap.evals.train.logo_train import (  # noqa: E402
    PRESETS,
    AnswerAgent,
    Decision,
    EpisodeResult,
    Generation,
    Sample,
    TrainConfig,
    evaluate_policy,
    global_reward,
    load_policy,
    local_group,
    logo_loss,
    manager_decision,
    parse_manager_completion,
    step_reward,
    train_logo,
)
from logicmap.evals.train.r2_synthetic import make_update_task  # noqa: E402
from logicmap.memory.files.loaders import Conversation, QAItem, RawTurn, Session  # noqa: E402
from logicmap.memory.records.r2 import CandidateFact, FactMemory  # noqa: E402

TINY = replace(PRESETS["tiny"], stages=(2,), group_size=4, local_points=1, conversations_per_step=1, seed=3)
SMALL_TALK = "Maya said: Hi! Good to see you again."


@pytest.fixture(scope="module")
def policy():
    return load_policy(TINY)


def _conversation() -> Conversation:
    turns = [
        [
            RawTurn(dia_id="D1:1", speaker="Maya", text="I live in Porto."),
            RawTurn(dia_id="D1:2", speaker="Maya", text="Hi!"),
        ],
        [RawTurn(dia_id="D2:1", speaker="Maya", text="Hi!")],
    ]
    sessions = [Session(session_id=f"S{i + 1}", timestamp_text=f"day {i + 1}", turns=t) for i, t in enumerate(turns)]
    qa = [QAItem(question_id="q0", question="Where does Maya live?", answer="Porto", evidence=["D1:1"], category=4)]
    return Conversation(conversation_id="c", speakers=["Maya", "Tom"], sessions=sessions, qa=qa)


def _state() -> tuple[FactMemory, list[CandidateFact]]:
    """Memory holds the city and a small-talk line; the new session repeats the small talk word for word."""
    memory = FactMemory("t")
    first = [
        CandidateFact(text="Maya lives in Porto.", turn_ids=("D1:1",)),
        CandidateFact(text=SMALL_TALK, turn_ids=("D1:2",)),
    ]
    memory.apply(
        parse_manager_completion('{"edits":[{"op":"ADD","fact":0},{"op":"ADD","fact":1}]}', memory, first, {})[0], first
    )
    return memory, [CandidateFact(text=SMALL_TALK, turn_ids=("D2:1",))]


def _forced(policy, memory: FactMemory, candidates: list[CandidateFact], pieces: list[str]) -> Decision:
    """The decision whose completion is ``pieces`` (whole grammar tokens), walked through the policy's grammar with
    the masks and sampling log-probabilities it would have had."""
    grammar = policy.grammar
    prompt, related = manager_messages(memory, candidates)
    messages = messages_as_dicts(prompt)
    state = grammar.start(len(candidates), [r.id for r in memory.live()])
    tokens, allowed = [], []
    for piece in [*pieces, None]:
        token = policy.tokenizer.eos_token_id if piece is None else grammar.id[piece]
        allowed.append(grammar.allowed(state))
        assert token in allowed[-1], f"{piece!r} is not allowed by the grammar here"
        tokens.append(token)
        if piece is not None:
            state = grammar.advance(state, token)
    generation = Generation(grammar.text(tokens), tokens, [0.0] * len(tokens), allowed)
    with torch.no_grad():
        generation.logprobs = policy.token_logprobs(messages, generation, TINY.temperature).tolist()
    edits, problems = parse_manager_completion(generation.text, memory, candidates, related)
    return Decision(
        "manager", messages, generation, not problems, problems, 1, memory.snapshot(), tuple(candidates), edits
    )


def test_a_re_add_is_invalid_gets_a_negative_advantage_and_the_grpo_step_makes_it_less_likely(policy) -> None:
    conversation = _conversation()
    memory, candidates = _state()
    re_add = _forced(policy, memory, candidates, ['{"edits":[', '{"op":"ADD","fact":', "0", "}", "]}"])
    noop = _forced(policy, memory, candidates, ['{"edits":[', '{"op":"NOOP","fact":', "0", "}", "]}"])
    assert not re_add.valid and any("already holds this fact" in p for p in re_add.problems)
    assert noop.valid
    answer = AnswerAgent()
    rewards = [step_reward(d, conversation, TINY, answer)[0] for d in (re_add, noop, re_add, noop)]
    assert rewards[0] == INVALID_REWARD and rewards[1] > INVALID_REWARD
    advantages = group_advantages(rewards)
    assert advantages[0] < 0 < advantages[1]
    fresh = load_policy(TINY)
    samples = [Sample(d, a, "local") for d, a in zip((re_add, noop, re_add, noop), advantages)]
    with torch.no_grad():
        before = {
            k: float(fresh.token_logprobs(d.messages, d.generation).sum()) for k, d in (("add", re_add), ("noop", noop))
        }
    optimizer = torch.optim.SGD(fresh.trainable_parameters(), lr=0.5)
    logo_loss(fresh, samples, TINY, backward=True)
    optimizer.step()
    with torch.no_grad():
        after = {
            k: float(fresh.token_logprobs(d.messages, d.generation).sum()) for k, d in (("add", re_add), ("noop", noop))
        }
    assert after["add"] < before["add"] and after["noop"] > before["noop"]


def test_local_re_samples_start_from_the_steps_own_snapshot_and_facts(policy) -> None:
    conversation = _conversation()
    memory, candidates = _state()
    decision = manager_decision(policy, memory, candidates, 1, TINY, generator=torch.Generator().manual_seed(0))
    record, samples = local_group(policy, conversation, decision, TINY, AnswerAgent(), torch.Generator().manual_seed(1))
    assert len(samples) == TINY.group_size and record.level == "local"
    for s in samples:
        assert s.decision.candidates == decision.candidates and s.decision.messages == decision.messages
        assert s.decision.snapshot.to_json() == memory.to_json()
    for s, r in zip(samples, record.rewards):
        assert (r == INVALID_REWARD) == (not s.decision.valid)


def test_the_global_reward_is_the_memorys_unless_the_episode_is_voided() -> None:
    episode = EpisodeResult([], FactMemory("t"), INVALID_REWARD, 0.8, 3, False, memory_reward=0.5)
    assert global_reward(episode, TrainConfig()) == 0.5  # default: F1 - penalty of the memory built
    assert global_reward(episode, TrainConfig(invalid_episode="void")) == INVALID_REWARD
    valid = replace(episode, valid=True, reward=0.5)
    assert global_reward(valid, TrainConfig(invalid_episode="void")) == global_reward(valid, TrainConfig()) == 0.5
    with pytest.raises(ValueError, match="invalid_episode"):
        TrainConfig(invalid_episode="drop")
    with pytest.raises(ValueError, match="local_points"):
        TrainConfig(local_points=-1)


def test_every_manager_step_gets_a_local_group_and_the_invalid_step_rate_is_reported() -> None:
    task = [x.conversation for x in make_update_task(1, 2, seed=5)]
    fresh = load_policy(TINY)
    report = train_logo(fresh, task, replace(TINY, local_points=None), max_steps=1)
    assert report.groups_global == 1 and report.groups_local == 2 * TINY.group_size  # both steps of every rollout
    figures = evaluate_policy(fresh, task, TINY)
    assert 0.0 <= figures["invalid_step_rate"] <= 1.0
    assert figures["invalid_step_rate"] == pytest.approx(1.0 - figures["validity"])  # manager-only: every reply a step
    assert figures["valid_episodes"] in (0.0, 1.0)


def test_the_kl_term_is_zero_at_the_reference_and_pulls_back_once_the_policy_moves(policy) -> None:
    memory, candidates = _state()
    fresh = load_policy(TINY)
    cfg = replace(TINY, kl_beta=0.5)
    fresh.freeze_reference()
    d = _forced(fresh, memory, candidates, ['{"edits":[', '{"op":"NOOP","fact":', "0", "}", "]}"])
    flat = [Sample(d, 0.0, "local")]  # no advantage: only the KL term remains
    at_reference, _ = logo_loss(fresh, flat, cfg)
    assert float(at_reference) == pytest.approx(0.0, abs=1e-6)
    assert float(logo_loss(fresh, flat, TINY)[0]) == 0.0  # kl_beta 0: nothing
    optimizer = torch.optim.SGD(fresh.trainable_parameters(), lr=2.0)
    logo_loss(fresh, [Sample(d, 1.0, "local")], TINY, backward=True)
    optimizer.step()
    moved, _ = logo_loss(fresh, flat, cfg)
    assert float(moved) > 0.0
    back = torch.optim.SGD(fresh.trainable_parameters(), lr=0.05)
    back.zero_grad()
    logo_loss(fresh, flat, cfg, backward=True)
    back.step()
    assert float(logo_loss(fresh, flat, cfg)[0]) < float(moved)
