"""Shared pieces of the reliability suite: a role-aware garbage chat model, memory invariants, marked tenants.

Strategies and tools that are still being written are imported lazily; a missing one skips with a reason.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import typing
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, PrivateAttr

from logicmap.agents.testing import ScriptedChatModel
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.memory.records.kinds import RECORD_KINDS
from tests.chroma_internals import uncommitted_versions, visible_duplicates  # Chroma's versions, for these tests

__all__ = [
    "ForkWorker",
    "GUARANTEED_INVALID_KINDS",
    "REPLY_KINDS",
    "ROOT",
    "SAMPLE",
    "GarbageChatModel",
    "ReplySpec",
    "available_strategy",
    "locomo_document",
    "marked_conversation",
    "memory_problems",
    "require_module",
    "strategy_names",
    "subprocess_env",
    "uncommitted_versions",
    "visible_duplicates",
]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_conversation.json"


# -- environment ---------------------------------------------------------------------------------
def subprocess_env(data_dir: Path | str, **extra: str) -> dict[str, str]:
    """Environment of a LogicMap subprocess: hashing embedder, a private data dir, no LLM, embedded store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGICMAP_")}
    env.update(
        LOGICMAP_EMBEDDING_PROVIDER="hashing",
        LOGICMAP_DATA_DIR=str(data_dir),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        ANONYMIZED_TELEMETRY="False",
        PYTHONPATH=str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        PYTHONUNBUFFERED="1",
        LOGICMAP_CONSOLIDATION="sync",  # as the suite's own stores (tests/conftest.py); extra may say otherwise
    )
    env.pop("LANGSMITH_TRACING", None)
    env.pop("LANGCHAIN_TRACING_V2", None)
    env.update(extra)
    return env


def require_module(name: str) -> types.ModuleType:
    """The module, or a skip naming it (the suite grows as strategies and tools land)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.skip(f"{name} is not available yet ({exc}); its reliability tests run once it lands")


def strategy_names() -> list[str]:
    from logicmap.graphs.strategies.registry import STRATEGIES

    return sorted(STRATEGIES)


def available_strategy(name: str) -> Callable[..., Any]:
    """The strategy's answer function, or a skip when its module is not there yet."""
    from logicmap.graphs.strategies.registry import strategy_function

    return strategy_function(name)


# -- memory invariants ---------------------------------------------------------------------------
def memory_problems(snapshot: Any, session_turns: dict[str, list[str]] | None = None) -> list[str]:
    """Everything that would make a committed snapshot inconsistent (empty list: consistent)."""
    problems: list[str] = []
    ns = snapshot.namespace
    turns, events = snapshot.turns, snapshot.events
    committed = set(snapshot.manifest.sessions)
    for kind in (k.field for k in RECORD_KINDS):
        for rid, record in getattr(snapshot, kind).items():
            if record.namespace != ns:
                problems.append(f"{kind} {rid} belongs to namespace {record.namespace!r}, read from {ns!r}")
    visible_sessions = {t.session_id for t in turns.values()}
    if visible_sessions != committed:
        problems.append(
            f"manifest lists sessions {sorted(committed)} but turns of {sorted(visible_sessions)} are visible"
        )
    if session_turns is not None:
        for sid in committed:
            got = sorted(t for t, turn in turns.items() if turn.session_id == sid)
            if sid in session_turns and got != sorted(session_turns[sid]):
                problems.append(
                    f"session {sid}: visible turns {got} differ from the file's {sorted(session_turns[sid])}"
                )
    positions = [t.position for t in turns.values()]
    if len(set(positions)) != len(positions):
        dup = sorted({p for p in positions if positions.count(p) > 1})
        problems.append(f"turn positions repeat: {dup[:10]}")
    orders = [e.order for e in events.values()]
    if len(set(orders)) != len(orders):
        dup = sorted({o for o in orders if orders.count(o) > 1})
        problems.append(f"event orders repeat: {dup[:10]}")
    for eid, event in events.items():
        missing = [t for t in event.turn_ids if t not in turns]
        if missing:
            problems.append(f"event {eid} cites missing turns {missing[:5]}")
        if not event.turn_ids:
            problems.append(f"event {eid} cites no turn")
        if event.session_id not in committed:
            problems.append(f"event {eid} belongs to uncommitted session {event.session_id}")
    for rid, rel in snapshot.relations.items():
        for end in (rel.source, rel.target):
            if end not in events:
                problems.append(f"relation {rid} ends at missing event {end}")
        missing = [t for t in rel.turn_ids if t not in turns]
        if missing:
            problems.append(f"relation {rid} cites missing turns {missing[:5]}")
    for tid, topic in snapshot.topics.items():
        missing = [m for m in topic.members if m not in events]
        if missing:
            problems.append(f"topic {tid} has missing members {missing[:5]}")
    for fid, fact in snapshot.facts.items():
        missing = [t for t in fact.turn_ids if t not in turns]
        if missing:
            problems.append(f"fact {fid} cites missing turns {missing[:5]}")
    for gid, tag in snapshot.tags.items():
        if tag.cue_id not in snapshot.cues:
            problems.append(f"tag {gid} points to missing cue {tag.cue_id}")
        if tag.target_kind == "event" and tag.target_id not in events:
            problems.append(f"tag {gid} points to missing event {tag.target_id}")
    for eid in events:
        if eid not in snapshot.event_vectors:
            problems.append(f"event {eid} has no vector")
    for tid in turns:
        if tid not in snapshot.turn_vectors:
            problems.append(f"turn {tid} has no vector")
    return problems


