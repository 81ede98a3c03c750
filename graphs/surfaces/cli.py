"""The ``logicmap`` command line's core: the parser and the memory commands (ingest, ask, graph, stats, chat, ...).

The eval commands (demo, eval, train-data) live in ``evals.cli``, whose ``main`` joins both into the program.
Errors the user can fix (bad files, unknown namespaces, a locked store) print one clear line and exit 2.
Text that comes from memory, files or a model is printed through ``memory.language.text.printable``: a stored turn
cannot send escape sequences to the terminal or forge output lines.
Errors of the chat model's provider (bad key, unknown model, unreachable server, rate limits or deadline), a run
past its deadline and a writer that waited for a busy namespace until its deadline print one line and exit 3.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from logicmap.graphs.strategies.names import STRATEGY_NAMES
from logicmap.memory.language.text import printable, printable_json

if TYPE_CHECKING:
    from logicmap.graphs.runtime.resources import Resources

# The parser imports nothing heavy (``logicmap --help`` starts in well under a second): each command imports
# what it runs on (the store, the models, networkx) when it runs.
_STRATEGY_NAMES = ", ".join(STRATEGY_NAMES)  # the registry's names, for the --strategy help

__all__ = [
    "add_core_commands",
    "build_parser",
    "LIST_KINDS",
    "cmd_mcp",
    "confirmed",
    "fallback_summary",
    "main",
    "output_path",
    "policy_from_args",
    "resources_from_args",
    "run",
]


def resources_from_args(args: argparse.Namespace) -> Resources:
    """The resources a command runs on: the settings, with ``--data-dir``, ``--store-url`` and ``--embeddings``
    applied."""
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.settings import LogicMapSettings

    overrides: dict[str, Any] = {}
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = Path(args.data_dir)
    if getattr(args, "store_url", None):
        overrides["store_url"] = args.store_url
    if getattr(args, "embeddings", None):
        overrides["embedding_provider"] = args.embeddings
    resources = Resources(settings=LogicMapSettings(**overrides))
    _COMMAND_RESOURCES.append(resources)
    return resources


_COMMAND_RESOURCES: list[Any] = []
"""The resources the running command opened; ``run`` closes their stores when the command ends."""


def _close_command_resources() -> None:
    while _COMMAND_RESOURCES:
        store = getattr(_COMMAND_RESOURCES.pop(), "store_", None)
        if store is not None:
            store.close()


PolicyName = Literal["auto", "llm", "heuristic"]
"""``--policy``'s choices."""


def policy_from_args(args: argparse.Namespace, resources: Resources) -> PolicyName:
    """``--policy``, with ``auto`` resolved by the one rule every run uses (``graphs.runtime.resources.resolve_policy``):
    the LLM policy when the run has a chat model, else the no-LLM one."""
    from logicmap.graphs.runtime.resources import resolve_policy

    policy = getattr(args, "policy", "auto") or "auto"
    if policy == "auto":
        policy = resolve_policy(policy, resources)
        if policy == "heuristic":  # tells the user what auto resolved to; the run's policy object decides the rest
            print("note: no chat model configured (LOGICMAP_CHAT_MODEL); using the no-LLM policy", file=sys.stderr)
    # --policy's choices are these names and resolve_policy returns one of them (or raises): the str is one.
    return cast(PolicyName, policy)


def output_path(value: str | Path, what: str) -> Path:
    """Where a command writes ``what``: its directory must exist (a command never creates directories anywhere a
    mistyped path points); ``ValueError`` (one line, exit 2) otherwise, before any work is done."""
    path = Path(value)
    parent = path.parent
    if not parent.is_dir():
        state = "is not a directory" if parent.exists() else "does not exist"
        raise ValueError(
            f"{what} {str(path)!r}: the directory {str(parent)!r} {state}; create it first (nothing was written)"
        )
    return path


