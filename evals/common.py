"""Shared bits of the bench scripts, the training scripts (evals.train) and evals.loco: the machine they ran on,
memory used, fresh resources, tables.

Benchmarks print numbers; nothing here is timed against a limit.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["fresh_resources", "machine_line", "open_resources", "print_table", "rss_mb", "peak_rss_mb"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def machine_line() -> str:
    """``nproc``, the CPU model and the Python version, for the figures to be read against."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"machine: {cores} cores (nproc), {model}, Python {platform.python_version()}"


def rss_mb() -> float:
    """Resident memory of this process now (MB)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mb()


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fresh_resources(data_dir: Path, *, embeddings: str = "hashing", llm: Any = None) -> Any:
    """Resources on their own directory with the given embedder and chat model (None: no LLM)."""
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.settings import LogicMapSettings

    res = Resources(settings=LogicMapSettings(data_dir=data_dir, embedding_provider=embeddings))  # type: ignore[arg-type]  # a name from argparse choices
    res.llm_ = llm
    return res


@contextlib.contextmanager
def open_resources(data_dir: Path, *, embeddings: str = "hashing", llm: Any = None) -> Iterator[Any]:
    """``fresh_resources`` for a ``with`` block: their store, once opened, is closed when the block ends, however
    it ends (its files, its directory's lock and its pending writes are released before the caller goes on, or
    removes a temporary directory)."""
    res = fresh_resources(data_dir, embeddings=embeddings, llm=llm)
    try:
        yield res
    finally:
        if res.store_ is not None:
            res.store_.close()


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A markdown table on stdout, so the output pastes into a report."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
