"""Which backend a store is: ``open_store`` reads ``LOGICMAP_STORE_URL`` (``store_url``) and the Chroma settings.

| ``store_url`` | backend |
| --- | --- |
| unset | Chroma: embedded in ``LOGICMAP_DATA_DIR``, or the server at ``LOGICMAP_CHROMA_HOST`` when set |
| ``memory://`` or ``memory://NAME`` | ``InProcessStore``: this process's memory, shared by the stores of one NAME |
| ``postgresql://...`` (or ``postgres://...``) | ``PostgresStore``: PostgreSQL + pgvector (``pip install 'logicmap[postgres]'``) |

Any other URL is refused in one line naming the ones this version knows.
"""

from __future__ import annotations

from logicmap.memory.store.port import StoragePort
from logicmap.settings import LogicMapSettings

__all__ = ["SCHEMES", "open_store"]

SCHEMES = ("memory://", "postgresql://")


def open_store(settings: LogicMapSettings | None = None) -> StoragePort:
    """The store ``settings`` name (see the module docstring)."""
    settings = settings or LogicMapSettings()
    url = settings.store_url
    if not url:
        from logicmap.memory.store.facade import MemoryStore

        return MemoryStore(settings)
    if url.startswith("memory://"):
        from logicmap.memory.store.inmemory import InProcessStore

        return InProcessStore(settings, name=url[len("memory://") :])
    if url.startswith(("postgresql://", "postgres://")):
        from logicmap.memory.store.postgres import PostgresStore

        return PostgresStore(settings)
    scheme = url.split("://", 1)[0] if "://" in url else url[:20]
    raise ValueError(
        f"LOGICMAP_STORE_URL: unknown store {scheme!r}; this version knows {', '.join(SCHEMES)} "
        "(unset: Chroma in LOGICMAP_DATA_DIR, or the server at LOGICMAP_CHROMA_HOST)"
    )
