"""Provider faults, scenario by scenario: the sample conversation ingested through the real ChatOpenAI client
against the fake OpenAI-compatible server (``evals.fake_openai``), one fault per row.

Prints HTTP requests, wall time, fallbacks, sessions committed and how the run ended.
Usage: ``python -m logicmap.evals.bench.bench_provider_faults [--deadline 3] [--budget 3]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from logicmap.agents.provider import ProviderError, rate_gate
from logicmap.evals.common import machine_line, print_table
from logicmap.evals.fake_openai import FakeOpenAIServer, Scenario

__all__ = ["SCENARIOS", "main", "run_scenario"]

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"

SCENARIOS: list[tuple[str, Scenario]] = [
    ("ok", Scenario()),
    ("401 bad key", Scenario(status=401, message="Incorrect API key provided")),
    ("403 permission", Scenario(status=403, message="not allowed")),
    ("404 model", Scenario(status=404, message="The model does not exist")),
    ("400 tool_choice rejected", Scenario(status=400, message="tool_choice is not supported")),
    ("429 x4, Retry-After 0.5 s", Scenario(status=429, status_times=4, retry_after=0.5)),
    ("429 storm longer than the budget", Scenario(status=429, retry_after=0.5)),
    ("503 x2", Scenario(status=503, status_times=2)),
    ("hang (deadline)", Scenario(hang_s=30)),
    ("truncated tool arguments x1", Scenario(truncated=1)),
    ("choices: [] with usage x1", Scenario(empty_choices=1)),
    ("finish_reason length x1", Scenario(length=1)),
    ("context_length_exceeded", Scenario(max_prompt_chars=2000)),
]


def run_scenario(server: FakeOpenAIServer, scenario: Scenario, args: argparse.Namespace) -> list[Any]:
    """One row: ingest the sample into a fresh directory with ``scenario`` on the server."""
    from logicmap.graphs.ingest.ingest import ingest_conversation
    from logicmap.graphs.runtime.resources import Resources
    from logicmap.memory.files.loaders import load_conversations
    from logicmap.settings import LogicMapSettings

    server.reset(scenario)
    rate_gate.clear()
    with tempfile.TemporaryDirectory() as tmp:
        settings = LogicMapSettings(
            data_dir=Path(tmp),
            embedding_provider="hashing",
            chat_model="fake-model",
            openai_base_url=server.url,
            openai_api_key=SecretStr("sk-bench"),
            request_timeout=args.timeout,
            run_deadline_s=args.deadline,
            retry_budget_s=args.budget,
            retry_base_s=0.1,
        )
        resources = Resources(settings=settings)
        resources.store.snapshot("warm-up")  # open the store before the clock starts
        started = time.monotonic()
        fallbacks, outcome = "-", "ok"
        try:
            report = ingest_conversation(load_conversations(SAMPLE)[0], "bench", resources=resources)
            fallbacks, outcome = str(len(report.fallbacks)), f"ok ({report.cost.usable_replies} usable replies)"
            tokens = f"{report.cost.prompt_tokens}+{report.cost.completion_tokens}"
        except ProviderError as exc:
            outcome, tokens = f"stopped: {exc.kind}", "-"
        wall = time.monotonic() - started
        committed = (
            len(resources.store.snapshot("bench").manifest.sessions) if resources.store.has_namespace("bench") else 0
        )
        resources.store.close()
    sent = server.usage_sent()
    return [len(server.requests), f"{wall:.2f}", fallbacks, f"{committed}/5", outcome, tokens, f"{sent[0]}+{sent[1]}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=3.0, help="LOGICMAP_RUN_DEADLINE_S for the runs")
    parser.add_argument("--budget", type=float, default=3.0, help="LOGICMAP_RETRY_BUDGET_S for the runs")
    parser.add_argument("--timeout", type=float, default=1.0, help="LOGICMAP_REQUEST_TIMEOUT for the runs")
    args = parser.parse_args(argv)
    print(machine_line())
    print(
        f"sample conversation (5 sessions); deadline {args.deadline:g} s per session, retry budget {args.budget:g} s, "
        f"request timeout {args.timeout:g} s"
    )
    rows = []
    with FakeOpenAIServer() as server:
        for label, scenario in SCENARIOS:
            rows.append([label, *run_scenario(server, scenario, args)])
    print_table(
        ["scenario", "HTTP requests", "wall s", "fallbacks", "committed", "outcome", "tokens counted", "tokens served"],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
