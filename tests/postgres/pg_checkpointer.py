"""A LangGraph API server's checkpointer on PostgreSQL (``langgraph-checkpoint-postgres``'s ``AsyncPostgresSaver``)
in the database ``LOGICMAP_STORE_URL`` names, so the server's checkpoints and LogicMap's memory share one database.

``langgraph dev`` (the in-memory runtime) keeps checkpoints in its process unless ``langgraph.json`` names a custom
checkpointer: ``"checkpointer": {"backend": "custom", "path": "tests/postgres/pg_checkpointer.py:generate_checkpointer"}``
(``tests/postgres/test_postgres_langgraph_dev.py`` does).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["generate_checkpointer"]


@asynccontextmanager
async def generate_checkpointer() -> AsyncIterator[Any]:
    """The saver, its tables created (``setup``), closed when the server stops."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(os.environ["LOGICMAP_STORE_URL"]) as saver:
        await saver.setup()
        yield saver
