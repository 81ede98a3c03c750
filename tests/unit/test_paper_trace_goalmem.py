"""Paper trace of Goal-Mem (Liang et al., Sec. 4 and Algorithm 1) on its Running Example 2: Alice asks which drink
to try at the cafe she went to last week.

A scripted model makes the decisions (its unifier, refiner and decomposer answer from tables keyed on the
subgoals they are shown) and a scripted backbone retrieves (Goal-Mem is backbone-agnostic; ``B_retrieve`` maps a
subgoal's words to the memories below). The decisions are chosen so each of the paper's rules changes the run:

* success needs every accumulated subgoal grounded (Algorithm 1: U(b,d) = {} over Psi(b,<=d)): at breadth 1,
  depth 1, every original subgoal is grounded (on the wrong cafe) while the antecedent "Alice visited the cafe last
  week" is not; counting only the original subgoals would answer "matcha frappe" there;
* the depth loop refines the frontier, one antecedent per subgoal (Eq. 6, Algorithm 1 lines 21-23): a reply with
  two antecedents for one subgoal is sent back, and at breadth 2, depth 2, only the open antecedent G3 is refined,
  not the original G2 it refines;
* the depth loop stops when no new memory arrives (Algorithm 1 line 35), even if the step grounded something;
* the breadth loop then tries a decomposition unlike the failed one (Eq. 2), which proves the goal;
* each breadth step starts from an empty memory pool (Algorithm 1 line 8, M_t^(b,0) <- {}): the second decomposition
  is unified and refined against what it retrieved, and "no new memory" is judged against its own pool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from logicmap.agents.goalmem import apply_unification, unify_subgoals
from logicmap.agents.testing import ScriptedChatModel
from logicmap.graphs.ingest.ingest import ingest_conversation
from logicmap.graphs.runtime.resources import Resources
from logicmap.graphs.strategies.goalmem import GoalMemContext, answer, call_bound, graph
from logicmap.memory.files.loaders import Conversation, RawTurn, Session
from logicmap.memory.records.nl_logic import Substitution, Term, binding_problem, parse_atom
from logicmap.memory.retrieval.retrieval import Hit
from logicmap.prompts import goalmem_decompose, goalmem_generate, goalmem_parse, goalmem_refine, goalmem_unify
from logicmap.prompts.goalmem_unify import Unification

NAMESPACE = "alice-cafe"
QUESTION = "I like the cafe I went to last week, what drink should I try this time?"
GOAL = "find x: recommend (x:drink) to Alice from the menu of the cafe she went to last week"

# The paper's rule (Running Example 2) and the second decomposition, unlike it.
LIKES, CONTAINS, SERVED = (
    "Alice likes (y:flavor)",
    "(x:drink) contains (y:flavor)",
    "(x:drink) is served at (z:cafe) Alice visited last week",
)
VISITED, WAS_AT = "Alice visited (z:cafe) last week", "Alice was at (z:cafe) on (t:date)"  # antecedents
PAID = "Alice paid at (z:cafe) last week"  # a second antecedent for one subgoal: sent back
SEASONAL, WENT = "(x:drink) is the seasonal drink of (z:cafe)", "Alice went to (z:cafe) last week"
TOOK, NAMED = "(p:person) took Alice to (z:cafe) last week", "Alice named the new cafe as (w:cafe)"
RULE_1, RULE_2 = [LIKES, CONTAINS, SERVED], [SEASONAL, WENT]

TURNS = {
    "D1:1": "I really like matcha, it is my favourite flavour.",
    "D1:2": "The Copper Kettle sells a matcha frappe.",
    "D1:3": "I visited the Copper Kettle in March.",
    "D2:1": "The Momoco cafe advertised a Kyoto Latte as its seasonal drink.",
    "D2:2": "Their Kyoto Latte is made with matcha powder.",
    "D2:3": "Last week Ben took me to a new cafe downtown.",
    "D2:4": "The new cafe Ben took me to is called Momoco.",
}
# B_retrieve: the first rule whose words are in the query gives the memories.
RETRIEVAL = [
    ("served at", ["D1:2"]),
    ("likes", ["D1:1"]),
    ("contains", ["D1:2"]),
    ("visited", ["D1:3"]),
    ("was at", ["D1:3"]),
    ("seasonal", ["D2:1"]),
    ("went to", ["D1:3"]),
    ("took", ["D2:3"]),
    ("named", ["D2:4"]),
]

# The unifier: a subgoal (found by its words) is grounded when every memory it needs was retrieved.
UNIFY = [
    ("likes", {"D1:1"}, {"y": "matcha"}),
    ("contains", {"D1:2"}, {"x": "matcha frappe", "y": "matcha"}),
    ("served at", {"D1:2", "D1:3"}, {"z": "Copper Kettle"}),  # a careless judgment: March is not last week
    ("visited", None, {}),  # never: no memory says Alice visited that cafe last week
    ("was at", {"D1:3"}, {"t": "March", "z": "Copper Kettle"}),
    ("seasonal", {"D2:1"}, {"x": "Kyoto Latte", "z": "Momoco"}),
    ("went to", {"D2:3", "D2:4"}, {"z": "Momoco"}),
    ("took", {"D2:3", "D2:4"}, {"p": "Ben", "z": "Momoco"}),
    ("named", {"D2:4"}, {"w": "Momoco"}),
]
# The refiner: one antecedent per subgoal it is asked about (the first reply for the served-at subgoal gives two).
REFINE = {"served at": [VISITED, PAID], "visited": [WAS_AT], "went to": [TOOK], "took": [NAMED]}

MARKERS = {
    "parse": goalmem_parse.SYSTEM_MARKER,
    "decompose": goalmem_decompose.SYSTEM_MARKER,
    "unify": goalmem_unify.SYSTEM_MARKER,
    "refine": goalmem_refine.SYSTEM_MARKER,
    "generate": goalmem_generate.SYSTEM_MARKER,
}
_SUBGOAL = re.compile(r"^(G\d+): (.+?)(?:  \(missing: .*\))?$", re.M)
_MEMORY = re.compile(r"^(D\d+:\d+): ", re.M)


def _subgoals(messages: Sequence[BaseMessage]) -> dict[str, str]:
    return dict(_SUBGOAL.findall(str(messages[1].content)))


def _memories(messages: Sequence[BaseMessage]) -> set[str]:
    return set(_MEMORY.findall(str(messages[1].content)))


def _variables(text: str) -> set[str]:
    return set(re.findall(r"\((\w+):", text))


class PaperModel:
    """The scripted model: each role decides from what its prompt shows. ``order`` lists every request."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.calls: dict[str, list[list[BaseMessage]]] = {role: [] for role in MARKERS}
        self.decompositions = [RULE_1, RULE_2]
        self.refine_table = dict(REFINE)
        self.served_refined = 0
        self.model = ScriptedChatModel(respond=self._respond, default="")

    def _respond(self, messages: Sequence[BaseMessage]) -> Any:
        role = next(r for r, marker in MARKERS.items() if marker in str(messages[0].content))
        self.order.append(role)
        self.calls[role].append(list(messages))
        return getattr(self, f"_{role}")(messages)

    def _parse(self, messages: Sequence[BaseMessage]) -> Any:
        return {"goal": GOAL}

    def _decompose(self, messages: Sequence[BaseMessage]) -> Any:
        rule = self.decompositions.pop(0) if self.decompositions else RULE_1
        return {"subgoals": rule, "rationale": "a way to satisfy the goal"}

    def _unify(self, messages: Sequence[BaseMessage]) -> Any:
        shown = _memories(messages)
        results = []
        for sid, text in _subgoals(messages).items():
            words, needed, bindings = next(row for row in UNIFY if row[0] in text)
            if needed is None or not needed <= shown:
                results.append({"subgoal": sid, "resolved": False, "reason": "the retrieved memories do not say it"})
                continue
            free = _variables(text)
            results.append(
                {
                    "subgoal": sid,
                    "resolved": True,
                    "facts": sorted(needed),
                    "bindings": [{"variable": v, "value": b} for v, b in bindings.items() if v in free],
                }
            )
        return {"results": results}

    def _refine(self, messages: Sequence[BaseMessage]) -> Any:
        antecedents = []
        for sid, text in _subgoals(messages).items():
            words = next((w for w in self.refine_table if w in text), None)
            options = self.refine_table.get(words, []) if words else []
            if words == "served at":
                self.served_refined += 1
                options = options if self.served_refined == 1 else options[:1]
            antecedents += [{"subgoal": sid, "antecedent": a} for a in options]
        return {"antecedents": antecedents}

    def _generate(self, messages: Sequence[BaseMessage]) -> Any:
        text = str(messages[1].content)
        return {"answer": "The Kyoto Latte" if "Kyoto Latte" in text else "The matcha frappe"}


