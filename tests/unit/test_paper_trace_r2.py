"""Paper trace of Memory-R2's memory manager (Appendix B, Figure 7): new facts, each with its related memories.

The manager receives each new fact with its ``related_memory_ids`` and follows a fixed decision procedure:
(1) DELETE every related memory the fact explicitly contradicts, then (2) NOOP if a related memory already holds it,
(3) UPDATE a related memory it refines (keeping all that memory said), (4) else INSERT (ADD). A scripted manager
applies exactly that procedure, from the ids its prompt shows, with the judgments below; its first reply slips in
ways the procedure forbids (an edit of an unrelated memory, a DELETE with no decision for the fact), which must be
sent back. So the trace fails if the prompt does not give each fact its related ids, if a fact may only have one
edit, or if edits may name memories outside the fact's related ones.
(The paper's review-page text names the operations INSERT / UPDATE / DELETE / NO OPERATION; here ADD / NOOP.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from logicmap.agents import r2 as r2_roles
from logicmap.agents.r2 import manage_memory
from logicmap.agents.testing import ScriptedChatModel
from logicmap.memory.records.r2 import CandidateFact, FactEdit, FactMemory
from logicmap.prompts import r2_manage

STORED = ["Maya lives in Porto", "Maya works as a nurse", "Maya has a dog named Biscuit", "Leo plays the guitar"]
NEW = [
    "Maya moved to Lisbon and no longer lives in Porto",  # contradicts F1: DELETE F1, then ADD
    "Maya works as a nurse on night shifts at Santa Maria hospital",  # refines F2: UPDATE F2
    "Maya's dog is called Biscuit",  # already held by F3: NOOP F3
    "Maya started learning the cello",  # nothing related holds or refines it: ADD
]
# The manager's judgments (what an LLM reads in the texts), by (new fact, memory id).
CONTRADICTS = {(0, "F1"), (4, "F3")}
EQUIVALENT = {(2, "F3")}
REFINES = {(1, "F2"): "Maya works as a nurse, on night shifts at Santa Maria hospital"}
_FACT_LINE = re.compile(r"^(\d+): .*\(related: ([^)]*)\)$", re.M)


def stored_memory() -> FactMemory:
    memory = FactMemory("maya")
    memory.apply(
        [FactEdit(op="ADD", fact=i) for i in range(len(STORED))],
        [CandidateFact(text=t, turn_ids=(f"D1:{i + 1}",)) for i, t in enumerate(STORED)],
    )
    return memory


def candidates(texts: Sequence[str], first: int = 0) -> list[CandidateFact]:
    return [CandidateFact(text=t, turn_ids=(f"D2:{first + i + 1}",)) for i, t in enumerate(texts)]


def related_ids(messages: Sequence[BaseMessage]) -> dict[int, list[str]]:
    """Each new fact's related memory ids, as the prompt shows them (none when it shows none)."""
    shown = {
        int(n): [i.strip() for i in ids.split(",") if i.strip() and i.strip() != "none"]
        for n, ids in _FACT_LINE.findall(str(messages[1].content))
    }
    return shown


def procedure(messages: Sequence[BaseMessage], offset: int = 0) -> list[dict[str, Any]]:
    """The paper's decision procedure, fact by fact, over the related ids the prompt gives each fact."""
    edits: list[dict[str, Any]] = []
    for fact, ids in sorted(related_ids(messages).items()):
        judged = fact + offset
        edits += [{"op": "DELETE", "fact": fact, "id": i} for i in ids if (judged, i) in CONTRADICTS]
        same = [i for i in ids if (judged, i) in EQUIVALENT]
        refined = [i for i in ids if (judged, i) in REFINES]
        if same:
            edits.append({"op": "NOOP", "fact": fact, "id": same[0]})
        elif refined:
            edits.append({"op": "UPDATE", "fact": fact, "id": refined[0], "text": REFINES[(judged, refined[0])]})
        else:
            edits.append({"op": "ADD", "fact": fact})
    order = {"ADD": 0, "UPDATE": 1, "DELETE": 2, "NOOP": 3}
    return sorted(edits, key=lambda e: (order[e["op"]], e["fact"]))


class Manager:
    """The scripted manager: its first reply adds ``slip`` to the procedure's edits; after the error, the procedure."""

    def __init__(self, slip: list[dict[str, Any]], drop: set[str] = frozenset(), offset: int = 0) -> None:
        self.slip, self.drop, self.offset = slip, drop, offset
        self.calls: list[list[BaseMessage]] = []
        self.model = ScriptedChatModel(respond=self._respond)

    def _respond(self, messages: Sequence[BaseMessage]) -> Any:
        assert r2_manage.ROLE_MARKER in str(messages[0].content)
        self.calls.append(list(messages))
        edits = procedure(messages, self.offset)
        if len(self.calls) == 1:
            edits = [e for e in edits if e["op"] not in self.drop] + self.slip
            order = {"ADD": 0, "UPDATE": 1, "DELETE": 2, "NOOP": 3}
            edits.sort(key=lambda e: (order[e["op"]], e["fact"]))
        return {"edits": edits}


