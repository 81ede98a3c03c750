"""Benchmark: does LoGo-GRPO on the policy's own generated completions make the Memory-R2 manager better than
doing nothing clever? The trained policy beside two baselines, on every figure.

Trains on synthetic update conversations (``evals.train.r2_synthetic``: repeats -> NOOP, changed values ->
UPDATE, retractions -> DELETE, small talk -> dropped) and prints, on held-out conversations, for the untrained
policy, the trained policy (greedy free generation, parsed and validated as the production manager does) and the
two baselines, which never train: ``add-all`` (ADD every new fact; ``logo_train.add_every_fact``) and ``lexical``
(the project's no-LLM manager, ``agents.r2.heuristic_edits``): the paper's episode reward (``memory_reward``: F1
minus the compression penalty of the memory built), answer F1 over every question and over the questions whose
answer changed (``f1_changed``), the strict episode reward (-1 for an episode with an invalid reply), the mean
local step reward, the invalid-step rate, the memory size and the share of turns handled as the optimal policy
would; then the optimisation steps, the share of tokens the PPO clip acted on, wall time and peak memory.

The answer step (training reward and evaluation alike) is ``logo_grpo.answer_every_match``: the extractive answer
of *every* fact on the question's subject and attribute, so a memory that kept a stale value beside the new one
answers both and loses F1; memory content alone (ADD everything) cannot reach the top. ``--answerer best-fact``
gives the earlier answer step (the best-matching fact only; BM25 picks between stale and current facts).

Split: training conversations are ``make_update_task(train_pool, h, seed=seed)`` (the first name and value pool);
held-out ones ``make_update_task(held_out, max(stages), seed=eval_seed, held_out=True)`` (other names and values,
another seed); ``--dev`` also scores development conversations (the training names and values, a seed the training
pool never draws) to choose settings by. No chat model runs here: the answer agent is the labelled extractive
fallback. A benchmark, not a test: it prints numbers.

    nice -n 10 python -m logicmap.evals.bench.bench_logo_learning              # docs/performance.md's table
    python -m logicmap.evals.bench.bench_logo_learning --config cpu-smoke      # SmolLM2-135M + LoRA (slow on CPU)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from typing import Any

from logicmap.agents.answerers import answer_from_best_fact
from logicmap.evals.train.logo_grpo import answer_every_match
from logicmap.evals.train.logo_train import (
    BASELINES,
    PRESETS,
    AnswerAgent,
    evaluate_manager,
    evaluate_policy,
    load_policy,
    peak_rss_mb,
    train_logo,
)
from logicmap.evals.train.r2_synthetic import LabelledConversation, make_update_task

__all__ = [
    "ANSWERERS",
    "COLUMNS",
    "DEV_SEED",
    "ROWS",
    "answer_agent",
    "invalid_problems",
    "main",
    "score_split",
    "table",
]

DEV_SEED = 1000  # development conversations: make_update_task(seed=DEV_SEED + seed, held_out=False)
ANSWERERS = {
    "every-match": (answer_every_match, "every-match extractive answerer"),
    "best-fact": (answer_from_best_fact, "extractive answerer"),
}
COLUMNS = ("untrained", "trained", "add-all", "lexical")
ROWS = (
    ("memory_reward", "episode reward (paper: F1 - 0.3 * min(1, \\|memory\\| / facts))"),
    ("f1", "answer F1, every question"),
    ("f1_changed", "answer F1, questions whose answer changed"),
    ("reward", "strict episode reward (-1 for an episode with an invalid reply)"),
    ("step_reward", "mean local step reward"),
    ("invalid_step_rate", "invalid-step rate"),
    ("memory_size", "live facts at the end"),
    ("optimal_ops", "turns handled as the optimal policy would"),
)


def answer_agent(answerer: str = "every-match") -> AnswerAgent:
    """The benchmark's answer step (training reward and held-out evaluation): ``ANSWERERS[answerer]``."""
    function, name = ANSWERERS[answerer]
    return AnswerAgent(answerer=function, answerer_name=name)


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


def score_split(
    labelled: list[LabelledConversation], cfg: Any, answer: AnswerAgent, policy: Any = None
) -> dict[str, dict[str, float]]:
    """The figures of ``policy`` (greedy; omitted when None) and of each baseline on one split."""
    conversations = [x.conversation for x in labelled]
    optimal = {x.conversation.conversation_id: x.optimal for x in labelled}
    changed = {x.conversation.conversation_id: x.changed for x in labelled}
    out = {name: evaluate_manager(m, conversations, cfg, optimal, answer, changed) for name, m in BASELINES.items()}
    if policy is not None:
        out["policy"] = evaluate_policy(policy, conversations, cfg, optimal, answer, changed)
    return out


