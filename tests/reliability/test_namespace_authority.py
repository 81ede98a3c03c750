"""Namespace authority and namespace errors: the tenant comes from the run's context only, every hostile name is
refused, and no error raised inside a tenant's request names another tenant.

Generated cases (seeded): chat inputs whose state carries a hostile ``namespace`` across threads and tenants;
tool calls that add a ``namespace`` argument; hostile names through the validator, the store, the tools, the
chatbot and the CLI; unknown-namespace requests through the CLI, the strategies and the tools.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph, add_messages
from typing_extensions import TypedDict

from logicmap.graphs.chat.chatbot import ChatContext, IngestionQueue, build_chatbot_graph
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.store import UnknownNamespaceError
from logicmap.tools import MemoryToolConfigError, create_memory_toolkit
from tests.conftest import make_resources
from tests.reliability.support import marked_conversation, strategy_names

# Tenant -> marker word carried by every one of its turns. "acme" and "acme.eu" differ by a suffix only.
TENANTS = {"acme": "wombat", "acme.eu": "axolotl", "globex": "pangolin"}
SEED = 617
CHAT_CASES = 24
TOOL_CASES = 22


def hostile_names(rng: random.Random, n: int) -> list[Any]:
    """Namespace values an attacker would put in a state or an argument: other tenants, traversal, spoofs."""
    names = list(TENANTS)
    fixed: list[Any] = [
        "",
        " ",
        None,
        7,
        ["globex"],
        {"ns": "globex"},
        "..",
        "../globex",
        "acme/../globex",
        "globex/",
        "./acme",
        "globex\n",
        "acme\n",
        "\nglobex",
        " globex",
        "globex ",
        "globex\r",
        "globex\t",
        "globex\x00",
        "glob\x1b[2Kex",
        "glоbex",  # Cyrillic o
        "ｇlobex",
        "globex" * 30,
        "default",
        "GLOBEX",
        "acme.eu\n",
    ]
    out: list[Any] = []
    while len(out) < n:
        base = rng.choice(names)
        out.append(rng.choice([*fixed, base, base + "\n", base.upper(), f"../{base}", f"{base}\n{rng.choice(names)}"]))
    return out


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Resources:
    res = make_resources(tmp_path_factory.mktemp("authority") / "memory")
    for ns, marker in TENANTS.items():
        ingest_conversation(marked_conversation(marker, sessions=2), ns, resources=res, policy="heuristic")
    yield res
    res.store.close()


def foreign(namespace: str, text: str) -> list[str]:
    words = set(re.findall(r"[a-z]+", text.lower()))
    return sorted(m for ns, m in TENANTS.items() if ns != namespace and m in words)


def _chat_turns(res: Resources, namespace: str) -> list[Any]:
    if not res.store.has_namespace(namespace):
        return []
    return [t for t in res.store.snapshot(namespace).turns.values() if t.session_id.startswith("chat-")]


# -- item 6: the chatbot's tenant is the context's, whatever the state says ----------------------------------------
def test_a_namespace_in_the_chat_state_never_changes_the_tenant(tenants: Resources) -> None:
    res = tenants
    rng = random.Random(SEED)
    before = {ns: res.store.snapshot(ns).fingerprint() for ns in TENANTS}
    known_before = res.store.namespaces()
    work = IngestionQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    hostile = hostile_names(rng, CHAT_CASES)
    sent: dict[str, list[str]] = {ns: [] for ns in TENANTS}
    problems: list[str] = []
    for i, value in enumerate(hostile):
        ns = rng.choice(sorted(TENANTS))
        thread = {"configurable": {"thread_id": f"t{i % 6}-{ns}"}}  # threads are reused: nothing may stick
        # Only the tenant's own marker: its memory must never hold another tenant's word, chat turns included.
        text = f"did the {TENANTS[ns]} go to the {rng.choice(['market', 'museum', 'island', 'street'])}? case {i}"
        context = ChatContext(
            namespace=ns,
            strategy=rng.choice(["compass", "dense", "reconstruct"]),
            policy="heuristic",
            ingestion=work,
            resources=res,
        )
        out = bot.invoke({"messages": [HumanMessage(content=text)], "namespace": value}, thread, context=context)
        sent[ns].append(text)
        state = bot.get_state(thread).values
        if "namespace" in out or "namespace" in state:
            problems.append(f"case {i}: the thread state holds a namespace ({state.get('namespace')!r})")
        if out["recall"].get("namespace") != ns:
            problems.append(f"case {i}: recalled from {out['recall'].get('namespace')!r}, context says {ns!r}")
        for item in out.get("evidence", []):
            if foreign(ns, str(item.get("text"))):
                problems.append(f"case {i}: {ns!r} recalled {item.get('id')} of another tenant")
        if foreign(ns, out["messages"][-1].content):
            problems.append(f"case {i}: the reply to {ns!r} carries {foreign(ns, out['messages'][-1].content)}")
    assert work.flush(timeout=300) and not work.errors, work.errors
    assert not problems, "\n".join(problems)
    # Writes: each tenant got exactly the turns sent under its context, and no new namespace appeared.
    assert res.store.namespaces() == known_before == sorted(TENANTS)
    for ns in TENANTS:
        stored = sorted(t.text for t in _chat_turns(res, ns) if t.speaker == "user")
        assert stored == sorted(sent[ns]), f"{ns}: stored {len(stored)} user turns, sent {len(sent[ns])}"
        old = {tid: t for tid, t in res.store.snapshot(ns).turns.items() if not t.session_id.startswith("chat-")}
        assert len(old) == 8 and not foreign(ns, " ".join(t.text for t in old.values()))
        assert before[ns] != res.store.snapshot(ns).fingerprint() or not sent[ns]
    assert sum(len(v) for v in sent.values()) == CHAT_CASES and all(sent.values())


class ParentState(TypedDict, total=False):
    """Someone else's graph, whose state has a ``namespace`` key of its own."""

    messages: Annotated[list, add_messages]
    namespace: str


