"""The offline model over real HTTP: llama-cpp-python's server with SmolLM2, used through ChatOpenAI and run_role."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from pydantic import BaseModel

from logicmap.agents.base import FallbackRecord, run_role
from logicmap.agents.local_llm import MODEL_ALIAS, LocalLLMServer
from logicmap.agents.segmenter import changepoint_segments, render_turns, validate_segmentation
from logicmap.memory.files.loaders import Conversation
from logicmap.memory.records.records import Turn
from logicmap.prompts import segment as segment_prompt
from logicmap.prompts.segment import Segmentation

pytestmark = pytest.mark.integration


class Capital(BaseModel):
    city: str
    country: str


def _turns(sample: Conversation, index: int = 0) -> list[Turn]:
    session = sample.sessions[index]
    return [
        Turn(
            namespace="it",
            session_id=session.session_id,
            dia_id=raw.dia_id,
            speaker=raw.speaker,
            text=raw.text,
            image_caption=raw.image_caption,
            session_time=session.timestamp,
            position=i,
        )
        for i, raw in enumerate(session.turns)
    ]


def test_server_serves_the_model_on_loopback(local_llm: LocalLLMServer) -> None:
    assert local_llm.base_url.startswith("http://127.0.0.1:")
    models = httpx.get(f"{local_llm.base_url}/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [MODEL_ALIAS]
    assert local_llm.start_time_s is not None and local_llm.start_time_s < 120


def test_segmentation_through_run_role_is_typed_or_a_recorded_fallback(
    local_llm: LocalLLMServer, sample: Conversation
) -> None:
    turns = _turns(sample)
    vectors = np.eye(len(turns), dtype=np.float32)
    outcome = run_role(
        local_llm.chat_model(max_tokens=384),
        role="segmenter",
        messages=segment_prompt.build_messages(render_turns(turns), sample.sessions[0].timestamp.isoformat()),
        schema=Segmentation,
        validate=lambda r: validate_segmentation(r, turns),
        fallback=lambda: changepoint_segments(turns, vectors),
        method="function_calling",
    )
    assert isinstance(outcome.output, Segmentation) and outcome.output.events
    # The call really went over HTTP: the server reported token usage (not an estimate).
    assert outcome.cost.llm_calls >= 1
    assert outcome.cost.prompt_tokens > 200 and not outcome.cost.tokens_estimated
    if outcome.fallback is None:
        assert validate_segmentation(outcome.output, turns) == []
    else:
        assert isinstance(outcome.fallback, FallbackRecord) and outcome.fallback.role == "segmenter"
        assert outcome.attempts == 2 and len(outcome.fallback.errors) == 2
        known = {t.dia_id for t in turns}
        assert all(set(e.turn_ids) <= known for e in outcome.output.events)


@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
def test_schema_constrained_decoding_returns_parseable_records(local_llm: LocalLLMServer, method: str) -> None:
    """Both methods are grammar-constrained by the JSON schema (json_schema through the launcher's translation)."""
    outcome = run_role(
        local_llm.chat_model(max_tokens=64),
        role="capital",
        messages=[
            ("system", "Answer with the capital city and its country."),
            ("user", "What is the capital of France?"),
        ],  # type: ignore[list-item]  # (role, text) tuples, as LangChain takes them
        schema=Capital,
        fallback=lambda: Capital(city="", country=""),
        method=method,
    )
    assert outcome.fallback is None, outcome.fallback
    assert outcome.attempts == 1 and isinstance(outcome.output, Capital) and outcome.output.city


def test_max_tokens_sent_by_chatopenai_is_honoured(local_llm: LocalLLMServer) -> None:
    """ChatOpenAI sends ``max_completion_tokens``, which the bare server ignores; the launcher maps it."""
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=MODEL_ALIAS, base_url=local_llm.base_url, api_key="x", max_tokens=12, max_retries=0)  # type: ignore[arg-type, call-arg]  # ChatOpenAI's aliases (api_key, max_tokens)
    reply = llm.invoke("Write a very long essay about the sea, at least two thousand words.")
    assert 0 < reply.usage_metadata["output_tokens"] <= 12


def test_server_caps_uncapped_requests_and_releases_its_port_when_stopped(local_llm: LocalLLMServer) -> None:
    server = LocalLLMServer(server_max_tokens=24)  # a second server beside the shared one
    try:
        server.start(timeout=120)
        assert server.alive() and server.port != local_llm.port
        body = {"messages": [{"role": "user", "content": "Write a very long essay about the sea."}]}
        usage = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120).json()["usage"]
        assert 0 < usage["completion_tokens"] <= 24  # no client cap: the server default applies
    finally:
        server.stop()
    assert not server.alive()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{server.base_url}/models", timeout=2)


def test_the_launcher_stops_its_server_child_on_sigterm(tmp_path) -> None:
    """``logicmap local-llm`` under a supervisor: SIGTERM stops the llama.cpp child, as Ctrl-C does."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    from logicmap.agents.local_llm import LocalLLMUnavailable, find_llm_python, find_model_path, free_port

    try:
        find_model_path(find_llm_python())
    except LocalLLMUnavailable as exc:
        pytest.skip(f"local model not installed ({exc})")
    port = free_port()
    log = (tmp_path / "launcher.log").open("w")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "logicmap", "local-llm", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = launcher.stdout.readline() if launcher.stdout else ""
            if not line:
                break
            lines.append(line)
            if "serving until Ctrl-C" in line:
                break
        assert any("serving until Ctrl-C" in line for line in lines), "".join(lines)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).status_code == 200
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=30) == 0
        # The server child is gone: nothing listens on its port any more.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    break
            time.sleep(0.2)
        else:
            pytest.fail(f"the local model server still listens on {port} after the launcher got SIGTERM")
    finally:
        if launcher.poll() is None:
            launcher.kill()
        log.close()
