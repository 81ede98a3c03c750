"""agents.base on LangChain's pieces: structured output with raw access, the JSON-prompt path, usage, run config.

The contract stays: a typed output validated into the role's model, one retry with the error shown to the model,
a recorded deterministic fallback, typed provider errors, the cost of every call. Models are LangChain fake chat
models with scripted replies, and the real ``ChatOpenAI`` client against the fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.runnables import RunnableLambda, RunnableMap, RunnablePassthrough
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from pydantic import BaseModel, Field

from logicmap.agents.base import RolePart, parse_json_reply, run_role, run_role_parts
from logicmap.agents.provider import DeadlineExceeded, rate_gate, run_scope
from logicmap.agents.testing import ScriptedChatModel
from logicmap.evals.fake_openai import FakeOpenAIServer, Scenario
from logicmap.settings import LogicMapSettings


class Pick(BaseModel):
    """A pick."""

    name: str
    count: int
    tags: list[str] = Field(default_factory=list)


class ToolScripted(ScriptedChatModel):
    """A scripted model with tool calling that records what ``bind_tools`` was asked for."""

    bound: list[dict[str, Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolScripted:
        self.bound.append({"tools": [getattr(t, "__name__", t) for t in tools], **kwargs})
        return self


class Runs(BaseTracer):
    """Every finished run: name, type, parent, tags, metadata."""

    def __init__(self) -> None:
        super().__init__()
        self.done: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _end_trace(self, run: Run) -> None:
        self.done.append(run)
        super()._end_trace(run)


MESSAGES = [SystemMessage(content="Reply with a Pick."), HumanMessage(content="pick one")]


def _fallback() -> Pick:
    return Pick(name="fallback", count=0)


def _call(model: Any, *, role: str = "picker", **kwargs: Any) -> Any:
    return run_role(model, role=role, messages=list(MESSAGES), schema=Pick, fallback=_fallback, **kwargs)


def _tool_reply(args: dict[str, Any], name: str = "Pick") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call_1", "type": "tool_call"}])


def test_a_tool_calling_model_is_asked_through_with_structured_output() -> None:
    model = ToolScripted(replies=[_tool_reply({"name": "a", "count": 2})])
    outcome = _call(model)
    assert outcome.fallback is None and outcome.output == Pick(name="a", count=2) and outcome.attempts == 1
    # LangChain's with_structured_output bound the schema as a forced tool (its own marker says which method).
    assert model.bound[0]["tools"] == ["Pick"]
    assert model.bound[0]["ls_structured_output_format"]["kwargs"]["method"] == "function_calling"
    assert outcome.cost.llm_calls == outcome.cost.http_requests == outcome.cost.usable_replies == 1
    assert outcome.cost.prompt_tokens == sum(len(str(m.content)) for m in MESSAGES) // 4  # the reply's usage_metadata
    assert not outcome.cost.tokens_estimated


def test_a_model_without_tool_calling_gets_the_json_prompt_path() -> None:
    replies = iter([AIMessage(content='Here it is:\n```json\n{"name": "b", "count": 3}\n```\nAnything else?')])
    model = GenericFakeChatModel(messages=replies)
    with pytest.raises(NotImplementedError):
        model.with_structured_output(Pick)
    outcome = _call(model)
    assert outcome.fallback is None and outcome.output == Pick(name="b", count=3)
    assert outcome.cost.tokens_estimated  # the fake model reports no usage: estimated at ~4 characters a token

    scripted = ToolScripted(replies=['Sure. {"name": "c", "count": 1} Hope that helps.'])
    assert _call(scripted, method="prompt").output == Pick(name="c", count=1)
    assert scripted.bound == []  # method "prompt" never binds a tool


def test_the_reply_s_json_is_read_from_tool_calls_fences_and_prose() -> None:
    assert parse_json_reply(_tool_reply({"x": 1})) == {"x": 1}
    assert parse_json_reply(AIMessage(content='```json\n{"x": 2}\n```')) == {"x": 2}
    assert parse_json_reply(AIMessage(content='I think [1, 2] is it, then {"x": 3}')) == [1, 2]
    with pytest.raises(ValueError, match="empty reply"):
        parse_json_reply(AIMessage(content="  "))
    with pytest.raises(ValueError, match="no JSON object"):
        parse_json_reply(AIMessage(content="42"))


def test_the_validation_error_is_shown_once_then_the_fallback_is_recorded() -> None:
    model = ToolScripted(replies=[_tool_reply({"name": "a"}), {"name": "a", "count": "many"}])
    outcome = _call(model)
    assert outcome.output == _fallback() and outcome.attempts == 2
    assert outcome.fallback is not None and outcome.fallback.role == "picker"
    assert outcome.fallback.reason == "invalid model output after one retry"
    first, second = outcome.fallback.errors
    assert first.startswith("attempt 1:") and "count\n  Field required" in first
    assert second.startswith("attempt 2:") and "valid integer" in second
    retry = model.calls[1]
    assert retry[:2] == MESSAGES and json.loads(str(retry[2].content)) == [{"name": "a"}]  # what the model said
    assert "Field required" in str(retry[3].content) and "matching the Pick schema" in str(retry[3].content)
    assert outcome.cost.llm_calls == 2 and outcome.cost.usable_replies == 0


def test_a_validation_failure_then_a_valid_reply_needs_no_fallback() -> None:
    model = ToolScripted(replies=[{"name": "a", "count": -1}, _tool_reply({"name": "a", "count": 1})])
    outcome = _call(model, validate=lambda p: ["count must be positive"] if p.count < 1 else [])
    assert outcome.fallback is None and outcome.output.count == 1 and outcome.attempts == 2
    assert "count must be positive" in str(model.calls[1][-1].content)


def test_a_cut_off_reply_is_not_completed_into_a_valid_one() -> None:
    text = '{"name": "a", "count": 2, "tags": ["x", "y'
    assert JsonOutputParser().parse(text) == {"name": "a", "count": 2, "tags": ["x", "y"]}  # LangChain completes it
    cut = AIMessage(content=text, response_metadata={"finish_reason": "length"})
    model = ScriptedChatModel(replies=[cut, {"name": "a", "count": 2, "tags": ["x"]}])
    outcome = _call(model)
    assert outcome.fallback is None and outcome.output.tags == ["x"] and outcome.attempts == 2
    feedback = str(model.calls[1][-1].content)
    assert "finish_reason=length" in feedback and "no JSON object" in feedback


class TextJsonModel(ScriptedChatModel):
    """A provider whose structured output reads the reply's text with LangChain's ``PydanticOutputParser`` (as
    ChatOllama's json_mode and ChatAnthropic's json_schema do), built like LangChain's own include_raw runnable."""

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Any:
        parse = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | PydanticOutputParser(pydantic_object=schema), parsing_error=lambda _: None
        )
        keep = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=self) | parse.with_fallbacks([keep], exception_key="parsing_error")


