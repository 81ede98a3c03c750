"""Settings for LogicMap: one pydantic-settings model read from ``LOGICMAP_*`` variables.

Secrets are ``SecretStr`` so they never appear in logs, reprs or error messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["LogicMapSettings", "StructuredOutputMethod", "get_settings"]

StructuredOutputMethod = Literal["function_calling", "json_schema", "json_mode", "prompt"]


class LogicMapSettings(BaseSettings):
    """Everything configurable about models, storage and the topic layer."""

    model_config = SettingsConfigDict(env_prefix="LOGICMAP_", env_file=None, extra="ignore")

    # Chat model. No model name means "no LLM": graphs then run their no-LLM policies.
    chat_model: str | None = Field(default=None, description="Chat model name, e.g. gpt-4o-mini.")
    openai_base_url: str | None = Field(default=None, description="OpenAI-compatible base URL.")
    openai_api_key: SecretStr | None = Field(default=None, description="API key (never logged).")
    structured_output: StructuredOutputMethod = Field(
        default="function_calling",
        description="How typed outputs are requested: OpenAI/vLLM support json_schema; "
        "llama.cpp's server needs function_calling.",
    )
    temperature: float = 0.0
    request_timeout: float = Field(default=120.0, gt=0, description="Seconds one chat model request may take.")
    retry_budget_s: float = Field(
        default=60.0,
        ge=0,
        description="Seconds one chat model call may spend retrying rate limits (429), server errors (5xx), "
        "timeouts and refused connections, honouring Retry-After, before the run stops with an error.",
    )
    retry_base_s: float = Field(
        default=0.5, gt=0, description="First backoff ceiling in seconds (doubles per retry, full jitter)."
    )
    retry_max_requests: int = Field(default=8, ge=1, description="At most this many requests per chat model call.")
    run_deadline_s: float = Field(
        default=900.0,
        ge=0,
        description="Wall-clock limit of one question or one ingested session, model calls and backoff included; "
        "past it the run stops with an error and commits nothing partial. 0 = no limit.",
    )
    max_question_chars: int = Field(
        default=8000,
        ge=1,
        description="Longest question a strategy answers (answer(), every strategy graph's input, `ask`, the "
        "chatbot's recall query); a longer one is refused with one clear error before any work.",
    )
    max_message_chars: int = Field(
        default=32000,
        ge=1,
        description="Longest chat message the chatbot takes (it is stored as a turn; recall uses its last "
        "max_question_chars characters); a longer one is refused with one clear error before any work.",
    )
    chat_idle_gap_s: float = Field(
        default=1800.0,
        gt=0,
        description="add_messages and the chatbot start a new chat session when a message comes this many seconds "
        "after the namespace's last message (also splits a JSONL file's lines without a session field).",
    )
    context_tokens: int = Field(
        default=8192,
        ge=512,
        description="The chat model's context window in tokens: longer sessions go to each ingest role in windows.",
    )
    combined_extraction: bool = Field(
        default=True,
        description="Ingest: segment a session and extract its facts and cues in one call per window (false: "
        "one call per role, which small models may answer better).",
    )
    cross_session_links: bool = Field(
        default=True,
        description="Ingest: link each session's first event to the previous session's last one (temporal_before) "
        "and, without an LLM, new events to similar stored ones sharing a participant (shared_participant): "
        "a project extension, off in CompassMem's paper-faithful construction.",
    )

    # Embeddings.
    embedding_provider: Literal["minilm", "openai", "hashing"] = "minilm"
    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_batch_size: int = 64
    embedding_runtime: Literal["numpy", "torch"] = Field(
        default="numpy",
        description="How MiniLM runs: numpy (the default: weights memory-mapped, no torch, a small process that "
        "starts fast) or torch (sentence-transformers). Same vectors either way.",
    )
    threads: int | Literal["auto"] = Field(
        default="auto",
        description="Intra-op threads of BLAS, OpenMP and torch per process. auto = 1 (measured by "
        "evals/bench/bench_threads: a search's query embedding is small products, and a pool of one thread per core "
        "spins while other programs hold the cores), in every storage mode; a number sets more.",
    )
    async_workers: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Worker threads of the one shared executor the async API (aanswer, aingest_conversation, "
        "aforget, the tools' async bodies, the MCP server) runs blocking work on (Chroma, embeddings, sync model "
        "calls). Concurrent calls beyond it wait for a worker; the event loop never blocks.",
    )

    # Storage.
    store_url: str | None = Field(
        default=None,
        description="Which storage backend holds memory (memory.store.backends): unset, Chroma (embedded in data_dir, "
        "or the server at chroma_host); 'memory://' or 'memory://NAME', this process's memory (unit tests, "
        "ephemeral agents: nothing on disk); 'postgresql://user:password@host:5432/db', PostgreSQL with pgvector "
        "(many processes on one memory; pip install 'logicmap[postgres]'; docs/backends.md).",
    )
    data_dir: Path = Path(".logicmap")
    chroma_host: str | None = Field(default=None, description="Chroma server host: server mode when set.")
    chroma_port: int = 8000
    commit_lease_s: float = Field(
        default=120.0,
        gt=0,
        description="Server mode: how long a writer's commit lease lasts, so a writer that died holding it blocks "
        "the namespace's other writers at most this long.",
    )

    # The API server (studio/server.py): who names the tenant, which files ingest may read.
    server_namespace: str | None = Field(
        default=None,
        description="API server only: the deployment's tenant template (e.g. '{user_id}' or "
        "'acme-{langgraph_auth_user_id}'). Set, it names every run's namespace and a run or assistant that names "
        "another is refused; unset, an assistant's namespace is the authority and a run may name one only on an "
        "assistant that has none.",
    )
    store_user_label: int = Field(
        default=1,
        ge=0,
        le=15,
        description="API server with LangGraph auth on: the position (0-based) of the store namespace label that "
        "must be the authenticated user's id on the /store routes (1: ('memories', user_id, ...), LangMem's and the "
        "memory-template's layout). A request whose namespace or prefix does not carry it there is refused (403).",
    )
    ingest_root: Path | None = Field(
        default=None,
        description="API server only: the one directory whose files the ingest graph's `path` input may read "
        "(unset: the server reads no files; clients send sessions in the request).",
    )

    # Topic layer and fusion (CompassMem paper defaults).
    topic_delta: float = 0.9
    consolidation: Literal["background", "sync", "manual"] = Field(
        default="background",
        description="when a LogicMapStore write is built into the event graph (graphs.consolidate): background (a "
        "thread of the process), sync (before the write returns), manual (flush() or `logicmap consolidate`)",
    )
    compact_every: int = Field(
        default=20,
        ge=0,
        description="the consolidator purges a namespace's retired versions after this many replaced values "
        "(LogicMapStore puts on existing keys) were consolidated in this process, so disk grows with live memory, "
        "not with history (0: only explicit purges)",
    )
    max_pending: int = Field(
        default=1000,
        ge=0,
        description="the most fast writes a namespace may have waiting for consolidation before a write consolidates "
        "in its own thread first (LogicMapStore, add_messages; graphs.consolidate)",
    )
    recluster_every: int = 4
    merge_threshold: float = 0.9

    @field_validator("threads", mode="before")
    @classmethod
    def _check_threads(cls, value: object) -> object:
        text = str(value).strip().lower()
        if text == "auto":
            return "auto"
        try:
            count = int(text)
        except ValueError:
            raise ValueError(f"threads must be 'auto' or a whole number of threads, got {value!r}") from None
        if count < 1:
            raise ValueError(f"threads must be at least 1 (or 'auto'), got {count}")
        return count

    def thread_count(self) -> int | None:
        """Threads per process for BLAS, OpenMP and torch: ``auto`` is 1 (``evals/bench/bench_threads``)."""
        if self.threads == "auto":
            return 1
        return self.threads

    def describe(self) -> dict[str, object]:
        """A loggable view: secrets reduced to whether they are set."""
        data = self.model_dump()
        data["openai_api_key"] = "set" if self.openai_api_key else "unset"
        data["data_dir"] = str(self.data_dir)
        return data


def get_settings(**overrides: Any) -> LogicMapSettings:
    """Settings from the environment, with explicit overrides on top."""
    return LogicMapSettings(**overrides)