def test_a_parent_graph_state_with_a_namespace_cannot_steer_the_chatbot_subgraph(tenants: Resources) -> None:
    parent = StateGraph(ParentState)
    parent.add_node("memory_bot", build_chatbot_graph().compile())
    parent.add_edge(START, "memory_bot")
    app = parent.compile(checkpointer=InMemorySaver())
    work = IngestionQueue()
    context = ChatContext(namespace="acme", strategy="dense", policy="heuristic", ingestion=work, resources=tenants)
    out = app.invoke(
        {"messages": [("user", "what about the wombat market?")], "namespace": "globex"},
        {"configurable": {"thread_id": "parent"}},
        context=context,
    )
    assert work.flush(timeout=120) and not work.errors
    assert out["namespace"] == "globex"  # the parent's own key, untouched and unused
    assert all(not foreign("acme", str(item.get("text"))) for item in out.get("evidence", []))
    assert any(t.text == "what about the wombat market?" for t in _chat_turns(tenants, "acme"))
    assert not any(t.text == "what about the wombat market?" for t in _chat_turns(tenants, "globex"))


def test_a_tool_call_that_names_a_namespace_is_refused_and_reads_nothing(tenants: Resources) -> None:
    """Tool arguments cannot carry a namespace: the toolkit is bound to one tenant and extra arguments are errors."""
    rng = random.Random(SEED + 1)
    toolkits = {ns: create_memory_toolkit(ns, store=tenants.store, embeddings=tenants.embeddings) for ns in TENANTS}
    for tool in toolkits["acme"]:
        assert "namespace" not in tool.tool_call_schema.model_json_schema()["properties"]
    good = {
        "query": "market",
        "cue": "market",
        "event_id": "S1-E1",
        "person": "Anawombat",
        "aspect": "pet",
        "start": "2023",
        "topic_id": "T1",
        "window": 1,
    }
    refused = 0
    for i, value in enumerate(hostile_names(rng, TOOL_CASES)):
        ns = rng.choice(sorted(TENANTS))
        tool = rng.choice(toolkits[ns])
        args = {f: good[f] for f in tool.args_schema.model_fields if f in good}
        args["namespace"] = value
        message = tool.invoke({"name": tool.name, "args": args, "id": f"c{i}", "type": "tool_call"})
        assert message.status == "error" and not message.artifact, (tool.name, value, message.content)
        assert "namespace" in message.content and "Extra inputs are not permitted" in message.content
        assert not foreign(ns, message.content.replace(str(value), " ")), message.content
        refused += 1
    assert refused == TOOL_CASES


