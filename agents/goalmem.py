"""Goal-Mem roles: parse the goal, decompose it, unify subgoals with memories, refine, generate.

Each runs through ``run_role`` (typed output, validation, one retry, deterministic fallback). The LLM
unifier's type and equality judgments stand; ``apply_unification`` checks only what is mechanical (cited ids
exist, variables bound to constants) and applies the lexical checks to the lexical fallback's output only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.agents.goalmem_heuristics import (
    MemoryLine,
    heuristic_answer,
    heuristic_decompositions,
    heuristic_goal,
    lexical_unification,
)
from logicmap.memory.records.nl_logic import (
    Atom,
    Goal,
    NLLogicSyntaxError,
    Rule,
    Substitution,
    Term,
    binding_problem,
    normalize_type,
    normalize_value,
    parse_atom,
    parse_goal,
)
from logicmap.prompts import (
    goalmem_decompose,
    goalmem_generate,
    goalmem_paper,
    goalmem_parse,
    goalmem_refine,
    goalmem_unify,
)
from logicmap.prompts.goalmem_decompose import Decomposition
from logicmap.prompts.goalmem_generate import GoalAnswer
from logicmap.prompts.goalmem_parse import ParsedGoal
from logicmap.prompts.goalmem_refine import Refinement
from logicmap.prompts.goalmem_unify import SubgoalResult, Unification

__all__ = [
    "MAX_SUBGOALS",
    "UnifyStep",
    "apply_unification",
    "checked_unification",
    "decompose_goal",
    "generate_answer",
    "goal_of",
    "next_decomposition",
    "parse_utterance",
    "picked_antecedents",
    "refine_subgoals",
    "rule_of",
    "unify_subgoals",
    "validate_decomposition",
    "validate_refinement",
    "validate_unification",
    "wh_goal",
]

MAX_SUBGOALS = 5
# Goal-Mem's refinement operator yields one requisite antecedent per frontier subgoal (Eq. 6, Algorithm 1 line 22).
MAX_ANTECEDENTS_PER_SUBGOAL = 1
_WH = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")

T = TypeVar("T", bound=BaseModel)


def _run(
    llm: BaseChatModel | None,
    *,
    role: str,
    messages: Callable[[], list[Any]],
    schema: type[T],
    fallback: Callable[[], T],
    validate: Callable[[T], list[str]],
    method: str,
    version: str,
    max_attempts: int = 2,
) -> RoleOutcome[T]:
    """``run_role`` with Goal-Mem's tags; ``max_attempts`` < 2 drops the retry (the caller's call budget). The no-LLM
    policy does not come here: ``agents.goalmem_policy.RuleGoalMemPolicy`` uses the fallbacks without a request."""
    return run_role(
        llm,
        role=role,
        messages=messages(),
        schema=schema,
        validate=validate,
        fallback=fallback,
        method=method,
        tags=["strategy:goalmem"],
        metadata={"prompt_version": version},
        max_attempts=max_attempts,
    )


def _types_of(atoms: Sequence[Atom]) -> dict[str, Term]:
    found: dict[str, Term] = {}
    for atom in atoms:
        for v in atom.variables():
            found.setdefault(v.name, v)
    return found


def _type_problems(atom: Atom, known: dict[str, Term], label: str) -> list[str]:
    problems = []
    for v in atom.variables():
        if v.name in known and normalize_type(known[v.name].type) != normalize_type(v.type):
            problems.append(
                f"{label}: variable {v.name} is typed {v.type!r} but the goal types it {known[v.name].type!r}"
            )
    return problems


# ------------------------------------------------------------------------------------------ parse_goal


def _validate_parsed(output: ParsedGoal, utterance: str) -> list[str]:
    try:
        goal = parse_goal(output.goal)
    except NLLogicSyntaxError as exc:
        return [f"goal is not NL-Logic: {exc}"]
    first = utterance.strip().split()[0].lower() if utterance.strip() else ""
    if first in _WH and not goal.answer:
        return ["the question asks for something: name it as an answer variable, 'find x: ... (x:type) ...'"]
    return []


def wh_goal(utterance: str) -> ParsedGoal:
    """The parser's fallback and no-LLM rule: the wh-word reading of the utterance (``heuristic_goal``)."""
    return ParsedGoal(goal=heuristic_goal(utterance).render())


