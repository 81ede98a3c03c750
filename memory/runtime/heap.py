"""Handing freed memory back to the system after a burst of work (an ingest's sessions, a consolidation batch).

A build allocates and drops large arrays (snapshot deltas, vector tables, k-means) inside reference cycles that
Python's collector reaches late, and glibc keeps the pages it freed: a 10,000-turn ingest held about twice the memory
it used (``evals/bench/bench_many_sessions.py``), and a LangMem-style app on ``memory://`` held 50 MB more than it
used after 2,000 consolidated items (docs/performance.md, "Footprint"). ``return_freed_memory`` collects the cycles
and asks glibc to release what is free (``malloc_trim``; nothing elsewhere: musl, macOS).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import cache

__all__ = ["return_freed_memory", "trim_freed_memory"]


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None elsewhere (musl, macOS)."""
    import ctypes

    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def return_freed_memory() -> None:
    """Free the cyclic garbage and hand the pages glibc holds free back to the system (see the module)."""
    gc.collect()
    trim_freed_memory()


def trim_freed_memory() -> None:
    """Hand the pages glibc holds free back to the system, without a collection (a few milliseconds): after a
    build whose temporaries were freed by reference counting (``agents.item_ranking``: 2,000 items' vectors as
    lists of Python floats, about 16 MB that glibc kept)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
