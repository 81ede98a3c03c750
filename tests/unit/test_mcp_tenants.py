"""The MCP server's tenant rules in process: tokens map to namespaces, a tool argument never names one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from logicmap.__main__ import main
from logicmap.graphs.surfaces.mcp_server import TenantTokens, build_mcp_server, load_tenants

TOKEN_A, TOKEN_B = "a" * 16 + "-alice", "b" * 16 + "-bob"


def test_tokens_map_to_namespaces_and_anything_else_maps_to_none() -> None:
    tokens = TenantTokens({TOKEN_A: "alice", TOKEN_B: "acme.bob"})
    assert tokens.namespace({"authorization": f"Bearer {TOKEN_A}"}) == "alice"
    assert tokens.namespace({"authorization": f"bearer {TOKEN_B}"}) == "acme.bob"
    for headers in (
        None,
        {},
        {"authorization": TOKEN_A},
        {"authorization": f"Bearer {TOKEN_A}x"},
        {"authorization": "Bearer "},
        {"authorization": f"Basic {TOKEN_A}"},
    ):
        assert tokens.namespace(headers) is None, headers
    with pytest.raises(ValueError, match="16 characters"):
        TenantTokens({"short": "alice"})
    with pytest.raises(ValueError):
        TenantTokens({TOKEN_A: "../etc"})


def test_a_bad_tenants_file_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "tenants.json"
    for content in ("{not json", "[1, 2]", json.dumps({TOKEN_A: 3})):
        bad.write_text(content)
        with pytest.raises(ValueError, match="tenants file"):
            load_tenants(bad)
    assert main(["--data-dir", str(tmp_path / "m"), "mcp", "--http", "--tenants", str(bad)]) == 2
    assert main(["--data-dir", str(tmp_path / "m"), "mcp"]) == 2
    assert main(["--data-dir", str(tmp_path / "m"), "mcp", "-n", "alice", "--tenants", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 3 and "Traceback" not in err


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], resources: Any, port: str
) -> None:
    from logicmap.graphs.surfaces.mcp_server import serve_http

    argv = ["--data-dir", str(tmp_path / "m"), "--embeddings", "hashing"]
    assert main([*argv, "mcp", "--http", "--port", port, "-n", "alice"]) == 2
    assert main([*argv, "local-llm", "--port", port]) == 2  # refused before any server starts
    err = capsys.readouterr().err
    assert err.count("error: --port must be a port number from 1 to 65535") == 2, err
    assert len(err.splitlines()) == 2 and "Traceback" not in err
    with pytest.raises(ValueError, match="port must be a port number"):  # the Python API, before any socket
        serve_http(build_mcp_server(resources, namespace="alice"), port=int(port))


def test_read_only_serves_no_write_tool_and_an_argument_namespace_is_dropped(resources: Any) -> None:
    from mcp import Client

    async def scenario() -> tuple[list[str], list[str], str]:
        writer = build_mcp_server(resources, namespace="alice")
        async with Client(writer) as client:
            write_tools = sorted(t.name for t in (await client.list_tools()).tools)
            await client.call_tool("remember", {"text": "I sail on Sundays.", "namespace": "bob"})
        reader = build_mcp_server(resources, namespace="bob", writes=False)
        async with Client(reader) as client:
            read_tools = sorted(t.name for t in (await client.list_tools()).tools)
            listed = await client.call_tool("list_memories", {"namespace": "alice"})
        return write_tools, read_tools, "".join(c.text for c in listed.content)

    write_tools, read_tools, listed = asyncio.run(scenario())
    assert read_tools == ["answer", "list_memories", "search_events"]
    assert set(write_tools) - set(read_tools) == {"remember", "forget_memory", "update_memory", "purge_memory"}
    assert "Sundays" not in listed and "bob" in listed  # bob's (unknown) namespace, never alice's
    assert resources.store.namespaces() == ["alice"]
