"""The memory toolkit over the Model Context Protocol: ``logicmap mcp`` (stdio, or streamable HTTP on 127.0.0.1).

Tools: ``search_events`` and ``remember``, ``forget_memory``, ``update_memory`` (the toolkit's own tools, run through
their async bodies; ``purge: true`` also removes what they retire from disk), ``answer`` (a question answered with a
named strategy), ``list_memories`` and ``purge_memory`` (every retired version of the tenant's namespace removed
from disk, ``logicmap.purge``). Without ``--read-only`` the write tools are served; forgets are audited with surface
``mcp``.

The tenant is never a tool argument (an argument named ``namespace`` is dropped with the other unknown ones). It is
fixed for the whole server (``--namespace``), or, over HTTP, per connection: ``--tenants FILE`` maps bearer tokens to
namespaces, each request's ``Authorization: Bearer <token>`` selects its namespace, and a request without a known
token is refused with 401 before it reaches a tool. Blocking work (Chroma, embeddings, the graphs) runs on the shared
bounded executor (``memory.runtime.blocking``), so the server's event loop keeps serving other connections.
"""

from __future__ import annotations

import hmac
import json
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from logicmap.graphs.strategies.registry import StrategyName, aanswer
from logicmap.graphs.writes.forget import MemoryKind, alist_memories, apurge, memory_editor
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.runtime.input_limits import check_port
from logicmap.memory.store import UnknownNamespaceError

if TYPE_CHECKING:
    from logicmap.graphs.runtime.resources import Resources

__all__ = ["MemoryTools", "TenantTokens", "TokenGate", "build_mcp_server", "load_tenants", "serve_http", "serve_stdio"]

DEFAULT_STRATEGY = "rerank"  # no LLM call to recall: an MCP client's own model does the reasoning


class TenantTokens:
    """Bearer tokens -> namespaces (``--tenants FILE``: a JSON object ``{"<token>": "<namespace>"}``)."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ValueError("the tenants file maps no token to a namespace")
        self._tokens: dict[str, str] = {}
        for token, namespace in tokens.items():
            if not isinstance(token, str) or len(token) < 16:
                raise ValueError("every tenant token must be a string of at least 16 characters")
            self._tokens[token] = validate_namespace(namespace)

    def namespace(self, headers: Mapping[str, str] | None) -> str | None:
        """The namespace a request's ``Authorization: Bearer`` token maps to (None: no known token)."""
        value = (headers or {}).get("authorization", "")
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        found = None
        for known, namespace in self._tokens.items():  # every token compared, in constant time each
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                found = namespace
        return found