# -- item 7: hostile names are refused whole; unknown-namespace errors name no other tenant -------------------------
HOSTILE_STRINGS = [
    "acme\n",
    "\nacme",
    " acme",
    "acme ",
    "acme\r",
    "acme\r\n",
    "acme\t",
    "acme\x00",
    "ac\x00me",
    "acme\x1b[31m",
    "acme\x7f",
    "acme\x85",
    "acme\u2028",
    "acme\u202e",
    "аcme",
    "ａcme",
    "acmе",
    "acme\u200b",
    "١٢٣",
    "acme²",
    "../acme",
    "..",
    "acme/../globex",
    "acme/x",
    "acme\\x",
    "/etc/passwd",
    "~acme",
    "",
    " ",
    "-acme",
    ".acme",
    "_acme",
    "a" * 129,
    "a" * 10_000,
    "acme;globex",
    "acme,globex",
    "acme globex",
    "acme*",
    "acme?",
    "%2e%2e",
]


def generated_hostile_strings(n: int) -> list[str]:
    rng = random.Random(SEED + 2)
    pieces = ["\n", "\r", "\t", "\x00", " ", "/", "/../", "\x1b", "\u202e", "\u00a0", "\ufeff", "é", "\\"]
    out = list(HOSTILE_STRINGS)
    while len(out) < n:
        base = rng.choice(list(TENANTS) + ["t-4", "user:42", "bob@example"])
        at = rng.randrange(len(base) + 1)
        out.append(base[:at] + rng.choice(pieces) + base[at:])
    return out


HOSTILE = generated_hostile_strings(80)


def test_hostile_namespace_strings_are_rejected_everywhere(tenants: Resources) -> None:
    assert len(HOSTILE) == 80 and len(set(HOSTILE)) > 70
    for name in HOSTILE:
        with pytest.raises(ValueError, match="invalid namespace") as info:
            validate_namespace(name)
        assert "\n" not in str(info.value) and len(str(info.value)) < 300, repr(str(info.value))[:200]
        with pytest.raises(ValueError, match="invalid namespace"):
            tenants.store.require_namespace(name)
        with pytest.raises(ValueError, match="invalid namespace"):
            tenants.store.snapshot(name)
        with pytest.raises(MemoryToolConfigError, match="invalid namespace"):
            create_memory_toolkit(name, store=tenants.store)
    assert tenants.store.namespaces() == sorted(TENANTS)


def test_a_hostile_context_namespace_stops_the_chatbot_before_anything_is_stored(tenants: Resources) -> None:
    bot = build_chatbot_graph().compile()
    work = IngestionQueue()
    for name in HOSTILE[::8]:
        context = ChatContext(namespace=name, policy="heuristic", strategy="dense", ingestion=work, resources=tenants)
        with pytest.raises(ValueError, match="invalid namespace"):
            bot.invoke({"messages": [("user", "remember the wombat")]}, context=context)
    assert work.flush(timeout=30) and work.completed == 0
    assert tenants.store.namespaces() == sorted(TENANTS)


def test_valid_names_still_pass() -> None:
    for name in ["acme", "ACME", "acme.eu", "t-4", "user:42", "bob@example.com", "a", "a" * 128, "0_x.y:z@w-v"]:
        assert validate_namespace(name) == name