def test_a_cut_off_text_reply_is_read_strictly_not_as_langchain_s_parser_completes_it() -> None:
    cut = '{"name": "a", "count": 2, "tags": ["x", "y'  # no finish_reason (Ollama: done_reason, Anthropic: stop_reason)
    out = TextJsonModel(replies=[cut]).with_structured_output(Pick, include_raw=True).invoke("q")
    assert out["parsed"] == Pick(name="a", count=2, tags=["x", "y"])  # LangChain's parse of the cut-off reply
    model = TextJsonModel(replies=[cut, {"name": "a", "count": 2, "tags": ["x"]}])
    outcome = _call(model, method="json_mode")
    assert outcome.fallback is None and outcome.output.tags == ["x"] and outcome.attempts == 2
    assert "no JSON object" in str(model.calls[1][-1].content)


def test_a_tool_call_under_another_name_is_still_read() -> None:
    """LangChain's tool parser refuses a tool name it was not given; the arguments are what the role reads."""
    outcome = _call(ToolScripted(replies=[_tool_reply({"name": "a", "count": 1}, name="pick_tool")]))
    assert outcome.fallback is None and outcome.attempts == 1


def test_role_runs_carry_the_role_s_name_tags_and_metadata_and_nest_in_the_caller_s_run() -> None:
    tracer = Runs()
    model = ToolScripted(replies=[{"name": "a"}, _tool_reply({"name": "a", "count": 1})])

    def step(_: Any) -> Any:
        return _call(model, tags=["strategy:test"], metadata={"namespace": "alice"})

    outcome = RunnableLambda(step).with_config(run_name="caller").invoke(None, config={"callbacks": [tracer]})
    assert outcome.fallback is None and outcome.attempts == 2
    by_id = {run.id: run for run in tracer.done}
    llm_runs = [run for run in tracer.done if run.run_type == "llm"]
    assert [run.name for run in llm_runs] == ["picker", "picker"] and len(llm_runs) == outcome.cost.llm_calls
    for run, attempt in zip(llm_runs, (None, 2), strict=True):
        assert {"role:picker", "strategy:test"} <= set(run.tags or [])
        assert run.metadata["namespace"] == "alice" and run.metadata.get("attempt") == attempt
        assert ("retry" in (run.tags or [])) == (attempt == 2)
        ancestors = []
        parent = run.parent_run_id
        while parent is not None:
            ancestors.append(by_id[parent].name)
            parent = by_id[parent].parent_run_id
        assert ancestors[-1] == "caller" and "picker" in ancestors[:-1]  # the role's run, inside the caller's