def cmd_ingest(args: argparse.Namespace) -> int:
    from logicmap.graphs.ingest.ingest import file_namespaces, ingest_conversation
    from logicmap.memory.files.loaders import load_conversations

    resources = resources_from_args(args)
    conversations = load_conversations(args.file)
    # The whole file is checked first: a namespace another source created refuses the file before any write.
    append = bool(getattr(args, "append", False))
    targets = file_namespaces(conversations, args.namespace, resources.store, append=append)
    redo = bool(getattr(args, "redo_fallbacks", False))
    policy: PolicyName = "llm" if redo else policy_from_args(args, resources)
    for conv, namespace in targets:
        for repair in conv.repairs:
            print(printable(f"repaired {conv.conversation_id}: {repair}", one_line=True), file=sys.stderr)
        report = ingest_conversation(
            conv,
            namespace,
            resources=resources,
            policy=policy,
            progress=not args.quiet,
            exclusive=len(targets) > 1,
            append=append,
            redo_fallbacks=redo,
            memory_manager=getattr(args, "memory_manager", None),
            allow_forgotten=bool(getattr(args, "allow_forgotten", False)),
        )
        done = [s for s in report.sessions if not s.skipped]
        skipped = len(report.sessions) - len(done)
        turns = sum(s.turns for s in done)
        what = (
            f"{len(done)} sessions with fallbacks rebuilt, {skipped} left as they are (no fallbacks, or "
            "already rebuilt with this model)"
            if redo
            else f"{len(done)} sessions ingested, {skipped} already committed"
        )
        print(
            f"{namespace}: {what}; "
            f"{sum(s.events for s in done)} events, {turns} turns; policy {policy}; "
            f"LLM calls {report.cost.llm_calls} ({report.llm_calls_per_session:.1f}/session), "
            f"tokens {report.cost.prompt_tokens}+{report.cost.completion_tokens}, wall {report.wall_time_s:.2f}s"
        )
        forgotten = [s.session_id for s in report.sessions if any("tombstone" in n for n in s.notes)]
        if forgotten:
            print(
                f"  note: {len(forgotten)} sessions had turns left out because a forget left tombstones for them "
                "(--allow-forgotten stores them)",
                file=sys.stderr,
            )
        renamed = {k: v for s in done for k, v in s.renamed.items()}
        if renamed:
            examples = printable(", ".join(f"{k} -> {v}" for k, v in list(renamed.items())[:3]), one_line=True)
            print(
                f"  note: {len(renamed)} turns reuse dia ids other sessions hold in {namespace}; stored under "
                f"distinct ids ({examples})",
                file=sys.stderr,
            )
        for fb in report.fallbacks:
            print(printable(f"  fallback: {fb.role}: {fb.reason}", one_line=True), file=sys.stderr)
    return 0


def fallback_summary(manifest: Any) -> dict[str, Any]:
    """Per committed session, the roles that fell back (calls, reason, first error line), and the total."""
    sessions: dict[str, Any] = {}
    for sid, info in manifest.sessions.items():
        if info.fallbacks:
            sessions[sid] = {
                "fallbacks": sum(f.calls for f in info.fallbacks),
                "roles": [
                    {"role": f.role, "calls": f.calls, "reason": f.reason, "error": f.first_error[:300]}
                    for f in info.fallbacks
                ],
            }
    return {
        "total": sum(s["fallbacks"] for s in sessions.values()),
        "sessions_with_fallbacks": len(sessions),
        "sessions_without_llm": sum(1 for info in manifest.sessions.values() if info.policy == "heuristic"),
        "sessions": sessions,
    }


def cmd_stats(args: argparse.Namespace) -> int:
    from logicmap.memory.indexes.graph import EventGraph

    resources = resources_from_args(args)
    resources.store.require_namespace(args.namespace)
    snapshot = resources.store.snapshot(args.namespace)
    stats = EventGraph.of(snapshot).stats()
    stats["fallbacks"] = fallback_summary(snapshot.manifest)
    if snapshot.manifest.forgets:  # the audit record of every forget: kinds and counts, when, from where
        stats["forgets"] = [f.model_dump(mode="json") for f in snapshot.manifest.forgets]
    print(json.dumps(stats, indent=2))
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    from logicmap.graphs.surfaces.visualize import write_event_graph
    from logicmap.memory.indexes.graph import EventGraph

    out = output_path(args.out or f"{args.namespace}-graph.html", "graph --out")
    resources = resources_from_args(args)
    resources.store.require_namespace(args.namespace)
    with _writing(out):
        write_event_graph(EventGraph.of(resources.store.snapshot(args.namespace)), out)
    print(f"wrote {out}")
    return 0


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A file system error while writing ``path`` names it (a full disk reports no file name of its own)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise


