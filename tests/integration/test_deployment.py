"""Deployment: what ``langgraph build``/``dockerfile`` package, the compose file, and the API server on a Chroma server.

Docker images cannot be built here (no registry for the base image), so the tests check what can run: the
Dockerfile ``langgraph dockerfile`` writes from studio/langgraph.json, the compose file's wiring, and the real
API server (``langgraph dev``) with its memory in a real Chroma server on 127.0.0.1, serving two clients at once
while another process reads the same memory.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from logicmap.memory.store import MemoryStore
from logicmap.settings import LogicMapSettings
from tests.reliability.test_concurrency import chroma_server  # noqa: F401 - the fixture, reused

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STUDIO = PROJECT_ROOT / "studio"
LANGGRAPH_BIN = Path(sys.executable).parent / "langgraph"
SAMPLE = PROJECT_ROOT / "data" / "sample_conversation.json"


def test_langgraph_dockerfile_packages_the_whole_library(tmp_path: Path) -> None:
    out = tmp_path / "Dockerfile"
    done = subprocess.run(
        [str(LANGGRAPH_BIN), "dockerfile", "-c", str(STUDIO / "langgraph.json"), str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "LANGGRAPH_CLI_NO_ANALYTICS": "1", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    dockerfile = out.read_text()
    # The dependency is the repository root (the logicmap package), not the studio folder.
    context = PROJECT_ROOT.name
    assert f"--build-context {context}={PROJECT_ROOT}" in done.stdout + done.stderr
    assert f"COPY --from={context} . /deps/{context}" in dockerfile
    assert "non-package dependency" not in dockerfile and "outer-studio" not in dockerfile
    install = dockerfile.index("uv pip install --system --no-cache-dir -c /api/constraints.txt -e .")
    torch = dockerfile.index("torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    assert torch < install, "CPU torch must be installed before the package pulls a CUDA build"
    graphs = json.loads(dockerfile.split("ENV LANGSERVE_GRAPHS='", 1)[1].split("'\n", 1)[0])
    assert sorted(graphs) == [
        "chatbot",
        "compass",
        "delete_namespace",
        "forget",
        "goalmem",
        "ingest",
        "list_memories",
        "r2",
        "real",
        "reconstruct",
        "rerank",
    ]
    assert all(entry["path"].startswith("logicmap.graphs.") for entry in graphs.values())
    assert json.loads(dockerfile.split("ENV LANGGRAPH_HTTP='", 1)[1].split("'\n", 1)[0]) == {
        "app": "logicmap.studio.server:app",
        "middleware_order": "auth_first",
    }
    # What the root context ships: not the virtual environments or local memory.
    ignored = (PROJECT_ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".venv-llm", ".logicmap", ".git"} <= set(ignored)


def test_the_compose_file_wires_the_api_server_to_the_chroma_server() -> None:
    compose = yaml.safe_load((STUDIO / "compose.yaml").read_text())
    services = compose["services"]
    assert {"chroma", "langgraph-api", "langgraph-redis", "langgraph-postgres"} <= set(services)
    for name, service in services.items():
        assert set(service.get("depends_on", {})) <= set(services), name
        assert "image" in service, name
        for volume in service.get("volumes", []):
            assert volume.split(":", 1)[0] in compose["volumes"], (name, volume)
    api, chroma = services["langgraph-api"], services["chroma"]
    env = api["environment"]
    assert env["LOGICMAP_CHROMA_HOST"] == "chroma" and "chroma" in api["depends_on"]
    chroma_ports = {p.rsplit(":", 1)[1] for p in chroma["ports"]}
    assert env["LOGICMAP_CHROMA_PORT"] in chroma_ports
    assert chroma["image"].startswith("chromadb/chroma:")
    assert {"REDIS_URI", "POSTGRES_URI"} <= set(env)
    # Every published port is bound to loopback only.
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", []))
    # The image the compose file runs is the one the docs tell `langgraph build` to tag.
    readme = (PROJECT_ROOT / "docs" / "studio-and-server.md").read_text()
    assert f"langgraph build -c studio/langgraph.json -t {api['image']}" in readme
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        checked = subprocess.run(
            [docker, "compose", "-f", str(STUDIO / "compose.yaml"), "config", "-q"], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr


def test_api_server_on_a_chroma_server_serves_two_clients_and_shares_memory(
    langgraph_dev: Any,
    chroma_server: int,  # noqa: F811
) -> None:
    from langgraph_sdk import get_client

    server = langgraph_dev(embedder="minilm", LOGICMAP_CHROMA_HOST="127.0.0.1", LOGICMAP_CHROMA_PORT=str(chroma_server))
    # The lifespan loaded the embedder and opened the store before the first run.
    health = httpx.get(f"{server.url}/logicmap/health", timeout=10).json()
    assert health["status"] == "ok" and health["embedder"] == "minilm:all-MiniLM-L6-v2", health
    assert health["store"] == "server" and health["store_location"] == f"127.0.0.1:{chroma_server}"
    assert health["embedder_load_s"] > 0 and "namespace" not in json.dumps(health)

    async def client_session(namespace: str) -> dict[str, Any]:
        client = get_client(url=server.url)
        ingested = await client.runs.wait(
            None, "ingest", input={"path": str(SAMPLE)}, context={"namespace": namespace, "policy": "heuristic"}
        )
        answered = await client.runs.wait(
            None,
            "compass",
            input={"question": "What is the name of Maya's dog?"},
            context={"namespace": namespace, "policy": "heuristic"},
        )
        return {"ingested": ingested, "answered": answered}

    async def both() -> list[dict[str, Any]]:
        return await asyncio.wait_for(asyncio.gather(client_session("client-a"), client_session("client-b")), 600)

    first, second = asyncio.run(both())
    for outcome in (first, second):
        assert [r["session_id"] for r in outcome["ingested"]["reports"]] == ["S1", "S2", "S3", "S4", "S5"]
        assert outcome["answered"]["kept"] and outcome["answered"]["answer"].strip(), outcome["answered"]
    assert first["answered"]["answer"] == second["answered"]["answer"]
    # Another process (this test, as the CLI would) reads the server's memory through the Chroma server.
    with MemoryStore(
        LogicMapSettings(chroma_host="127.0.0.1", chroma_port=chroma_server, embedding_provider="minilm")
    ) as store:
        assert {"client-a", "client-b"} <= set(store.namespaces())
        a, b = store.snapshot("client-a"), store.snapshot("client-b")
        assert len(a.turns) == len(b.turns) > 0 and sorted(a.events) == sorted(b.events)