def goal_of(outcome: RoleOutcome[ParsedGoal]) -> RoleOutcome[Goal]:
    """The parser's reply as an NL-Logic goal, with the outcome's cost, fallback and attempts."""
    return RoleOutcome(
        output=parse_goal(outcome.output.goal), cost=outcome.cost, fallback=outcome.fallback, attempts=outcome.attempts
    )


def parse_utterance(
    llm: BaseChatModel | None,
    utterance: str,
    *,
    method: str = "function_calling",
    max_attempts: int = 2,
) -> RoleOutcome[Goal]:
    """The utterance as an NL-Logic goal; fallback: the wh-word heuristic (``wh_goal``)."""
    outcome = _run(
        llm,
        role="goalmem_parse",
        messages=lambda: goalmem_parse.build_messages(utterance),
        schema=ParsedGoal,
        fallback=lambda: wh_goal(utterance),
        validate=lambda o: _validate_parsed(o, utterance),
        method=method,
        max_attempts=max_attempts,
        version=goalmem_parse.VERSION,
    )
    return goal_of(outcome)


# ------------------------------------------------------------------------------------------ decompose


def validate_decomposition(output: Decomposition, goal: Goal, failed: Sequence[Rule]) -> list[str]:
    """Subgoals parse as single atoms, keep the goal's variable types, mention every answer variable and
    differ from every earlier failed decomposition."""
    problems: list[str] = []
    if not 1 <= len(output.subgoals) <= MAX_SUBGOALS:
        problems.append(f"give between 1 and {MAX_SUBGOALS} subgoals, not {len(output.subgoals)}")
    known = _types_of(goal.atoms)
    atoms: list[Atom] = []
    for i, text in enumerate(output.subgoals):
        try:
            atom = parse_atom(text)
        except NLLogicSyntaxError as exc:
            problems.append(f"subgoal {i + 1} is not one atomic formula: {exc}")
            continue
        problems.extend(_type_problems(atom, known, f"subgoal {i + 1}"))
        for v in atom.variables():
            known.setdefault(v.name, v)
        atoms.append(atom)
    if problems:
        return problems
    present = {v.name for a in atoms for v in a.variables()}
    missing = [a for a in goal.answer if a not in present]
    if missing:
        problems.append(f"answer variables {missing} appear in no subgoal")
    key = frozenset(a.key() for a in atoms)
    for rule in failed:
        if rule.body_key() == key:
            problems.append(f"this decomposition already failed ({rule.render()}); give a different one")
    return problems


def next_decomposition(goal: Goal, failed: Sequence[tuple[Rule, str]] = ()) -> Decomposition:
    """The decomposer's fallback and no-LLM rule: the next heuristic decomposition not yet tried (the goal itself
    first); when none is left, the goal itself."""
    failed_keys = {rule.body_key() for rule, _ in failed}
    for candidate in heuristic_decompositions(goal):
        if frozenset(a.key() for a in candidate) not in failed_keys:
            return Decomposition(subgoals=[a.render() for a in candidate], rationale="heuristic")
    return Decomposition(subgoals=[a.render() for a in goal.atoms], rationale="no untried decomposition left")


def rule_of(goal: Goal, outcome: RoleOutcome[Decomposition]) -> RoleOutcome[Rule]:
    """The decomposition as a rule ``subgoals => goal`` (the goal itself when a subgoal does not parse)."""
    try:
        body = [parse_atom(text) for text in outcome.output.subgoals]
        rule = Rule(body=body, head=list(goal.atoms))
    except (NLLogicSyntaxError, ValueError):
        rule = Rule(body=list(goal.atoms), head=list(goal.atoms))
    return RoleOutcome(output=rule, cost=outcome.cost, fallback=outcome.fallback, attempts=outcome.attempts)


def decompose_goal(
    llm: BaseChatModel | None,
    utterance: str,
    goal: Goal,
    failed: Sequence[tuple[Rule, str]] = (),
    *,
    method: str = "function_calling",
    max_attempts: int = 2,
    paper: bool = False,
) -> RoleOutcome[Rule]:
    """A rule ``subgoals => goal`` that differs from the failed ones. Fallback: ``next_decomposition``. ``paper``:
    the paper's prompt (Appendix I.1, ``faithful``)."""
    failed_rules = [rule for rule, _ in failed]
    outcome = _run(
        llm,
        role="goalmem_decompose",
        messages=lambda: goalmem_decompose.build_messages(
            utterance, goal.render(), [(rule.render(), why) for rule, why in failed], paper=paper
        ),
        schema=Decomposition,
        fallback=lambda: next_decomposition(goal, failed),
        validate=lambda o: validate_decomposition(o, goal, failed_rules),
        method=method,
        max_attempts=max_attempts,
        version=goalmem_paper.VERSION if paper else goalmem_decompose.VERSION,
    )
    return rule_of(goal, outcome)