def _print_result(result: Any, as_json: bool) -> None:
    if as_json:
        print(printable_json(result.model_dump_json(indent=2)))
        return
    print(printable(f"Q: {result.question}", one_line=True))
    print(printable(f"A: {result.answer}", one_line=True))
    snapshot_turns = result.details.get("turn_texts", {})
    print(f"evidence ({len(result.evidence)}):")
    for item in result.evidence[:8]:
        print(printable(f"  - [{item.kind} {item.id}] {item.text[:160]}", one_line=True))
        for tid in item.turn_ids[:4]:
            if tid in snapshot_turns:
                print(printable(f"      {snapshot_turns[tid][:160]}", one_line=True))
    c = result.cost
    print(
        f"cost: {c.llm_calls} LLM calls, {c.prompt_tokens}+{c.completion_tokens} tokens"
        f"{' (estimated)' if c.tokens_estimated else ''}, {result.steps} steps, {c.wall_time_s:.2f}s"
    )
    for fb in result.fallbacks:
        print(printable(f"  fallback: {fb.role}: {fb.reason}", one_line=True))


def cmd_ask(args: argparse.Namespace) -> int:
    from logicmap.graphs.strategies.registry import STRATEGIES, answer, strategy_function

    strategy_function(args.strategy)  # an unknown name: one line naming the choices
    if args.backbone and "backbone" not in STRATEGIES[args.strategy].options:
        takes = ", ".join(name for name, s in STRATEGIES.items() if "backbone" in s.options)
        raise ValueError(f"--backbone: strategy {args.strategy} takes no backbone (these do: {takes})")
    resources = resources_from_args(args)
    resources.store.require_namespace(args.namespace)
    policy = policy_from_args(args, resources)
    options: dict[str, Any] = {"policy": policy}
    if args.backbone:
        options["backbone"] = args.backbone
    result = answer(args.strategy, args.question, args.namespace, resources=resources, **options)
    _print_result(result, args.json)
    return 0


def cmd_namespaces(args: argparse.Namespace) -> int:
    """An operator's listing of every tenant (request errors never list them)."""
    from logicmap.memory.records.records import validate_namespace

    for ns in resources_from_args(args).store.namespaces():
        print(validate_namespace(ns))  # the store lists valid names only: none can break or forge a line
    return 0


def cmd_local_llm(args: argparse.Namespace) -> int:
    """Offline model: `logicmap local-llm [--port P] [--benchmark] [-- CMD ...]` (agents.local_llm)."""
    from logicmap.agents.local_llm import run_local_llm_command
    from logicmap.memory.runtime.input_limits import check_port

    check_port(args.port)
    command = [c for c in args.run if c != "--"]
    return run_local_llm_command(
        port=args.port,
        benchmark=args.benchmark,
        command=command,
        venv=args.venv,
        n_threads=args.threads,
        model_path=args.model,
    )


def cmd_chat(args: argparse.Namespace) -> int:
    """MRAgent chatbot: `logicmap chat -n NS [--strategy S]` (graphs.chatbot); /evidence, /quit."""
    from logicmap.graphs.chat.chatbot import run_chat

    resources = resources_from_args(args)
    return run_chat(
        resources, args.namespace, strategy=args.strategy, policy=policy_from_args(args, resources), user_name=args.user
    )


def cmd_facts(args: argparse.Namespace) -> int:
    """REAL: `logicmap facts -n NS [--as-of DATE] [--history HEAD RELATION]` (memory.facts)."""
    from logicmap.memory.records.facts import describe_facts, parse_when

    resources = resources_from_args(args)
    resources.store.require_namespace(args.namespace)
    if args.as_of and parse_when(args.as_of) is None:
        raise ValueError(f"--as-of {args.as_of!r} is not a date (YYYY-MM-DD, YYYY-MM or YYYY)")
    snapshot = resources.store.snapshot(args.namespace)
    lines = describe_facts(snapshot, as_of=args.as_of, history=tuple(args.history) if args.history else None)
    print("\n".join(printable(line, one_line=True) for line in lines) if lines else "no facts")
    return 0


