"""The chatbot served by a LangGraph server, as a runnable or a node of your own graph (``RemoteChatbot``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.pregel.remote import RemoteGraph

from logicmap.memory.runtime.tenancy import resolve_namespace

__all__ = ["RemoteChatbot"]


# -- the chatbot on a LangGraph server ----------------------------------------------------------------


class RemoteChatbot(RemoteGraph):
    """The chatbot served by a LangGraph server, as a runnable or a node of your own graph.

    On every call it resolves the tenant from the caller's config (``namespace``: a name or a template such
    as ``"{user_id}"``; unset = ``configurable["namespace"]``) and sends it, with ``settings`` (strategy,
    policy...), in the run's ``configurable``, which the server hands to the chatbot's context. A parent
    graph forwards its ``configurable`` to a remote node but not its context, so this is how the parent's
    tenant reaches the server. ``NamespaceRequiredError`` is raised before any request when none is named.
    """

    def __init__(
        self,
        assistant_id: str = "chatbot",
        /,
        *,
        namespace: str | None = None,
        settings: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(assistant_id, **kwargs)
        self.namespace = namespace
        self.settings = dict(settings or {})

    def _tenant_config(self, config: RunnableConfig | None, context: Any) -> RunnableConfig:
        configurable = merge_configs(self.config, config).get("configurable") or {}
        namespace = resolve_namespace(self.namespace, configurable)
        # The server refuses a run that carries both configurable values and a context: send settings one way.
        extra = dict(context) if isinstance(context, dict) else {}
        return merge_configs(config, {"configurable": {**self.settings, **extra, "namespace": namespace}})

    def stream(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any
    ) -> Iterator[Any]:
        return super().stream(input, self._tenant_config(config, context), **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, *, context: Any = None, **kwargs: Any) -> Any:
        return super().astream(input, self._tenant_config(config, context), **kwargs)
