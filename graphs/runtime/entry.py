"""What every public entry point does with its keyword arguments, as LangChain runnables and Python do.

- An unknown keyword is refused by name, as Python refuses it, with the close valid ones: ``answer("compass", q, ns,
  top_kk=3)`` or ``LogicMapStore(stratgy="dense")`` raises ``TypeError`` naming the keyword and what it may have
  meant (``difflib``), instead of running without it; a keyword that belongs in a LangChain ``RunnableConfig``
  (``callbacks``, ``tags``, ``run_name``, ...) points to ``config=``. ``checked_keywords`` does it for a function with
  a fixed signature, ``check_keywords`` for one whose valid names are known only at the call (the options of the
  strategy ``answer()`` runs).
- ``config=`` is the caller's ``RunnableConfig``: merged into a graph's run (``with_caller_config``: its callbacks see
  the run, its tags and metadata join the run's, its ``run_name`` names it), or, for a call that is no graph
  (``forget``, ``list_memories``, ``add_messages``, ...), the config of one run around it (``as_run``,
  ``run_entry``).
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs

__all__ = [
    "CONFIG_KEYS",
    "as_run",
    "check_keywords",
    "checked_keywords",
    "run_entry",
    "unexpected_keyword",
    "with_caller_config",
]

P = ParamSpec("P")
T = TypeVar("T")

CONFIG_KEYS = frozenset(RunnableConfig.__annotations__)
"""The keys of a LangChain ``RunnableConfig``: passed as keywords, they belong in ``config=``."""


# -- unknown keywords ------------------------------------------------------------------------------------


def _either(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def unexpected_keyword(function: str, name: str, valid: Iterable[str], *, of: str = "") -> TypeError:
    """Python's own message (``f() got an unexpected keyword argument 'x'``, ``of`` after it), then the close valid
    names (``Did you mean 'y'?``), ``config={'x': ...}`` for a ``RunnableConfig`` key, or every valid name."""
    names = sorted(valid)
    message = f"{function}() got an unexpected keyword argument {name!r}{of}"
    if name in CONFIG_KEYS and "config" in names:
        return TypeError(f"{message}. Did you mean config={{{name!r}: ...}}?")
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return TypeError(f"{message}. Did you mean {_either(close)}?")
    return TypeError(f"{message}; it takes {', '.join(names) or 'no keyword arguments'}")


def check_keywords(
    function: str, given: Mapping[str, Any] | Iterable[str], valid: Iterable[str], *, of: str = ""
) -> None:
    """``TypeError`` (``unexpected_keyword``) for the first keyword in ``given`` that is not ``valid``."""
    allowed = frozenset(valid)
    for name in given:
        if name not in allowed:
            raise unexpected_keyword(function, name, allowed, of=of)


def checked_keywords(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` refusing an unknown keyword with ``unexpected_keyword``'s message (same signature, same behaviour
    otherwise; a method too)."""
    return _Entry(fn, None)


def _keyword_names(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The names ``fn`` takes as keywords (not ``self``); None when it takes ``**kwargs``."""
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in params if p.kind in kinds and p.name != "self")


class _Entry(Generic[P, T]):
    """``fn`` with its keywords checked before it runs and, when ``name`` is set, called under its ``config=`` as one
    run named ``name`` (``as_run``; its first argument the run's ``namespace`` input)."""

    def __init__(self, fn: Callable[P, T], name: str | None) -> None:
        functools.update_wrapper(self, fn)
        self.fn, self.name = fn, name
        self.valid = _keyword_names(fn)
        self.where = fn.__qualname__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T:
        if self.valid is not None:  # before any run starts: a refused call is no run
            check_keywords(self.where, kwargs, self.valid)
        if self.name is None:
            return self.fn(*args, **kwargs)
        config: RunnableConfig | None = kwargs.get("config")  # type: ignore[assignment]
        namespace = args[0] if args else kwargs.get("namespace")
        return as_run(self.name, config, {"namespace": namespace}, functools.partial(self.fn, *args, **kwargs))

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        """As a method: bound to ``obj``, as a function would be."""
        return self if obj is None else functools.partial(self, obj)


# -- the caller's RunnableConfig -------------------------------------------------------------------------


def with_caller_config(ours: RunnableConfig, caller: RunnableConfig | None) -> RunnableConfig:
    """The config a graph run starts with: ``ours`` (run name, tags, metadata, recursion limit) with the caller's
    ``config=`` merged in as LangChain merges configs (its callbacks join, its tags and metadata add to ours, its
    ``run_name``, ``run_id`` and ``configurable`` win); ``ours`` unchanged without one. Our recursion limit stays: it
    follows from the run's budgets, and a config handed down from a graph node carries that graph's (25 by default),
    which would cut a strategy's bounded loops short."""
    if caller is None:
        return ours
    merged = merge_configs(ours, caller)
    if "recursion_limit" in ours:
        merged["recursion_limit"] = ours["recursion_limit"]
    return merged


def as_run(name: str, config: RunnableConfig | None, inputs: Mapping[str, Any], call: Callable[[], T]) -> T:
    """``call()`` as one run named ``name`` (the caller's ``run_name`` wins) under the caller's ``config``: its
    callbacks see the run start and end (or fail), its tags and metadata are the run's, and runs started inside
    (an ingest graph, a strategy) nest under it. Without a config, a plain call: nothing added."""
    if config is None:
        return call()
    from langchain_core.runnables import RunnableLambda

    result: T = RunnableLambda(functools.partial(_called, call), name=name).invoke(dict(inputs), config)
    return result


def _called(call: Callable[[], T], _inputs: Any) -> T:
    return call()


def run_entry(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A public entry point that is no graph (``forget``, ``list_memories``, ``add_messages``, ...): its unknown
    keywords refused (``checked_keywords``); called with ``config=`` (a parameter it declares and leaves to this
    decorator), one run named ``name`` around the call (``as_run``), its first argument as the run's ``namespace``
    input."""
    return functools.partial(_Entry, name=name)