class _ProgressBars:
    """``memory.files.backup`` progress as one tqdm bar per phase (export, read, commit) on stderr."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bars: dict[str, Any] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        from tqdm import tqdm

        bar = self.bars.get(phase)
        if bar is None:
            unit = "commit" if phase == "commit" else "record"
            bar = self.bars[phase] = tqdm(total=total, desc=f"{phase} {self.label}", unit=unit, file=sys.stderr)
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}s" for kind, n in counts.items())


def cmd_export(args: argparse.Namespace) -> int:
    """`logicmap export -n NS FILE`: a namespace to a portable JSONL backup (memory.backup)."""
    from logicmap.memory.files.backup import export_namespace

    path = output_path(args.file, "export file")
    resources = resources_from_args(args)
    if resources.store.fast_writes and resources.store.pending_writes(args.namespace):
        from logicmap.graphs.writes.consolidate import flush

        flush(args.namespace, resources=resources)  # pending writes are exported consolidated, not left out
    bars = None if args.quiet else _ProgressBars(args.namespace)
    try:
        report = export_namespace(resources.store, args.namespace, path, progress=bars)
    finally:
        if bars is not None:
            bars.close()
    print(
        f"exported {report.namespace} (generation {report.generation}) to {report.path}: {_counts(report.counts)}; "
        f"{report.bytes} bytes, sha256 {report.body_sha256[:16]}, {report.wall_time_s:.2f}s"
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """`logicmap import FILE [-n NS]`: a backup restored into an empty namespace (memory.backup)."""
    from logicmap.memory.files.backup import import_namespace

    resources = resources_from_args(args)
    bars = None if args.quiet else _ProgressBars(Path(args.file).name)
    try:
        report = import_namespace(
            resources.store,
            args.file,
            args.namespace,
            embeddings=resources.embeddings,
            progress=bars,
            allow_forgotten=bool(getattr(args, "allow_forgotten", False)),
        )
    finally:
        if bars is not None:
            bars.close()
    renamed = f" (exported as {report.source_namespace})" if report.source_namespace != report.namespace else ""
    print(
        f"imported {report.path} into {report.namespace}{renamed} (generation {report.generation}): "
        f"{_counts(report.counts)}; {report.wall_time_s:.2f}s"
    )
    if report.forgotten:
        print(
            f"  note: {report.forgotten} turns of the file were forgotten in {report.source_namespace} since it was "
            "exported: left out (--allow-forgotten restores them)",
            file=sys.stderr,
        )
    return 0


def confirmed(args: argparse.Namespace, command: str, what: str) -> bool:
    """Whether a destructive command may go on: ``--yes``, else the user's ``y`` at a prompt on the terminal (on
    stderr; anything else declines). Without ``--yes`` and without a terminal to ask on, ``ValueError`` (one line,
    exit 2): a script must say ``--yes``."""
    if getattr(args, "yes", False):
        return True
    if sys.stdin is None or not sys.stdin.isatty():
        raise ValueError(f"{command}: {what}, which cannot be undone: add --yes to confirm (no terminal to ask on)")
    print(
        printable(f"{command}: {what}, which cannot be undone. Go on? [y/N] ", one_line=True),
        end="",
        file=sys.stderr,
        flush=True,
    )
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _forget_what(args: argparse.Namespace) -> str:
    """What ``logicmap forget`` is asked to forget, in words (for its confirmation)."""
    parts = [
        f"{label} {', '.join(values)}"
        for label, values in (("turns", args.turn), ("sessions", args.session), ("store keys", args.key))
        if values
    ]
    if args.before:
        parts.append(f"every turn said before {args.before}")
    purge = " and purges them from disk" if args.purge else ""
    return f"this forgets {'; '.join(parts)} in {args.namespace}, with everything derived only from them{purge}"


def cmd_forget(args: argparse.Namespace) -> int:
    """`logicmap forget -n NS --turn ID ... | --session ID ... | --key KEY ... | --before DATE [--purge] [--yes]`
    (graphs.forget); asks first unless --yes."""
    from logicmap.graphs.writes.forget import forget
    from logicmap.memory.store import UnknownMemoryError

    if not (args.turn or args.session or args.key or args.before):
        raise ValueError("say what to forget: --turn ID, --session ID, --key KEY or --before DATE")
    if not confirmed(args, "forget", _forget_what(args)):
        print("nothing was forgotten", file=sys.stderr)
        return 1
    try:
        report = forget(
            args.namespace,
            turn_ids=args.turn or (),
            session_ids=args.session or (),
            keys=args.key or (),
            before=args.before,
            purge=args.purge,
            surface="cli",
            resources=resources_from_args(args),
        )
    except UnknownMemoryError as exc:
        if not args.purge:
            raise
        # Already forgotten (or deleted from a LogicMapStore): what it left on disk is purged by `logicmap purge`.
        raise ValueError(
            f"{exc}; to remove from disk what earlier forgets and deletes left: logicmap purge -n {args.namespace}"
        ) from None
    removed = ", ".join(f"{n} {kind}" for kind, n in report.removed.items()) or "nothing"
    print(f"forgot in {report.namespace} (generation {report.generation}): {removed}")
    if report.purge is not None:
        _print_purge(report.purge)
    return 0


def _print_purge(purge: Any) -> None:
    gone = sum(purge.versions_removed.values())
    print(
        f"purged: {gone} retired versions removed, {purge.collections_rebuilt} collections rebuilt"
        + (", database compacted" if purge.compacted else "")
        + (f"; {purge.limits}" if purge.limits else "")
    )


def cmd_purge(args: argparse.Namespace) -> int:
    """`logicmap purge -n NS`: every retired version of the namespace removed from disk (graphs.forget.purge)."""
    from logicmap.graphs.writes.forget import purge

    _print_purge(purge(args.namespace, resources=resources_from_args(args)))
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    """`logicmap consolidate [-n NS] [--watch]`: build the pending fast writes into memory (graphs.consolidate); with
    --watch, keep doing it as writes arrive (a deployment's worker, beside stores run with consolidation="manual")."""
    from logicmap.graphs.writes.consolidate import flush, pending

    resources = resources_from_args(args)
    store = resources.store
    while True:
        names = [args.namespace] if args.namespace else store.pending_namespaces()
        for name in names:
            waiting = pending(name, resources=resources).writes
            if not waiting and not args.watch:
                print(f"{name}: nothing pending")
                continue
            if waiting:
                report = flush(name, resources=resources)
                print(
                    f"{name}: consolidated {report.sessions} sessions ({report.superseded} superseded writes) in "
                    f"{report.wall_time_s:.1f}s; {report.cost.llm_calls} LLM calls, "
                    f"{report.cost.prompt_tokens + report.cost.completion_tokens} tokens",
                    flush=True,
                )
        if not args.watch:
            return 0
        time.sleep(args.interval)


def cmd_delete_namespace(args: argparse.Namespace) -> int:
    """`logicmap delete-namespace -n NS [--yes]`: one namespace deleted and purged (never one whose name starts with
    it); asks first unless --yes."""
    from logicmap.graphs.writes.forget import delete_namespace
    from logicmap.memory.records.records import validate_namespace

    namespace = validate_namespace(args.namespace)
    what = f"this deletes namespace {namespace} and all its memory from disk ({namespace}.* namespaces stay)"
    if not confirmed(args, "delete-namespace", what):
        print("nothing was deleted", file=sys.stderr)
        return 1
    done = delete_namespace(args.namespace, resources=resources_from_args(args))
    print(
        f"deleted namespace {done['namespace']} ({done['collections']} collections)"
        + (", database compacted" if done["compacted"] else "")
    )
    return 0


LIST_KINDS = ("turns", "events", "facts", "r2_facts", "items")
"""``list --kind``'s choices: ``graphs.writes.forget.KINDS`` (a test holds them equal; the parser imports nothing heavy)."""


def cmd_list(args: argparse.Namespace) -> int:
    """`logicmap list -n NS [--kind turns|events|facts|r2_facts|items]`: one JSON line per memory (a store item's id
    is its key)."""
    from logicmap.graphs.writes.forget import list_memories

    resources = resources_from_args(args)
    page = list_memories(args.namespace, kind=args.kind, limit=args.limit, cursor=args.cursor, resources=resources)
    for item in page.items:
        print(printable_json(json.dumps(item)))
    if page.next_cursor is not None:
        print(f"more: --cursor {page.next_cursor}", file=sys.stderr)
    if args.kind == "items" and not page.items and resources.store.snapshot(args.namespace).r2_facts:
        print(
            "note: no store items here; Memory-R2 facts, which --kind items listed before, are --kind r2_facts",
            file=sys.stderr,
        )
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    """`logicmap get -n NS ID`: one memory with its whole record, as JSON."""
    from logicmap.graphs.writes.forget import get_memory

    found = get_memory(args.namespace, args.id, resources=resources_from_args(args))
    print(printable_json(json.dumps(found, indent=2)))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """`logicmap mcp -n NS | --http --tenants FILE`: the memory toolkit over MCP (graphs.mcp_server).

    A stdio server that cannot start (a bad flag, the store in use by another process, ...) answers its client's
    ``initialize`` with a JSON-RPC error carrying the same line it prints on stderr, then exits: the client shows
    the reason, not only "Connection closed"."""
    try:
        serve = _mcp_server(args)
    except Exception as exc:
        if not args.http:
            _refuse_stdio_client(printable(f"error: {exc}", one_line=True))
        raise
    serve()
    return 0


def _refuse_stdio_client(line: str, *, wait_s: float = 30.0) -> bool:
    """Answer a stdio MCP client's requests with a JSON-RPC error whose message is ``line``, until its ``initialize``
    (a newer client probes ``server/discover`` first and falls back to ``initialize`` on an error); whether
    ``initialize`` was answered (not: stdin is a terminal, closed, or silent for ``wait_s`` seconds).

    Plain JSON-RPC 2.0, as the MCP stdio transport frames it (one JSON object per line), so it also works when the
    mcp package is what is missing."""
    import select

    if sys.stdin is None or sys.stdin.isatty():
        return False
    stdin = sys.stdin.buffer
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0 and select.select([stdin], [], [], left)[0]:
        raw = stdin.readline()
        if not raw:
            return False  # the client closed its end
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if isinstance(message, dict) and "method" in message and message.get("id") is not None:
            error = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": line}}
            sys.stdout.write(json.dumps(error) + "\n")
            sys.stdout.flush()
            if message["method"] == "initialize":
                return True
    return False


def _mcp_server(args: argparse.Namespace) -> Callable[[], None]:
    """How ``logicmap mcp`` serves: its MCP server built (the store opened, the embedder loaded), over stdio or
    HTTP."""
    from functools import partial

    if args.http is False and args.tenants:
        raise ValueError("--tenants maps HTTP bearer tokens to namespaces: add --http (stdio serves one namespace)")
    if bool(args.namespace) == bool(args.tenants):
        raise ValueError(
            "name the tenant one way: --namespace NS (the whole server) or --http --tenants FILE "
            "(one namespace per bearer token)"
        )
    from logicmap.memory.runtime.input_limits import check_port

    check_port(args.port)
    try:
        from logicmap.graphs.surfaces import mcp_server
    except ImportError as exc:
        raise ValueError(f"the MCP server needs the mcp package ({exc}): pip install 'logicmap[mcp]'") from None
    from logicmap.memory.records.records import validate_namespace

    namespace = validate_namespace(args.namespace) if args.namespace else None
    tenants = mcp_server.load_tenants(args.tenants) if args.tenants else None
    resources = resources_from_args(args)
    policy = policy_from_args(args, resources)
    server = mcp_server.build_mcp_server(
        resources, namespace=namespace, tenants=tenants, policy=policy, writes=not args.read_only, profile=args.profile
    )
    resources.embeddings.embed_query("warm-up")  # the embedder loads now, not in the first client's call
    if args.http:
        return partial(mcp_server.serve_http, server, port=args.port, tenants=tenants)
    return partial(mcp_server.serve_stdio, server)


def _add_mcp_command(sub: Any) -> None:
    p = sub.add_parser("mcp", help="serve the memory toolkit over MCP (stdio, or streamable HTTP on 127.0.0.1)")
    p.add_argument("--namespace", "-n", help="the one namespace this server serves")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 (default: stdio)")
    p.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (default: a free one, printed)")
    p.add_argument(
        "--tenants",
        metavar="FILE",
        help="HTTP: a JSON object of bearer token -> namespace; each connection's token names its namespace",
    )
    p.add_argument("--read-only", action="store_true", help="no remember, forget_memory or update_memory tools")
    p.add_argument(
        "--profile",
        choices=["full", "compact"],
        default="full",
        help="compact: two tools, search_memory and manage_memory (as LangMem's), instead of the full set",
    )
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.set_defaults(func=cmd_mcp)


def _add_lifecycle_commands(sub: Any) -> None:
    p = sub.add_parser("forget", help="forget turns (by id, session or date) and everything derived only from them")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--turn", nargs="+", metavar="ID", help="turn ids (dia ids, as `logicmap list` shows them)")
    p.add_argument("--session", nargs="+", metavar="ID", help="every turn of these sessions")
    p.add_argument("--key", nargs="+", metavar="KEY", help="items LogicMapStore.put stored under these keys")
    p.add_argument("--before", metavar="DATE", help="every turn said before this date (YYYY-MM-DD)")
    p.add_argument("--purge", action="store_true", help="then remove the forgotten records from disk for good")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask first (needed without a terminal)")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser(
        "purge",
        help="remove every retired version of a namespace from disk (what forgets, store "
        "deletes, replaced values and updates retired; a purge a stopped process left unfinished)",
    )
    p.add_argument("--namespace", "-n", required=True)
    p.set_defaults(func=cmd_purge)

    p = sub.add_parser(
        "consolidate",
        help="build pending fast writes (store puts, chat turns) into the event graph "
        "now; --watch keeps doing it, as a deployment's worker",
    )
    p.add_argument("--namespace", "-n", help="only this namespace (default: every namespace with pending writes)")
    p.add_argument("--watch", action="store_true", help="keep consolidating new writes until stopped")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between looks for new writes (--watch)")
    p.set_defaults(func=cmd_consolidate)

    p = sub.add_parser("delete-namespace", help="delete one namespace and purge it (its children are kept)")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask first (needed without a terminal)")
    p.set_defaults(func=cmd_delete_namespace)

    p = sub.add_parser("list", help="list a namespace's memories, one JSON line each")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument(
        "--kind",
        choices=LIST_KINDS,
        default="turns",
        help="turns, events, facts (REAL's temporal facts), r2_facts (Memory-R2's facts, which "
        "--kind items listed before), items (LogicMapStore items, by key)",
    )
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--cursor", help="the cursor the page before printed")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "get", help="one memory (turn, event, fact, Memory-R2 fact) by id, or a store item by key, as JSON"
    )
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("id")
    p.set_defaults(func=cmd_get)


