"""The fork-server loop the crash workers share (``crash_worker.py``, ``redo_worker.py``, ``forget_worker.py``).

A worker imports LogicMap once, then calls ``serve``: one JSON command per stdin line, one forked child per
command, one JSON reply per stdout line. The child runs the worker's body for the command, writes its result
as JSON to ``cmd["out"]`` (``{"ok": True, ...}`` or ``{"ok": False, "error": traceback}``) and exits; the
server SIGKILLs it after ``cmd["kill_after"]`` seconds when that is set. The reply:
``{"op", "elapsed", "killed" (the child died of SIGKILL, by the timer or by itself), "timer_kill", "exit_code"}``.
Only the standard library is imported here, so it adds nothing a fork must not inherit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import NoReturn

CHILD_STARTED = 0.0
"""``time.perf_counter()`` when the current child started (in the child)."""

Body = Callable[[dict], dict]


def write_result(path: str, payload: dict) -> None:
    """Write a child's result atomically (the test never reads half a file)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, default=str)
    os.replace(tmp, path)


def run_child(body: Body, cmd: dict) -> NoReturn:
    """The body of a forked child: run ``body(cmd)``, write its result, exit without returning."""
    global CHILD_STARTED
    CHILD_STARTED = time.perf_counter()
    code = 0
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stdout is the protocol pipe
        write_result(cmd["out"], {"ok": True, **body(cmd)})
    except BaseException:  # reported to the test, which fails on it
        code = 1
        try:
            write_result(cmd["out"], {"ok": False, "error": traceback.format_exc()})
        except BaseException:
            pass
    finally:
        os._exit(code)


def wait_child(pid: int, kill_after: float | None, started: float) -> tuple[int, bool]:
    """Wait for a child, SIGKILLing it once ``kill_after`` seconds have passed: its wait status, and whether
    the timer killed it."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if kill_after is not None and time.perf_counter() - started >= kill_after:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return status, True
        time.sleep(0.002)


def serve(body_for: Callable[[dict], Body], after: Callable[[dict, int], None] | None = None) -> None:
    """Serve commands from stdin until ``{"op": "quit"}`` or EOF; ``body_for(cmd)`` picks the child's body,
    ``after(cmd, status)`` runs in the server once the child has ended."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        sys.stdout.flush()
        sys.stderr.flush()
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            run_child(body_for(cmd), cmd)
        kill_after = cmd.get("kill_after")
        status, timer_kill = wait_child(pid, None if kill_after is None else float(kill_after), started)
        if after is not None:
            after(cmd, status)
        print(
            json.dumps(
                {
                    "op": cmd["op"],
                    "elapsed": time.perf_counter() - started,
                    "killed": os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
                    "timer_kill": timer_kill,
                    "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                }
            ),
            flush=True,
        )
