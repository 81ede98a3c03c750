"""The context budget of LLM roles: a long session is split into windows whose prompts fit the model's context.

A session that fits is one window, so its prompt is exactly the unwindowed one. Window sizes are estimated
from characters (``CHARS_PER_TOKEN``, no tokenizer); windows run concurrently and merge in window order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, Field

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_CONTEXT_TOKENS",
    "MAX_PARALLEL_WINDOWS",
    "ContextBudget",
    "WindowedOutcome",
    "clip_line",
    "fit_lines",
    "merge_outcomes",
    "plan_windows",
    "prompt_chars",
    "run_windows",
]

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")  # what one window's call returns

# Deliberately low (English runs near 4): JSON, ids and names tokenize denser, and an estimate must not overflow.
CHARS_PER_TOKEN = 3
DEFAULT_CONTEXT_TOKENS = 8192
MAX_PARALLEL_WINDOWS = 4
# A retry re-sends the prompt with the previous reply (run_role shows at most 4000 characters of it) and the
# problems (at most 2000): the first prompt leaves that room, so the retry fits as well.
RETRY_CHARS = 6500


@dataclass(frozen=True)
class ContextBudget:
    """How much prompt a role may send: the model's context minus room for the reply and for one retry."""

    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    reply_parts: int = 1
    """Roles answered in one reply (a combined call): each part's reply needs room, up to half the context."""

    @property
    def total_chars(self) -> int:
        return max(1, self.context_tokens) * CHARS_PER_TOKEN

    @property
    def reply_chars(self) -> int:
        one = min(max(256, self.context_tokens // 4), 4096) * CHARS_PER_TOKEN
        return min(one * max(1, self.reply_parts), max(one, self.total_chars // 2))

    @property
    def prompt_chars(self) -> int:
        """The largest first prompt (characters) a role sends."""
        total = self.total_chars
        return max(total - self.reply_chars - min(RETRY_CHARS, total // 8), total // 4)


class WindowedOutcome(RoleOutcome[T], Generic[T]):
    """A role's merged outcome over a session's windows: every window's fallback, and notes on clipped turns."""

    fallbacks: list[FallbackRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    windows: int = 1


def prompt_chars(messages: Sequence[BaseMessage]) -> int:
    """The size of a prompt in characters (what the budget is estimated from)."""
    return sum(len(str(m.content)) for m in messages)


def plan_windows(
    count: int,
    size: Callable[[int, int], int],
    room: int,
    *,
    overlap: int = 0,
    cut_ok: Callable[[int], bool] | None = None,
) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` item ranges whose prompt ``size(start, end)`` fits ``room``.

    Everything fitting gives one window. A window grows item by item; a single item too large is a window
    alone (the role clips it). ``cut_ok(i)`` says whether a window may end before item ``i`` (a question
    and its answer stay together when the window can still end earlier); the last ``overlap`` items of a
    window (at most a third of it) open the next one, so relations across a window boundary are seen.
    """
    if count <= 0:
        return []
    if size(0, count) <= room:
        return [(0, count)]
    windows: list[tuple[int, int]] = []
    start = 0
    while start < count:
        end = start + 1
        while end < count and size(start, end + 1) <= room:
            end += 1
        if end < count and cut_ok is not None and not cut_ok(end):
            earlier = [i for i in range(end - 1, start + overlap, -1) if cut_ok(i)]
            if earlier:
                end = earlier[0]
        windows.append((start, end))
        if end >= count:
            break
        start = end - min(overlap, (end - start) // 3)
    return windows


def clip_line(line: str, limit: int) -> str:
    """``line`` cut to at most ``limit`` characters, saying how much was left out."""
    if len(line) <= limit:
        return line
    marker = f" ... [{len(line) - limit} more characters not shown]"
    return line[: max(0, limit - len(marker))] + marker


def fit_lines(
    lines: Sequence[str], measure: Callable[[list[str]], int], room: int, *, labels: Sequence[str], role: str
) -> tuple[list[str], list[str]]:
    """``lines`` with the longest ones clipped until ``measure(lines)`` fits ``room``, and a note per clip.

    Only a window of one huge turn (or event) needs it: the turn is shown cut, never dropped, never failed.
    """
    fitted, notes = list(lines), []
    for _ in range(len(fitted)):
        excess = measure(fitted) - room
        if excess <= 0 or not fitted:
            break
        index = max(range(len(fitted)), key=lambda k: len(fitted[k]))
        original = len(fitted[index])
        if original <= 200:
            break
        fitted[index] = clip_line(fitted[index], max(200, original - excess - 64))
        notes.append(
            f"{role}: {labels[index]} ({original} characters) shown as {len(fitted[index])} to fit the context"
        )
    return fitted, notes


def run_windows(tasks: Sequence[Callable[[], R]]) -> list[R]:
    """Run one role's window calls, at most ``MAX_PARALLEL_WINDOWS`` at a time; results in window order."""
    if len(tasks) == 1:
        return [tasks[0]()]
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_WINDOWS, len(tasks))) as pool:
        return list(pool.map(lambda task: task(), tasks))


def merge_outcomes(output: T, outcomes: Sequence[RoleOutcome[Any]], notes: Sequence[str] = ()) -> WindowedOutcome[T]:
    """One outcome for a session: costs added, each window's fallback kept (named by its window)."""
    cost = Cost()
    fallbacks: list[FallbackRecord] = []
    for index, outcome in enumerate(outcomes):
        cost = cost + outcome.cost
        if outcome.fallback is not None:
            record = outcome.fallback
            if len(outcomes) > 1:
                record = record.model_copy(
                    update={"reason": f"{record.reason} (window {index + 1} of {len(outcomes)})"}
                )
            fallbacks.append(record)
    # Parametrised at run time by the output's class (a type variable can't be subscripted statically).
    windowed: type[WindowedOutcome[T]] = cast(Any, WindowedOutcome)[type(output)]
    return windowed(
        output=output,
        cost=cost,
        fallback=fallbacks[0] if fallbacks else None,
        attempts=sum(o.attempts for o in outcomes),
        fallbacks=fallbacks,
        notes=list(notes),
        windows=len(outcomes),
    )
