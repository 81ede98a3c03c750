"""The terminal chat loop of ``logicmap chat`` (``run_chat``) over the chatbot graph."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from langchain_core.messages import HumanMessage

from logicmap.agents.provider import ProviderError, run_scope
from logicmap.graphs.chat.graph import ChatContext, builder, message_text
from logicmap.graphs.chat.ingestion import IngestionQueue
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.registry import STRATEGIES
from logicmap.memory.language.text import printable
from logicmap.memory.records.records import validate_namespace
from logicmap.memory.runtime.input_limits import InputTooLargeError

__all__ = ["run_chat"]


# -- the interactive loop ---------------------------------------------------------------------------


def run_chat(
    resources: Resources,
    namespace: str,
    *,
    strategy: str = "rerank",
    policy: Literal["auto", "llm", "heuristic"] = "auto",
    user_name: str = "user",
    thread_id: str | None = None,
    input_fn: Callable[[str], str] | None = None,
    output: Callable[[str], None] = print,
) -> int:
    """The interactive loop of ``logicmap chat``: ``/evidence`` shows what the last answer recalled, ``/quit`` ends.

    Turns are stored in the background while you chat (a failure is reported at the next prompt); on exit the
    loop waits until they are stored.
    """
    import uuid

    from langgraph.checkpoint.memory import InMemorySaver

    validate_namespace(namespace)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown recall strategy {strategy!r}; choose one of {sorted(STRATEGIES)}")
    read = input_fn or input
    work = IngestionQueue()
    bot = builder.compile(checkpointer=InMemorySaver())
    context = ChatContext(
        namespace=namespace, strategy=strategy, policy=policy, user_name=user_name, ingestion=work, resources=resources
    )
    config = {"configurable": {"thread_id": thread_id or str(uuid.uuid4())}}
    known = resources.store.has_namespace(namespace)
    output(
        f"chatting with the memory of {namespace!r} ({'existing' if known else 'new'}; recall: {strategy}, "
        f"policy: {policy}). Commands: /evidence, /quit"
    )
    last: dict[str, Any] = {}
    reported = 0
    while True:
        reported = _report_errors(work, reported, output)
        try:
            line = read("you> ")
        except (EOFError, KeyboardInterrupt):
            output("")
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit", "/q"):
            break
        if text == "/evidence":
            _show_evidence(last, output)
        elif text == "/retry":
            output(f"(storing {work.retry_failed()} failed turn(s) again)")
            reported = 0  # the retried turns' errors were cleared: report any new failure afresh
        elif text.startswith("/"):
            output("commands: /evidence (what the last answer recalled), /retry (store failed turns again), /quit")
        else:
            last = _chat_turn(bot, text, config, context, output) or last
    if work.pending:
        output(f"(storing {work.pending} turn(s) in memory...)")
    work.flush()
    _report_errors(work, reported, output)
    return 0


def _chat_turn(
    bot: Any, text: str, config: dict[str, Any], context: ChatContext, output: Callable[[str], None]
) -> dict[str, Any] | None:
    """One turn of ``run_chat``: the reply printed, or a provider failure printed as one line (the chat goes on)."""
    settings = context.resources.settings if isinstance(context.resources, Resources) else None
    try:
        with run_scope(settings):
            last: dict[str, Any] = bot.invoke({"messages": [HumanMessage(content=text)]}, config, context=context)
    except ProviderError as exc:
        output(printable(f"error: {exc}; this message was not answered or stored, send it again", one_line=True))
        return None
    except InputTooLargeError as exc:
        output(printable(f"error: {exc}; this message was not answered or stored", one_line=True))
        return None
    # Continuation lines indented: a recalled or generated text cannot forge a "you>" line.
    output("bot> " + printable(message_text(last["messages"][-1])).replace("\n", "\n     "))
    return last


def _report_errors(work: IngestionQueue, reported: int, output: Callable[[str], None]) -> int:
    """Print the ingestion failures not reported yet; the new count of reported ones."""
    errors = list(work.errors)
    for label, error in errors[reported:]:
        output(printable(f"warning: could not store {label}: {error}", one_line=True))
    return len(errors)


def _show_evidence(last: dict[str, Any], output: Callable[[str], None]) -> None:
    """``/evidence``: what the last answer recalled, and by which strategy at what cost."""
    recalled = last.get("recall") or {}
    evidence = last.get("evidence") or []
    if not evidence:
        output("(nothing recalled for the last message)")
        return
    cost = last.get("cost") or {}
    output(
        printable(
            f"recalled by {recalled.get('strategy')} ({cost.get('llm_calls', 0)} LLM calls): {recalled.get('answer')}",
            one_line=True,
        )
    )
    for item in evidence:
        output(printable(f"  [{item.get('kind')} {item.get('id')}] {str(item.get('text', ''))[:200]}", one_line=True))
