"""Tenant isolation: randomized multi-namespace workloads through the store, every strategy and every tool.

Each namespace's turns carry a marker word of their own; record ids collide across namespaces on purpose
(every tenant has S1-E1 and D1:1), and namespace names differ only by case or suffix. Nothing returned for
one namespace may carry another's marker.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from tests.conftest import make_resources
from tests.reliability.support import (
    GarbageChatModel,
    ReplySpec,
    available_strategy,
    marked_conversation,
    memory_problems,
    require_module,
    strategy_names,
)

# Namespace -> marker word. "acme" and "ACME" differ only by case, "acme.eu" by a suffix.
TENANTS = {"acme": "wombat", "ACME": "narwhal", "acme.eu": "axolotl", "globex": "pangolin", "t-4": "okapi"}
FIRST_SESSION = {"globex": 7}  # one tenant with ids no other tenant has, so a leaked id is visible by id too
SESSIONS = 3
SEED = 1107


def foreign_markers(namespace: str) -> set[str]:
    return {m for ns, m in TENANTS.items() if ns != namespace}


def leaks(namespace: str, value: Any, allowed: tuple[str, ...] = ()) -> list[str]:
    """Foreign marker words found anywhere in a returned value (echoes of the ``allowed`` inputs excepted)."""
    text = _flatten(value)
    for echo in sorted(allowed, key=len, reverse=True):
        text = re.sub(re.escape(echo), " ", text, flags=re.IGNORECASE) if echo else text
    words = set(re.findall(r"[a-z]+", text.lower()))
    return sorted(words & foreign_markers(namespace))


def _flatten(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k} {_flatten(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return " ".join(_flatten(v) for v in value)
    if hasattr(value, "model_dump"):
        return _flatten(value.model_dump(mode="json"))
    return str(value)


class Workload:
    """Seeded random operations over the tenants: ingest a session, ask, call a tool, query the store."""

    def __init__(self, resources: Resources, seed: int) -> None:
        self.res = resources
        self.rng = random.Random(seed)
        self.conversations = {
            ns: marked_conversation(m, sessions=SESSIONS, first_session=FIRST_SESSION.get(ns, 1))
            for ns, m in TENANTS.items()
        }
        self.ingested = {ns: 0 for ns in TENANTS}
        self.leaks: list[str] = []
        self.counts: dict[str, int] = {}
        self.tool_calls = self.rng.randrange(1000)  # tools are called round robin from a random start

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def ready(self) -> list[str]:
        return [ns for ns, n in self.ingested.items() if n > 0]

    def words(self, namespace: str) -> str:
        """Query words: the tenant's own marker, another tenant's marker, or both, plus common words."""
        own, other = TENANTS[namespace], self.rng.choice(sorted(foreign_markers(namespace)))
        picked = self.rng.choice([[own], [other], [own, other], [other, "market", "friend"]])
        return " ".join(picked)

    # -- operations -----------------------------------------------------------------------------
    def ingest_next(self) -> None:
        pending = [ns for ns, n in self.ingested.items() if n < SESSIONS]
        if not pending:
            return
        ns = self.rng.choice(pending)
        conv = self.conversations[ns]
        n = self.ingested[ns]
        before = {other: self.res.store.snapshot(other).fingerprint() for other in self.ready() if other != ns}
        ingest_conversation(
            conv.model_copy(update={"sessions": conv.sessions[: n + 1]}),
            ns,
            resources=self.res,
            policy="heuristic",
            memory_manager="r2",
        )  # every strategy (r2 included) has its memory
        self.ingested[ns] = n + 1
        self.count("ingest")
        for other, fingerprint in before.items():
            if self.res.store.snapshot(other).fingerprint() != fingerprint:
                self.leaks.append(f"ingesting into {ns!r} changed {other!r}")

    def ask(self, strategy: str, answer: Any) -> None:
        ns = self.rng.choice(self.ready())
        question = f"What did they say about the {self.words(ns)}?"
        result = answer(question, ns, resources=self.res, policy="heuristic")
        self.count(f"strategy:{strategy}")
        snap = self.res.store.snapshot(ns)
        self.counts["evidence"] = self.counts.get("evidence", 0) + len(result.evidence)
        for item in result.evidence:
            found = leaks(ns, [item.text, [snap.turns[t].text for t in item.turn_ids if t in snap.turns]])
            if found:
                self.leaks.append(f"{strategy} on {ns!r}: evidence {item.id} carries {found}")
            stray = [t for t in item.turn_ids if t not in snap.turns]
            if stray:
                self.leaks.append(f"{strategy} on {ns!r}: evidence {item.id} cites turns {stray} not in {ns!r}")
        found = leaks(ns, [result.answer, result.details.get("turn_texts", {})], allowed=(question,))
        if found:
            self.leaks.append(f"{strategy} on {ns!r}: answer or details carry {found}")

    def tool_args(self, namespace: str, name: str, field: str) -> Any:
        other = self.rng.choice(sorted(foreign_markers(namespace)))
        person = self.rng.choice([f"Ana{TENANTS[namespace]}", f"Rui{other}", f"Ana{other}"])
        pools: dict[str, list[Any]] = {
            "query": [self.words(namespace)],
            "cue": [TENANTS[namespace], other, "market", person],
            "event_id": ["S1-E1", "S2-E1", "S7-E1", "S8-E2", "s1-e1", "D1:1", "D7:2"],
            "person": [person],
            "aspect": ["pet", "work", "home", "travel", "food"],
            "start": ["2023", "2023-03", "2023-03-04"],
            "end": [None, "2023-12-31"],
            "topic_id": ["T1", "T2", "T3", "t1"],
            "k": [None, 3, 20],
            "window": [0, 2, 10],
            "relation_types": [None, ["temporal_before"], ["shared_participant", "causal"]],
            "diverse_topics": [True, False],
            "tag": [None, "pet", "work"],
        }
        return self.rng.choice(pools.get(field, [None]))

    def call_tool(self) -> None:
        from logicmap.tools import create_memory_toolkit

        ns = self.rng.choice(self.ready())
        tools = create_memory_toolkit(ns, store=self.res.store, embeddings=self.res.embeddings)
        # Round robin, so every tool is called whatever the seed and however many other operations there are.
        tool = tools[self.tool_calls % len(tools)]
        self.tool_calls += 1
        args = {f: self.tool_args(ns, tool.name, f) for f in tool.args_schema.model_fields}
        args = {k: v for k, v in args.items() if v is not None}
        message = tool.invoke(
            {"name": tool.name, "args": args, "id": f"call-{self.rng.randrange(10**6)}", "type": "tool_call"}
        )
        self.count(f"tool:{tool.name}")
        echoed = tuple(str(x) for v in args.values() for x in (v if isinstance(v, list) else [v]))
        found = leaks(ns, [message.content], allowed=echoed) + leaks(ns, message.artifact or [])
        if found:
            self.leaks.append(f"tool {tool.name}({args}) on {ns!r} returned {sorted(set(found))}")
        for record in message.artifact or []:
            if isinstance(record, dict) and record.get("namespace", ns) != ns:
                self.leaks.append(f"tool {tool.name} on {ns!r} returned a record of {record['namespace']!r}")

    def query_store(self) -> None:
        ns = self.rng.choice(self.ready())
        other = self.rng.choice([o for o in self.ready() if o != ns] or [ns])
        other_snap = self.res.store.snapshot(other)
        kind = self.rng.choice(["turns", "events", "facts", "cues"])
        vectors = {
            "turns": other_snap.turn_vectors,
            "events": other_snap.event_vectors,
            "facts": other_snap.fact_vectors,
            "cues": other_snap.cue_vectors,
        }[kind]
        if not vectors:
            return
        vector = vectors[self.rng.choice(sorted(vectors))]
        hits = self.res.store.query(ns, kind, np.asarray(vector).tolist(), k=50)
        self.count("store.query")
        own = getattr(self.res.store.snapshot(ns), kind)
        for rid, _ in hits:
            if rid not in own:
                self.leaks.append(f"store.query({ns!r}, {kind}) returned {rid!r}, not a record of {ns!r}")
            elif leaks(ns, own[rid]):
                self.leaks.append(f"store.query({ns!r}, {kind}) returned {rid!r} carrying {leaks(ns, own[rid])}")


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """The randomized workload, run once: ingests interleaved with every reader."""
    res = make_resources(tmp_path_factory.mktemp("tenants") / "memory")
    work = Workload(res, SEED)
    answers = {}
    for name in strategy_names():
        try:
            answers[name] = available_strategy(name)
        except pytest.skip.Exception:
            continue
    try:
        import logicmap.tools  # noqa: F401

        has_tools = True
    except ImportError:
        has_tools = False
    work.ingest_next()
    operations = ["ingest"] * (len(TENANTS) * SESSIONS - 1) + ["ask"] * 3 * len(answers) + ["store"] * 12
    operations += ["tool"] * (30 if has_tools else 0)
    work.rng.shuffle(operations)
    for op in operations:
        if op == "ingest":
            work.ingest_next()
        elif op == "ask":
            name = work.rng.choice(sorted(answers))
            work.ask(name, answers[name])
        elif op == "tool":
            work.call_tool()
        else:
            work.query_store()
    while any(n < SESSIONS for n in work.ingested.values()):
        work.ingest_next()
    for name in sorted(answers):  # every strategy on every tenant at least once, on complete memories
        for _ in range(2):
            work.ask(name, answers[name])
    yield work
    res.store.close()


def test_the_leak_detector_sees_foreign_records(workload: Workload) -> None:
    """Reading one tenant's snapshot as if it were another's must be flagged (the check is not vacuous)."""
    store = workload.res.store
    assert leaks("acme", store.snapshot("ACME").turns) == ["narwhal"]
    assert leaks("acme", store.snapshot("acme").turns) == []
    assert leaks("acme", "ask about the narwhal", allowed=("narwhal",)) == []


def test_no_tenant_reads_another_tenants_records(workload: Workload) -> None:
    assert workload.counts.get("ingest") == len(TENANTS) * SESSIONS
    assert workload.counts.get("evidence", 0) > 50 and workload.counts.get("store.query", 0) > 5, workload.counts
    assert not workload.leaks, "\n".join(workload.leaks)


def test_every_namespace_holds_exactly_its_own_memory(workload: Workload) -> None:
    store = workload.res.store
    assert store.namespaces() == sorted(TENANTS)
    for ns, marker in TENANTS.items():
        snap = store.snapshot(ns)
        expected = {s.session_id: [t.dia_id for t in s.turns] for s in workload.conversations[ns].sessions}
        assert not memory_problems(snap, expected), memory_problems(snap, expected)
        assert all(marker in t.text for t in snap.turns.values())
        for kind in ("turns", "events", "facts", "cues", "tags", "r2_facts"):
            found = leaks(ns, getattr(snap, kind))
            assert not found, f"{ns}: {kind} carry {found}"


@pytest.mark.parametrize("strategy", strategy_names())
def test_every_strategy_was_exercised_on_the_tenants(workload: Workload, strategy: str) -> None:
    available_strategy(strategy)
    assert workload.counts.get(f"strategy:{strategy}", 0) >= 2


def test_every_tool_was_exercised_on_the_tenants(workload: Workload) -> None:
    tools = require_module("tools")
    names = [t.name for t in tools.create_memory_toolkit("acme", store=workload.res.store)]
    missing = [n for n in names if not workload.counts.get(f"tool:{n}")]
    # 30 calls over 11 tools, round robin: every tool is called at least twice.
    assert not missing, f"tools never called: {missing} ({workload.counts})"


def test_a_tool_agent_driven_by_a_model_stays_in_its_namespace(workload: Workload) -> None:
    """The reconstruct agent with a model that calls every tool with other tenants' words and ids."""
    answer = available_strategy("reconstruct")
    res = workload.res
    specs = [
        ReplySpec(kind="tool_call", payload={"query": m, "cue": m, "person": f"Ana{m}", "event_id": "S7-E1"}, seed=i)
        for i, m in enumerate(TENANTS.values())
    ] + [ReplySpec(kind="plausible", seed=99)]
    for ns in TENANTS:
        res.llm_ = GarbageChatModel(specs=specs)
        try:
            result = answer("What about the market?", ns, resources=res, policy="llm")
        finally:
            res.llm_ = None
        snap = res.store.snapshot(ns)
        for item in result.evidence:
            assert not leaks(ns, item.text), f"{ns}: {item.id} carries {leaks(ns, item.text)}"
            assert all(t in snap.turns for t in item.turn_ids)
        for step in result.details.get("tool_trace", []):
            assert step.get("status") in ("success", "error")


