"""Paper trace of Goal-Mem on its running example: a drink at the cafe visited last week.

A scripted model makes the paper's decisions; the assertions are on the control flow (which nodes ran, in which
order, what was kept or refused, how many LLM requests), not only on the answer.
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
from logicmap.graphs.goalmem import FAILURE_ANSWER, GoalMemContext, answer, call_bound, graph
from logicmap.graphs.ingest import ingest_conversation
from logicmap.graphs.resources import Resources
from logicmap.memory.loaders import Conversation, RawTurn, Session
from logicmap.memory.nl_logic import Substitution, Term, binding_problem, parse_atom
from logicmap.prompts import goalmem_decompose, goalmem_generate, goalmem_parse, goalmem_refine, goalmem_unify
from logicmap.prompts.goalmem_unify import Unification

QUESTION = "What drink did I have at the cafe I visited last week?"
GOAL = "find x: I had (x:drink) at the cafe I visited last week"
HAD_AT_VISITED = "I had (x:drink) at the cafe I visited last week"
VISITED = "I visited (y:cafe) last week"
ORDERED_AT = "I ordered (x:drink) at (y:cafe)"
NAMESPACE = "cafe-trace"

MARKERS = {
    "parse": goalmem_parse.SYSTEM_MARKER,
    "decompose": goalmem_decompose.SYSTEM_MARKER,
    "unify": goalmem_unify.SYSTEM_MARKER,
    "refine": goalmem_refine.SYSTEM_MARKER,
    "generate": goalmem_generate.SYSTEM_MARKER,
}


def _session(sid: str, stamp: datetime, lines: Sequence[tuple[str, str]]) -> Session:
    turns = [RawTurn(dia_id=f"D{sid[1:]}:{i + 1}", speaker=who, text=text) for i, (who, text) in enumerate(lines)]
    return Session(session_id=sid, timestamp=stamp, timestamp_text=stamp.strftime("%-I:%M %p on %-d %B, %Y"),
                   turns=turns)  # fmt: skip


CONVERSATION = Conversation(
    conversation_id="cafe-trace",
    speakers=["Sam", "Ada"],
    sessions=[
        _session(
            "S1",
            datetime(2024, 3, 2, 10, 0),
            [
                ("Sam", "I tried the Copper Kettle cafe near the station today."),
                ("Ada", "What did you order there?"),
                ("Sam", "A hot chocolate, far too sweet for me."),
            ],
        ),
        _session(
            "S2",
            datetime(2024, 5, 7, 16, 30),
            [
                ("Sam", "I visited the Blue Finch today, the new cafe on Elm Street."),
                ("Ada", "Nice! What did you order at the Blue Finch?"),
                ("Sam", "I ordered their iced latte made with matcha and oat milk."),
                ("Ada", "Sounds refreshing."),
            ],
        ),
        _session(
            "S3",
            datetime(2024, 5, 13, 9, 0),
            [
                ("Sam", "My sister wants to open a bakery next year."),
                ("Ada", "That is a big plan, tell her good luck."),
            ],
        ),
    ],
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Resources:
    """The conversation ingested once with the no-LLM policy (the trace runs only read it)."""
    from tests.conftest import make_resources

    res = make_resources(Path(tmp_path_factory.mktemp("cafe-trace")))
    ingest_conversation(CONVERSATION, NAMESPACE, resources=res, policy="heuristic")
    yield res
    res.store.close()


class PaperModel:
    """A scripted chat model per Goal-Mem role (found by the prompt's marker): each role's replies in order.

    ``order`` is every LLM request in the order sent (retries included); ``calls`` the messages per role."""

    def __init__(self, **scripts: list[Any]) -> None:
        self.scripts = {role: list(replies) for role, replies in scripts.items()}
        self.order: list[str] = []
        self.calls: dict[str, list[list[BaseMessage]]] = {role: [] for role in MARKERS}
        self.model = ScriptedChatModel(respond=self._respond, default="")

    def _respond(self, messages: Sequence[BaseMessage]) -> Any:
        role = next(r for r, marker in MARKERS.items() if marker in str(messages[0].content))
        self.order.append(role)
        self.calls[role].append(list(messages))
        script = self.scripts.get(role) or []
        if not script:
            raise AssertionError(f"unexpected {role} request")
        return script.pop(0)


def _with_model(base: Resources, model: Any) -> Resources:
    res = Resources(settings=base.settings, store_=base.store, embeddings_=base.embeddings_)
    res.llm_ = model
    return res


def _subgoals(messages: Sequence[BaseMessage]) -> dict[str, str]:
    return dict(re.findall(r"^(G\d+): (.+?)(?:  \(missing: .*\))?$", str(messages[1].content), re.M))


def _memories(messages: Sequence[BaseMessage]) -> set[str]:
    return set(re.findall(r"^(D\d+:\d+): ", str(messages[1].content), re.M))


def _run(model: PaperModel, memory: Resources, question: str = QUESTION, **limits: Any) -> tuple[list[str], dict]:
    """The graph streamed: the nodes in the order they ran (one ``retrieve`` per ``Send``) and the final state."""
    context = GoalMemContext(namespace=NAMESPACE, resources=_with_model(memory, model.model), policy="llm", **limits)
    nodes: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": question}, context=context, stream_mode=["updates", "values"]):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            final = chunk
    return nodes, final


def unresolved(sid: str, why: str) -> dict:
    return {"subgoal": sid, "resolved": False, "reason": why}


def resolved(sid: str, facts: list[str], **bindings: str | tuple[str, str]) -> dict:
    """A resolved subgoal; a binding is a value or (value, the value's type)."""
    pairs = [(name, value if isinstance(value, tuple) else (value, None)) for name, value in bindings.items()]
    return {
        "subgoal": sid,
        "resolved": True,
        "facts": facts,
        "bindings": [{"variable": name, "value": value, "type": kind} for name, (value, kind) in pairs],
    }


# The paper's decisions on the running example. Depth 0: the goal does not unify (no memory says what was had
# at the cafe visited last week). Depth 1: the antecedent "which cafe was visited last week" grounds y. Depth 2:
# the antecedent "the drink ordered at that cafe" grounds x, and the goal follows.
BAD_UNIFICATION = {"results": [{"subgoal": "G1", "resolved": True, "facts": ["D9:9"], "bindings": []}]}
DEPTH0 = {"results": [unresolved("G1", "nothing says which cafe I visited last week or what I had there")]}
DEPTH1 = {
    "results": [
        unresolved("G1", "nothing says what I had at the Blue Finch"),
        resolved("G2", ["D2:1"], y=("Blue Finch", "cafe")),
    ]
}
DEPTH2 = {
    "results": [
        resolved("G1", ["D2:1", "D2:3"], x=("iced matcha latte", "drink")),
        resolved("G3", ["D2:3"], x=("iced matcha latte", "drink")),
    ]
}
REFINE1 = {"antecedents": [{"subgoal": "G1", "antecedent": VISITED}]}
REFINE2 = {"antecedents": [{"subgoal": "G1", "antecedent": ORDERED_AT}]}


def paper_model(*, unify: list[Any]) -> PaperModel:
    return PaperModel(
        parse=[{"goal": GOAL}],
        decompose=[{"subgoals": [HAD_AT_VISITED], "rationale": "the drink had at the cafe visited last week"}],
        unify=unify,
        refine=[REFINE1, REFINE2],
        generate=[{"answer": "An iced matcha latte, at the Blue Finch"}],
    )


def test_running_example_is_solved_by_backward_chaining_at_depth_2(memory: Resources) -> None:
    model = paper_model(unify=[BAD_UNIFICATION, DEPTH0, DEPTH1, DEPTH2])
    nodes, final = _run(model, memory)  # the paper's defaults: B = 3, D = 5, 60 memories

    # Control flow: formalize -> decompose -> retrieve per subgoal -> unify -> refine -> ... -> answer.
    assert nodes == ["parse_goal", "decompose", "retrieve", "unify", "refine", "retrieve", "unify",
                     "refine", "retrieve", "unify", "generate", "finish"]  # fmt: skip
    assert [r.subgoal for r in final["retrieved"]] == ["G1", "G2", "G3"]  # each step retrieves for its new subgoal
    assert [r.query for r in final["retrieved"]] == [
        "I had drink at the cafe I visited last week",
        "I visited cafe last week",
        "I ordered drink at Blue Finch",
    ]
    # LLM requests in order: the forced retry of the first unification is one of them.
    assert model.order == ["parse", "decompose", "unify", "unify", "refine", "unify", "refine", "unify", "generate"]

    # The proof: one decomposition, two antecedent refinements of G1, solved at depth 2.
    assert final["status"] == "answered" and final["answer"] == "An iced matcha latte, at the Blue Finch"
    assert final["breadth"] == 1 and final["depth"] == 2 and final["solved_depth"] == 2
    assert {sid: atom.render() for sid, atom in final["subgoals"].items()} == {
        "G1": HAD_AT_VISITED,
        "G2": VISITED,
        "G3": ORDERED_AT,
    }
    assert final["antecedent_of"] == {"G2": "G1", "G3": "G1"}
    assert final["substitution"].as_dict() == {"y": "Blue Finch", "x": "iced matcha latte"}
    assert final["resolved"] == {"G2": ["D2:1"], "G1": ["D2:1", "D2:3"], "G3": ["D2:3"]}
    assert [e.id for e in final["evidence"]] == ["D2:1", "D2:3"]

    # Depth 1 asked the refiner about G1 only; depth 2 saw y bound and the antecedent grounded by it.
    first_refine, second_refine = model.calls["refine"]
    assert _subgoals(first_refine) == {"G1": HAD_AT_VISITED}
    assert 'Current substitution: {y/("Blue Finch":cafe)}' in str(second_refine[1].content)
    last_unify = model.calls["unify"][-1]
    assert _subgoals(last_unify) == {"G1": HAD_AT_VISITED, "G3": 'I ordered (x:drink) at ("Blue Finch":cafe)'}
    assert "D2:3" in _memories(last_unify) and "D2:3" not in _memories(model.calls["unify"][2])

    # The unifier's first reply claimed a memory that does not exist and left x unbound: refused mechanically,
    # with the reason sent back in the retry, and nothing of it kept.
    retry = str(model.calls["unify"][1][-1].content)
    assert "unknown memory ids ['D9:9']" in retry and "['x'] have no value" in retry
    assert not final["fallbacks"] and not final["rejected"]

    # The count is exposed and within the bound 1 + B(2 + 2D) = 37, the retry included.
    assert final["llm_requests"] == len(model.order) == 9 <= call_bound(3, 5) == 37
    assert final["cost"].llm_calls == 9


def test_the_llm_unifiers_type_judgment_stands_ingredient_entails_flavor(memory: Resources) -> None:
    flavor = 'I ordered a drink with (f:flavor) at ("Blue Finch":cafe)'
    model = PaperModel(
        parse=[{"goal": f"find f: {flavor}"}],
        decompose=[{"subgoals": [flavor]}],
        unify=[{"results": [resolved("G1", ["D2:3"], f=("matcha", "ingredient"))]}],
        generate=[{"answer": "Matcha"}],
    )
    nodes, final = _run(model, memory, "What flavor was the drink I ordered at the Blue Finch?")
    # The lexical check refuses an ingredient for a flavor ...
    assert binding_problem(Term.var("f", "flavor"), Term.const("matcha", "ingredient")) is not None
    # ... but the unifier judged that the memory (an iced latte made with matcha) entails the flavor: it stands.
    assert nodes == ["parse_goal", "decompose", "retrieve", "unify", "generate", "finish"]
    assert final["status"] == "answered" and final["answer"] == "Matcha" and final["solved_depth"] == 0
    assert final["substitution"].as_dict() == {"f": "matcha"} and final["resolved"] == {"G1": ["D2:3"]}
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
    model = PaperModel(unify=[reply])
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
    step = apply_unification(Unification.model_validate(reply), subgoals, Substitution(),
                             memory_ids={"D2:1", "D2:3"}, trust_judgments=True)  # fmt: skip
    assert step.resolved == {"G1": ["D2:3"]} and step.substitution.as_dict() == {"f": "matcha", "y": "Blue Finch"}
    assert step.unresolved["G2"] == "cites memory ids that were not retrieved: ['D7:7']"
    assert step.unresolved["G3"] == "variables ['p'] left unbound" and len(step.rejected) == 2
    assert "type mismatch" in step.judged[0]


@pytest.mark.parametrize("case", ["retry-first", "retry-last", "no-retry"])
def test_call_bound_is_enforced_counting_retries(memory: Resources, case: str) -> None:
    """B = 1, D = 2: at most 1 + 1(2 + 4) = 7 LLM requests, retries and the answer included; the loop stops
    (recorded) rather than exceed them."""
    unify = {
        "retry-first": [BAD_UNIFICATION, DEPTH0, DEPTH1, DEPTH2],
        "retry-last": [DEPTH0, DEPTH1, BAD_UNIFICATION, DEPTH2],
        "no-retry": [DEPTH0, DEPTH1, DEPTH2],
    }[case]
    model = paper_model(unify=unify)
    nodes, final = _run(model, memory, max_breadth=1, max_depth=2)
    bound = call_bound(1, 2)
    assert bound == 7 and final["cost"].llm_calls == len(model.order) <= bound
    if case == "retry-first":
        # The retry took the request depth 2 needed: after depth 1 the budget has room for a refinement but not
        # for the unification after it, so the depth loop stops there, recorded, instead of exceeding the bound.
        assert model.order == ["parse", "decompose", "unify", "unify", "refine", "unify"]
        assert nodes == ["parse_goal", "decompose", "retrieve", "unify", "refine", "retrieve", "unify", "fail", "finish"]
        assert final["answer"] == FAILURE_ANSWER and final["depth"] == 1
        assert final["stop_reason"].startswith("call budget spent: 6 of 7 LLM requests")
    elif case == "retry-last":
        # The last unification has one request left: its invalid reply gets no retry (recorded) and the rest
        # of the script is never asked for.
        assert model.order == ["parse", "decompose", "unify", "refine", "unify", "refine", "unify"]
        assert final["llm_requests"] == bound and model.scripts["unify"] == [DEPTH2]
        unify_fallbacks = [f for f in final["fallbacks"] if f.role == "goalmem_unify"]
        assert len(unify_fallbacks) == 1 and "no retry left in the call budget" in unify_fallbacks[0].reason
        assert nodes[-2] in ("generate", "fail") and nodes[-1] == "finish" and "generate" not in model.order
    else:
        # Solved at depth 2 with the whole budget spent: the answer is the answer variable's value, without a
        # generate request, and that is recorded.
        assert model.order == ["parse", "decompose", "unify", "refine", "unify", "refine", "unify"]
        assert nodes[-2:] == ["generate", "finish"] and final["solved_depth"] == 2
        assert final["answer"] == "iced matcha latte" and final["llm_requests"] == bound
        assert [(f.role, f.reason.split(":")[0]) for f in final["fallbacks"]] == [
            ("goalmem_generate", "call budget spent")
        ]
    assert final["llm_requests"] == len(model.order)  # the count the run exposes is the requests the model saw


def test_a_retry_that_would_pass_the_bound_is_not_sent(memory: Resources) -> None:
    """B = 1, D = 0: 1 + 1(2 + 0) = 3 requests; the unifier's invalid reply would need a fourth to be retried."""
    model = paper_model(unify=[BAD_UNIFICATION, DEPTH0])
    nodes, final = _run(model, memory, max_breadth=1, max_depth=0)
    assert len(model.order) <= call_bound(1, 0) == 3
    assert model.order == ["parse", "decompose", "unify"] and model.scripts["unify"] == [DEPTH0]
    assert nodes == ["parse_goal", "decompose", "retrieve", "unify", "fail", "finish"] and final["answer"] == FAILURE_ANSWER
    assert [f.role for f in final["fallbacks"]] == ["goalmem_unify"]
    assert final["fallbacks"][0].reason == "invalid model output; no retry left in the call budget"
    assert final["llm_requests"] == 3


def test_the_count_is_exposed_on_the_result(memory: Resources) -> None:
    model = paper_model(unify=[DEPTH0, DEPTH1, DEPTH2])
    result = answer(
        QUESTION, NAMESPACE, resources=_with_model(memory, model.model), policy="llm", max_breadth=1, max_depth=3
    )
    assert result.answer == "An iced matcha latte, at the Blue Finch" and result.details["solved_depth"] == 2
    assert result.cost.llm_calls == 8 and result.details["call_bound"] == call_bound(1, 3) == 9
    assert result.details["llm_requests"] == 8


def test_the_call_budget_never_stops_the_no_llm_policy(memory: Resources) -> None:
    result = answer(QUESTION, NAMESPACE, resources=memory, policy="heuristic", max_breadth=1, max_depth=1)
    assert result.details["llm_requests"] == 0 and result.cost.llm_calls == 0 and not result.fallbacks
    assert not str(result.details["stop_reason"] or "").startswith("call budget")