class PaperBackbone:
    """``B_retrieve`` of the trace: the memories of the first rule whose words are in the query."""

    name = "paper"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Hit]:
        self.queries.append(query)
        ids = next((ids for words, ids in RETRIEVAL if words in query), [])
        return [Hit("turn", i, f"Alice: {TURNS[i]}", [i], 1.0, "2024-05-06") for i in ids][:k]


def _session(sid: str, stamp: datetime, ids: Sequence[str]) -> Session:
    turns = [RawTurn(dia_id=i, speaker="Alice", text=TURNS[i]) for i in ids]
    return Session(
        session_id=sid, timestamp=stamp, timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"), turns=turns
    )


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Resources:
    """The conversation ingested once with the no-LLM policy (the namespace the runs read)."""
    from tests.conftest import make_resources

    res = make_resources(Path(tmp_path_factory.mktemp("alice-cafe")))
    conversation = Conversation(
        conversation_id=NAMESPACE,
        speakers=["Alice", "Ben"],
        sessions=[
            _session("S1", datetime(2024, 3, 20, 10, 0), ["D1:1", "D1:2", "D1:3"]),
            _session("S2", datetime(2024, 5, 6, 18, 0), ["D2:1", "D2:2", "D2:3", "D2:4"]),
        ],
    )
    ingest_conversation(conversation, NAMESPACE, resources=res, policy="heuristic")
    yield res
    res.store.close()


