"""The LangGraph API server's custom app (``http.app`` in ``studio/langgraph.json``).

Its lifespan loads the process-wide resources once, at server start: the embedder (MiniLM takes a few
seconds to load) and the memory store, so the first run does not pay for them and a broken store or a
missing model stops the server at start with one clear line instead of failing the first user's run.
``GET /logicmap/health`` reports what was loaded (never a namespace name: tenants stay private).

The app also marks the process as the server (``set_server_mode``: the ingest graph then reads no server files
outside ``LOGICMAP_INGEST_ROOT``, and ``LOGICMAP_SERVER_NAMESPACE`` names every run's tenant) and installs
``TenantGuard``, which the LangGraph API server applies to its own routes: a run may not override its
assistant's tenant, and a thread stays with the tenant of its first run (``studio/tenant_guard.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from logicmap.graphs.runtime.resources import Resources, default_resources, set_server_mode
from logicmap.memory.store import embedder_identity
from logicmap.studio.tenant_guard import TenantGuard

__all__ = ["app", "warm_up"]

logger = logging.getLogger("logicmap.studio")

_loaded: dict[str, Any] = {}


def warm_up(resources: Resources) -> dict[str, Any]:
    """Load the embedder (one embedding) and open the store; what was loaded and how long it took."""
    started = time.perf_counter()
    resources.embeddings.embed_query("warm-up")
    embedder_s = time.perf_counter() - started
    store = resources.store
    settings = resources.settings
    return {
        "embedder": embedder_identity(settings),
        "embedder_load_s": round(embedder_s, 3),
        "store": "server" if settings.chroma_host else "embedded",
        "store_location": f"{settings.chroma_host}:{settings.chroma_port}"
        if settings.chroma_host
        else str(settings.data_dir),
        "store_open": store is not None,
        "chat_model": settings.chat_model or None,
        "loaded_at": time.time(),
    }


@asynccontextmanager
async def lifespan(_: Starlette) -> AsyncIterator[None]:
    set_server_mode(True)
    loaded = await asyncio.to_thread(warm_up, default_resources())
    _loaded.update(loaded)
    logger.info("logicmap resources loaded at server start: %s", loaded)
    yield


async def health(_: Request) -> JSONResponse:
    """What the server loaded at start; 503 until the lifespan has finished."""
    if not _loaded:
        return JSONResponse({"status": "starting"}, status_code=503)
    return JSONResponse({"status": "ok", **_loaded})


app = Starlette(routes=[Route("/logicmap/health", health)], middleware=[Middleware(TenantGuard)], lifespan=lifespan)