def load_tenants(path: str | Path) -> TenantTokens:
    """``TenantTokens`` from a JSON file; ``ValueError`` (one line) when it cannot be read as one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"tenants file {str(path)!r}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"tenants file {str(path)!r}: expected a JSON object of token -> namespace")
    return TenantTokens(data)


class _ToolkitCalls:
    """The toolkit's tools for one server, each called with the request's namespace in its configurable."""

    def __init__(self, resources: Resources, *, policy: str, writes: bool) -> None:
        from logicmap.graphs.chat.ingestion import session_ingester
        from logicmap.tools import create_memory_toolkit

        ingest = session_ingester(resources, policy=policy) if writes else None
        editor = memory_editor(resources, surface="mcp") if writes else None
        tools = create_memory_toolkit(
            None, store=resources.store, embeddings=resources.embeddings, ingest=ingest, editor=editor
        )
        compact = create_memory_toolkit(
            None,
            store=resources.store,
            embeddings=resources.embeddings,
            ingest=ingest,
            editor=editor,
            profile="compact",
        )
        self.tools = {t.name: t for t in [*tools, *compact]}

    async def call(self, name: str, namespace: str, args: dict[str, Any]) -> str:
        call = {"name": name, "args": args, "id": f"mcp-{name}", "type": "tool_call"}
        message = await self.tools[name].ainvoke(call, config={"configurable": {"namespace": namespace}})
        text = message.content if isinstance(message.content, str) else json.dumps(message.content)
        if getattr(message, "status", "success") == "error":
            raise ToolError(text)
        return text


class MemoryTools:
    """The MCP tools of one server: each resolves the request's tenant, then runs on the shared executor."""

    def __init__(
        self, resources: Resources, *, namespace: str | None, tenants: TenantTokens | None, policy: str, writes: bool
    ) -> None:
        self.resources, self.policy = resources, policy
        self.fixed = validate_namespace(namespace) if namespace is not None else None
        self.tenants = tenants
        self.toolkit = _ToolkitCalls(resources, policy=policy, writes=writes)

    def tenant(self, ctx: Context) -> str:
        """The request's namespace: the server's, or the one its bearer token maps to. Never a tool argument."""
        if self.fixed is not None:
            return self.fixed
        found = self.tenants.namespace(ctx.headers) if self.tenants is not None else None
        if found is None:
            raise ToolError("this connection carries no known tenant token (Authorization: Bearer <token>)")
        return found

    async def search_events(self, query: str, ctx: Context, k: int = 5) -> str:
        """Search long-term memory for events relevant to a query; returns event lines with their ids and the
        turn ids they cite."""
        return await self.toolkit.call("search_events", self.tenant(ctx), {"query": query, "k": k})

    async def answer(self, question: str, ctx: Context, strategy: StrategyName = DEFAULT_STRATEGY) -> str:
        """Answer a question from long-term memory with one of LogicMap's strategies (rerank by default: no model
        call to recall); returns the answer and the turn ids it cites."""
        result = await self._readable_answer(strategy, question, self.tenant(ctx))
        return json.dumps({"answer": result.answer, "cited_turns": result.cited_turns(10), "strategy": strategy})

    async def list_memories(
        self, ctx: Context, kind: MemoryKind = "turns", limit: int = 50, cursor: str | None = None
    ) -> str:
        """List stored memories of one kind, a page at a time (pass next_cursor back for the next page): turns,
        events, facts (temporal facts), r2_facts (Memory-R2 facts) or items (store items, by key)."""
        try:
            page = await alist_memories(
                self.tenant(ctx), kind=kind, limit=limit, cursor=cursor, resources=self.resources
            )
        except (UnknownNamespaceError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return page.model_dump_json()

    async def _readable_answer(self, strategy: str, question: str, namespace: str) -> Any:
        try:
            return await aanswer(strategy, question, namespace, resources=self.resources, policy=self.policy)
        except (UnknownNamespaceError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    async def remember(self, text: str, ctx: Context, speaker: str = "user", when: str | None = None) -> str:
        """Store something worth remembering (a fact, plan, preference or event someone stated), in the speaker's
        own words; when: YYYY-MM-DD or 'YYYY-MM-DD HH:MM' (default now)."""
        args = {"text": text, "speaker": speaker, **({"when": when} if when else {})}
        return await self.toolkit.call("remember", self.tenant(ctx), args)

    async def forget_memory(self, turn_ids: list[str], ctx: Context, purge: bool = False) -> str:
        """Forget turns the user asked to forget, with everything derived only from them (find the ids with
        search_events or list_memories first); purge: also remove them from disk for good."""
        args: dict[str, Any] = {"turn_ids": turn_ids, **({"purge": True} if purge else {})}
        return await self.toolkit.call("forget_memory", self.tenant(ctx), args)

    async def update_memory(self, turn_id: str, text: str, ctx: Context, purge: bool = False) -> str:
        """Correct a stored turn the user says is wrong or changed; what was derived from the old text is
        forgotten; purge: also remove the old text from disk for good."""
        args: dict[str, Any] = {"turn_id": turn_id, "text": text, **({"purge": True} if purge else {})}
        return await self.toolkit.call("update_memory", self.tenant(ctx), args)

    async def search_memory(self, query: str, ctx: Context, limit: int = 5) -> str:
        """Search long-term memory. Returns memories with their ids, best first."""
        return await self.toolkit.call("search_memory", self.tenant(ctx), {"query": query, "limit": limit})

    async def manage_memory(
        self,
        ctx: Context,
        content: str | None = None,
        action: Literal["create", "update", "delete"] = "create",
        id: str | None = None,
    ) -> str:  # LangMem's argument name
        """Create, update or delete a memory in long-term memory. Create stores something worth remembering (a
        fact, plan, preference or event the user stated), in the user's words; update corrects a memory that is
        wrong or changed; delete forgets one the user asks to forget. Update and delete take the memory's id."""
        args: dict[str, Any] = {
            "action": action,
            **({"content": content} if content is not None else {}),
            **({"id": id} if id is not None else {}),
        }
        return await self.toolkit.call("manage_memory", self.tenant(ctx), args)

    async def purge_memory(self, ctx: Context) -> str:
        """Remove from disk for good every memory already forgotten, updated or replaced (nothing still
        remembered changes)."""
        try:
            report = await apurge(self.tenant(ctx), resources=self.resources)
        except UnknownNamespaceError as exc:
            raise ToolError(str(exc)) from None
        return report.model_dump_json()


READ_TOOLS = ("search_events", "answer", "list_memories")
WRITE_TOOLS = ("remember", "forget_memory", "update_memory", "purge_memory")
# The compact profile (``logicmap mcp --profile compact``): LangMem's two tools on LogicMap memory.
COMPACT_READ_TOOLS = ("search_memory",)
COMPACT_WRITE_TOOLS = ("manage_memory",)


def build_mcp_server(
    resources: Resources,
    *,
    namespace: str | None = None,
    tenants: TenantTokens | None = None,
    policy: str = "heuristic",
    writes: bool = True,
    profile: Literal["full", "compact"] = "full",
) -> MCPServer:
    """The MCP server over one store: a fixed ``namespace``, or ``tenants`` (HTTP: one namespace per bearer token).
    ``profile="compact"`` serves ``search_memory`` and ``manage_memory`` (with writes) instead of the full set."""
    if (namespace is None) == (tenants is None):
        raise ValueError("name the tenant one way: a fixed namespace, or a tenants file (HTTP only)")
    if profile not in ("full", "compact"):
        raise ValueError(f"unknown toolkit profile {profile!r}; use 'full' or 'compact'")
    tools = MemoryTools(resources, namespace=namespace, tenants=tenants, policy=policy, writes=writes)
    server: MCPServer = MCPServer(
        "logicmap",
        instructions="Long-term memory of one user: search it, answer from "
        "it, and (when allowed) remember, correct and forget what the user says.",
    )
    read, write = (READ_TOOLS, WRITE_TOOLS) if profile == "full" else (COMPACT_READ_TOOLS, COMPACT_WRITE_TOOLS)
    for name in read + (write if writes else ()):
        server.add_tool(getattr(tools, name), name=name, structured_output=False)
    return server


def serve_stdio(server: MCPServer) -> None:
    """Serve over stdin/stdout until the client closes them (nothing else may write to stdout)."""
    server.run("stdio")


Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


class TokenGate:
    """ASGI middleware: refuses (401) every HTTP request whose bearer token maps to no namespace, before MCP."""

    def __init__(self, app: ASGIApp, tenants: TenantTokens) -> None:
        self.app, self.tenants = app, tenants

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if self.tenants.namespace(headers) is None:
                body = b'{"error": "unknown or missing tenant token (Authorization: Bearer <token>)"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(
    server: MCPServer, *, port: int = 0, tenants: TenantTokens | None = None, ready: Callable[[str], None] | None = None
) -> None:
    """Serve streamable HTTP on 127.0.0.1 (``port`` 0: a free one) at ``/mcp`` until interrupted; ``ready`` gets
    the URL once the socket listens."""
    import anyio
    import uvicorn

    check_port(port, option="port")
    app: ASGIApp = server.streamable_http_app(host="127.0.0.1")
    if tenants is not None:
        app = TokenGate(app, tenants)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    (ready or (lambda u: print(f"serving MCP on {u}", file=sys.stderr, flush=True)))(url)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))