def _with_model(base: Resources, model: Any) -> Resources:
    res = Resources(settings=base.settings, store_=base.store, embeddings_=base.embeddings_)
    res.llm_ = model
    return res


def _run(
    memory: Resources, model: PaperModel | None = None, **limits: Any
) -> tuple[PaperModel, PaperBackbone, list[str], dict[str, Any]]:
    """The graph streamed: the nodes in the order they ran (one ``retrieve`` per ``Send``) and the final state."""
    model, backbone = model or PaperModel(), PaperBackbone()
    context = GoalMemContext(
        namespace=NAMESPACE,
        resources=_with_model(memory, model.model),
        policy="llm",
        retriever=backbone,
        backbone="paper",
        **limits,
    )
    nodes: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": QUESTION}, context=context, stream_mode=["updates", "values"]):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            final = chunk
    return model, backbone, nodes, final


@pytest.fixture(scope="module")
def trace(memory: Resources) -> tuple[PaperModel, PaperBackbone, list[str], dict[str, Any]]:
    return _run(memory)  # the paper's limits: B = 3, D = 5


def _unify_steps(final: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in final["trace"] if t["node"] == "unify"]


def test_success_needs_every_accumulated_subgoal_grounded(trace) -> None:
    model, _, nodes, final = trace
    steps = _unify_steps(final)
    # Breadth 1, depth 1: every original subgoal (G1-G3) is grounded, the antecedent G4 is not: no answer yet.
    assert (steps[1]["breadth"], steps[1]["depth"]) == (1, 1)
    assert steps[1]["resolved"] == ["G3"] and steps[1]["unresolved"] == ["G4"]
    second_unify = [i for i, n in enumerate(nodes) if n == "unify"][1]
    assert nodes[second_unify + 1] == "refine" and "generate" not in nodes[: second_unify + 1]
    # The answer comes from the decomposition whose every subgoal, antecedents included, is grounded.
    assert final["status"] == "answered" and final["answer"] == "The Kyoto Latte"
    assert set(final["resolved"]) == set(final["subgoals"]) == {"G1", "G2", "G3", "G4"}
    assert model.order.count("generate") == 1 and "matcha frappe" not in final["answer"]