def _add_backup_commands(sub: Any) -> None:
    p = sub.add_parser("export", help="write a namespace to a portable JSONL backup file")
    p.add_argument("file")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="restore a backup file into an empty namespace (never merges or overwrites)")
    p.add_argument("file")
    p.add_argument("--namespace", "-n", help="the namespace to restore into (default: the one exported)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _allow_forgotten(p, "restore turns forgotten in the exported namespace since the file was written")
    p.set_defaults(func=cmd_import)


def _allow_forgotten(parser: Any, what: str) -> None:
    parser.add_argument(
        "--allow-forgotten", action="store_true", help=f"also {what} (default: left out; memory.tombstones)"
    )


def _add_stored_memory_commands(sub: Any) -> None:
    """export and import, then forget, purge, delete-namespace, list and get, then mcp (the toolkit over MCP)."""
    _add_backup_commands(sub)
    _allow_forgotten(sub.choices["ingest"], "store turns a forget left tombstones for")  # ingest's, like import's
    _add_lifecycle_commands(sub)
    _add_mcp_command(sub)


def add_core_commands(sub: Any) -> None:
    """The memory commands: ingest, ask, graph, stats, namespaces, backups, the memory lifecycle, local-llm, chat."""
    p = sub.add_parser("ingest", help="ingest a LoCoMo / LongMemEval / JSONL conversation file")
    p.add_argument("file")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--append",
        action="store_true",
        help="continue the namespace's conversation although the file "
        "repeats none of its sessions (never into a namespace another conversation created)",
    )
    p.add_argument(
        "--redo-fallbacks",
        action="store_true",
        help="rebuild with the chat model the committed sessions whose roles fell back (see `stats`)",
    )
    p.add_argument(
        "--memory-manager",
        choices=["none", "r2"],
        default=None,
        help="r2: the Memory-R2 extractor and manager (ADD/UPDATE/DELETE/NOOP) also maintain the "
        "namespace's R2 fact memory, which `ask --strategy r2` reads",
    )
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("ask", help="answer a question from a namespace's memory")
    p.add_argument("question")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--strategy", "-s", default="compass", help="answering strategy: " + _STRATEGY_NAMES)
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--backbone", help="retrieval backbone (goalmem): bm25, dense, events")
    p.add_argument("--json", action="store_true", help="print the typed result as JSON")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser(
        "graph", help="draw a namespace's event graph to a self-contained HTML file (or PNG: --out x.png)"
    )
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--out", "-o")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("stats", help="memory statistics of a namespace")
    p.add_argument("--namespace", "-n", required=True)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("namespaces", help="list namespaces with committed memory")
    p.set_defaults(func=cmd_namespaces)

    _add_stored_memory_commands(sub)
    _add_model_and_chat_commands(sub)