# ------------------------------------------------------------------------------------------ unify


def validate_unification(
    output: Unification, subgoals: dict[str, Atom], memory_ids: set[str], substitution: Substitution | None = None
) -> list[str]:
    """Structural problems a retry can fix: unknown subgoal or memory ids, repeated subgoals, bindings of
    variables the subgoal does not have, resolved subgoals without support or with unbound variables.
    (Type and agreement checks are ``apply_unification``'s: they reject, they do not retry.)"""
    problems: list[str] = []
    seen: set[str] = set()
    for result in output.results:
        sid = result.subgoal.strip()
        if sid not in subgoals:
            problems.append(f"unknown subgoal id {result.subgoal!r}; the ids are {sorted(subgoals)}")
            continue
        if sid in seen:
            problems.append(f"subgoal {sid} appears twice; give one result per subgoal")
        seen.add(sid)
        names = {v.name for v in subgoals[sid].variables()}
        for b in result.bindings:
            if b.variable not in names:
                problems.append(
                    f"{sid}: {b.variable!r} is not a variable of this subgoal (its variables: {sorted(names)})"
                )
            elif not normalize_value(b.value):
                problems.append(f"{sid}: empty value for {b.variable}")
        unknown = [f for f in result.facts if f not in memory_ids]
        if unknown:
            problems.append(f"{sid}: unknown memory ids {unknown}; cite ids from the Memories list")
        if result.resolved:
            if not result.facts:
                problems.append(f"{sid}: a resolved subgoal cites the memories that state it")
            unbound = names - {b.variable for b in result.bindings} - set((substitution or Substitution()).bindings)
            if unbound:
                problems.append(f"{sid}: resolved but {sorted(unbound)} have no value; bind them or mark it unresolved")
    return problems


class UnifyStep(BaseModel):
    """What one unification step established after deterministic checking."""

    substitution: Substitution
    resolved: dict[str, list[str]] = Field(default_factory=dict, description="subgoal id -> supporting memory ids")
    unresolved: dict[str, str] = Field(default_factory=dict, description="subgoal id -> what is missing")
    rejected: list[str] = Field(default_factory=list, description="bindings refused, with the reason")
    judged: list[str] = Field(
        default_factory=list,
        description="bindings kept on the unifier's judgment that the lexical check would have refused",
    )


def _result_problem(
    sid: str,
    atom: Atom,
    result: SubgoalResult,
    substitution: Substitution,
    memory_ids: set[str] | None,
    trust_judgments: bool,
) -> tuple[Substitution, str | None, list[str]]:
    """``(substitution with the result's bindings, problem or None, lexical objections overruled)``."""
    unknown = [f for f in result.facts if memory_ids is not None and f not in memory_ids]
    if unknown:
        return substitution, f"cites memory ids that were not retrieved: {unknown}", []
    trial, overruled = substitution, []
    variables = {v.name: v for v in atom.variables()}
    for b in result.bindings:
        var = variables.get(b.variable)
        if var is None:
            return substitution, f"{b.variable} is not a variable of {sid}", []
        try:
            value = Term.const(b.value.strip(), b.type.strip() if b.type and b.type.strip() else None)
        except ValueError:
            return substitution, f"{b.variable}: {b.value!r} (type {b.type!r}) is not a constant", []
        problem = binding_problem(var, value, trial, lexical=not trust_judgments)
        if problem:
            return substitution, problem, []
        objection = binding_problem(var, value, trial) if trust_judgments else None
        if objection:
            overruled.append(f"{sid} {var.name}/{value.name!r}: {objection}")
        trial = trial.bind(var, value, lexical=not trust_judgments)
    unbound = [name for name in variables if name not in trial]
    if unbound:
        return substitution, f"variables {unbound} left unbound", []
    if not result.facts:
        return substitution, "no supporting memory cited", []
    return trial, None, overruled