def test_parts_are_read_from_the_raw_reply_and_asked_again_on_their_own() -> None:
    class Left(BaseModel):
        left: int

    class Right(BaseModel):
        right: str

    class Both(BaseModel):
        left: int
        right: str

    model = ToolScripted(replies=[_tool_reply({"left": 1, "right": 5}, name="Both"), {"right": "r"}])
    outcome = run_role_parts(
        model,
        role="both",
        messages=list(MESSAGES),
        schema=Both,
        parts=[RolePart("left", Left, lambda: Left(left=0)), RolePart("right", Right, lambda: Right(right="f"))],
    )
    assert outcome.fallbacks == [] and outcome.outputs == {"left": Left(left=1), "right": Right(right="r")}
    assert "right: " in str(model.calls[1][-1].content) and "left:" not in str(model.calls[1][-1].content)


# -- the real ChatOpenAI client against the fake OpenAI-compatible server --------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    rate_gate.clear()
    with FakeOpenAIServer() as fake:
        fake.reply = lambda messages: {"name": "served", "count": 4}
        yield fake


def _openai(server: FakeOpenAIServer) -> Any:
    from langchain_openai import ChatOpenAI

    key: Any = "sk-test"  # a SecretStr field that takes a str
    return ChatOpenAI(model="fake-model", base_url=server.url, api_key=key, max_retries=0, timeout=30)


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode", "prompt"])
def test_each_method_sends_its_request_and_counts_the_served_usage(server: FakeOpenAIServer, method: str) -> None:
    outcome = _call(_openai(server), method=method)
    assert outcome.fallback is None and outcome.output == Pick(name="served", count=4)
    body = server.requests[-1].body
    expected_format = {
        "function_calling": None,
        "json_schema": {
            "type": "json_schema",
            "json_schema": {"name": "Pick", "schema": Pick.model_json_schema(), "strict": False},
        },
        "json_mode": {"type": "json_object"},
        "prompt": None,
    }[method]
    assert body.get("response_format") == expected_format
    tool = body.get("tool_choice")
    assert (tool == {"type": "function", "function": {"name": "Pick"}}) == (method == "function_calling")
    assert (outcome.cost.prompt_tokens, outcome.cost.completion_tokens) == server.usage_sent()
    assert not outcome.cost.tokens_estimated


def test_the_run_deadline_bounds_the_structured_request(server: FakeOpenAIServer) -> None:
    """The request's share of the deadline reaches the client through the structured-output runnable: the hung
    request is cut at the deadline (the client's own timeout is 30 s, the server hangs 3 s, then would answer)."""
    server.reset(Scenario(hang_s=3, hang_times=1))
    server.reply = lambda messages: {"name": "served", "count": 4}
    with run_scope(LogicMapSettings(run_deadline_s=0.5, retry_budget_s=0)), pytest.raises(DeadlineExceeded):
        _call(_openai(server))


def test_a_cut_off_json_mode_reply_from_openai_is_asked_again_with_the_reason(server: FakeOpenAIServer) -> None:
    """OpenAI's SDK refuses a json_mode reply stopped at the token limit; it is a failed attempt, retried."""
    server.reset(Scenario(length=1))
    served = {"name": "served", "count": 4, "tags": ["a", "b", "c", "d", "e"]}
    server.reply = lambda messages: served
    outcome = _call(_openai(server), method="json_mode")
    assert outcome.fallback is None and outcome.attempts == 2 and outcome.output.tags == ["a", "b", "c", "d", "e"]
    feedback = server.requests[1].body["messages"][-1]["content"]
    assert "finish_reason=length" in feedback