def test_the_depth_loop_refines_one_antecedent_per_frontier_subgoal(trace) -> None:
    model, _, _, final = trace
    refined = [sorted(_subgoals(m)) for m in model.calls["refine"]]
    # Depth 1 refines U(b,0); deeper steps refine only the frontier (the antecedents the last step added).
    assert refined == [["G3"], ["G3"], ["G4"], ["G2"], ["G3"]]
    # The first reply gave the served-at subgoal two antecedents: sent back, and the retry gave one.
    retry = str(model.calls["refine"][1][-1].content)
    assert "G3 already has an antecedent; give exactly one per subgoal" in retry
    refines = [t for t in final["trace"] if t["node"] == "refine"]
    assert [len(t["antecedents"]) for t in refines] == [1, 1, 1, 1]
    # Breadth 2's proof: G2 <- G3 <- G4, one antecedent each.
    assert final["antecedent_of"] == {"G3": "G2", "G4": "G3"}
    assert {sid: atom.render() for sid, atom in final["subgoals"].items()} == {
        "G1": SEASONAL,
        "G2": WENT,
        "G3": TOOK,
        "G4": NAMED,
    }


def test_the_depth_loop_stops_when_no_new_memory_arrives(trace) -> None:
    model, _, nodes, final = trace
    steps = _unify_steps(final)
    # Breadth 1, depth 2: the antecedent "Alice was at the cafe on a date" is grounded from a memory already
    # retrieved; nothing new arrived, so the decomposition is given up (no depth 3) and breadth 2 begins.
    b1d2 = steps[2]
    assert (b1d2["breadth"], b1d2["depth"], b1d2["new_memories"]) == (1, 2, 0)
    assert b1d2["resolved"] == ["G5"] and b1d2["unresolved"] == ["G4"]
    assert nodes[nodes.index("unify", 10) + 1] == "decompose"
    assert [(t["breadth"], t["depth"]) for t in steps] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]


def test_the_breadth_loop_tries_a_decomposition_unlike_the_failed_one(trace) -> None:
    model, backbone, nodes, final = trace
    assert final["breadth"] == 2 and final["solved_depth"] == 2
    assert [r.render() for r, _ in final["failed"]] == [f"{' AND '.join(RULE_1)} => {GOAL.split(': ', 1)[1]}"] or len(
        final["failed"]
    ) == 1
    second = str(model.calls["decompose"][1][1].content)
    assert SERVED.split(" (z")[0].split(") ")[1] in second and "Alice visited" in second  # the failed rule is shown
    assert final["substitution"].as_dict() == {"x": "Kyoto Latte", "z": "Momoco", "p": "Ben", "w": "Momoco"}
    assert [e.id for e in final["evidence"]] == ["D2:1", "D2:3", "D2:4"]
    # Every LLM request in order (the refiner's retry included), within the bound 1 + B(2 + 2D) = 37.
    assert model.order == [
        "parse",
        "decompose",
        "unify",
        "refine",
        "refine",
        "unify",
        "refine",
        "unify",
        "decompose",
        "unify",
        "refine",
        "unify",
        "refine",
        "unify",
        "generate",
    ]
    assert final["llm_requests"] == len(model.order) == 15 <= call_bound(3, 5) == 37
    assert nodes[-2:] == ["generate", "finish"] and not final["fallbacks"]


def test_each_breadth_step_starts_from_an_empty_memory_pool(trace) -> None:
    """Algorithm 1 line 8 (M_t^(b,0) <- {}; Eq. 3 unions over psi^(b) only): the second decomposition is unified
    and refined against the memories its own subgoals retrieved, not those of the decomposition that failed."""
    model, _, _, final = trace
    shown = [sorted(_memories(m)) for m in model.calls["unify"]]
    breadth_1 = [["D1:1", "D1:2"], ["D1:1", "D1:2", "D1:3"], ["D1:1", "D1:2", "D1:3"]]
    breadth_2 = [["D1:3", "D2:1"], ["D1:3", "D2:1", "D2:3"], ["D1:3", "D2:1", "D2:3", "D2:4"]]
    assert shown == breadth_1 + breadth_2  # the matcha memories D1:1, D1:2 are not in breadth 2's pool
    assert [sorted(_memories(m)) for m in model.calls["refine"]][3:] == breadth_2[:2]
    steps = _unify_steps(final)
    # Both memories breadth 2 starts with are new to its pool (D1:3 was retrieved at breadth 1 too).
    assert (steps[3]["breadth"], steps[3]["depth"], steps[3]["new_memories"]) == (2, 0, 2)


