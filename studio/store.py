"""``generate_store``: ``LogicMapStore`` for ``langgraph.json``'s ``"store"`` key.

    "store": {"path": "logicmap.studio.store.generate_store"}

The LangGraph API server then serves its store (``get_store()``, ``runtime.store`` in every graph, and the
``/store`` routes) from LogicMap memory, with the process-wide resources (``LOGICMAP_*`` settings). The store's
write policy and search strategy come from ``LOGICMAP_STORE_POLICY`` (default ``auto``) and
``LOGICMAP_STORE_STRATEGY`` (default ``rerank``, no LLM); ``LOGICMAP_STORE_PURGE=true`` makes every delete
(``DELETE /store/items``) and replacing put purge what it retired (``LogicMapStore(purge=True)``);
``LOGICMAP_CONSOLIDATION`` (``background``, the default; ``sync``; ``manual`` when a worker runs
``logicmap consolidate --watch``) is when a put's event graph is built (``graphs.writes.consolidate``). The server's ``/store`` routes take a namespace from the
client; ``studio/tenant_guard.py`` applies the tenant authority to them (``studio/store_guard.py``): with LangGraph
auth on or ``LOGICMAP_SERVER_NAMESPACE`` set, a request for another tenant's namespace gets 403.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from logicmap.graphs.runtime.resources import default_resources
from logicmap.graphs.surfaces.basestore import LogicMapStore

__all__ = ["generate_store"]


@asynccontextmanager
async def generate_store() -> AsyncIterator[LogicMapStore]:
    """Yield the server's ``LogicMapStore`` (on the process-wide resources, loaded once)."""
    policy = cast(Any, os.environ.get("LOGICMAP_STORE_POLICY", "auto"))
    strategy = os.environ.get("LOGICMAP_STORE_STRATEGY", "rerank")
    yield LogicMapStore(
        resources=default_resources(), policy=policy, strategy=strategy, purge=_flag("LOGICMAP_STORE_PURGE")
    )


def _flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name}={os.environ[name]!r}: expected true or false")
