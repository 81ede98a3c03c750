"""The LangGraph API server on one PostgreSQL database: ``langgraph dev`` serving studio/langgraph.json with
``LOGICMAP_STORE_URL`` naming the test server's database, its store (``LogicMapStore``) and, through a custom
checkpointer (``pg_checkpointer.py``), its checkpoints there too. A store put and an ingest + strategy run through
the API; then the database holds the memory (``logicmap_*`` tables) and the runs' threads (``checkpoints``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parents[1] / "data" / "sample_conversation.json"
RUN_TIMEOUT_S = 240.0


def test_langgraph_dev_keeps_checkpoints_and_memory_in_one_postgres(postgres_url: str, tmp_path: Path) -> None:
    import importlib.util
    import json

    import psycopg
    from langgraph_sdk import get_client

    from tests.integration.conftest import STUDIO_CONFIG, LangGraphDevServer, server_env

    config = json.loads(STUDIO_CONFIG.read_text())
    saver = importlib.util.find_spec("langgraph.checkpoint.postgres") is not None
    if saver:  # else the checkpoints stay in the server's process, and only the memory is checked
        config["checkpointer"] = {"backend": "custom", "path": f"{HERE / 'pg_checkpointer.py'}:generate_checkpointer"}
    source = tmp_path / "langgraph.json"
    source.write_text(json.dumps(config))
    workdir = tmp_path / "server"
    workdir.mkdir()
    env = server_env(
        workdir / "memory", embedder="hashing", LOGICMAP_STORE_URL=postgres_url, LOGICMAP_STORE_POLICY="heuristic"
    )
    server = LangGraphDevServer(workdir, env, config=source).start()
    try:
        client = get_client(url=server.url)

        async def scenario() -> dict[str, Any]:
            await client.store.put_item(["docs", "alice"], "pref", {"content": "Alice prefers window seats."})
            got = await client.store.get_item(["docs", "alice"], "pref")
            thread = await client.threads.create()
            ingested = await client.runs.wait(
                thread["thread_id"],
                "ingest",
                input={"path": str(SAMPLE)},
                context={"namespace": "sample", "policy": "heuristic"},
            )
            answer = await client.runs.wait(
                thread["thread_id"],
                "rerank",
                input={"question": "What is the name of Maya's dog?"},
                context={"namespace": "sample"},
            )
            state = await client.threads.get_state(thread["thread_id"])
            return {"got": got, "ingested": ingested, "answer": answer, "thread": thread["thread_id"], "state": state}

        out = asyncio.run(asyncio.wait_for(scenario(), RUN_TIMEOUT_S))
    finally:
        server.stop()
    log = server.log_path.read_text(errors="replace")
    assert "Using custom store" in log and ("Configuring custom checkpointer" in log) == saver
    assert out["got"]["value"] == {"content": "Alice prefers window seats."}
    assert [r["session_id"] for r in out["ingested"]["reports"]] == ["S1", "S2", "S3", "S4", "S5"]
    assert out["answer"]["answer"].strip() and out["answer"]["cost"]["llm_calls"] == 0
    assert "D1:1" in {t for item in out["answer"]["evidence"] for t in item["turn_ids"]}
    assert out["state"]["values"]["question"] == "What is the name of Maya's dog?"
    with psycopg.connect(postgres_url) as conn:  # after the server stopped: what it left in the database
        namespaces = {ns: g for ns, g in conn.execute("SELECT namespace, generation FROM logicmap_namespaces")}
        turns = conn.execute(
            "SELECT count(*) FROM logicmap_records WHERE namespace = 'sample' AND kind = 'turns' "
            "AND record->>'text' LIKE %s",
            ("%dog%",),
        ).fetchone()
        checkpoints = (
            conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (out["thread"],)).fetchone()
            if saver
            else None
        )
    assert namespaces.get("sample", 0) >= 5 and namespaces.get("docs.alice", 0) >= 1, namespaces
    assert turns is not None and turns[0] >= 1
    if not saver:
        pytest.skip("memory in PostgreSQL checked; checkpoints not: langgraph-checkpoint-postgres is not installed")
    assert checkpoints is not None and checkpoints[0] >= 2, "the thread's checkpoints are not in PostgreSQL"


def test_the_postgres_compose_file_puts_the_servers_state_and_the_memory_in_one_database() -> None:
    import yaml
    from psycopg.conninfo import conninfo_to_dict

    compose = yaml.safe_load((HERE.parents[1] / "studio" / "compose.postgres.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"langgraph-api", "langgraph-redis", "langgraph-postgres"}
    for name, service in services.items():
        assert set(service.get("depends_on", {})) <= set(services), name
        for volume in service.get("volumes", []):
            assert volume.split(":", 1)[0] in compose["volumes"], (name, volume)
    database, api = services["langgraph-postgres"], services["langgraph-api"]
    assert database["image"].startswith("pgvector/pgvector:")
    env = api["environment"]
    server_db, memory_db = conninfo_to_dict(env["POSTGRES_URI"]), conninfo_to_dict(env["LOGICMAP_STORE_URL"])
    assert env["LOGICMAP_STORE_URL"].startswith("postgresql://") and server_db == memory_db
    assert server_db["host"] == "langgraph-postgres" and api["depends_on"]["langgraph-postgres"]
    assert not any(key.startswith("LOGICMAP_CHROMA") for key in env)
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", []))