def _add_model_and_chat_commands(sub: Any) -> None:
    """local-llm, chat and facts."""
    p = sub.add_parser("local-llm", help="serve SmolLM2-135M (llama.cpp, OpenAI-compatible) on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--threads", type=int, help="generation threads (default: half the cores)")
    p.add_argument("--venv", help="the llama-cpp-python venv (default: LOGICMAP_LLM_VENV or .venv-llm)")
    p.add_argument("--model", help="serve this GGUF instead of SmolLM2 (e.g. a trained manager from train-r2)")
    p.add_argument("--benchmark", action="store_true", help="print start time and tokens/s, then stop")
    p.add_argument("run", nargs=argparse.REMAINDER, help="-- CMD ...: run CMD against the server with LOGICMAP_* set")
    p.set_defaults(func=cmd_local_llm)

    p = sub.add_parser("chat", help="chat with long-term memory (/evidence shows what was recalled, /quit ends)")
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--strategy", "-s", default="rerank", help="recall strategy: " + _STRATEGY_NAMES)
    p.add_argument("--policy", choices=["auto", "llm", "heuristic"], default="auto")
    p.add_argument("--user", default="user", help="the speaker name your turns are stored under")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser(
        "facts", help="REAL's temporal facts of a namespace: all, as of a date, or one attribute's history"
    )
    p.add_argument("--namespace", "-n", required=True)
    p.add_argument("--as-of", help="only facts valid at this date (YYYY-MM-DD, YYYY-MM or YYYY)")
    p.add_argument("--history", nargs=2, metavar=("HEAD", "RELATION"), help="every version of one attribute")
    p.set_defaults(func=cmd_facts)