# -- tenants with marker words -------------------------------------------------------------------
_TOPICS = [
    "adopted a puppy named {m}",
    "started a pottery class near the {m} market",
    "moved to a flat on {m} street",
    "is training for the {m} half marathon",
    "cooked ramen with {m} mushrooms",
    "visited the {m} museum",
    "bought a bike from {m} cycles",
    "plans a trip to {m} island in May",
    "fixed the {m} bakery oven",
]


def marked_conversation(
    marker: str,
    *,
    sessions: int = 2,
    turns_per_session: int = 4,
    seed: int = 0,
    first_session: int = 1,
    start: datetime = datetime(2023, 3, 4, 14, 15),
    conversation_id: str | None = None,
) -> Conversation:
    """A conversation whose every turn carries ``marker`` (ids like the sample: S1.., D1:1..)."""
    rng = random.Random(f"{marker}-{seed}")
    people = [f"Ana{marker}", f"Rui{marker}"]
    out = []
    for s in range(first_session, first_session + sessions):
        stamp = start + timedelta(days=9 * (s - 1))
        raw = []
        for t in range(1, turns_per_session + 1):
            topic = rng.choice(_TOPICS).format(m=marker)
            raw.append(
                RawTurn(
                    dia_id=f"D{s}:{t}",
                    speaker=people[(t - 1) % 2],
                    text=f"{marker} note {s}.{t}: my friend {topic}, said {people[t % 2]} about {marker}.",
                )
            )
        out.append(
            Session(
                session_id=f"S{s}", timestamp=stamp, timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"), turns=raw
            )
        )
    return Conversation(conversation_id=conversation_id or f"conv-{marker}", speakers=people, sessions=out)