def test_no_new_memory_is_judged_against_the_decompositions_own_pool(memory: Resources) -> None:
    """Algorithm 1 line 35 compares M_t^(b,d) with M_t^(b,d-1) of the same breadth step: an antecedent that
    retrieves a memory only the failed decomposition had seen brings new memory to this one, so the depth loop
    goes on (a pool kept across breadth steps would count nothing new and give the decomposition up)."""
    model = PaperModel()
    model.refine_table["went to"] = ["Alice likes the drinks of (z:cafe)"]  # retrieves D1:1 (breadth 1's)
    _, backbone, nodes, final = _run(memory, model)
    assert "Alice likes the drinks of Momoco" in backbone.queries
    b2d1 = [t for t in _unify_steps(final) if (t["breadth"], t["depth"]) == (2, 1)][0]
    assert b2d1["new_memories"] == 1 and b2d1["resolved"] == ["G3"] and b2d1["unresolved"] == ["G2"]
    after = [i for i, n in enumerate(nodes) if n == "unify"][4] + 1
    assert nodes[after] == "refine"  # depth 2 of breadth 2, not the next decomposition
    assert [t["depth"] for t in final["trace"] if t["node"] == "refine"][-1] == 2


def test_keeping_the_pool_across_breadth_steps_is_an_option_off_by_default(memory: Resources) -> None:
    assert GoalMemContext().keep_pool_across_breadth is False
    model, _, _, final = _run(memory, keep_pool_across_breadth=True)
    shown = [sorted(_memories(m)) for m in model.calls["unify"]]
    assert shown[3] == ["D1:1", "D1:2", "D1:3", "D2:1"]  # the failed decomposition's memories stay
    assert final["answer"] == "The Kyoto Latte"


def test_the_call_bound_is_enforced_and_exposed(memory: Resources) -> None:
    """B = 1, D = 1: at most 1 + 1(2 + 2) = 5 requests. The refiner's invalid first reply gets no retry (the
    unification after it needs the last request): its fallback adds no antecedent (recorded); the last request
    re-unifies the re-grounded subgoals, and the proof fails within the bound."""
    model, _, nodes, final = _run(memory, max_breadth=1, max_depth=1)
    assert model.order == ["parse", "decompose", "unify", "refine", "unify"]
    assert final["llm_requests"] == 5 == call_bound(1, 1)
    assert [f.role for f in final["fallbacks"]] == ["goalmem_refine"]
    assert "no retry left in the call budget" in final["fallbacks"][0].reason
    assert final["status"] == "failed" and nodes[-2:] == ["fail", "finish"]
    res = answer(
        QUESTION,
        NAMESPACE,
        resources=_with_model(memory, PaperModel().model),
        policy="llm",
        backbone=PaperBackbone(),
        max_breadth=1,
        max_depth=1,
    )
    assert res.details["call_bound"] == 5 and res.details["llm_requests"] == res.cost.llm_calls == 5


class ListModel:
    """A scripted model per role (found by the prompt's marker): each role's replies in order."""

    def __init__(self, **scripts: list[Any]) -> None:
        self.scripts = {role: list(replies) for role, replies in scripts.items()}
        self.order: list[str] = []
        self.model = ScriptedChatModel(respond=self._respond, default="")

    def _respond(self, messages: Sequence[BaseMessage]) -> Any:
        role = next(r for r, marker in MARKERS.items() if marker in str(messages[0].content))
        self.order.append(role)
        return (self.scripts.get(role) or [""]).pop(0)


def resolved(sid: str, facts: list[str], **bindings: str | tuple[str, str]) -> dict:
    """A resolved subgoal; a binding is a value or (value, the value's type)."""
    pairs = [(name, value if isinstance(value, tuple) else (value, None)) for name, value in bindings.items()]
    return {
        "subgoal": sid,
        "resolved": True,
        "facts": facts,
        "bindings": [{"variable": name, "value": value, "type": kind} for name, (value, kind) in pairs],
    }


