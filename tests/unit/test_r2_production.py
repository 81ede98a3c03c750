"""Memory-R2 in production: the ingest option that lets the manager maintain a namespace's R2 fact memory, and the
``r2`` strategy (retrieve -> distill -> answer) that reads it.

A scripted model plays the R2 extractor and manager (the other ingest roles get nothing usable and fall back);
the committed memory is checked after each session: ADD, then UPDATE of a single-valued attribute (history kept),
then DELETE of a retracted fact (the record kept, marked deleted by that session).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from logicmap.agents.provider import ProviderError
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.ingest import IngestContext, ingest_conversation
from logicmap.graphs.strategies.r2 import NoR2MemoryError, R2Context, answer, graph
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.prompts import r2_distill, r2_extract, r2_manage
from logicmap.prompts.respond import Answer
from tests.conftest import make_resources

NS = "maya"
SESSIONS = [
    (
        "S1",
        datetime(2023, 5, 1, 10),
        [("D1:1", "Maya", "I live in Porto and I work as a nurse."), ("D1:2", "Leo", "Nice! Porto is lovely.")],
    ),
    (
        "S2",
        datetime(2023, 6, 1, 10),
        [("D2:1", "Maya", "Big news: I moved to Lisbon last week."), ("D2:2", "Leo", "Congratulations on the move!")],
    ),
    (
        "S3",
        datetime(2023, 7, 1, 10),
        [("D3:1", "Maya", "I quit nursing, I don't work as a nurse anymore."), ("D3:2", "Leo", "A fresh start then.")],
    ),
]
EXTRACTED = {
    "S1": {
        "facts": [
            {"text": "Maya lives in Porto", "turn_ids": ["D1:1"]},
            {"text": "Maya works as a nurse", "turn_ids": ["D1:1"]},
        ]
    },
    "S2": {"facts": [{"text": "Maya lives in Lisbon", "turn_ids": ["D2:1"]}]},
    "S3": {"facts": [{"text": "Maya no longer works as a nurse", "turn_ids": ["D3:1"]}]},
}
MANAGED = {
    "S1": {"edits": [{"op": "ADD", "fact": 0}, {"op": "ADD", "fact": 1}]},
    "S2": {
        "edits": [
            {"op": "UPDATE", "fact": 0, "id": "F1", "text": "Maya lives in Lisbon (moved from Porto in May 2023)"}
        ]
    },
    # The paper's procedure: DELETE the contradicted memory, then the new fact is new information: ADD it.
    "S3": {"edits": [{"op": "ADD", "fact": 0}, {"op": "DELETE", "fact": 0, "id": "F2"}]},
}


def conversation(upto: int) -> Conversation:
    sessions = [
        Session(
            session_id=sid,
            timestamp=when,
            timestamp_text=when.strftime("%-I:%M %p on %-d %B, %Y"),
            turns=[RawTurn(dia_id=d, speaker=s, text=t) for d, s, t in turns],
        )
        for sid, when, turns in SESSIONS[:upto]
    ]
    return Conversation(conversation_id="maya-leo", speakers=["Maya", "Leo"], sessions=sessions)


def scripted(extract: list[Any], manage: list[Any], respond: Any = None) -> ScriptedChatModel:
    """The R2 extractor and manager follow their scripts; every other ingest role gets an empty reply (falls back)."""
    return ScriptedChatModel(
        routes={r2_extract.ROLE_MARKER: list(extract), r2_manage.ROLE_MARKER: list(manage)}, respond=respond
    )


def ingest(res: Any, upto: int, ns: str = NS) -> Any:
    ctx = IngestContext(policy="llm", memory_manager="r2", extract_cues=False)
    return ingest_conversation(conversation(upto), ns, resources=res, context=ctx)


def manager_calls(model: ScriptedChatModel) -> list[list[BaseMessage]]:
    return [c for c in model.calls if r2_manage.ROLE_MARKER in str(c[0].content)]


@pytest.fixture
def res(tmp_path: Path) -> Any:
    res = make_resources(tmp_path / "memory")
    yield res
    if res.store_ is not None:
        res.store_.close()


# -- ingest with the manager ------------------------------------------------------------------------


def test_add_then_update_then_delete_across_three_sessions_keeps_history(res: Any) -> None:
    res.llm_ = scripted([EXTRACTED[s] for s in ("S1", "S2", "S3")], [MANAGED[s] for s in ("S1", "S2", "S3")])
    store = res.store

    ingest(res, 1)
    snap = store.snapshot(NS)
    assert {r: (f.text, f.deleted) for r, f in snap.r2_facts.items()} == {
        "F1": ("Maya lives in Porto", False),
        "F2": ("Maya works as a nurse", False),
    }
    assert snap.r2_facts["F1"].created_in == "S1" and snap.r2_facts["F1"].turn_ids == ("D1:1",)
    assert snap.r2_facts["F1"].namespace == NS and set(snap.r2_fact_vectors) == {"F1", "F2"}
    assert snap.manifest.sessions["S1"].memory_manager == "r2"
    # The manager of S1 saw an empty memory; the manager of S2 sees S1's committed facts.
    calls = manager_calls(res.llm_)
    assert "(memory is empty)" in str(calls[0][1].content)

    ingest(res, 2)
    snap = store.snapshot(NS)
    f1 = snap.r2_facts["F1"]
    assert f1.text == "Maya lives in Lisbon (moved from Porto in May 2023)" and not f1.deleted
    assert [(h.text, h.replaced_in) for h in f1.history] == [("Maya lives in Porto", "S2")]
    assert f1.updated_in == "S2" and f1.turn_ids == ("D1:1", "D2:1")
    assert "F1: Maya lives in Porto" in str(manager_calls(res.llm_)[1][1].content)
    facts_before_delete = dict(snap.facts)
    assert facts_before_delete, "REAL's fact layer was built beside R2's"

    ingest(res, 3)
    snap = store.snapshot(NS)
    f2 = snap.r2_facts["F2"]
    assert f2.deleted and f2.deleted_in == "S3" and f2.deleted_by == ("D3:1",) and f2.text == "Maya works as a nurse"
    assert [r for r, f in snap.r2_facts.items() if not f.deleted] == ["F1", "F3"]
    assert snap.r2_facts["F3"].text == "Maya no longer works as a nurse"
    assert "F2" in snap.r2_fact_vectors  # the deleted version keeps its vector (and its text)
    # R2's DELETE never touches what other strategies read: REAL's facts of the earlier sessions are all there.
    assert set(facts_before_delete) <= set(snap.facts)
    assert [s.memory_manager for s in snap.manifest.sessions.values()] == ["r2", "r2", "r2"]
    assert not [f for s in snap.manifest.sessions.values() for f in s.fallbacks if f.role.startswith("r2")]


def test_an_invalid_edit_batch_is_retried_once_with_its_problems_then_the_deterministic_manager_decides(
    res: Any,
) -> None:
    bad = {"edits": [{"op": "UPDATE", "fact": 0, "id": "F99"}]}  # no such memory id
    res.llm_ = scripted([EXTRACTED["S1"], EXTRACTED["S2"]], [MANAGED["S1"], bad, bad])
    ingest(res, 2)
    snap = res.store.snapshot(NS)
    calls = manager_calls(res.llm_)
    assert len(calls) == 3  # S1 once; S2 twice: the reply, then the retry with the validation error
    assert "unknown memory id 'F99'" in " ".join(str(m.content) for m in calls[2])
    fallbacks = snap.manifest.sessions["S2"].fallbacks
    assert [f.role for f in fallbacks if f.role.startswith("r2")] == ["r2_manager"]
    # The deterministic manager: same subject and attribute ('maya', 'live') -> UPDATE of F1, history kept.
    f1 = snap.r2_facts["F1"]
    assert f1.text == "Maya lives in Lisbon" and [h.text for h in f1.history] == ["Maya lives in Porto"]
    assert set(snap.r2_facts) == {"F1", "F2"}


def test_a_provider_error_mid_session_commits_nothing_of_that_session(res: Any) -> None:
    def fail_manager(messages: list[BaseMessage]) -> str:
        if r2_manage.ROLE_MARKER in str(messages[0].content):
            raise ProviderError("auth", "the chat model rejected the API key (401)")
        return ""

    res.llm_ = scripted([EXTRACTED["S1"]], [MANAGED["S1"]])
    ingest(res, 1)
    before = res.store.snapshot(NS)
    res.llm_ = scripted([EXTRACTED["S2"]], [], respond=fail_manager)
    res.llm_.routes.pop(r2_manage.ROLE_MARKER)  # the manager's call reaches ``respond``, which fails
    with pytest.raises(ProviderError):
        ingest(res, 2)
    after = res.store.snapshot(NS)
    assert after.generation == before.generation and set(after.manifest.sessions) == {"S1"}
    assert after.fingerprint() == before.fingerprint()
    assert not any(t.session_id == "S2" for t in after.turns.values())
    assert {r: f.text for r, f in after.r2_facts.items()} == {
        "F1": "Maya lives in Porto",
        "F2": "Maya works as a nurse",
    }


def test_the_no_llm_manager_is_deterministic(tmp_path: Path) -> None:
    dumps = []
    for run in range(2):
        res = make_resources(tmp_path / f"run{run}")
        ingest_conversation(conversation(3), NS, resources=res, policy="heuristic", memory_manager="r2")
        snap = res.store.snapshot(NS)
        dumps.append({r: f.model_dump(mode="json") for r, f in snap.r2_facts.items()})
        assert not [f for s in snap.manifest.sessions.values() for f in s.fallbacks]  # chosen policy, not fallbacks
        res.store.close()
    assert dumps[0] == dumps[1] and len(dumps[0]) >= 3


def test_namespaces_never_see_each_others_r2_memory(res: Any) -> None:
    ingest_conversation(conversation(2), "tenant-a", resources=res, policy="heuristic", memory_manager="r2")
    other = Conversation(
        conversation_id="b",
        speakers=["Ana", "Rui"],
        sessions=[
            Session(
                session_id="S1",
                timestamp=datetime(2023, 5, 1),
                turns=[RawTurn(dia_id="D1:1", speaker="Ana", text="I keep bees.")],
            )
        ],
    )
    ingest_conversation(other, "tenant-b", resources=res, policy="heuristic", memory_manager="r2")
    a, b = res.store.snapshot("tenant-a"), res.store.snapshot("tenant-b")
    assert all(f.namespace == "tenant-a" for f in a.r2_facts.values())
    assert [f.text for f in b.r2_facts.values()] == ["Ana keep bees."] and all(
        f.namespace == "tenant-b" for f in b.r2_facts.values()
    )
    result = answer("Where does Maya live?", "tenant-b", resources=res, policy="heuristic")
    assert all("Maya" not in e.text for e in result.evidence) and result.details["retrieved"] == ["F1"]
    # A namespace ingested without the manager has no R2 memory: the error names the flag.
    ingest_conversation(conversation(1), "plain", resources=res, policy="heuristic")
    with pytest.raises(NoR2MemoryError, match="--memory-manager r2"):
        answer("Where does Maya live?", "plain", resources=res, policy="heuristic")


# -- the r2 strategy -------------------------------------------------------------------------------


def test_the_r2_strategy_retrieves_then_distills_then_answers_from_the_distilled_memories_only(res: Any) -> None:
    res.llm_ = scripted([EXTRACTED[s] for s in ("S1", "S2", "S3")], [MANAGED[s] for s in ("S1", "S2", "S3")])
    ingest(res, 3)
    res.llm_ = ScriptedChatModel(
        routes={r2_distill.ROLE_MARKER: [{"selected": ["F1"]}]},
        respond=lambda _: Answer(answer="Lisbon", cited_ids=["F1"]).model_dump(),
    )
    context = R2Context(namespace=NS, resources=res, policy="llm")
    nodes: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"question": "Where does Maya live now?"}, context=context, stream_mode=["updates", "values"]
    ):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            final = chunk
    assert nodes == ["retrieve", "distill", "answer", "finish"]
    assert "F2" not in final["retrieved"] and "F1" in final["retrieved"]  # F2 was deleted: only live ones retrieved
    assert [e.id for e in final["evidence"]] == ["F1"] and final["answer"] == "Lisbon"
    distill_call, answer_call = res.llm_.calls
    assert r2_distill.ROLE_MARKER in str(distill_call[0].content)
    shown = str(answer_call[-1].content)
    assert "Maya lives in Lisbon" in shown and "nurse" not in shown


def test_the_answer_sees_only_what_the_distiller_kept(res: Any) -> None:
    ingest_conversation(conversation(3), NS, resources=res, policy="heuristic", memory_manager="r2")
    live = [r for r, f in res.store.snapshot(NS).r2_facts.items() if not f.deleted]
    assert len(live) >= 3
    keep = live[1]
    res.llm_ = ScriptedChatModel(
        routes={r2_distill.ROLE_MARKER: [{"selected": [keep, "F404"]}, {"selected": [keep]}]},
        respond=lambda _: {"answer": "something", "cited_ids": [keep]},
    )
    result = answer("What did Maya say?", NS, resources=res, policy="llm")
    assert result.details["distilled"] == [keep] and [e.id for e in result.evidence] == [keep]
    assert len(result.details["retrieved"]) == len(live)
    answer_prompt = str(res.llm_.calls[-1][-1].content)
    others = [res.store.snapshot(NS).r2_facts[r].text for r in live if r != keep]
    assert all(f"[{r}]" not in answer_prompt for r in live if r != keep), others
    assert f"[{keep}]" in answer_prompt
    assert "not among the retrieved memories" in str(res.llm_.calls[1][-1].content)  # the retry named the bad id
    assert not result.fallbacks


def test_without_a_model_the_distillation_keeps_the_most_similar(res: Any) -> None:
    ingest_conversation(conversation(3), NS, resources=res, policy="heuristic", memory_manager="r2")
    first = answer("Where does Maya live?", NS, resources=res, policy="heuristic", keep=2)
    second = answer("Where does Maya live?", NS, resources=res, policy="heuristic", keep=2)
    assert first.details["distilled"] == first.details["retrieved"][:2] == second.details["distilled"]
    assert first.answer == second.answer and first.cost.llm_calls == 0 and not first.fallbacks


def test_a_studio_run_without_a_model_takes_the_no_llm_path(res: Any) -> None:
    ingest_conversation(conversation(2), NS, resources=res, policy="heuristic", memory_manager="r2")
    out = graph.invoke({"question": "Where does Maya live?"}, context={"namespace": NS, "resources": res})
    assert out["answer"] and out["cost"].llm_calls == 0 and not out.get("fallbacks")
    assert out["retrieved"] and {e.id for e in out["evidence"]} <= set(out["retrieved"])


def test_a_backup_keeps_the_r2_memory_and_its_history(res: Any, tmp_path: Path) -> None:
    from logicmap.memory.files.backup import export_namespace, import_namespace

    res.llm_ = scripted([EXTRACTED[s] for s in ("S1", "S2", "S3")], [MANAGED[s] for s in ("S1", "S2", "S3")])
    ingest(res, 3)
    path = tmp_path / "maya.jsonl"
    report = export_namespace(res.store, NS, path)
    assert report.counts["r2_fact"] == 3
    import_namespace(res.store, path, namespace="maya-copy")
    original, copy = res.store.snapshot(NS), res.store.snapshot("maya-copy")
    assert {r: f.model_copy(update={"namespace": NS}) for r, f in copy.r2_facts.items()} == original.r2_facts
    assert copy.r2_facts["F2"].deleted and copy.r2_facts["F1"].history[0].text == "Maya lives in Porto"
    assert all(f.namespace == "maya-copy" for f in copy.r2_facts.values())
    res.llm_ = None
    retrieved = answer("Where does Maya live?", "maya-copy", resources=res, policy="heuristic").details["retrieved"]
    assert "F1" in retrieved and "F2" not in retrieved


def window_reply(messages: list[BaseMessage]) -> Any:
    """The extractor: one fact naming the first turn of its window; the manager: ADD every new fact."""
    system, human = str(messages[0].content), str(messages[-1].content)
    if r2_extract.ROLE_MARKER in system:
        first = re.search(r"\[(D\d+:\d+)\]", human).group(1)
        return {"facts": [{"text": f"Maya said something in {first}", "turn_ids": [first]}]}
    if r2_manage.ROLE_MARKER in system:
        new = human.split("New facts:", 1)[1]
        return {"edits": [{"op": "ADD", "fact": i} for i in range(len(re.findall(r"^\d+: ", new, re.M)))]}
    return ""


def test_a_session_longer_than_the_context_is_extracted_in_windows(res: Any) -> None:
    long = "I live in Porto and I work as a nurse. " * 14  # about 550 characters a turn
    session = Session(
        session_id="S1",
        timestamp=datetime(2023, 5, 1),
        turns=[RawTurn(dia_id=f"D1:{i}", speaker="Maya", text=f"{i}: {long}") for i in range(1, 5)],
    )
    res.llm_ = ScriptedChatModel(respond=window_reply)
    ctx = IngestContext(policy="llm", memory_manager="r2", extract_cues=False, extract_facts=False, context_tokens=1000)
    conv = Conversation(conversation_id="long", speakers=["Maya"], sessions=[session])
    ingest_conversation(conv, NS, resources=res, context=ctx)
    extractor_calls = [c for c in res.llm_.calls if r2_extract.ROLE_MARKER in str(c[0].content)]
    firsts = [re.search(r"\[(D1:\d)\]", str(c[-1].content)).group(1) for c in extractor_calls]
    assert len(extractor_calls) >= 2 and all(len(str(c[-1].content)) < 2500 for c in extractor_calls)
    texts = [f.text for f in res.store.snapshot(NS).r2_facts.values()]
    assert texts == [f"Maya said something in {d}" for d in sorted(firsts)]  # every window's facts, in window order


# -- the faithful configuration: the paper's answer prompt (Fig. 8) -----------------------------------------


def test_faithful_answers_with_the_papers_prompt_and_its_answer_span(res: Any) -> None:
    """``faithful``: the answer agent asks with Fig. 8 (the most recent memory on a contradiction, step by step,
    memories per speaker) and takes the ``<answer>`` span; a reply without one is sent back once. The default keeps
    the project's responder (``test_the_r2_strategy_retrieves_then_distills_...``)."""
    from logicmap.prompts import r2_answer

    res.llm_ = scripted([EXTRACTED[s] for s in ("S1", "S2", "S3")], [MANAGED[s] for s in ("S1", "S2", "S3")])
    ingest(res, 3)
    res.llm_ = ScriptedChatModel(
        routes={
            r2_distill.ROLE_MARKER: [{"selected": ["F1", "F3"]}],
            r2_answer.ROLE_MARKER: [
                {"response": "Maya lives in Lisbon."},
                {"response": "F1 is the most recent. <answer>Lisbon</answer>"},
            ],
        }
    )
    result = answer("Where does Maya live now?", NS, resources=res, policy="llm", faithful=True)
    assert result.answer == "Lisbon" and not result.fallbacks
    first, retry = [c for c in res.llm_.calls if r2_answer.ROLE_MARKER in str(c[0].content)]
    system, shown = str(first[0].content), str(first[-1].content)
    for rule in (
        "If the memories contain contradictory information, prioritize the most recent memory",
        "If memories are insufficient and the question is about a general world fact, you may use reliable "
        "general world knowledge",
        "# APPROACH (Think step by step):",
        "<answer>YOUR_FINAL_ANSWER</answer>",
    ):
        assert rule in system, rule
    assert shown.startswith("Memories for user Maya:\n") and "Maya lives in Lisbon" in shown
    assert "Not mentioned" not in system
    assert "no <answer>...</answer> span" in str(retry[-1].content)