def test_remember_writes_only_its_own_namespace(workload: Workload, tmp_path: Path) -> None:
    from logicmap.graphs.ingest.ingest import ingest_conversation as ingest
    from logicmap.memory.files.loaders import Conversation
    from logicmap.tools import create_remember_tool

    res = workload.res
    before = {ns: res.store.snapshot(ns).fingerprint() for ns in TENANTS}

    def ingest_session(session, namespace):
        conv = Conversation(conversation_id="remember", sessions=[session])
        # As the chat's ingester does: a statement appended by the app, not another conversation's file.
        return ingest(conv, namespace, resources=res, policy="heuristic", source="api", append=True)

    tool = create_remember_tool("t-4", ingest=ingest_session)
    reply = tool.invoke(
        {
            "name": "remember",
            "args": {"text": "the okapi ate my notes", "speaker": "Anaokapi", "when": "2023-05-01"},
            "id": "r1",
            "type": "tool_call",
        }
    )
    assert "Remembered" in reply.content, reply.content
    for ns, fingerprint in before.items():
        after = res.store.snapshot(ns).fingerprint()
        if ns == "t-4":
            assert after != fingerprint and any("okapi ate" in t.text for t in res.store.snapshot(ns).turns.values())
        else:
            assert after == fingerprint, f"remembering into t-4 changed {ns}"