def table(figures: dict[str, dict[str, float]]) -> str:
    """A markdown table: one row per figure, one column per policy of ``COLUMNS`` present in ``figures``."""
    columns = [c for c in COLUMNS if c in figures]
    lines = ["| figure | " + " | ".join(columns) + " |", "| --- |" + " --- |" * len(columns)]
    for key, label in ROWS:
        cells = [f"{figures[c][key]:.3f}" if key in figures[c] else "-" for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
    parser.add_argument("--inner-epochs", type=int, help="override the preset (> 1: the PPO clip acts)")
    parser.add_argument("--conversations-per-step", type=int, help="override the preset")
    parser.add_argument(
        "--local-points", help="override the preset: local groups per global rollout, or 'all' (every manager step)"
    )
    parser.add_argument("--kl-beta", type=float, help="override the preset: GRPO's KL penalty to the initial policy")
    parser.add_argument(
        "--invalid-episode",
        choices=("skip", "void"),
        help="override the preset: global reward of an episode with an "
        "invalid reply (skip: F1 - penalty of the memory built; void: -1)",
    )
    parser.add_argument(
        "--answerer",
        choices=sorted(ANSWERERS),
        default="every-match",
        help="the answer step of the reward and the evaluation (default every-match: a stale fact kept beside the "
        "current one costs F1; best-fact: the earlier answer step)",
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
    # development: the training pool's names and values, conversations the training seed never draws
    dev = make_update_task(args.held_out, horizon, seed=DEV_SEED + args.seed, held_out=False) if args.dev else []
    print(
        f"config {args.config}: model {cfg.model}, G={cfg.group_size}, stages {cfg.stages}, "
        f"{cfg.steps_per_stage} steps/stage, {cfg.inner_epochs} inner epochs, local groups "
        f"{'at every manager step' if cfg.local_points is None else f'at {cfg.local_points} step(s)'} of every "
        f"rollout; train: make_update_task({args.train_pool}, h, seed={args.seed}) (training names and values); "
        f"held-out: make_update_task({args.held_out}, {horizon}, seed={eval_seed}, held_out=True) (other names and "
        f"values), {sum(len(x.changed) for x in held)} of {sum(len(x.conversation.qa) for x in held)} questions changed"
        + (f"; development {len(dev)}" if dev else ""),
        flush=True,
    )
    started = time.perf_counter()
    policy = load_policy(cfg)
    print(f"loaded in {time.perf_counter() - started:.0f}s", flush=True)
    answer = answer_agent(args.answerer)
    print(f"answer agent (QA reward and evaluation): {answer.label}", flush=True)
    splits = {"held-out": held, **({"development": dev} if dev else {})}
    before = {name: score_split(part, cfg, answer, policy) for name, part in splits.items()}
    report = train_logo(
        policy,
        lambda h: [x.conversation for x in make_update_task(args.train_pool, h, seed=args.seed)],
        cfg,
        answer=answer,
        progress=lambda line: print("  " + line, flush=True),
    )
    figures: dict[str, Any] = {}
    for name, part in splits.items():
        after = score_split(part, cfg, answer, policy)
        figures[name] = {
            "untrained": before[name]["policy"],
            "trained": after["policy"],
            **{b: after[b] for b in BASELINES},
        }
        print(f"\n{name} ({len(part)} conversations of {horizon} sessions, greedy):\n{table(figures[name])}")
    problems = invalid_problems(policy, [x.conversation for x in held], cfg, answer)
    print(f"\ntrained policy's validation problems (held-out, greedy): {json.dumps(problems)}")
    out = figures["held-out"]
    beats = [b for b in BASELINES if out["trained"]["memory_reward"] > out[b]["memory_reward"]]
    print(
        f"held-out episode reward: trained {out['trained']['memory_reward']:.3f} (untrained "
        f"{out['untrained']['memory_reward']:.3f}), add-all {out['add-all']['memory_reward']:.3f}, lexical "
        f"{out['lexical']['memory_reward']:.3f}; F1: trained {out['trained']['f1']:.3f}, add-all "
        f"{out['add-all']['f1']:.3f}, lexical {out['lexical']['f1']:.3f}; the trained policy beats "
        f"{' and '.join(beats) if beats else 'neither baseline'} on reward; {report.steps} steps, clipped tokens "
        f"{sum(report.clipped) / max(1, len(report.clipped)):.3f} per step, train wall {report.wall_time_s:.0f}s, "
        f"total {time.perf_counter() - started:.0f}s, peak RSS {peak_rss_mb():.0f} MB"
    )
    if args.json:
        record = {
            "config": args.config,
            "model": cfg.model,
            "answerer": answer.label,
            "figures": figures,
            "trained_invalid_problems": problems,
            "generation": "greedy free generation" + (" under EditGrammar" if cfg.constrained_manager else ""),
            "steps": report.steps,
            "stages": report.stages,
            "groups_global": report.groups_global,
            "groups_local": report.groups_local,
            "flat_groups": report.flat_groups,
            "clipped": report.clipped,
            "train_wall_time_s": round(report.wall_time_s, 1),
            "total_wall_time_s": round(time.perf_counter() - started, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "train_config": asdict(cfg),
        }
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
