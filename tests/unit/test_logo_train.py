"""LoGo-GRPO training loop: action sets, both levels of groups, the loss, a few real optimisation steps, export.

A tiny randomly initialised Llama (2 layers, in-memory tokenizer) keeps this fast; the learning proof on the
synthetic task is the benchmark ``evals/bench/bench_logo_learning.py``, not a test.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from logicmap.agents.r2 import parse_completion  # noqa: E402
from logicmap.evals.train.logo_grpo import group_advantages  # noqa: E402
from logicmap.evals.train.logo_train import (  # noqa: E402
    PRESETS,
    Sample,
    _reward,
    export_policy,
    extraction_actions,
    global_group,
    load_policy,
    local_group,
    logo_loss,
    manager_actions,
    run_episode,
    train_logo,
)
from logicmap.evals.train.r2_synthetic import make_update_task  # noqa: E402
from logicmap.memory.r2 import CandidateFact, FactMemory  # noqa: E402

TINY = replace(PRESETS["tiny"], stages=(2,), group_size=4, local_points=1, conversations_per_step=1, seed=3)


@pytest.fixture(scope="module")
def lora_policy():
    return load_policy(replace(TINY, lora_r=4, lora_alpha=8, learning_rate=5e-3))


@pytest.fixture(scope="module")
def task():
    return make_update_task(4, 2, seed=5)


def test_manager_actions_are_valid_and_cover_every_op() -> None:
    memory = FactMemory("t")
    memory.apply(parse_completion('{"edits":[{"op":"ADD","fact":0}]}'), [CandidateFact(text="Maya lives in Porto")])
    changed = [CandidateFact(text="Maya lives in Lisbon now", turn_ids=("D2:1",))]
    actions = manager_actions(memory, changed)
    ops = {edit.op for a in actions for edit in parse_completion(a)}
    assert ops == {"ADD", "NOOP", "UPDATE", "DELETE"}
    for action in actions:
        assert memory.validate(parse_completion(action), changed) == []
    two = [*changed, CandidateFact(text="Maya works as a nurse")]
    assert all(memory.validate(parse_completion(a), two) == [] for a in manager_actions(memory, two, limit=5))
    assert len(manager_actions(memory, two, limit=5)) == 5


def test_extraction_actions_hold_the_full_extraction_and_leave_one_out(task) -> None:
    session = task[0].conversation.sessions[0]
    actions = extraction_actions(session.turns, task[0].conversation.speakers)
    assert len(actions) == len(session.turns) + 1
    assert actions[0].count('"turn_ids"') == len(session.turns)


def test_global_group_gives_each_rollout_its_group_normalised_advantage(lora_policy, task) -> None:
    conversation = task[0].conversation
    episodes, record, samples = global_group(lora_policy, conversation, 2, TINY, random.Random(0))
    assert len(episodes) == TINY.group_size and record.level == "global"
    assert record.rewards == [e.reward for e in episodes]
    assert record.advantages == pytest.approx(group_advantages(record.rewards))
    for episode, advantage in zip(episodes, record.advantages):
        mine = [s for s in samples if any(s.decision is d for d in episode.decisions)]
        assert mine and all(s.advantage == advantage and s.level == "global" for s in mine)
    # co-learning: the extractor's decisions are trained on the same episode advantage
    assert {s.decision.role for s in samples} == {"extractor", "manager"}


def test_local_group_resamples_one_snapshot_and_scores_the_step(lora_policy, task) -> None:
    conversation = task[1].conversation
    episode = run_episode(lora_policy, conversation, 2, TINY, rng=random.Random(1))
    decision = next(d for d in episode.decisions if d.role == "manager" and len(d.actions) > 1)
    record, samples = local_group(lora_policy, conversation, decision, TINY, random.Random(2))
    assert record.level == "local" and len(samples) == TINY.group_size
    assert all(s.decision.snapshot is decision.snapshot and s.decision.messages == decision.messages for s in samples)
    expected = []
    for s in samples:  # each member's reward: its own edits on a copy of the shared snapshot
        memory = decision.snapshot.snapshot()
        memory.apply(parse_completion(s.decision.completion), decision.candidates)
        expected.append(_reward(memory, conversation, decision.session_index + 1, TINY.compression_penalty).reward)
    assert record.rewards == pytest.approx(expected)
    assert [s.advantage for s in samples] == pytest.approx(group_advantages(expected))
    assert decision.snapshot.size == len(decision.snapshot.live())  # the snapshot itself was never edited


def test_a_positive_advantage_raises_the_chosen_action(lora_policy, task) -> None:
    policy = load_policy(replace(TINY, lora_r=0, learning_rate=1e-2))
    episode = run_episode(policy, task[2].conversation, 2, TINY, rng=random.Random(4))
    decision = next(d for d in episode.decisions if len(d.actions) > 2)
    with torch.no_grad():
        before = float(policy.action_logprobs(decision.messages, decision.actions)[decision.chosen])
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1e-2)
    loss, parts = logo_loss(policy, [Sample(decision, 1.0, "local")], replace(TINY, local_weight=1.0))
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        after = float(policy.action_logprobs(decision.messages, decision.actions)[decision.chosen])
    assert math.isfinite(float(loss.detach())) and parts["local"] == pytest.approx(-1.0)
    assert after > before


def test_a_few_optimisation_steps_change_only_the_adapters(lora_policy, task) -> None:
    named = dict(lora_policy.model.named_parameters())
    lora = {n: p.detach().clone() for n, p in named.items() if "lora_" in n}
    frozen = {n: p.detach().clone() for n, p in named.items() if "lora_" not in n}
    assert lora and all(not named[n].requires_grad for n in frozen)
    report = train_logo(lora_policy, [x.conversation for x in task], replace(TINY, steps_per_stage=3))
    assert report.steps == 3 and report.groups_global == 3 and report.groups_local >= 1
    assert all(math.isfinite(v) for v in report.losses)
    assert any(not torch.equal(named[n], v) for n, v in lora.items())
    assert all(torch.equal(named[n], v) for n, v in frozen.items())
    assert report.peak_rss_mb > 0


def test_export_writes_the_adapter_and_a_merged_model_that_scores_the_same(lora_policy, tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    written = export_policy(lora_policy, tmp_path / "out")
    assert (written["adapter"] / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(written["merged"])
    messages = [{"role": "system", "content": "You are the memory manager"}, {"role": "user", "content": "x"}]
    actions = ['{"edits":[{"op":"ADD","fact":0}]}', '{"edits":[{"op":"NOOP","fact":0}]}']
    with torch.no_grad():
        adapted = lora_policy.sequence_logprobs(messages, actions)
        plain = lora_policy.sequence_logprobs(messages, actions, model=merged)
    assert torch.allclose(adapted, plain, atol=1e-4)


def test_cli_train_r2_trains_evaluates_and_exports(tmp_path, capsys) -> None:
    from logicmap.__main__ import main

    out = tmp_path / "r2"
    args = ["train-r2", "--config", "tiny", "--stages", "2", "--steps-per-stage", "1", "--held-out", "2"]
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "untrained policy, held-out" in printed and "trained policy, held-out" in printed
    assert (out / "merged" / "config.json").exists() and (out / "train_report.json").exists()
    assert main(["train-r2", "--model", str(tmp_path / "missing.gguf"), "--no-export"]) == 2


def test_per_prompt_backward_gives_the_gradient_of_the_whole_loss(task) -> None:
    policy = load_policy(replace(TINY, lora_r=0))
    episodes, _record, samples = global_group(policy, task[3].conversation, 2, TINY, random.Random(6))
    samples = [replace(s, advantage=a) for s, a in zip(samples, [1.0, -0.5, 0.25, -1.0] * len(samples))]
    params = policy.trainable_parameters()
    whole, _ = logo_loss(policy, samples, TINY)
    whole.backward()
    expected = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    split, _ = logo_loss(policy, samples, TINY, backward=True)
    assert float(split) == pytest.approx(float(whole.detach()), abs=1e-6)
    assert all(torch.allclose(p.grad, g, atol=1e-6) for p, g in zip(params, expected))
