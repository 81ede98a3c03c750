"""One bounded executor for blocking work awaited from async code: ``run_blocking(fn, ...)``.

The store (Chroma), the embedder and the graphs' sync nodes block. The async API (``aanswer``,
``aingest_conversation``, the lifecycle's twins, the tools' async bodies, the MCP server) awaits them on this one
process-wide ``ThreadPoolExecutor`` of ``LOGICMAP_ASYNC_WORKERS`` threads (default 4): the event loop keeps running,
a hundred concurrent calls share the same few threads (the rest wait in its queue), and no call starts a thread of
its own. Context variables (the run's deadline, a tool call's configurable) travel with the call.

Why a whole run goes to one worker rather than through ``graph.ainvoke``: the graphs' nodes are sync (Chroma, the
embedder and LangChain's sync model calls block), and ``ainvoke`` would hand each sync node to the event loop's
default executor, which this process does not size; one worker per run keeps the bound here and the deadline's
context in one thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

__all__ = ["THREAD_PREFIX", "blocking_executor", "run_blocking"]

T = TypeVar("T")
THREAD_PREFIX = "logicmap-blocking"

_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def blocking_executor() -> ThreadPoolExecutor:
    """The process's shared executor, made on first use with ``LogicMapSettings().async_workers`` threads."""
    global _executor
    if _executor is None:
        with _lock:
            if _executor is None:
                from logicmap.settings import LogicMapSettings

                workers = LogicMapSettings().async_workers
                _executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=THREAD_PREFIX)
    return _executor


async def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on the shared executor, awaited without blocking the event loop."""
    call = partial(contextvars.copy_context().run, partial(fn, *args, **kwargs))
    return await asyncio.get_running_loop().run_in_executor(blocking_executor(), call)
