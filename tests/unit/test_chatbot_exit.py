"""The chatbot's turns reach memory whatever the remember mode and however the process ends normally: the README's
chatbot example recalls in its own process and leaves its turns for the next one (the queue is drained at exit
while thread pools still take work), a later recall waits for its namespace's queued turns, and every remember
mode works with ``invoke`` and ``ainvoke``."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from logicmap.graphs.chat.chatbot import (
    ChatContext,
    IngestionQueue,
    build_chatbot_graph,
    default_ingestion_queue,
    ingest_session,
)
from logicmap.graphs.runtime.resources import Resources

ROOT = Path(__file__).resolve().parents[2]
README_CHATBOT = re.compile(r"^### The chatbot as a subgraph.*?^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

_NEXT_PROCESS = """
import json
from logicmap import ChatContext, build_chatbot_graph, list_memories

turns = [item["text"] for item in list_memories("alice", kind="turns").items]
bot = build_chatbot_graph().compile()
out = bot.invoke({"messages": [("user", "Where did I move last spring?")]},
                 {"configurable": {"user_id": "alice", "thread_id": "next"}},
                 context=ChatContext(namespace="{user_id}", policy="heuristic", ingest=False))
print(json.dumps({"turns": turns, "reply": out["messages"][-1].content}))
"""

_TELL_AND_EXIT = """
from logicmap import ChatContext, build_chatbot_graph

bot = build_chatbot_graph().compile()
statuses = []
for i, text in enumerate(["My locker code is 4312.", "My bike is a green Brompton.", "I play the oboe."]):
    out = bot.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": f"t{i}"}},
                     context=ChatContext(namespace="carol", policy="heuristic", recall=False))
    statuses.append(out["memory_write"]["status"])
print(" ".join(statuses))  # the process then ends as any script does: no flush
"""


def _python(program: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    """``program`` in a fresh interpreter in ``workdir`` (the default data directory ``.logicmap/`` is there), with
    the no-LLM setup of the README's examples: no chat model, the lexical embedder, nothing from the network."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("LOGICMAP_", "LANGSMITH_", "LANGCHAIN_", "OPENAI_"))
    }
    env |= {
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "LOGICMAP_EMBEDDING_PROVIDER": "hashing",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
    }
    return subprocess.run(
        [sys.executable, "-c", program], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_readme_chatbot_example_recalls_and_the_next_process_finds_its_turns(tmp_path: Path) -> None:
    found = README_CHATBOT.search((ROOT / "README.md").read_text())
    assert found, "the README's chatbot example is gone"
    first = _python(found.group(1), tmp_path)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr[-3000:]
    assert "Porto" in first.stdout, first.stdout  # the second turn recalled the first, in the same process
    following = _python(_NEXT_PROCESS, tmp_path)
    assert following.returncode == 0, following.stderr[-3000:]
    seen = json.loads(following.stdout)
    # Both turns are in memory; the question was queued when the example's process exited.
    assert seen["turns"] == ["I moved to Porto last spring.", "Where did I move last spring?"]
    assert "Porto" in seen["reply"]


def test_turns_still_queued_when_a_script_ends_are_stored_before_it_exits(tmp_path: Path) -> None:
    told = _python(_TELL_AND_EXIT, tmp_path)
    assert told.returncode == 0 and told.stderr == "", told.stderr[-3000:]
    assert told.stdout.split() == ["queued"] * 3
    listed = _python(
        "from logicmap import list_memories\n"
        "print('|'.join(sorted(i['text'] for i in list_memories('carol', kind='turns').items)))",
        tmp_path,
    )
    assert listed.stdout.strip() == "I play the oboe.|My bike is a green Brompton.|My locker code is 4312."


def _ask(bot, text: str, thread_id: str, ctx: ChatContext, how: str) -> dict:
    inputs, config = {"messages": [("user", text)]}, {"configurable": {"thread_id": thread_id}}
    if how == "invoke":
        return bot.invoke(inputs, config, context=ctx)
    return asyncio.run(bot.ainvoke(inputs, config, context=ctx))


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
@pytest.mark.parametrize("mode", ["auto", "sync", "background", "deferred"])
def test_every_remember_mode_stores_the_turn_with_invoke_and_ainvoke(resources: Resources, mode: str, how: str) -> None:
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = ChatContext(namespace="dora", policy="heuristic", remember_mode=mode, resources=resources)  # type: ignore[arg-type]
    told = _ask(bot, "My locker code is 4312.", "t1", ctx, how)
    # Outside the API server there is no run to schedule: a deferred turn is stored within its run.
    expected = {"auto": "queued", "background": "queued", "sync": "stored", "deferred": "stored"}[mode]
    assert told["memory_write"]["status"] == expected and told["messages"][-1].content == "Noted, I'll remember that."
    assert default_ingestion_queue().flush(timeout=120)
    assert [t.text for t in resources.store.snapshot("dora").turns.values()] == ["My locker code is 4312."]
    asked = _ask(bot, "What is my locker code?", "t2", ctx, how)
    assert "4312" in asked["messages"][-1].content


def test_a_recall_waits_for_its_namespace_s_queued_turns_and_only_those(resources: Resources) -> None:
    release = threading.Event()

    def slow_store(session, namespace: str, policy: str) -> object:
        if namespace == "bob":
            release.wait(timeout=60)
        else:
            time.sleep(0.5)  # slower than the next turn's recall reaches memory
        return ingest_session(session, namespace, resources=resources, policy=policy)

    work = IngestionQueue()
    bot = build_chatbot_graph().compile(checkpointer=InMemorySaver())
    ctx = ChatContext(namespace="alice", policy="heuristic", ingestion=work, store_turn=slow_store, resources=resources)
    assert _ask(bot, "I moved to Porto last spring.", "t1", ctx, "invoke")["memory_write"]["status"] == "queued"
    _ask(bot, "I keep bees on the roof.", "b1", replace(ctx, namespace="bob"), "invoke")  # held until released
    started = time.monotonic()
    out = _ask(bot, "Where did I move last spring?", "t2", ctx, "invoke")
    assert "Porto" in out["messages"][-1].content
    assert time.monotonic() - started < 30  # alice's recall did not wait for bob's held turn
    assert work.pending >= 1 and not work.wait_for("bob", timeout=0.05)
    release.set()
    assert work.flush(timeout=120) and not work.errors


def test_the_docs_name_the_status_a_default_in_process_run_ends_with(resources: Resources) -> None:
    """docs/langgraph.md said a turn is in memory when ``invoke`` returns, while the default run ends queued."""
    out = (
        build_chatbot_graph()
        .compile()
        .invoke(
            {"messages": [("user", "I play the oboe.")]},
            context=ChatContext(namespace="erin", policy="heuristic", resources=resources),
        )
    )
    assert default_ingestion_queue().flush(timeout=120)
    status = out["memory_write"]["status"]
    for page in ("chat.md", "langgraph.md"):
        text = (ROOT / "docs" / page).read_text()
        assert f'`memory_write.status == "{status}"`' in text and "default" in text, page