def apply_unification(
    output: Unification,
    subgoals: dict[str, Atom],
    substitution: Substitution,
    *,
    memory_ids: set[str] | None = None,
    trust_judgments: bool = False,
) -> UnifyStep:
    """Merge the unifier's results into the substitution, one subgoal at a time.

    Mechanical checks always refuse a resolved subgoal: a binding of something that is not its variable or to
    no constant, a variable left unbound, no cited memory, a cited id not in ``memory_ids``. Type fit and
    equality are judgments: with ``trust_judgments`` (the LLM unifier's own reply) they stand, so a value for
    a variable already bound is the same thing by the unifier's word (the first value is kept) and what the
    lexical check would have refused is listed in ``judged``; without it (the lexical fallback) a type mismatch
    or a value conflicting with the substitution (or an earlier result) refuses the subgoal.
    ``subgoals`` are the atoms before the substitution is applied, so a restated binding is checked."""
    current = substitution
    step = UnifyStep(substitution=substitution)
    by_id: dict[str, SubgoalResult] = {}
    for given in output.results:
        by_id.setdefault(given.subgoal.strip(), given)
    for sid, atom in subgoals.items():
        result = by_id.get(sid)
        if result is None or not result.resolved:
            step.unresolved[sid] = (result.reason if result else "") or "not proved by the retrieved memories"
            continue
        trial, problem, overruled = _result_problem(sid, atom, result, current, memory_ids, trust_judgments)
        if problem:
            step.rejected.append(f"{sid} {atom.render()}: {problem}")
            step.unresolved[sid] = problem
            continue
        current = trial
        step.resolved[sid] = list(dict.fromkeys(result.facts))
        step.judged.extend(overruled)
    step.substitution = current
    return step


def checked_unification(
    outcome: RoleOutcome[Unification],
    subgoals: dict[str, Atom],
    memories: Sequence[MemoryLine],
    substitution: Substitution,
    *,
    judged_by_model: bool,
) -> tuple[UnifyStep, RoleOutcome[Unification]]:
    """A unifier's reply applied (``apply_unification``): the model's own reply keeps its judgments
    (``judged_by_model``); the lexical rule's output gets the lexical checks too."""
    step = apply_unification(
        outcome.output,
        subgoals,
        substitution,
        memory_ids={mid for mid, _, _ in memories},
        trust_judgments=judged_by_model,
    )
    return step, outcome


def unify_subgoals(
    llm: BaseChatModel | None,
    utterance: str,
    subgoals: dict[str, Atom],
    memories: Sequence[MemoryLine],
    substitution: Substitution,
    *,
    method: str = "function_calling",
    max_attempts: int = 2,
    paper: bool = False,
) -> tuple[UnifyStep, RoleOutcome[Unification]]:
    """ONE call for all active subgoals and all retrieved memories, then deterministic checking: the model's
    type and equality judgments stand, only mechanical checks apply (``apply_unification``).
    Fallback: lexical entailment (``lexical_unification``), whose output also gets the lexical checks."""
    memory_ids = {mid for mid, _, _ in memories}
    grounded = {sid: atom.apply(substitution) for sid, atom in subgoals.items()}
    outcome = _run(
        llm,
        role="goalmem_unify",
        messages=lambda: goalmem_unify.build_messages(
            utterance,
            substitution.render(),
            [(sid, atom.render()) for sid, atom in grounded.items()],
            [(mid, f"({when or 'undated'}) {text}") for mid, text, when in memories],
            paper=paper,
        ),
        schema=Unification,
        fallback=lambda: lexical_unification(list(grounded.items()), memories, substitution),
        validate=lambda o: validate_unification(o, subgoals, memory_ids, substitution),
        method=method,
        max_attempts=max_attempts,
        version=goalmem_paper.VERSION if paper else goalmem_unify.VERSION,
    )
    return checked_unification(outcome, subgoals, memories, substitution, judged_by_model=outcome.fallback is None)


# ------------------------------------------------------------------------------------------ refine