def test_each_new_fact_comes_with_its_related_memories_and_ids() -> None:
    memory = stored_memory()
    related = r2_roles.related_memories(memory, candidates(NEW))
    assert related[0][0] == "F1" and related[1][0] == "F2" and related[2][0] == "F3"
    assert all("F4" not in ids for ids in related.values())  # nothing said about Maya relates to Leo's guitar
    manager = Manager(slip=[{"op": "DELETE", "fact": 3, "id": "F4"}])
    manage_memory(manager.model, memory, candidates(NEW))
    prompt = str(manager.calls[0][1].content)
    assert related_ids(manager.calls[0]) == related
    assert "F1: Maya lives in Porto [D1:1]" in prompt and "Leo plays the guitar" not in prompt


def test_the_manager_follows_the_papers_procedure_with_two_edits_for_a_contradicting_fact() -> None:
    memory = stored_memory()
    manager = Manager(slip=[{"op": "DELETE", "fact": 3, "id": "F4"}])  # an edit of a memory unrelated to fact 3
    outcome = manage_memory(manager.model, memory, candidates(NEW))
    # The slip is sent back: F4 is not among fact 3's related memories. The retry follows the procedure.
    assert len(manager.calls) == 2 and outcome.fallback is None and not outcome.skipped
    retry = str(manager.calls[1][-1].content)
    assert "DELETE for new fact 3 names F4, which is not one of its related memories" in retry
    report = memory.apply(outcome.edits, candidates(NEW))
    # Fact 0 contradicts F1: DELETE F1 and ADD the fact (two edits); fact 1 refines F2: UPDATE, nothing lost;
    # fact 2 is held by F3: NOOP; fact 3 is new: ADD. Leo's guitar (unrelated) is untouched.
    assert [(e.op, e.fact, e.id) for e in outcome.edits] == [
        ("ADD", 0, None),
        ("ADD", 3, None),
        ("UPDATE", 1, "F2"),
        ("DELETE", 0, "F1"),
        ("NOOP", 2, "F3"),
    ]
    assert report.added == ["F5", "F6"] and report.updated == ["F2"] and report.deleted == ["F1"] and report.noop == 1
    live = {r.id: r.text for r in memory.live()}
    assert live == {"F2": REFINES[(1, "F2")], "F3": STORED[2], "F4": STORED[3], "F5": NEW[0], "F6": NEW[3]}
    assert memory.get("F2").history[0].text == STORED[1]  # UPDATE is non-destructive
    assert memory.get("F1").deleted and memory.get("F1").deleted_by == ("D2:1",)


def test_a_delete_alone_loses_the_new_fact_and_is_sent_back() -> None:
    memory = stored_memory()
    new = candidates(["Maya gave her dog Biscuit to her sister, she has no dog now"], first=4)
    manager = Manager(slip=[], drop={"ADD"}, offset=4)  # the first reply deletes F3 and forgets the fact itself
    outcome = manage_memory(manager.model, memory, new)
    assert len(manager.calls) == 2 and outcome.fallback is None
    assert "new fact 0 has only DELETE edits" in str(manager.calls[1][-1].content)
    assert [(e.op, e.id) for e in outcome.edits] == [("ADD", None), ("DELETE", "F3")]
    memory.apply(outcome.edits, new)
    assert memory.get("F3").deleted and memory.get("F5").text == new[0].text


def test_a_fact_on_the_same_subject_and_attribute_is_related_however_few_words_it_shares() -> None:
    """Related memories are the most similar facts and every fact on the new fact's subject and attribute: Maya's
    old home (few shared words, below five closer facts about other people) is still shown, so the manager can
    DELETE it; related by similarity alone, it would stay live beside the new home."""
    memory = FactMemory("maya")
    old = [
        "Maya lives in Porto",
        *(
            f"{name} shares a flat beside the harbour in Lisbon with friends"
            for name in ("Leo", "Ana", "Rui", "Eva", "Tom")
        ),
    ]
    memory.apply([FactEdit(op="ADD", fact=i) for i in range(len(old))], candidates(old))
    new = candidates(["Maya lives in a flat beside the harbour in Lisbon with friends"])
    related = r2_roles.related_memories(memory, new)
    assert related[0][:5] == ["F2", "F3", "F4", "F5", "F6"] and related[0][5:] == ["F1"]
    manager = Manager(slip=[])
    outcome = manage_memory(manager.model, memory, new)
    assert related_ids(manager.calls[0])[0][-1] == "F1"
    memory.apply(outcome.edits, new)
    assert memory.get("F1").deleted and [r.text for r in memory.live()][-1] == new[0].text
