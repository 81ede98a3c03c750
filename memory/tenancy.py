"""Which tenant a run belongs to: a namespace resolved at run time, never a silent default.

A run names its namespace in its context (``namespace="acme"``) or as a template filled from the run's
``configurable`` (``namespace="{user_id}"`` or ``"acme-{user_id}"``, as LangMem fills ``{langgraph_user_id}``),
or in ``configurable["namespace"]``. Values filled into a template come from the caller's config and are
untrusted: each must be one plain name segment (letters, digits, ``_`` and ``-``), so a ``user_id`` can never
reach into another tenant's dotted namespace (``acme.bob``) or spoof one.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from logicmap.memory.records import validate_namespace

__all__ = ["NamespaceRequiredError", "resolve_namespace"]

_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class NamespaceRequiredError(ValueError):
    """A run that names no namespace, or whose template refers to a value the run's config does not carry."""


def resolve_namespace(template: str | None, configurable: Mapping[str, Any] | None = None) -> str:
    """The run's namespace: ``template`` filled from ``configurable``, else ``configurable["namespace"]``.

    Raises ``NamespaceRequiredError`` when neither names one, ``ValueError`` when the result is not a valid name.
    """
    configurable = configurable or {}
    if not template:
        template = configurable.get("namespace")
        if template is None or template == "":
            raise NamespaceRequiredError(
                "this run names no namespace: set `namespace` in the run's context (a name, or a template such "
                "as '{user_id}' filled from config['configurable']) or config['configurable']['namespace']"
            )
        return validate_namespace(template)
    if not isinstance(template, str):
        return validate_namespace(template)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"invalid namespace template {template!r}: {exc}") from None
    if not fields:
        return validate_namespace(template)
    values: dict[str, str] = {}
    for name in fields:
        if not name.isidentifier():
            raise ValueError(f"invalid namespace template {template!r}: a field must be a plain name, got {name!r}")
        value = configurable.get(name)
        if value is None or value == "":
            raise NamespaceRequiredError(
                f"the namespace template {template!r} needs config['configurable'][{name!r}], which this run "
                "does not carry"
            )
        if not isinstance(value, str | int) or isinstance(value, bool) or not _SEGMENT.fullmatch(str(value)):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:50] + "..."
            raise ValueError(
                f"invalid value for namespace field {name!r}: {shown}; use 1-64 ASCII letters, digits, _ and -, "
                "starting with a letter or digit"
            )
        values[name] = str(value)
    return validate_namespace(template.format(**values))