def _run_list(model: ListModel, memory: Resources, question: str) -> tuple[list[str], dict[str, Any]]:
    context = GoalMemContext(namespace=NAMESPACE, resources=_with_model(memory, model.model), policy="llm")
    nodes: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": question}, context=context, stream_mode=["updates", "values"]):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            final = chunk
    return nodes, final


def test_the_llm_unifiers_type_judgment_stands_ingredient_entails_flavor(memory: Resources) -> None:
    flavor = 'the Kyoto Latte at ("Momoco":cafe) has (f:flavor)'
    model = ListModel(
        parse=[{"goal": f"find f: {flavor}"}],
        decompose=[{"subgoals": [flavor]}],
        unify=[{"results": [resolved("G1", ["D2:2"], f=("matcha", "ingredient"))]}],
        generate=[{"answer": "Matcha"}],
    )
    nodes, final = _run_list(model, memory, "What flavor does the Kyoto Latte at Momoco have?")
    # The lexical check refuses an ingredient for a flavor ...
    assert binding_problem(Term.var("f", "flavor"), Term.const("matcha", "ingredient")) is not None
    # ... but the unifier judged that the memory (an iced latte made with matcha) entails the flavor: it stands.
    assert nodes == ["parse_goal", "decompose", "retrieve", "unify", "generate", "finish"]
    assert final["status"] == "answered" and final["answer"] == "Matcha" and final["solved_depth"] == 0
    assert final["substitution"].as_dict() == {"f": "matcha"} and final["resolved"] == {"G1": ["D2:2"]}
    assert not final["rejected"] and model.order == ["parse", "decompose", "unify", "generate"]
    judged = [t for t in final["trace"] if t["node"] == "unify"][0]["judged"]
    assert len(judged) == 1 and "type mismatch" in judged[0] and "matcha" in judged[0]


def test_mechanical_checks_still_refuse_unknown_memories_and_unbound_variables() -> None:
    """Judgments stand, mechanics do not: in one reply (no retry left) the ingredient-for-flavor binding is kept,
    the subgoal citing a memory that was never retrieved and the one leaving a variable unbound are refused."""
    subgoals = {
        "G1": parse_atom("I ordered a drink with (f:flavor) at (y:cafe)"),
        "G2": parse_atom("I visited (y:cafe) last week"),
        "G3": parse_atom("I paid (p:price) for (x:drink)"),
    }
    memories = [
        ("D2:1", "Sam: I visited the Blue Finch today.", "2024-05-07"),
        ("D2:3", "Sam: I ordered their iced latte made with matcha.", "2024-05-07"),
    ]
    reply = {
        "results": [
            resolved("G1", ["D2:3"], f=("matcha", "ingredient"), y="Blue Finch"),
            resolved("G2", ["D7:7"], y="Blue Finch"),
            resolved("G3", ["D2:3"], x="iced latte"),
        ]
    }
    model = ListModel(unify=[reply])
    step, outcome = unify_subgoals(model.model, QUESTION, subgoals, memories, Substitution(), max_attempts=1)
    # Validation sees the problems and no retry is allowed: the run's budget had one request left.
    assert outcome.attempts == 1 and outcome.fallback is not None and "no retry left" in outcome.fallback.reason
    assert (
        "unknown memory ids ['D7:7']" in outcome.fallback.errors[0]
        and "['p'] have no value" in outcome.fallback.errors[0]
    )
    assert model.order == ["unify"]
    # The same reply checked subgoal by subgoal (how an LLM reply that passed validation is applied): the
    # judgment is kept, the mechanical failures are refused and said why.
    step = apply_unification(
        Unification.model_validate(reply), subgoals, Substitution(), memory_ids={"D2:1", "D2:3"}, trust_judgments=True
    )
    assert step.resolved == {"G1": ["D2:3"]} and step.substitution.as_dict() == {"f": "matcha", "y": "Blue Finch"}
    assert step.unresolved["G2"] == "cites memory ids that were not retrieved: ['D7:7']"
    assert step.unresolved["G3"] == "variables ['p'] left unbound" and len(step.rejected) == 2
    assert "type mismatch" in step.judged[0]


