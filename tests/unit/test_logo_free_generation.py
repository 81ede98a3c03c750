"""Memory-R2 / LoGo-GRPO trains the model's own memory operations: free generation, GRPO over generated tokens.

A tiny randomly initialised Llama (2 layers, in-memory tokenizer) keeps this fast; the learning proof on the
synthetic task is the benchmark ``evals/bench/bench_logo_learning.py``, not a test.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from logicmap.agents.testing import ScriptedChatModel  # noqa: E402
from logicmap.evals.train import logo_grpo, logo_train  # noqa: E402
from logicmap.evals.train.logo_grpo import INVALID_REWARD, LoGoConfig, build_logo_grpo_dataset  # noqa: E402
from logicmap.evals.train.logo_train import (  # noqa: E402
    PRESETS,
    AnswerAgent,
    Sample,
    _no_llm_candidates,
    export_policy,
    global_group,
    load_policy,
    local_group,
    logo_loss,
    manager_decision,
    parse_manager_completion,
    step_reward,
    train_logo,
)
from logicmap.evals.train.r2_synthetic import make_update_task  # noqa: E402
from logicmap.memory.records.r2 import CandidateFact, FactMemory  # noqa: E402

TINY = replace(PRESETS["tiny"], stages=(2,), group_size=4, local_points=1, conversations_per_step=1, seed=3)


@pytest.fixture(scope="module")
def policy():
    return load_policy(TINY)


@pytest.fixture(scope="module")
def task():
    return make_update_task(3, 2, seed=5)


def _step(task, session=0):
    conversation = task[0].conversation
    return conversation, FactMemory("t"), _no_llm_candidates(conversation, session)


def test_the_chooser_is_gone() -> None:
    for name in ("manager_actions", "extraction_actions", "action_logprobs", "_choose"):
        assert not hasattr(logo_train, name)
    assert not hasattr(logo_train.Policy, "action_logprobs")


def test_completions_are_sampled_from_the_policy_token_by_token(policy, task) -> None:
    conversation, memory, candidates = _step(task)
    generator = torch.Generator().manual_seed(1)
    decisions = [manager_decision(policy, memory, candidates, 0, TINY, generator=generator) for _ in range(8)]
    texts = {d.completion for d in decisions}
    assert len(texts) > 1  # sampled, so re-samples of one step differ
    for d in decisions:
        # the recorded sampling log-probs are the policy's own log-probs of the generated tokens
        with torch.no_grad():
            again = policy.token_logprobs(d.messages, d.generation, TINY.temperature)
        assert torch.allclose(again, torch.tensor(d.generation.logprobs), atol=1e-4)
        assert d.generation.tokens[-1] == policy.tokenizer.eos_token_id
    # greedy decoding is deterministic
    a = manager_decision(policy, memory, candidates, 0, TINY, greedy=True)
    b = manager_decision(policy, memory, candidates, 0, TINY, greedy=True)
    assert a.completion == b.completion


def test_unconstrained_free_text_is_decoded_from_the_whole_vocabulary(policy, task) -> None:
    conversation, memory, candidates = _step(task)
    free = replace(TINY, constrained_manager=False, max_new_tokens=24)
    d = manager_decision(policy, memory, candidates, 0, free, generator=torch.Generator().manual_seed(0))
    assert d.generation.allowed is None and len(d.generation.tokens) > 1
    assert d.completion == policy.tokenizer.decode(
        [t for t in d.generation.tokens if t != policy.tokenizer.eos_token_id], skip_special_tokens=True
    )


def test_invalid_completions_get_the_invalid_reward_and_stay_in_their_group(policy, task) -> None:
    conversation, memory, candidates = _step(task)
    # a random model's unconstrained text is (almost surely) not a valid edit batch
    free = replace(TINY, constrained_manager=False, max_new_tokens=16)
    d = manager_decision(policy, memory, candidates, 0, free, generator=torch.Generator().manual_seed(0))
    assert not d.valid and d.problems
    assert step_reward(d, conversation, free, AnswerAgent())[0] == INVALID_REWARD
    record, samples = local_group(policy, conversation, d, free, AnswerAgent(), torch.Generator().manual_seed(4))
    assert len(samples) == free.group_size and record.rewards == [INVALID_REWARD] * free.group_size
    assert record.advantages == [0.0] * free.group_size  # all invalid: no signal, but nothing filtered out
    # the production checks: a batch that misses a new fact is invalid
    edits, problems = parse_manager_completion('{"edits":[{"op":"ADD","fact":0}]}', memory, candidates, {})
    assert edits == [] and any("no edit" in p for p in problems)


def test_mixed_groups_score_valid_and_invalid_members(policy, task) -> None:
    conversation, memory, candidates = _step(task)
    d = manager_decision(policy, memory, candidates, 0, TINY, generator=torch.Generator().manual_seed(2))
    bad = replace(d, valid=False, problems=["x"], edits=[])
    assert step_reward(bad, conversation, TINY, AnswerAgent())[0] == INVALID_REWARD
    assert d.valid  # the grammar fixes the syntax; this batch passed the production validation
    assert step_reward(d, conversation, TINY, AnswerAgent())[0] > INVALID_REWARD


def test_one_step_moves_the_parameters_through_generated_token_logprobs(task) -> None:
    fresh = load_policy(TINY)
    conversation = task[1].conversation
    answer = AnswerAgent()
    generator = torch.Generator().manual_seed(0)
    episodes, record, samples = global_group(fresh, conversation, 2, TINY, answer, generator)
    assert len(record.rewards) == TINY.group_size and all(s.decision.generation.tokens for s in samples)
    # advantages of zero give no gradient: the gradient comes only from the advantage-weighted token log-probs
    params = fresh.trainable_parameters()
    zero, _ = logo_loss(fresh, [replace(s, advantage=0.0) for s in samples], TINY)
    assert not zero.requires_grad
    signed = [Sample(s.decision, a, "global") for s, a in zip(samples, [1.0, -1.0] * len(samples))]
    before = [p.detach().clone() for p in params]
    loss, _ = logo_loss(fresh, signed, TINY, backward=True)
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in params)
    torch.optim.SGD(params, lr=0.1).step()
    assert any(not torch.equal(p.detach(), b) for p, b in zip(params, before))
    # a positive advantage makes its completion more likely under the new weights
    first = signed[0].decision
    with torch.no_grad():
        new = fresh.token_logprobs(first.messages, first.generation, TINY.temperature).sum()
    assert float(new) > sum(first.generation.logprobs)


def test_one_local_reward_definition(policy, task) -> None:
    # the trainer's local reward, the dataset builder's and the TRL reward hook's are logo_grpo.local_reward
    assert not hasattr(logo_train, "_reward")
    conversation = task[0].conversation
    memory, candidates = FactMemory("t"), _no_llm_candidates(conversation, 0)
    d = manager_decision(policy, memory, candidates, 0, TINY, generator=torch.Generator().manual_seed(2))
    assert d.valid
    mine = step_reward(d, conversation, TINY, AnswerAgent())[0]
    data = build_logo_grpo_dataset(conversation, config=LoGoConfig(group_size=2, local_points=1))
    hook = logo_grpo.LoGoRewardHook(data.context)
    theirs = hook.score_completion(
        d.completion,
        state=memory.to_json(),
        candidates=json.dumps([c.model_dump(mode="json") for c in candidates]),
        session_index=0,
        horizon=len(conversation.sessions),
    )
    assert mine == pytest.approx(theirs)
    # a later session's local reward sees only the QA answerable so far (not the horizon's)
    assert "sessions_so_far" in logo_grpo.local_reward.__code__.co_varnames


def test_the_answer_agent_is_the_chat_model_when_there_is_one() -> None:
    memory = FactMemory("t")
    memory.apply(
        logo_train.parse_completion('{"edits":[{"op":"ADD","fact":0}]}'), [CandidateFact(text="Maya lives in Porto")]
    )
    model = ScriptedChatModel(default={"answer": "Porto, in Portugal"})
    agent = AnswerAgent(model)
    assert agent.label == "chat model" and agent("Where does Maya live?", memory) == "Porto, in Portugal"
    assert model.calls
    assert "fallback" in AnswerAgent().label


def test_train_export_and_cli(tmp_path, capsys, task) -> None:
    trained = load_policy(TINY)
    report = train_logo(trained, [x.conversation for x in task], TINY, max_steps=1)
    assert (
        report.steps == 1 and report.groups_local == TINY.group_size and "fallback" in report.answerer
    )  # one per rollout
    from transformers import AutoModelForCausalLM

    written = export_policy(trained, tmp_path / "out")
    merged = AutoModelForCausalLM.from_pretrained(written["merged"])
    conversation, memory, candidates = _step(task)
    d = manager_decision(trained, memory, candidates, 0, TINY, greedy=True)
    with torch.no_grad():
        assert torch.allclose(
            trained.token_logprobs(d.messages, d.generation),
            trained.token_logprobs(d.messages, d.generation, model=merged),
            atol=1e-4,
        )
    from logicmap.__main__ import main

    out = tmp_path / "r2"
    args = ["train-r2", "--config", "tiny", "--stages", "2", "--steps-per-stage", "1", "--held-out", "2"]
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "answer agent (QA reward): extractive answerer (fallback" in printed
    assert "untrained policy, held-out (greedy free generation)" in printed and "validity" in printed
    assert "baselines (never trained: add-all, lexical), held-out" in printed
    assert (out / "merged" / "config.json").exists()
    assert "fallback" in json.loads((out / "train_report.json").read_text())["answerer"]
    assert set(json.loads((out / "train_report.json").read_text())["baselines"]) == {"add-all", "lexical"}
    assert main(["train-r2", "--model", str(tmp_path / "missing.gguf"), "--no-export"]) == 2


def test_the_co_learned_extractor_generates_too_and_an_invalid_extraction_invalidates_the_episode(policy, task) -> None:
    cfg = replace(TINY, co_learn_extractor=True, max_new_tokens=12)
    episode = logo_train.run_episode(
        policy, task[0].conversation, 2, cfg, AnswerAgent(), generator=torch.Generator().manual_seed(0)
    )
    roles = [d.role for d in episode.decisions]
    assert roles == ["extractor", "manager", "extractor", "manager"]
    extractions = [d for d in episode.decisions if d.role == "extractor"]
    assert all(d.generation.tokens and d.generation.allowed is None for d in extractions)  # free text
    assert not all(d.valid for d in extractions)  # a random model's text is no FactExtraction
    assert episode.reward == INVALID_REWARD and not episode.valid
