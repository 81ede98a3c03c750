"""Every Python snippet in the README and in ``docs/`` runs as written (those fenced ``python live-server`` in the
integration test that starts the API server).

The snippets of one page run in order in one fresh interpreter (a later snippet may use an earlier one's
names), from the repository root so ``data/...`` paths resolve, on a private data directory, with the fast
lexical embedder and no chat model configured. A snippet that names an OpenAI model reaches a fake
OpenAI-compatible server on 127.0.0.1 (``OPENAI_BASE_URL``), never the network.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from logicmap.evals.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# A block fenced ```python live-server talks to a running LangGraph API server: the integration test that starts
# one runs it (tests/integration/test_live_server_lifecycle.py), not this module.
LIVE_SERVER = "live-server"


def python_snippets(markdown: str, *, live_server: bool = False) -> list[str]:
    """The fenced ``python`` blocks of one page, in order (``live_server``: only those that need a server)."""
    return [block for info, block in FENCE.findall(markdown) if (LIVE_SERVER in info) == live_server]


def run_snippets(snippets: list[str], workdir: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    program = "\n\n".join(f"# --- snippet {i + 1}\n{code}" for i, code in enumerate(snippets))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOGICMAP_", "LANGSMITH_", "LANGCHAIN_"))}
    env |= {
        "LOGICMAP_DATA_DIR": str(workdir / "memory"),
        "LOGICMAP_EMBEDDING_PROVIDER": "hashing",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-test",
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def openai_server() -> FakeOpenAIServer:
    with FakeOpenAIServer() as server:
        yield server


def test_the_docs_have_python_snippets() -> None:
    counts = {page.name: len(python_snippets(page.read_text())) for page in PAGES}
    assert counts["README.md"] >= 3 and sum(counts.values()) >= 5, counts


@pytest.mark.parametrize("page", [p for p in PAGES if python_snippets(p.read_text())], ids=lambda p: p.name)
def test_every_snippet_of_a_page_runs(page: Path, tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    done = run_snippets(python_snippets(page.read_text()), tmp_path, openai_server.url)
    assert done.returncode == 0, f"{page.name}:\n{done.stderr[-3000:]}"


def test_a_broken_snippet_fails_the_check(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    page = 'Text.\n\n```python\nfrom logicmap import answer\n```\n\n```python\nanswer("compass")\n```\n'
    snippets = python_snippets(page)
    assert len(snippets) == 2
    done = run_snippets(snippets, tmp_path, openai_server.url)
    assert done.returncode != 0 and "TypeError" in done.stderr
