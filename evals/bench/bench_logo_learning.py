"""Benchmark: does LoGo-GRPO on the policy's own generated completions make the Memory-R2 manager better?

Trains on synthetic update conversations (``evals.train.r2_synthetic``: repeats -> NOOP, changed values ->
UPDATE, retractions -> DELETE, small talk -> dropped) and prints, for the untrained and the trained policy in
greedy free generation on held-out conversations (parsed and validated as the production manager does): the
strict episode reward (-1 for an episode with an invalid reply), the paper's episode reward (``memory_reward``: F1
minus the compression penalty of the memory built), answer F1, the invalid-step rate, validity, the mean local step
reward and the share of turns handled as the optimal policy would; then the optimisation steps, wall time and peak
memory. Held-out conversations use other names and values than the training ones; ``--dev`` also scores
development conversations (the training names and values, a seed the training pool never draws) to choose settings
by. The answer agent of the reward is the extractive answerer (a fallback: no chat model runs here), as printed.
A benchmark, not a test: it prints numbers.

    python -m logicmap.evals.bench.bench_logo_learning                       # tiny model, about 10-15 min on 2 cores
    python -m logicmap.evals.bench.bench_logo_learning --dev --local-points all --kl-beta 0.05   # docs/methods.md's run
    python -m logicmap.evals.bench.bench_logo_learning --config cpu-smoke    # SmolLM2-135M + LoRA (slow on CPU)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from typing import Any

from logicmap.evals.train.logo_train import (
    PRESETS,
    AnswerAgent,
    evaluate_policy,
    load_policy,
    peak_rss_mb,
    train_logo,
)
from logicmap.evals.train.r2_synthetic import make_update_task

__all__ = ["DEV_SEED", "invalid_problems", "main"]

DEV_SEED = 1000  # development conversations: make_update_task(seed=DEV_SEED + seed, held_out=False)


def invalid_problems(policy: Any, conversations: Any, cfg: Any, answer: Any) -> dict[str, int]:
    """How often each validation problem (its text without the numbers) stopped a greedy reply."""
    import re
    from collections import Counter

    import torch

    from logicmap.evals.train.logo_train import run_episode

    seen: Counter[str] = Counter()
    with torch.no_grad():
        for conversation in conversations:
            episode = run_episode(policy, conversation, len(conversation.sessions), cfg, answer, greedy=True)
            for decision in episode.decisions:
                seen.update({re.sub(r"\b[F]?\d+\b", "N", p)[:90] for p in decision.problems})
    return dict(seen.most_common(5))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m logicmap.evals.bench.bench_logo_learning", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--config", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--steps-per-stage", type=int, help="override the preset")
    parser.add_argument("--stages", help="curriculum horizons, comma-separated (default: the preset's)")
    parser.add_argument("--held-out", type=int, default=16, help="held-out conversations")
    parser.add_argument("--train-pool", type=int, default=24, help="training conversations per stage")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-seed", type=int, help="seed of the held-out set (default seed + 1; tune on another one, report on this)"
    )
    parser.add_argument("--learning-rate", type=float, help="override the preset")
    parser.add_argument("--inner-epochs", type=int, help="override the preset")
    parser.add_argument("--conversations-per-step", type=int, help="override the preset")
    parser.add_argument(
        "--local-points", help="override the preset: local groups per rollout, or 'all' (every manager step)"
    )
    parser.add_argument("--kl-beta", type=float, help="override the preset: GRPO's KL penalty to the initial policy")
    parser.add_argument(
        "--invalid-episode", choices=("skip", "void"), help="override the preset: global reward of an episode with an "
        "invalid reply (skip: F1 - penalty of the memory built; void: -1)",
    )
    parser.add_argument(
        "--dev",
        action="store_true",
        help="also evaluate on development conversations (the training names and values, conversations the training "
        "seed never draws): choose hyper-parameters by these figures, report the held-out ones",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    cfg = replace(PRESETS[args.config], seed=args.seed)
    if args.steps_per_stage is not None:
        cfg = replace(cfg, steps_per_stage=args.steps_per_stage)
    for name in ("learning_rate", "inner_epochs", "conversations_per_step", "invalid_episode", "kl_beta"):
        if getattr(args, name) is not None:
            cfg = replace(cfg, **{name: getattr(args, name)})
    if args.local_points is not None:
        cfg = replace(cfg, local_points=None if args.local_points == "all" else int(args.local_points))
    if args.stages:
        cfg = replace(cfg, stages=tuple(int(s) for s in args.stages.split(",")))
    horizon = max(cfg.stages)
    eval_seed = args.seed + 1 if args.eval_seed is None else args.eval_seed
    held = make_update_task(args.held_out, horizon, seed=eval_seed, held_out=True)
    conversations = [x.conversation for x in held]
    optimal = {x.conversation.conversation_id: x.optimal for x in held}
    # development: the training pool's names and values, conversations the training seed never draws
    dev = make_update_task(args.held_out, horizon, seed=DEV_SEED + args.seed, held_out=False) if args.dev else []
    dev_optimal = {x.conversation.conversation_id: x.optimal for x in dev}
    print(
        f"config {args.config}: model {cfg.model}, G={cfg.group_size}, stages {cfg.stages}, "
        f"{cfg.steps_per_stage} steps/stage; held-out {len(held)} conversations of {horizon} sessions"
        + (f", development {len(dev)}" if dev else ""),
        flush=True,
    )
    started = time.perf_counter()
    policy = load_policy(cfg)
    print(f"loaded in {time.perf_counter() - started:.0f}s", flush=True)
    answer = AnswerAgent()
    print(f"answer agent (QA reward): {answer.label}", flush=True)
    dev_before = evaluate_policy(policy, [x.conversation for x in dev], cfg, dev_optimal, answer) if dev else {}
    if dev:
        print(f"untrained (development): {json.dumps(dev_before)}", flush=True)
    before = evaluate_policy(policy, conversations, cfg, optimal, answer)
    print(f"untrained: {json.dumps(before)}", flush=True)
    report = train_logo(
        policy,
        lambda h: [x.conversation for x in make_update_task(args.train_pool, h, seed=args.seed)],
        cfg,
        answer=answer,
        progress=lambda line: print("  " + line, flush=True),
    )
    dev_after = evaluate_policy(policy, [x.conversation for x in dev], cfg, dev_optimal, answer) if dev else {}
    if dev:
        print(f"trained (development): {json.dumps(dev_after)}", flush=True)
    after = evaluate_policy(policy, conversations, cfg, optimal, answer)
    print(f"trained: {json.dumps(after)}")
    problems = invalid_problems(policy, conversations, cfg, answer)
    print(f"trained policy's validation problems (held-out, greedy): {json.dumps(problems)}")
    figures = {
        "config": args.config,
        "dev_untrained": dev_before,
        "dev_trained": dev_after,
        "model": cfg.model,
        "untrained": before,
        "trained": after,
        "answerer": answer.label,
        "trained_invalid_problems": problems,
        "generation": "greedy free generation" + (" under EditGrammar" if cfg.constrained_manager else ""),
        "steps": report.steps,
        "stages": report.stages,
        "groups_global": report.groups_global,
        "groups_local": report.groups_local,
        "flat_groups": report.flat_groups,
        "train_wall_time_s": round(report.wall_time_s, 1),
        "total_wall_time_s": round(time.perf_counter() - started, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "train_config": asdict(cfg),
    }
    print(
        f"held-out reward {before['reward']:.3f} -> {after['reward']:.3f}; memory reward "
        f"{before['memory_reward']:.3f} -> {after['memory_reward']:.3f}; step reward {before['step_reward']:.3f} -> "
        f"{after['step_reward']:.3f}; F1 {before['f1']:.3f} -> {after['f1']:.3f}; invalid-step rate "
        f"{before['invalid_step_rate']:.3f} -> {after['invalid_step_rate']:.3f}; valid episodes "
        f"{before['valid_episodes']:.2f} -> {after['valid_episodes']:.2f}; "
        f"validity {before['validity']:.2f} -> {after['validity']:.2f}; optimal ops "
        f"{before['optimal_ops']:.2f} -> {after['optimal_ops']:.2f}; {report.steps} steps, train wall "
        f"{report.wall_time_s:.0f}s, peak RSS {figures['peak_rss_mb']:.0f} MB"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