def locomo_document(conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation as a LoCoMo file (session ids ``S<n>`` become ``session_<n>``)."""
    body: dict[str, Any] = {"speaker_a": conversation.speakers[0], "speaker_b": conversation.speakers[-1]}
    for session in conversation.sessions:
        key = f"session_{session.session_id.lstrip('S')}"
        body[f"{key}_date_time"] = session.timestamp_text
        body[key] = [{"speaker": t.speaker, "dia_id": t.dia_id, "text": t.text} for t in session.turns]
    return [{"sample_id": conversation.conversation_id, "conversation": body, "qa": []}]


# -- garbage chat model --------------------------------------------------------------------------
REPLY_KINDS = (
    "text",
    "empty",
    "whitespace",
    "huge_text",
    "huge_json",
    "json",
    "json_list",
    "wrong_schema",
    "mutant",
    "plausible",
    "fenced",
    "tool_call",
    "invalid_tool_call",
    "raise",
    "prose_with_json",
)
# Replies no schema can accept: no JSON object in them, or a call that fails.
GUARANTEED_INVALID_KINDS = ("empty", "whitespace", "huge_text", "json_list", "invalid_tool_call", "raise", "bare_text")

ID_POOL = [
    "E1",
    "E2",
    "E3",
    "E4",
    "E9",
    "E0",
    "S1-E1",
    "S1-E2",
    "S2-E1",
    "S3-E2",
    "S9-E9",
    "D1:1",
    "D1:2",
    "D2:3",
    "D5:9",
    "D9:9",
    "T1",
    "T2",
    "T99",
    "0",
    "1",
    "-1",
    "",
    " ",
    "Maya",
    "Leo",
    "none",
    "null",
    "E1; DROP",
    "🙂",
]
INT_POOL = [-1, 0, 1, 2, 3, 4, 7, 99, 10**12]
HUGE = 100_000


class ReplySpec(BaseModel):
    """One scripted reply, materialized for the role and schema of the call that receives it."""

    kind: str
    text: str = ""
    payload: Any = None
    seed: int = 0


def _junk(rng: random.Random) -> Any:
    return rng.choice([None, "", "??", -5, 3.5, True, [], {}, [1, "x"], {"a": {"b": None}}, "x" * 50, "E42", 10**15])


def _value(annotation: Any, rng: random.Random, mutate: float, depth: int = 0) -> Any:
    """A value for a field type: plausible (ids from the pool, small ints) or, with probability ``mutate``, junk."""
    if rng.random() < mutate:
        return _junk(rng)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is typing.Any or annotation is None:
        return rng.choice(ID_POOL)
    if origin is typing.Annotated:
        return _value(args[0], rng, mutate, depth)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)] or [type(None)]
        return None if type(None) in args and rng.random() < 0.15 else _value(rng.choice(options), rng, mutate, depth)
    if origin is Literal:
        return rng.choice([*args, "NOT_A_CHOICE"]) if rng.random() < 0.2 else rng.choice(args)
    if origin in (list, Sequence, set, tuple, frozenset) or annotation in (list, tuple, set):
        inner = args[0] if args else typing.Any
        if depth > 3:
            return []
        return [_value(inner, rng, mutate, depth + 1) for _ in range(rng.choice([0, 1, 2, 3, 6]))]
    if origin is dict or annotation is dict:
        inner = args[1] if len(args) == 2 else typing.Any
        return {rng.choice(ID_POOL): _value(inner, rng, mutate, depth + 1) for _ in range(rng.choice([0, 1, 3]))}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_dict(annotation, rng, mutate, depth + 1)
    if annotation is bool:
        return rng.random() < 0.5
    if annotation is int:
        return rng.choice(INT_POOL)
    if annotation is float:
        return rng.choice([0.0, 0.5, 1.0, -0.3, 1.7, 0.95])
    if annotation is datetime:
        return rng.choice(["2023-05-08", "2023-05-08T13:56:00", "yesterday", "", "2023-13-45"])
    if annotation is str:
        return rng.choice([*ID_POOL, "Maya adopted a dog", "I don't know", "yes", "EXPAND", "ANSWER", "SKIP"])
    return rng.choice(ID_POOL)


def _model_dict(schema: type[BaseModel], rng: random.Random, mutate: float, depth: int = 0) -> dict[str, Any]:
    hints = typing.get_type_hints(schema, include_extras=False)
    out: dict[str, Any] = {}
    for name, info in schema.model_fields.items():
        if rng.random() < mutate / 2:
            continue  # dropped field
        out[info.alias or name] = _value(hints.get(name, info.annotation), rng, mutate, depth)
    if rng.random() < mutate:
        out[rng.choice(["extra", "thoughts", "E1"])] = _junk(rng)
    return out


def _huge_strings(value: Any) -> Any:
    if isinstance(value, str):
        return value + "y" * HUGE
    if isinstance(value, list):
        return [_huge_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: _huge_strings(v) for k, v in value.items()}
    return value


class GarbageChatModel(ScriptedChatModel):
    """A ``ScriptedChatModel`` whose replies come from a hypothesis-drawn list of ``ReplySpec``s.

    The spec for a call is chosen by a hash of the role and the last message, so parallel branches get the
    same reply whatever order their threads run in (failures reproduce). Each reply is built for the call:
    the schema a role bound (``run_role`` binds it with ``bind_tools``) or the tools an agent bound, and the
    role read from the ``role:<name>`` tag ``run_role`` puts on every call (a combined call counts as the roles
    of its ``part:<name>`` tags).
    """

    specs: list[ReplySpec] = []
    roles_called: list[str] = []
    _bound: Any = PrivateAttr(default_factory=threading.local)
    _shared_tools: list[Any] = PrivateAttr(default_factory=list)
    _call_lock: Any = PrivateAttr(default_factory=threading.Lock)
    _pending: dict[int, Any] = PrivateAttr(default_factory=dict)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> GarbageChatModel:
        self._bound.tools = list(tools)
        if not (len(tools) == 1 and isinstance(tools[0], type) and issubclass(tools[0], BaseModel)):
            self._shared_tools = list(tools)  # an agent's toolset, possibly invoked from other threads
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        tags = list(getattr(run_manager, "tags", None) or [])
        role = next((t.split(":", 1)[1] for t in tags if t.startswith("role:")), None) or "agent"
        # A combined call (the session analyst) stands for the roles of its parts: those are what can fall back.
        parts = [t.split(":", 1)[1] for t in tags if t.startswith("part:")]
        tools = getattr(self._bound, "tools", None) or self._shared_tools
        self._bound.tools = None
        with self._call_lock:
            self.roles_called.extend(parts or [role])
        self._pending[threading.get_ident()] = self.materialize(role, tools, messages)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def _next(self, messages: Sequence[BaseMessage]) -> Any:
        """The reply materialized for this thread's call (ScriptedChatModel turns it into a message)."""
        with self._lock:
            self.calls.append(list(messages))
        reply = self._pending.pop(threading.get_ident(), "")
        if isinstance(reply, Exception):
            raise reply
        return reply

    def materialize(self, role: str, tools: list[Any] | None, messages: Sequence[BaseMessage]) -> Any:
        last = str(messages[-1].content) if messages else ""
        key = hashlib.sha256(f"{role}\x1f{len(messages)}\x1f{last}".encode()).digest()
        spec = self.specs[int.from_bytes(key[:4], "big") % len(self.specs)] if self.specs else ReplySpec(kind="empty")
        rng = random.Random(spec.seed)
        schema = tools[0] if tools and isinstance(tools[0], type) and issubclass(tools[0], BaseModel) else None
        tool_names = [getattr(t, "name", None) for t in tools or [] if getattr(t, "name", None)]
        return self._build(spec, rng, schema, tool_names)

    def _build(self, spec: ReplySpec, rng: random.Random, schema: type[BaseModel] | None, tool_names: list[str]) -> Any:
        kind = spec.kind
        shaped = _model_dict(schema, rng, 0.0) if schema is not None else {"answer": "x", "next_events": ["E1"]}
        if kind == "text":
            return spec.text
        if kind == "bare_text":
            return spec.text.replace("{", "(").replace("[", "(") or "no"
        if kind == "empty":
            return ""
        if kind == "whitespace":
            return " \n\t "
        if kind == "huge_text":
            return (
                ("x" * HUGE)
                if not spec.text
                else (spec.text.replace("{", "").replace("[", "") * (HUGE // max(1, len(spec.text))))[:HUGE] or "x"
            )
        if kind == "huge_json":
            return json.dumps(_huge_strings(shaped))
        if kind == "json":
            return json.dumps(spec.payload)
        if kind == "json_list":
            return json.dumps([shaped, spec.payload])
        if kind == "wrong_schema":
            return json.dumps({"result": spec.payload, "status": "ok", "data": [spec.payload]})
        if kind == "mutant":
            return json.dumps(_model_dict(schema, rng, 0.5) if schema is not None else {"junk": spec.payload})
        if kind == "plausible":
            return json.dumps(_model_dict(schema, rng, 0.05) if schema is not None else shaped)
        if kind == "fenced":
            return f"Sure! Here it is:\n```json\n{json.dumps(_model_dict(schema, rng, 0.3) if schema else shaped)}\n```"
        if kind == "prose_with_json":
            return (
                f"I think {{not json}} then {json.dumps(_model_dict(schema, rng, 0.3) if schema else shaped)} trailing"
            )
        if kind == "tool_call":
            names = [*(tool_names or []), *([schema.__name__] if schema is not None else []), "no_such_tool", ""]
            args = spec.payload if isinstance(spec.payload, dict) else {"value": spec.payload}
            if rng.random() < 0.5 and schema is not None:
                args = _model_dict(schema, rng, 0.6)
            calls = [
                {"name": rng.choice(names), "args": args, "id": f"call_{rng.randrange(10**6)}", "type": "tool_call"}
                for _ in range(rng.choice([1, 1, 2, 12]))
            ]
            return AIMessage(content=rng.choice(["", "calling tools"]), tool_calls=calls)
        if kind == "invalid_tool_call":
            return AIMessage(
                content="",
                invalid_tool_calls=[
                    {
                        "name": rng.choice([*(tool_names or ["search_events"]), "???"]),
                        "args": '{"query": unterminated',
                        "id": f"bad_{rng.randrange(10**6)}",
                        "error": "malformed JSON arguments",
                        "type": "invalid_tool_call",
                    }
                ],
            )
        if kind == "raise":
            return RuntimeError("simulated provider failure: 500 internal error")
        raise ValueError(f"unknown reply kind {kind!r}")


def json_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indexes) into a JSON document, the root's ``()`` first."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += json_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += json_paths(value, (*prefix, i))
    return out


class ForkWorker:
    """The test side of a fork-server worker (``fork_server.py``): one command per call, its reply and the
    child's JSON result; ``done`` asserts the child finished and returns its result."""

    def __init__(self, script: str, workdir: Path) -> None:
        self.workdir, self.count = workdir, 0
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name(script))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(workdir / "default", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
            cwd=ROOT,
        )

    def call(self, op: str, directory: Path, kill_after: float | None = None, **fields: Any) -> tuple[dict, dict]:
        self.count += 1
        out = self.workdir / f"{op}-{self.count}.json"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(
            json.dumps({"op": op, "dir": str(directory), "out": str(out), "kill_after": kill_after, **fields}) + "\n"
        )
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker died: {self.proc.stderr.read() if self.proc.stderr else ''}")
        return json.loads(line), (json.loads(out.read_text()) if out.exists() else {})

    def done(self, op: str, directory: Path) -> dict:
        reply, result = self.call(op, directory)
        assert reply["exit_code"] == 0 and result.get("ok"), result.get("error", reply)
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


class ChromaServer:
    """A ``chroma run`` process on one data path and port, started and SIGKILLed at will."""

    def __init__(self, path: Path, log: Path) -> None:
        chroma = Path(sys.executable).with_name("chroma")
        if not chroma.exists():
            chroma = Path(shutil.which("chroma") or "")
        if not chroma or not chroma.exists():
            pytest.skip("the chroma CLI is not installed")
        self.chroma, self.path, self.log = chroma, path, log
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        import chromadb

        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [str(self.chroma), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=self.port).heartbeat()
                return
            except Exception:  # not up yet
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma server did not start: {self.log.read_text()[-2000:]}")
                time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def env(self, tmp: Path, lease_s: float = 6.0) -> dict[str, str]:
        return subprocess_env(
            tmp / "unused",
            LOGICMAP_CHROMA_HOST="127.0.0.1",
            LOGICMAP_CHROMA_PORT=str(self.port),
            LOGICMAP_COMMIT_LEASE_S=str(lease_s),
        )

    def settings(self, **extra: Any) -> Any:
        """Settings of a LogicMap store on this server (``extra``: more fields, e.g. a data directory)."""
        from logicmap.settings import LogicMapSettings

        return LogicMapSettings(chroma_host="127.0.0.1", chroma_port=self.port, embedding_provider="hashing", **extra)

    def store(self) -> Any:
        from logicmap.memory.store import MemoryStore

        return MemoryStore(self.settings())


def with_session(conv: Conversation, number: int, lines: Sequence[tuple[int, str]]) -> Conversation:
    """``conv`` with one more session ``S{number}``, dated as its last: turn ``D{number}:i`` is said by
    ``conv.speakers[speaker]`` for each ``(speaker, text)`` (the canary tests' planted session)."""
    last = conv.sessions[-1]
    turns = [
        RawTurn(dia_id=f"D{number}:{i}", speaker=conv.speakers[who], text=text)
        for i, (who, text) in enumerate(lines, start=1)
    ]
    extra = Session(session_id=f"S{number}", timestamp=last.timestamp, timestamp_text=last.timestamp_text, turns=turns)
    return conv.model_copy(update={"sessions": [*conv.sessions, extra]})