def validate_refinement(
    output: Refinement, unresolved: dict[str, Atom], known_types: dict[str, Term], existing: set[str]
) -> list[str]:
    """Antecedents parse, refer to an unresolved subgoal (one antecedent each), share a term with it, keep
    variable types and are not already subgoals."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(output.antecedents):
        sid = item.subgoal.strip()
        if sid not in unresolved:
            problems.append(f"antecedent {i + 1}: {item.subgoal!r} is not an unresolved subgoal ({sorted(unresolved)})")
            continue
        if sid in seen:
            problems.append(f"antecedent {i + 1}: {sid} already has an antecedent; give exactly one per subgoal")
            continue
        seen.add(sid)
        try:
            atom = parse_atom(item.antecedent)
        except NLLogicSyntaxError as exc:
            problems.append(f"antecedent {i + 1} is not one atomic formula: {exc}")
            continue
        problems.extend(_type_problems(atom, known_types, f"antecedent {i + 1}"))
        target = unresolved[sid]
        shared_vars = {v.name for v in atom.variables()} & {v.name for v in target.variables()}
        shared_consts = {normalize_value(t.name) for t in atom.args if not t.variable} & {
            normalize_value(t.name) for t in target.args if not t.variable
        }
        words = set(normalize_value(" ".join(atom.segments)).split()) & set(normalize_value(target.text()).split())
        if not (shared_vars or shared_consts or words):
            problems.append(f"antecedent {i + 1} shares no variable, constant or word with {sid}")
        if atom.key() in existing:
            problems.append(f"antecedent {i + 1} is already a subgoal; ask for something new")
    return problems


def refine_subgoals(
    llm: BaseChatModel | None,
    utterance: str,
    goal: Goal,
    substitution: Substitution,
    unresolved: dict[str, tuple[Atom, str]],
    memories: Sequence[MemoryLine],
    known_types: dict[str, Term],
    existing: set[str],
    *,
    method: str = "function_calling",
    max_attempts: int = 2,
    paper: bool = False,
) -> tuple[list[tuple[str, Atom]], RoleOutcome[Refinement]]:
    """For each unresolved frontier subgoal, the one antecedent whose grounding it needs (new ones only).
    Fallback: no refinement, which ends the depth loop."""
    grounded = {sid: atom.apply(substitution) for sid, (atom, _) in unresolved.items()}
    outcome = _run(
        llm,
        role="goalmem_refine",
        messages=lambda: goalmem_refine.build_messages(
            utterance,
            goal.apply(substitution).render(),
            substitution.render(),
            [(sid, grounded[sid].render(), why) for sid, (_, why) in unresolved.items()],
            [(mid, f"({when or 'undated'}) {text}") for mid, text, when in memories],
            paper=paper,
        ),
        schema=Refinement,
        fallback=lambda: Refinement(antecedents=[]),
        validate=lambda o: validate_refinement(o, grounded, known_types, existing),
        method=method,
        max_attempts=max_attempts,
        version=goalmem_paper.VERSION if paper else goalmem_refine.VERSION,
    )
    return picked_antecedents(outcome.output, grounded, known_types, existing), outcome


def picked_antecedents(
    refinement: Refinement, grounded: dict[str, Atom], known_types: dict[str, Term], existing: set[str]
) -> list[tuple[str, Atom]]:
    """The refinement's antecedents that parse, refine a frontier subgoal (one each), are new and keep the
    variable types, as ``(subgoal id, antecedent)``."""
    picked: list[tuple[str, Atom]] = []
    per_subgoal: dict[str, int] = {}
    keys = set(existing)
    for item in refinement.antecedents:
        sid = item.subgoal.strip()
        try:
            atom = parse_atom(item.antecedent)
        except NLLogicSyntaxError:
            continue
        if sid not in grounded or atom.key() in keys or per_subgoal.get(sid, 0) >= MAX_ANTECEDENTS_PER_SUBGOAL:
            continue
        if _type_problems(atom, known_types, sid):
            continue
        keys.add(atom.key())
        per_subgoal[sid] = per_subgoal.get(sid, 0) + 1
        picked.append((sid, atom))
    return picked


# ------------------------------------------------------------------------------------------ generate


def generate_answer(
    llm: BaseChatModel | None,
    utterance: str,
    goal: Goal,
    substitution: Substitution,
    supporting: Sequence[MemoryLine],
    *,
    method: str = "function_calling",
    max_attempts: int = 2,
    paper: bool = False,
) -> RoleOutcome[GoalAnswer]:
    """The answer from the utterance, the grounded goal and only the supporting memories.
    Fallback: the answer variables' values."""
    return _run(
        llm,
        role="goalmem_generate",
        messages=lambda: goalmem_generate.build_messages(
            utterance,
            goal.apply(substitution).render(),
            substitution.render(),
            [(mid, f"({when or 'undated'}) {text}") for mid, text, when in supporting],
            paper=paper,
        ),
        schema=GoalAnswer,
        fallback=lambda: GoalAnswer(answer=heuristic_answer(goal, substitution)),
        validate=lambda o: [] if o.answer.strip() else ["the answer is empty"],
        method=method,
        max_attempts=max_attempts,
        version=goalmem_paper.VERSION if paper else goalmem_generate.VERSION,
    )