def test_two_tenants_chatting_at_once_stay_apart(workload: Workload) -> None:
    """Two chatbot conversations in parallel threads, one per tenant, sharing one ingestion queue."""
    import threading

    chatbot = require_module("logicmap.graphs.chat.chatbot")
    from langgraph.checkpoint.memory import InMemorySaver

    res = workload.res
    work = chatbot.IngestionQueue()
    bot = chatbot.build_chatbot_graph().compile(checkpointer=InMemorySaver())
    tenants = {"acme": "wombat", "ACME": "narwhal"}
    replies: dict[str, list[dict]] = {ns: [] for ns in tenants}
    errors: list[str] = []

    def chat(ns: str) -> None:
        context = chatbot.ChatContext(
            namespace=ns, strategy="compass", policy="heuristic", ingestion=work, resources=res
        )
        try:
            for i in range(3):
                out = bot.invoke(
                    {"messages": [("user", f"did the {tenants[ns]} go to the market on day {i}?")]},
                    {"configurable": {"thread_id": f"thread-{ns}"}},
                    context=context,
                )
                replies[ns].append({"reply": out["messages"][-1].content, "evidence": out.get("evidence", [])})
        except Exception as exc:  # reported below
            errors.append(f"{ns}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=chat, args=(ns,)) for ns in tenants]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert work.flush(timeout=120) and not work.errors and not errors, (work.errors, errors)
    for ns in tenants:
        for turn in replies[ns]:
            assert not leaks(ns, turn), f"{ns}: a reply or its evidence carries {leaks(ns, turn)}"
        chat_turns = [t for t in res.store.snapshot(ns).turns.values() if t.session_id.startswith("chat-")]
        assert len({t.session_id for t in chat_turns}) == 3 and not leaks(ns, chat_turns)