def test_faithful_without_a_model_answers_as_the_default(res: Any) -> None:
    ingest_conversation(conversation(3), NS, resources=res, policy="heuristic", memory_manager="r2")
    default = answer("Where does Maya live?", NS, resources=res, policy="heuristic")
    paper = answer("Where does Maya live?", NS, resources=res, policy="heuristic", faithful=True)
    assert paper.answer == default.answer and paper.cost.llm_calls == 0


def test_a_faithful_ingest_asks_with_the_papers_construction_prompts(res: Any) -> None:
    """``IngestContext.faithful``: Memory-R2's extractor gets Fig. 6's categories and rules, MRAgent's cue extractor
    the Dialogue Processing Prompt (every sentence kept, one tag of at most two words, dates normalised), each in a
    call of its own; the default's extractor prompt has neither."""
    from logicmap.agents.cue_extractor import validate_paper_extraction
    from logicmap.memory.records.records import Turn
    from logicmap.prompts import cues

    units = {
        "units": [
            {
                "turn_id": "D1:1",
                "content": "Maya lives in Porto and Maya works as a nurse.",
                "tags": ["home"],
                "cues": [{"cue": "Porto", "kind": "place"}],
            },
            {
                "turn_id": "D1:2",
                "content": "Porto is lovely.",
                "tags": ["city"],
                "cues": [{"cue": "Porto", "kind": "place"}],
            },
        ],
        "person_facts": [],
    }
    res.llm_ = ScriptedChatModel(
        routes={
            r2_extract.ROLE_MARKER: [EXTRACTED["S1"]],
            r2_manage.ROLE_MARKER: [MANAGED["S1"]],
            "You are a dialogue processor": [units],
        }
    )
    ctx = IngestContext(policy="llm", memory_manager="r2", extract_cues=True, faithful=True)
    report = ingest_conversation(conversation(1), NS, resources=res, context=ctx)
    calls = res.llm_.calls
    (extract,) = [c for c in calls if r2_extract.ROLE_MARKER in str(c[0].content)]
    for rule in (
        "5. Health and Wellness (NON-DIAGNOSTIC)",
        "Extract facts from the provided dialogue turns for BOTH speakers.",
        "Ignore small talk, greetings, generic statements, opinions without substance",
    ):
        assert rule in str(extract[0].content), rule
    (processed,) = [c for c in calls if "You are a dialogue processor" in str(c[0].content)]
    for rule in (
        "- Preserve every original sentence.",
        "Assign a short concrete `tag` (at most two words).",
        "Normalize time to `YYYY-MM-DD` using `conversation_time`.",
        "If a question is answered by the next sentence, merge them.",
        "Do not invent, paraphrase, or generalize",
    ):
        assert rule in str(processed[0].content), rule
    assert not [f for f in report.fallbacks if f.role in ("cue_extractor", "r2_extractor")]
    assert "Types of Information to Remember" not in str(r2_extract.build_messages("", None, ["Maya"])[0].content)
    turns = [
        Turn(namespace=NS, session_id="S1", dia_id=d, speaker=s, text=t, position=i)
        for i, (d, s, t) in enumerate(SESSIONS[0][2])
    ]
    two_tags = cues.CueExtraction.model_validate(
        {**units, "units": [{**units["units"][0], "tags": ["home", "job"]}, units["units"][1]]}
    )
    assert any("one short concrete tag" in p for p in validate_paper_extraction(two_tags, turns))
    one_turn = cues.CueExtraction.model_validate({**units, "units": units["units"][:1]})
    assert any("preserve every original sentence" in p for p in validate_paper_extraction(one_turn, turns))
