"""Training data for Memory-R2's memory manager: LoGo-GRPO groups, rewards and a TRL reward hook.

``logo_grpo`` builds the dataset; ``smoke`` is the CPU smoke run and the ``train-data`` command;
``logo_train`` trains the manager with LoGo-GRPO on its own generated completions (``train-r2``; needs the
``train`` extra).
Names are loaded on first use, so registering the CLI command imports nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BuildStats",
    "LoGoConfig",
    "LoGoDataset",
    "LoGoRewardHook",
    "build_logo_grpo_dataset",
    "compression_penalty",
    "curriculum_horizons",
    "group_advantages",
    "write_dataset",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("logicmap.evals.train.logo_grpo"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
