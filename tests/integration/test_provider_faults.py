"""The real ChatOpenAI client and the real ingest/ask CLI against a fake OpenAI-compatible server on 127.0.0.1.

Each scenario switches the server's faults: a bad key, rate limits with Retry-After, intermittent 5xx, a hang,
a rejected request, a prompt over the context window, truncated tool arguments, replies without choices.
A provider failure exits 3 with one line and commits nothing of the session; bad output alone may fall back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logicmap.__main__ import main
from logicmap.agents.provider import CONTEXT_WINDOW_SETTING, rate_gate
from logicmap.evals.fake_openai import FakeOpenAIServer, Scenario
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.memory.files.loaders import load_conversations
from logicmap.memory.store import MemoryStore
from logicmap.settings import LogicMapSettings

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_conversation.json"
NS = "faults"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def two_sessions(tmp_path: Path) -> Path:
    """The sample conversation cut to its first two sessions (fewer requests, same roles)."""
    sample = json.loads(SAMPLE.read_text())[0]
    conv = {
        k: v for k, v in sample["conversation"].items() if not k.startswith(("session_3", "session_4", "session_5"))
    }
    path = tmp_path / "two.json"
    path.write_text(json.dumps([{**sample, "conversation": conv, "qa": sample["qa"][:2]}]))
    return path


@pytest.fixture
def env(tmp_path: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """LOGICMAP_* pointing at the fake server, with small timeouts and budgets; the data directory."""
    for name in ("OPENAI_API_KEY", "LOGICMAP_CHAT_MODEL", "LOGICMAP_STRUCTURED_OUTPUT"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "memory"
    settings = {
        "CHAT_MODEL": "fake-model",
        "OPENAI_BASE_URL": server.url,
        "OPENAI_API_KEY": "sk-test",
        "EMBEDDING_PROVIDER": "hashing",
        "DATA_DIR": str(data),
        "REQUEST_TIMEOUT": "0.5",
        "RUN_DEADLINE_S": "6",
        "RETRY_BUDGET_S": "4",
        "RETRY_BASE_S": "0.05",
    }
    for key, value in settings.items():
        monkeypatch.setenv(f"LOGICMAP_{key}", value)
    server.reset()
    rate_gate.clear()
    return data


def committed_sessions(data: Path) -> dict[str, str]:
    """Session id -> the policy it was built with, for every committed session of the namespace."""
    store = MemoryStore(LogicMapSettings(data_dir=data, embedding_provider="hashing"))
    try:
        if not store.has_namespace(NS):
            return {}
        return {sid: info.policy for sid, info in store.snapshot(NS).manifest.sessions.items()}
    finally:
        store.close()


def ingest(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    started = time.monotonic()
    code = main(["ingest", str(path), "-n", NS, "--quiet"])
    return code, capsys.readouterr().err.strip(), time.monotonic() - started


def test_a_rejected_key_stops_with_one_line_and_a_later_run_builds_the_session(
    env: Path, server: FakeOpenAIServer, two_sessions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reset(Scenario(status=401, message="Incorrect API key provided: sk-test"))
    code, err, _ = ingest(two_sessions, capsys)
    assert code == 3 and len(err.splitlines()) == 1
    assert "rejected the API key (401)" in err and server.url in err and "not committed" in err
    assert len(server.requests) == 1 and committed_sessions(env) == {}

    server.reset(Scenario())
    code, err, _ = ingest(two_sessions, capsys)
    assert code == 0 and "fallback" not in err
    assert committed_sessions(env) == {"S1": "llm", "S2": "llm"}


def test_a_rate_limit_storm_shorter_than_the_budget_leaves_no_fallback(
    env: Path, server: FakeOpenAIServer, two_sessions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reset(Scenario(status=429, status_times=4, retry_after=0.2, message="Rate limit reached"))
    code, err, _ = ingest(two_sessions, capsys)
    assert code == 0 and "fallback" not in err
    limited = [r for r in server.requests if r.status == 429]
    answered = [r for r in server.requests if r.status == 200]
    assert len(limited) == 4 and len(server.requests) == len(answered) + 4  # one request per 429, no storm
    gaps = [b.at - a.at for a, b in zip(server.requests, server.requests[1:])][:4]
    assert all(gap >= 0.19 for gap in gaps)  # Retry-After honoured on every attempt
    assert set(committed_sessions(env).values()) == {"llm"}


def test_intermittent_server_errors_are_absorbed(
    env: Path, server: FakeOpenAIServer, two_sessions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reset(Scenario(status=503, status_times=2))
    code, err, _ = ingest(two_sessions, capsys)
    assert code == 0 and "fallback" not in err and len(committed_sessions(env)) == 2


def test_a_hung_server_stops_at_the_deadline_and_commits_nothing(
    env: Path,
    server: FakeOpenAIServer,
    two_sessions: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOGICMAP_RUN_DEADLINE_S", "2")
    server.reset(Scenario(hang_s=6))
    code, err, wall = ingest(two_sessions, capsys)
    assert code == 3 and len(err.splitlines()) == 1 and "deadline (2 s)" in err
    assert wall < 4.5 and committed_sessions(env) == {}


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (Scenario(status=403, message="not allowed"), "denied access (403)"),
        (Scenario(status=404, message="The model `fake-model` does not exist"), "does not know the model (404)"),
        (Scenario(status=400, message="tool_choice is not supported"), "LOGICMAP_STRUCTURED_OUTPUT"),
        (Scenario(max_prompt_chars=400), CONTEXT_WINDOW_SETTING),
    ],
    ids=["403", "404", "400-tool-choice", "context-length"],
)
def test_configuration_errors_stop_at_once_with_their_cause(
    env: Path,
    server: FakeOpenAIServer,
    two_sessions: Path,
    capsys: pytest.CaptureFixture[str],
    scenario: Scenario,
    expected: str,
) -> None:
    server.reset(scenario)
    code, err, _ = ingest(two_sessions, capsys)
    assert code == 3 and len(err.splitlines()) == 1 and expected in err
    assert len(server.requests) == 1 and committed_sessions(env) == {}


def test_ask_stops_with_one_line_instead_of_a_silent_fallback_answer(
    env: Path, server: FakeOpenAIServer, two_sessions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ingest(two_sessions, capsys)[0] == 0
    server.reset(Scenario(status=401, message="Incorrect API key provided"))
    code = main(["ask", "Where does Leo work?", "-n", NS])
    captured = capsys.readouterr()
    assert code == 3 and "rejected the API key (401)" in captured.err and "A:" not in captured.out


def test_truncated_tool_arguments_are_retried_with_the_parse_error(
    env: Path, server: FakeOpenAIServer, two_sessions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reset(Scenario(truncated=1))
    code, err, _ = ingest(two_sessions, capsys)
    assert code == 0 and "fallback" not in err
    first, retry = server.requests[0], server.requests[1]
    assert first.kind == "truncated" and retry.kind == "ok"
    feedback = retry.body["messages"][-1]["content"]
    assert "are not valid JSON" in feedback and "empty reply" not in feedback
    assert retry.body["messages"][-2]["content"] == first_arguments(server)


def first_arguments(server: FakeOpenAIServer) -> str:
    """The truncated arguments the server sent in its first reply (rebuilt the way it built them)."""
    from langchain_core.messages import convert_to_messages

    full = json.dumps(server.reply(convert_to_messages(server.requests[0].body["messages"])))
    return full[: max(1, len(full) // 2)]


def test_cost_matches_the_usage_the_server_reported_including_unusable_replies(
    env: Path, server: FakeOpenAIServer, two_sessions: Path
) -> None:
    server.reset(Scenario(empty_choices=1, length=1, status=429, status_times=1, retry_after=0.05))
    resources = Resources(settings=LogicMapSettings())
    try:
        report = ingest_conversation(load_conversations(two_sessions)[0], NS, resources=resources)
    finally:
        resources.store.close()
    # The empty and the cut-off reply may be one call's two attempts: one role, or the session analyst's parts
    # (segmentation, facts and cues are one call), each part falling back once.
    roles = [f.role for f in report.fallbacks]
    assert len(roles) <= 1 or (
        len(set(roles)) == len(roles) and set(roles) <= {"segmenter", "fact_extractor", "cue_extractor"}
    )
    prompt, completion = server.usage_sent()
    assert (report.cost.prompt_tokens, report.cost.completion_tokens) == (prompt, completion)
    assert not report.cost.tokens_estimated
    assert report.cost.http_requests == len(server.requests)
    assert report.cost.llm_calls == len([r for r in server.requests if r.status == 200])
    assert report.cost.usable_replies == report.cost.llm_calls - 2  # the empty and the cut-off reply


def test_parallel_callers_wait_out_one_rate_limit_together(env: Path, server: FakeOpenAIServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from langchain_core.messages import HumanMessage, SystemMessage

    from logicmap.agents.base import run_role
    from logicmap.agents.models import make_chat_model
    from logicmap.agents.provider import run_scope
    from logicmap.prompts.plan import Plan

    settings = LogicMapSettings()
    llm = make_chat_model(settings)
    schema_text = json.dumps(Plan.model_json_schema())
    messages = [
        SystemMessage(
            content=f"Reply with a JSON object of type Plan matching this JSON schema, and nothing else:\n{schema_text}"
        ),
        HumanMessage(content="Question: where?"),
    ]
    server.reset(Scenario(status=429, status_times=1, retry_after=0.4))

    def ask(_: int) -> bool:
        with run_scope(settings):
            return (
                run_role(
                    llm, role="planner", messages=messages, schema=Plan, fallback=lambda: Plan(subgoals=["x"])
                ).fallback
                is None
            )

    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(ask, 0)
        time.sleep(0.1)  # the first caller's 429 is in: the others start during its hold
        results = [first.result(), *pool.map(ask, range(1, 6))]
    assert all(results)
    limited = [r for r in server.requests if r.status == 429]
    assert len(limited) == 1 and len(server.requests) == 7  # six answers and the one 429: no storm
    assert all(r.at - limited[0].at >= 0.39 for r in server.requests if r is not limited[0])


def test_a_long_session_is_built_in_windows_that_fit_the_context(
    env: Path,
    server: FakeOpenAIServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 120-turn session against a server that refuses any request over its context window: with the
    window set to the model's context the session is built by the model in windows, with no fallback; the
    same session sent whole is refused (the limit is real)."""
    import random

    rng = random.Random(22)
    places = ["Lisbon", "Porto", "Kyoto", "Oslo", "Quito", "Accra"]
    things = ["a pottery class", "the night shift", "a marathon", "her sister's wedding", "a vintage camera"]
    turns = [
        {
            "speaker": speaker,
            "dia_id": f"D1:{i + 1}",
            "text": f"Turn {i + 1}: {speaker} talks about {rng.choice(things)} in {rng.choice(places)}, "
            f"and about what happened after it, in some detail, for a while. " * 2,
        }
        for i, speaker in enumerate(["Maya", "Leo"] * 60)
    ]
    doc = [
        {
            "sample_id": "long",
            "conversation": {
                "speaker_a": "Maya",
                "speaker_b": "Leo",
                "session_1": turns,
                "session_1_date_time": "1 May 2023",
            },
            "qa": [],
        }
    ]
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    session_chars = sum(len(t["text"]) for t in turns)
    limit = 2048 * 4  # the server's window: 2,048 tokens at its 4 characters per token

    monkeypatch.setenv("LOGICMAP_CONTEXT_TOKENS", "100000")  # told a larger window than the model has
    server.reset(Scenario(max_prompt_chars=limit))
    code, err, _ = ingest(path, capsys)
    assert session_chars > 3 * limit and code == 3 and CONTEXT_WINDOW_SETTING in err
    assert committed_sessions(env) == {}

    monkeypatch.setenv("LOGICMAP_CONTEXT_TOKENS", "2048")  # the model's real window
    server.reset(Scenario(max_prompt_chars=limit))
    code, err, _ = ingest(path, capsys)
    assert code == 0 and "fallback" not in err, err
    assert committed_sessions(env) == {"S1": "llm"}
    assert all(r.chars <= limit for r in server.requests) and all(r.status == 200 for r in server.requests)
    assert len(server.requests) >= 8  # several windows per role
    store = MemoryStore(LogicMapSettings(data_dir=env, embedding_provider="hashing"))
    try:
        snapshot = store.snapshot(NS)
        cited = {t for e in snapshot.events.values() for t in e.turn_ids}
        assert cited == set(snapshot.turns) and len(snapshot.turns) == 120
        assert snapshot.manifest.sessions["S1"].fallbacks == []  # every window of every role built by the model
    finally:
        store.close()