def _unknown_names(n: int) -> list[str]:
    rng = random.Random(SEED + 3)
    return [
        f"{rng.choice(['visitor', 'nobody', 'x', 'Q'])}{rng.choice(['', '-', '.', ':', '@'])}{rng.randrange(10**6)}"
        for _ in range(n)
    ]


def _names_in(text: str) -> list[str]:
    """Stored tenants named in an error text (whole names, so "acme" inside "acme.eu" counts once, as acme.eu)."""
    return [ns for ns in TENANTS if re.search(rf"(?<![\w.:@-]){re.escape(ns)}(?![\w.:@-])", text)]


def test_unknown_namespace_errors_through_the_api_and_tools_name_no_other_tenant(tenants: Resources) -> None:
    from logicmap.graphs.strategies.registry import answer

    names = _unknown_names(24)
    strategies = strategy_names()
    checked = 0
    for i, name in enumerate(names):
        texts = []
        with pytest.raises(UnknownNamespaceError) as info:
            tenants.store.require_namespace(name)
        texts.append(str(info.value))
        with pytest.raises(MemoryToolConfigError) as tool_info:
            create_memory_toolkit(name, store=tenants.store)
        texts.append(str(tool_info.value))
        strategy = strategies[i % len(strategies)]
        with pytest.raises(UnknownNamespaceError) as answer_info:
            answer(strategy, "what about the market?", name, resources=tenants, policy="heuristic")
        texts.append(str(answer_info.value))
        for text in texts:
            assert f"unknown namespace {name!r}" in text and not _names_in(text), text
            assert not hasattr(info.value, "known")
            checked += 1
    assert checked == 3 * len(names)


def test_unknown_namespace_errors_through_the_cli_name_no_other_tenant(tmp_path: Path, capsys) -> None:
    from logicmap.__main__ import main

    data_dir = tmp_path / "memory"
    res = make_resources(data_dir)
    for ns, marker in TENANTS.items():
        ingest_conversation(marked_conversation(marker, sessions=1), ns, resources=res, policy="heuristic")
    res.store.close()
    base = ["--data-dir", str(data_dir), "--embeddings", "hashing"]
    commands = [
        ["ask", "what about the market?", "-s", "dense"],
        ["stats"],
        ["graph"],
        ["facts"],
        ["ask", "when?", "-s", "compass", "--policy", "heuristic"],
    ]
    names = _unknown_names(15)
    for i, name in enumerate(names):
        command = commands[i % len(commands)]
        code = main([*base, *command, "-n", name])
        captured = capsys.readouterr()
        assert code == 2, (command, captured)
        lines = captured.err.strip().splitlines()
        assert lines[-1].startswith(f"error: unknown namespace {name!r}"), captured.err
        assert not _names_in(captured.err + captured.out), captured.err
    assert main([*base, "namespaces"]) == 0  # the operator's listing does name them
    assert capsys.readouterr().out.split() == sorted(TENANTS)
    for name in HOSTILE[::10]:
        if name.startswith("-"):
            continue  # argparse reads it as an option
        assert main([*base, "stats", "-n", name]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: invalid namespace") and err.count("\n") == 1, repr(err)
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", err), repr(err)


def test_a_spoofing_name_registered_by_an_older_version_is_skipped_not_listed(tmp_path: Path, caplog) -> None:
    """Before names were matched whole, "acme\\n" could be registered: the listing skips it (with a warning)."""
    from tests import chroma_internals as chroma  # names reach only Chroma's registry unchecked

    res = make_resources(tmp_path / "memory")
    try:
        ingest_conversation(marked_conversation("wombat", sessions=1), "acme", resources=res, policy="heuristic")
        for legacy in ("acme\n", "globex\r", "x" * 200):
            chroma.register_raw(res.store, legacy)
        with caplog.at_level("WARNING", logger="logicmap.memory.store"):
            assert res.store.namespaces() == ["acme"]
        assert sum("skipping namespace" in r.getMessage() for r in caplog.records) == 3
    finally:
        res.store.close()