def test_the_call_budget_never_stops_the_no_llm_policy(memory: Resources) -> None:
    result = answer(QUESTION, NAMESPACE, resources=memory, policy="heuristic", max_breadth=1, max_depth=1)
    assert result.details["llm_requests"] == 0 and result.cost.llm_calls == 0 and not result.fallbacks
    assert not str(result.details["stop_reason"] or "").startswith("call budget")


class CountingBackbone(PaperBackbone):
    """The trace's ``B_retrieve``, recording how many memories each search asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def search(self, query: str, k: int) -> list[Hit]:
        self.asked.append(k)
        return super().search(query, k)


def test_at_most_sixty_memories_per_question_by_default(memory: Resources) -> None:
    """Appendix F: the shared cap k = 60 memories per question, distributed across the searches. With 30 asked
    per subgoal, the first decomposition's three searches share the 60 (20 each); a cap of 50 would give 17, 17,
    16, one of 100 the 30 asked."""
    model, backbone = PaperModel(), CountingBackbone()
    context = GoalMemContext(
        namespace=NAMESPACE,
        resources=_with_model(memory, model.model),
        policy="llm",
        retriever=backbone,
        backbone="paper",
        k_per_subgoal=30,
    )
    final = graph.invoke({"question": QUESTION}, context=context)
    assert backbone.asked[:3] == [20, 20, 20]
    # Each later step's searches share what is left of the 60 (the memories retrieved so far, on every breadth
    # step, count against it).
    assert backbone.asked == [20, 20, 20, 29, 29, 29, 28, 29, 28, 28, 28, 30] and final["answer"] == "The Kyoto Latte"


# -- the faithful configuration: the paper's prompts (Appendix I) -------------------------------------------

PAPER_RULES = {
    "decompose": [
        "Use general human commonsense only.",
        "Do NOT use any specific retrieved facts or invented details.",
        "DO NOT phrase premises as META-CLAIMS about the conversation itself.",
        "Closely related but distinct entities are not substitutes",
        "What career field is Caroline likely to pursue in her education?",
    ],
    "unify": [
        "ENTITY-ANCHOR CHECK (do this BEFORE selecting facts):",
        "Do not pick a thematically similar fact as a fallback.",
        "if facts ground the same required variable with incompatible values and the conflict cannot be "
        'resolved from the facts alone, answer "I dont know"',
        "Topical similarity is not enough.",
    ],
    "refine": ["5. Do not invent constants.", "6. Avoid repeated refinement.", "Alice visited (z:cafe) last week"],
    "generate": [
        'the value is not grounded by a successful substitution or an explicit fact, answer "I dont know"',
        "Partial or hedged answers",
        "are FORBIDDEN",
    ],
}


def test_faithful_asks_every_role_with_the_papers_prompt_and_proves_the_same_goal(memory: Resources, trace) -> None:
    """``faithful``: decompose, unify, refine and generate get Appendix I's rules and examples (the second
    decomposition I.1.2's "NEW ... not redundant"); the running example is proved as by the default, whose prompts
    carry none of them."""
    model, _, _, final = _run(memory, faithful=True)
    assert final["status"] == "answered" and final["answer"] == "The Kyoto Latte"
    for role, rules in PAPER_RULES.items():
        system = str(model.calls[role][0][0].content)
        for rule in rules:
            assert rule in system, (role, rule)
        default = str(trace[0].calls[role][0][0].content)
        assert not any(rule in default for rule in rules), role
    second = str(model.calls["decompose"][1][0].content)
    assert "Generate one NEW commonsense goal decomposition that is complementary, not redundant" in second
    assert "Existing rules/decompositions that should NOT be repeated:" in str(model.calls["decompose"][1][1].content)


def test_faithful_runs_without_a_model(memory: Resources) -> None:
    result = answer(QUESTION, NAMESPACE, resources=memory, policy="heuristic", faithful=True)
    default = answer(QUESTION, NAMESPACE, resources=memory, policy="heuristic")
    assert result.answer == default.answer and result.cost.llm_calls == 0
