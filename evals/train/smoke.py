"""CPU smoke run of the LoGo-GRPO data builder, and the ``logicmap train-data`` command.

Builds the dataset for a conversation file (the bundled sample by default) and prints rollouts, LLM calls and wall time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "cmd_train_data", "main", "register_train_data"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"


def add_arguments(parser: argparse.ArgumentParser, *, file_required: bool = True) -> None:
    if file_required:
        parser.add_argument("file", help="LoCoMo / LongMemEval / JSONL conversation file with QA pairs")
    else:
        parser.add_argument("file", nargs="?", default=str(SAMPLE), help="conversation file (default: the sample)")
    parser.add_argument(
        "--out",
        "-o",
        required=file_required,
        default=None if file_required else "reports/logo_grpo_sample.jsonl",
        help="JSONL dataset path; the reward hook's context is written beside it",
    )
    parser.add_argument("--group-size", "-g", type=int, default=4, help="G: rollouts per group (default 4)")
    parser.add_argument("--curriculum", action="store_true", help="horizon schedule 8 -> 16 -> 32 sessions")
    parser.add_argument("--stages", help="curriculum stages, comma-separated (default 8,16,32)")
    parser.add_argument("--local-points", type=int, default=4, help="sessions that get a local group (default 4)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of rollouts")
    parser.add_argument(
        "--answerer",
        choices=["auto", "llm", "extractive"],
        default="auto",
        help="how the reward answers questions (auto: the chat model when configured)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--policy",
        choices=["auto", "llm", "heuristic"],
        default="auto",
        help="auto: the configured chat model (LOGICMAP_CHAT_MODEL), else the no-LLM policy",
    )
    parser.add_argument("--show", type=int, default=3, help="rollouts to print (0: none)")


def cmd_train_data(args: argparse.Namespace) -> int:
    from logicmap.agents.models import make_chat_model
    from logicmap.evals.train.logo_grpo import LoGoConfig, build_logo_grpo_dataset, write_dataset
    from logicmap.memory.files.loaders import load_conversations
    from logicmap.settings import LogicMapSettings

    settings = LogicMapSettings()
    llm: Any = None
    if args.policy in ("auto", "llm"):
        llm = make_chat_model(settings)
        if llm is None and args.policy == "llm":
            print("note: no chat model configured (LOGICMAP_CHAT_MODEL); the no-LLM policy runs", file=sys.stderr)
    stages = tuple(int(s) for s in args.stages.split(",")) if args.stages else (8, 16, 32)
    config = LoGoConfig(
        group_size=args.group_size,
        curriculum=args.curriculum or bool(args.stages),
        curriculum_stages=stages,
        local_points=args.local_points,
        temperature=args.temperature,
        answerer=args.answerer,
        seed=args.seed,
        method=settings.structured_output,
    )
    conversations = load_conversations(args.file)
    out = Path(args.out)
    for n, conversation in enumerate(conversations):
        target = out if len(conversations) == 1 else out.with_name(f"{out.stem}.{n}{out.suffix}")
        dataset = build_logo_grpo_dataset(conversation, llm=llm, config=config)
        rows_path, context_path = write_dataset(dataset, target)
        s = dataset.stats
        _show_rollouts(dataset.rows, args.show)
        print(
            f"{s.conversation_id}: {s.sessions} sessions, horizons {s.horizons}, policy {s.policy}, "
            f"answerer {s.answerer}, G={s.group_size}\n"
            f"  rollouts {s.rollouts} ({s.rollouts_global} global, {s.rollouts_local} local continuations), "
            f"manager steps {s.manager_steps}, skipped batches {s.skipped_batches}\n"
            f"  LLM calls {s.llm_calls} {s.llm_calls_by_role}, tokens {s.prompt_tokens}+{s.completion_tokens}, "
            f"wall {s.wall_time_s:.2f}s\n"
            f"  groups {s.groups_global} global + {s.groups_local} local ({s.flat_groups} with equal rewards), "
            f"reward mean {s.mean_reward:.3f} range [{s.min_reward:.3f}, {s.max_reward:.3f}]\n"
            f"  wrote {s.rows} rows to {rows_path} and the reward context to {context_path}"
        )
    return 0


def _show_rollouts(rows: list[dict[str, Any]], limit: int) -> None:
    """One line per rollout: its group, reward parts and the ops it chose session by session."""
    if limit <= 0:
        return
    import json

    seen: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        seen.setdefault((row["group_id"], row["member"]), []).append(row)
    for (group, member), steps in list(seen.items())[:limit]:
        ops = []
        for step in steps:
            edits = json.loads(step["completion"][0]["content"])["edits"]
            counts = {op: sum(e["op"] == op for e in edits) for op in ("ADD", "UPDATE", "DELETE", "NOOP")}
            ops.append(f"{step['session_id']}:" + "/".join(f"{k[0]}{v}" for k, v in counts.items() if v))
        first = steps[0]
        print(
            f"  {group} #{member}: reward {first['reward']:.3f} (F1 {first['f1']:.3f}, size {first['memory_size']}, "
            f"penalty {first['penalty']:.3f}) advantage {first['advantage']:+.2f}  " + " ".join(ops)
        )


def register_train_data(subparsers: Any) -> None:
    """Add ``train-data`` to the ``logicmap`` CLI."""
    parser = subparsers.add_parser(
        "train-data", help="Memory-R2: build LoGo-GRPO training data (JSONL) for a conversation"
    )
    add_arguments(parser)
    parser.set_defaults(func=cmd_train_data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.train.smoke", description=__doc__.splitlines()[0])
    add_arguments(parser, file_required=False)
    return cmd_train_data(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