def build_parser(*extensions: Callable[[Any], None]) -> argparse.ArgumentParser:
    """The ``logicmap`` parser with the core commands, then each extension's (called with the subparsers).

    Layers above graphs add their commands this way: ``evals.cli.main`` passes ``evals.cli.add_eval_commands``.
    """
    parser = argparse.ArgumentParser(prog="logicmap", description="Long-term memory for conversational agents.")
    parser.add_argument("--data-dir", help="memory directory (default: LOGICMAP_DATA_DIR or .logicmap)")
    parser.add_argument(
        "--store-url",
        help="the storage backend (default: LOGICMAP_STORE_URL; unset: Chroma in the "
        "data directory): postgresql://..., memory://NAME (docs/backends.md)",
    )
    parser.add_argument("--embeddings", choices=["minilm", "openai", "hashing"], help="embedding provider override")
    sub = parser.add_subparsers(dest="command", required=True)
    add_core_commands(sub)
    for extend in extensions:
        extend(sub)
    return parser


_UNCOMMITTED_NOTE = {"ingest": "the session in progress was not committed; re-run to resume"}


def run(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse ``argv`` with ``parser`` and run the chosen command; errors the user can fix exit 2 with one line."""
    args = parser.parse_args(argv)
    try:
        return _run_command(args)
    finally:
        _close_command_resources()  # the store's Chroma client and lock: main() may run again in this process


def _run_command(args: argparse.Namespace) -> int:
    from logicmap.agents.provider import ProviderError
    from logicmap.memory.files.loaders import DataFormatError
    from logicmap.memory.runtime.deadline import RunDeadlineExceeded
    from logicmap.memory.store import GenerationConflict, StoreError, UnknownMemoryError, UnknownNamespaceError

    try:
        return int(args.func(args) or 0)
    except (DataFormatError, UnknownNamespaceError, UnknownMemoryError, StoreError, ValueError) as exc:
        print(printable(f"error: {exc}", one_line=True), file=sys.stderr)
        return 2
    except (ProviderError, RunDeadlineExceeded) as exc:
        note = _UNCOMMITTED_NOTE.get(args.command, "nothing was answered")
        print(printable(f"error: {exc}; {note}", one_line=True), file=sys.stderr)
        return 3
    except GenerationConflict as exc:  # NamespaceBusyError: its message says what was (not) written and what to do
        print(printable(f"error: {exc}", one_line=True), file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("interrupted; committed sessions are kept, re-run to resume", file=sys.stderr)
        return 130
    except OSError as exc:  # a path the user gave that cannot be read or written: a directory, a full disk...
        print(printable(f"error: {_os_error_line(exc)}", one_line=True), file=sys.stderr)
        return 2


def _os_error_line(exc: OSError) -> str:
    """What and where of a file system error, without Python's "[Errno N]" decoration."""
    where = exc.filename if exc.filename is not None else ""
    what = exc.strerror or str(exc) or type(exc).__name__
    return f"{where}: {what}" if where else what


def main(argv: list[str] | None = None) -> int:
    """The core commands only; the ``logicmap`` program (``evals.cli.main``) adds the eval commands."""
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
