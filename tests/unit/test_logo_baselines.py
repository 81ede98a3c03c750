"""LoGo-GRPO's proof against baselines (issue 42, item 5): the learning benchmark's answer step makes a stale ADD
wrong (the untrained ADD-every-fact policy cannot reach the top by memory content alone), more than one inner
epoch lets the PPO clip act, and local groups branch from every global rollout.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from logicmap.evals.bench.bench_logo_learning import answer_agent, score_split  # noqa: E402
from logicmap.evals.metrics import token_f1  # noqa: E402
from logicmap.evals.train.logo_train import (  # noqa: E402
    PRESETS,
    Decision,
    Generation,
    Sample,
    add_every_fact,
    load_policy,
    logo_loss,
    manager_decision,
    run_episode,
    train_logo,
)
from logicmap.evals.train.r2_synthetic import make_update_task  # noqa: E402
from logicmap.memory.records.r2 import CandidateFact, FactEdit, FactMemory  # noqa: E402

# The benchmark's held-out split: other names and values than training, seed + 1.
HELD_OUT = make_update_task(16, max(PRESETS["tiny"].stages), seed=1, held_out=True)
# One optimisation step with the tiny preset's inner epochs; 3 rollouts, a local group at one step of each.
TINY = replace(PRESETS["tiny"], stages=(2,), group_size=3, local_points=1, conversations_per_step=1, seed=3)


def _changed_questions() -> list[tuple[object, object]]:
    return [(x, q) for x in HELD_OUT for q in x.conversation.qa if q.question_id in x.changed]


def test_the_held_out_answer_step_penalises_a_stale_add() -> None:
    answer = answer_agent()
    stale, updated = FactMemory("stale"), FactMemory("updated")
    old, new = CandidateFact(text="Greta lives in Prague."), CandidateFact(text="Greta lives in Athens now.")
    for memory in (stale, updated):
        memory.apply([FactEdit(op="ADD", fact=0)], [old])
    stale.apply([FactEdit(op="ADD", fact=0)], [new])
    updated.apply([FactEdit(op="UPDATE", fact=0, id=updated.live()[0].id)], [new])
    question = "Where does Greta live?"
    assert token_f1(answer(question, stale), "Athens") < token_f1(answer(question, updated), "Athens")

    # Held out: every question whose answer changed is answered worse than perfectly by ADD every fact (the stale
    # value it kept is in the answer), and the lexical manager, which UPDATEs, does better on those questions.
    changed = _changed_questions()
    assert len(changed) >= 10
    cfg = PRESETS["tiny"]
    for labelled, q in changed:
        conversation = labelled.conversation  # type: ignore[attr-defined]
        episode = run_episode(None, conversation, len(conversation.sessions), cfg, answer, manager=add_every_fact)
        assert token_f1(answer(q.question, episode.memory), q.answer, q.category) < 1.0, q  # type: ignore[attr-defined]
    figures = score_split(HELD_OUT, cfg, answer)
    assert figures["add-all"]["f1_changed"] < figures["lexical"]["f1_changed"]
    assert figures["add-all"]["memory_reward"] < figures["lexical"]["memory_reward"]

    # The earlier answer step (the best-matching fact only) let ADD every fact answer some changed questions right.
    best = answer_agent("best-fact")
    perfect = 0
    for labelled, q in changed:
        conversation = labelled.conversation  # type: ignore[attr-defined]
        episode = run_episode(None, conversation, len(conversation.sessions), cfg, best, manager=add_every_fact)
        perfect += token_f1(best(q.question, episode.memory), q.answer, q.category) == 1.0  # type: ignore[attr-defined]
    assert perfect > 0


@pytest.fixture(scope="module")
def trained():
    task = [x.conversation for x in make_update_task(2, 2, seed=5)]
    policy = load_policy(TINY)
    report = train_logo(policy, task, TINY, answer=answer_agent(), max_steps=1)
    return policy, report


def test_inner_epochs_above_one_make_the_clip_act(trained) -> None:
    assert PRESETS["tiny"].inner_epochs > 1
    _, report = trained
    assert report.steps == 1 and report.clipped[0] > 0  # a later epoch's ratio left [1 - eps, 1 + eps] and was clipped
    one = replace(TINY, inner_epochs=1)
    single = train_logo(load_policy(one), [x.conversation for x in make_update_task(2, 2, seed=5)], one, max_steps=1)
    assert single.clipped == [0.0]  # one epoch: rho = 1, nothing to clip

    # The clip itself: a token whose ratio is outside [1 - eps, 1 + eps] on the side its advantage pushes gives no
    # gradient; inside, it does.
    policy = load_policy(TINY)
    memory, candidates = FactMemory("t"), [CandidateFact(text="Maya lives in Porto.")]
    decision = manager_decision(policy, memory, candidates, 0, TINY, generator=torch.Generator().manual_seed(0))
    for shift, clipped in ((0.5, True), (0.05, False)):  # rho = e^shift
        generation = decision.generation
        moved = Generation(
            generation.text, generation.tokens, [lp - shift for lp in generation.logprobs], generation.allowed
        )
        sample = Sample(
            Decision("manager", decision.messages, moved, True, [], 0, memory, tuple(candidates)), 1.0, "local"
        )
        policy.model.zero_grad()
        _, parts = logo_loss(policy, [sample], TINY, backward=True)
        grad = sum(float(p.grad.abs().sum()) for p in policy.trainable_parameters() if p.grad is not None)
        assert parts["outside"] == (parts["tokens"] if clipped else 0.0)
        assert parts["clipped"] == (parts["tokens"] if clipped else 0.0)
        assert (grad == 0.0) is clipped


def test_local_groups_come_from_every_rollout(trained) -> None:
    _, report = trained
    local = [g for g in report.last_groups if g.level == "local"]
    assert report.groups_global == 1 and report.groups_local == TINY.group_size  # one step of each rollout
    assert sorted(g.rollout for g in local) == list(range(TINY.group_size))
