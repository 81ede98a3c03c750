"""The ``train-r2`` command's arguments, apart from the trainer, so ``logicmap --help`` imports no training code.

``evals.train.logo_train`` (the LoGo-GRPO trainer) runs the command; ``evals.cli`` imports it when the command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["PRESET_NAMES", "add_arguments", "register_train_r2"]

PRESET_NAMES = ("cpu-smoke", "gpu", "tiny")
"""The names of ``logo_train.PRESETS`` (a test keeps the two equal)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", choices=PRESET_NAMES, default="cpu-smoke", help="preset (default cpu-smoke)")
    parser.add_argument(
        "--data", action="append", help="conversation file(s) with QA (default: the synthetic update task)"
    )
    parser.add_argument("--out", "-o", default="reports/r2-manager", help="where the adapter and merged model go")
    parser.add_argument(
        "--model", help="override the preset's model: smollm2, tiny, a HF id or directory, a .gguf path"
    )
    parser.add_argument("--stages", help="curriculum horizons, comma-separated (presets: smoke 2,4; gpu 8,16,32)")
    parser.add_argument("--steps-per-stage", dest="steps_per_stage", type=int)
    parser.add_argument("--group-size", dest="group_size", type=int, help="G at both levels")
    parser.add_argument("--learning-rate", dest="learning_rate", type=float)
    parser.add_argument("--lora-r", dest="lora_r", type=int, help="LoRA rank (0: train every parameter)")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-extractor", action="store_true", help="train the manager only")
    parser.add_argument("--held-out", type=int, default=16, help="held-out synthetic conversations (0: no evaluation)")
    parser.add_argument("--no-export", action="store_true", help="skip writing the adapter and merged model")


def register_train_r2(subparsers: Any, run: Callable[[argparse.Namespace], int]) -> None:
    """Add ``train-r2`` to the ``logicmap`` CLI; ``run`` (``evals.cli``'s, which imports the trainer when the
    command runs) trains."""
    parser = subparsers.add_parser("train-r2", help="Memory-R2: train the memory manager with LoGo-GRPO (LoRA)")
    add_arguments(parser)
    parser.set_defaults(func=run)
