"""One parser for what the API server's guard reads: the guard checks exactly what the server will act on.

The LangGraph API server parses a request again after the guard (``orjson`` for bodies, Starlette's query parser
for ``GET``). Wherever two parsers could read one request two ways, a check on the first reading guards nothing:
``?namespace=memories.alice&namespace=memories.bob`` reads as alice to ``parse_qs(...)[0]`` and as bob to
Starlette's ``query_params.get``. So the guard never lets the server parse the client's bytes:

- ``strict_json`` reads a body, refusing a key repeated in one object (at any depth), nesting deeper than
  ``MAX_JSON_DEPTH``, and anything that is not JSON; the guard forwards ``canonical_json`` of what it read;
- ``strict_query`` reads a query string, refusing a parameter given twice (in any spelling that decodes to the same
  name) and any parameter the route does not take; the guard forwards ``canonical_query`` of what it read.

A refusal is a ``BadRequest``: a status (400, or 413 for size) and one line, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode

__all__ = ["MAX_JSON_DEPTH", "BadRequest", "canonical_json", "canonical_query", "strict_json", "strict_query"]

MAX_JSON_DEPTH = 100
"""The deepest nesting of objects and arrays a request body may have (a store value nested 3,000 deep is refused
with 400 here, not a ``RecursionError`` in the server)."""


class BadRequest(ValueError):
    """A request the guard refuses to read: ``status`` (400 or 413) and a one-line ``detail``."""

    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise BadRequest(f"the request body repeats the key {key!r} in one object: send each key once")
        seen[key] = value
    return seen


def _depth(value: Any) -> int:
    """The nesting depth of a parsed JSON value, iteratively (a deep value cannot exhaust the stack here)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                return depth
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def strict_json(body: bytes) -> Any:
    """The JSON value of ``body`` (an empty body is ``{}``), or ``BadRequest``."""
    try:
        value = json.loads(body or b"{}", object_pairs_hook=_no_repeats)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest(f"the request body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {str(exc).splitlines()[0][:120]}") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise BadRequest(f"the request body is nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def canonical_json(value: Any) -> bytes:
    """The bytes the server is given in place of the client's: ``value`` as the guard read it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")


def strict_query(query: bytes, allowed: Iterable[str]) -> dict[str, str]:
    """The parameters of ``query`` (decoded as the server decodes them), or ``BadRequest`` for a repeated or an
    unknown one."""
    allowed = set(allowed)
    params: dict[str, str] = {}
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name in params:
            raise BadRequest(f"the query repeats the parameter {name!r}: send each parameter once")
        if name not in allowed:
            raise BadRequest(
                f"unknown query parameter {name[:40]!r} on this route; it takes {', '.join(sorted(allowed))}"
            )
        params[name] = value
    return params


def canonical_query(params: dict[str, str]) -> bytes:
    """The query string the server is given in place of the client's."""
    return urlencode(params).encode("latin-1")
