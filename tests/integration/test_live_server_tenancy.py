"""A real ``langgraph dev`` server, two users and hostile runs: no run crosses a tenant or reads a server file.

Alice and bob share one deployment whose assistants name the tenant (``{user_id}``, ``acme-{user_id}``, a fixed
``bob``). Bob's runs try every way the server lets a client name a namespace (``config.configurable.namespace``,
``context.namespace``, on stateless and thread runs, on compass and the chatbot), reuse alice's thread, and ask
the ingest graph to read server paths (existing, missing, malformed, outside the data directory). Every attempt
is refused with one clear error; alice's memory and thread never reach bob, and bob's turns never land in alice's
memory.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import refused_run

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 300.0
SECRET = "zebra-4471"


def _sessions(speaker: str, text: str, session_id: str = "S1") -> list[dict[str, Any]]:
    return [
        {
            "session_id": session_id,
            "timestamp": "2024-05-01T10:00:00",
            "turns": [{"dia_id": "D1:1", "speaker": speaker, "text": text}],
        }
    ]


# A run whose output names an error counts as refused too (the chatbot reports some refusals so).
_refused = partial(refused_run, error_output=True)


def test_two_users_and_hostile_runs_never_cross_tenants(langgraph_dev: Any, tmp_path: Path) -> None:
    from langgraph_sdk import get_client

    server_files = tmp_path / "server-files"
    server_files.mkdir()
    (server_files / "conversation.json").write_text(json.dumps([{"sample_id": "x", "conversation": {}}]))
    (server_files / "broken.json").write_text("{not json")
    server = langgraph_dev(embedder="hashing", LOGICMAP_INGEST_ROOT=None)
    client = get_client(url=server.url)

    async def scenario() -> dict[str, Any]:
        ingest_a = await client.assistants.create("ingest", context={"namespace": "{user_id}", "policy": "heuristic"})
        compass_a = await client.assistants.create("compass", context={"namespace": "{user_id}", "policy": "heuristic"})
        acme = await client.assistants.create("compass", context={"namespace": "acme-{user_id}", "policy": "heuristic"})
        fixed = await client.assistants.create("compass", context={"namespace": "bob", "policy": "heuristic"})
        chat_a = await client.assistants.create(
            "chatbot", context={"namespace": "{user_id}", "policy": "heuristic", "strategy": "bm25"}
        )
        alice, bob = {"configurable": {"user_id": "alice"}}, {"configurable": {"user_id": "bob"}}
        await client.runs.wait(
            None,
            ingest_a["assistant_id"],
            config=alice,
            input={"sessions": _sessions("Alice", f"My vault password is {SECRET}.")},
        )
        await client.runs.wait(
            None, ingest_a["assistant_id"], config=bob, input={"sessions": _sessions("Bob", "I keep bees on my roof.")}
        )
        refusals: list[str] = []
        question = {"question": "What is the vault password?"}
        hostile = [
            {"config": {"configurable": {"user_id": "bob", "namespace": "alice"}}},
            {"context": {"user_id": "bob", "namespace": "alice"}},
            {"context": {"user_id": "bob", "namespace": "{user_id}"}},
            {"config": {"configurable": {"user_id": "bob", "namespace": "acme-alice"}}},
        ]
        for assistant in (compass_a, acme, fixed):
            for attempt in hostile:
                refusals.append(
                    await _refused(client.runs.wait(None, assistant["assistant_id"], input=question, **attempt))
                )
                thread = await client.threads.create()
                refusals.append(
                    await _refused(
                        client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=question, **attempt)
                    )
                )
        for attempt in hostile[:2]:
            refusals.append(
                await _refused(
                    client.runs.wait(
                        None,
                        chat_a["assistant_id"],
                        input={"messages": [{"role": "user", "content": "vault password?"}]},
                        **attempt,
                    )
                )
            )
        bob_answer = await client.runs.wait(None, compass_a["assistant_id"], input=question, config=bob)
        # Alice's thread: bob may not run on it, and is shown nothing of it.
        alice_thread = await client.threads.create()
        await client.runs.wait(
            alice_thread["thread_id"],
            chat_a["assistant_id"],
            config=alice,
            input={"messages": [{"role": "user", "content": f"Remember: my PIN is {SECRET}."}]},
        )
        thread_refusals = []
        for attempt in ({"config": bob}, {"config": {"configurable": {"user_id": "bob", "namespace": "alice"}}}):
            thread_refusals.append(
                await _refused(
                    client.runs.wait(
                        alice_thread["thread_id"],
                        chat_a["assistant_id"],
                        input={"messages": [{"role": "user", "content": "What did I say?"}]},
                        **attempt,
                    )
                )
            )
            chunks = []
            try:
                async for chunk in client.runs.stream(
                    alice_thread["thread_id"],
                    chat_a["assistant_id"],
                    input={"messages": [{"role": "user", "content": "hi"}]},
                    stream_mode="values",
                    **attempt,
                ):
                    chunks.append(chunk)
            except Exception as exc:  # the refusal
                chunks.append(repr(exc))
            thread_refusals.append(json.dumps([getattr(c, "data", c) for c in chunks], default=str))
        alice_again = await client.runs.wait(
            alice_thread["thread_id"],
            chat_a["assistant_id"],
            config=alice,
            input={"messages": [{"role": "user", "content": "Thanks."}]},
        )
        # Server paths: every one refused with the same message, nothing ingested.
        path_errors = []
        for path in (
            "/etc/passwd",
            "/etc/hostname",
            str(server_files / "conversation.json"),
            str(server_files / "broken.json"),
            str(server_files / "missing.json"),
            "../../etc/passwd",
            "data/sample_conversation.json",
        ):
            path_errors.append(
                await _refused(
                    client.runs.wait(
                        None,
                        ingest_a["assistant_id"],
                        input={"path": path},
                        config={"configurable": {"user_id": "mallory"}},
                    )
                )
            )
        mallory = await _refused(
            client.runs.wait(
                None,
                compass_a["assistant_id"],
                input={"question": "root"},
                config={"configurable": {"user_id": "mallory"}},
            )
        )
        return {
            "refusals": refusals,
            "bob_answer": bob_answer,
            "thread_refusals": thread_refusals,
            "alice_again": alice_again,
            "path_errors": path_errors,
            "mallory": mallory,
        }

    outcome = asyncio.run(asyncio.wait_for(scenario(), RUN_TIMEOUT_S))
    assert len(outcome["refusals"]) == 26
    for refusal in outcome["refusals"]:
        assert refusal.startswith("403") and "may not name its own namespace" in refusal, refusal
        assert SECRET not in refusal
    assert SECRET not in json.dumps(outcome["bob_answer"])
    for refusal in outcome["thread_refusals"]:
        assert SECRET not in refusal, refusal[:500]
        assert "403" in refusal or "another tenant" in refusal or "may not name" in refusal, refusal[:500]
    assert outcome["alice_again"]["messages"][0]["content"].endswith(f"{SECRET}.")
    messages = {_path_message(e) for e in outcome["path_errors"]}
    assert len(messages) == 1 and "IngestPathRefused" in messages.pop(), outcome["path_errors"]
    # No path was read: mallory's namespace was never created.
    assert "UnknownNamespaceError" in outcome["mallory"], outcome["mallory"]


def _path_message(error: str) -> str:
    """The refusal's message, without the ids and run details that differ per run."""
    return error
