"""NL-Logic: parsing and rendering the (x:type) text form, substitutions, unification checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logicmap.memory.records.nl_logic import (
    Atom,
    BindingConflict,
    Goal,
    NLLogicSyntaxError,
    Substitution,
    Term,
    TypeMismatch,
    UnificationError,
    binding_problem,
    parse_atom,
    parse_goal,
    parse_rule,
    parse_substitution,
    parse_term,
    same_value,
    types_compatible,
    unify_atoms,
)

CANONICAL = [
    "Maya had (x:drink) at (y:cafe)",
    'Maya visited ("Blue Finch":cafe) last week',
    '("Leo")\'s time was (t:duration) \\(a personal best\\)',
    'a \\& b =\\> c ("say \\"hi\\"":phrase)',
]


@pytest.mark.parametrize("text", CANONICAL)
def test_canonical_atoms_round_trip(text: str) -> None:
    atom = parse_atom(text)
    assert atom.render() == text
    assert parse_atom(atom.render()) == atom


def test_atom_structure_variables_and_plain_text() -> None:
    atom = parse_atom("Maya had (x:drink) at (y:cafe)")
    assert atom.segments == ["Maya had ", " at ", ""]
    assert [v.name for v in atom.variables()] == ["x", "y"]
    assert atom.args[0] == Term.var("x", "drink")
    assert atom.relation == "Maya had _ at _"
    assert atom.text() == "Maya had drink at cafe"
    assert not atom.is_ground()


def test_goal_and_rule_round_trip() -> None:
    goal_text = "find x: Maya had (x:drink) at (y:cafe) & Maya visited (y:cafe) last week"
    goal = parse_goal(goal_text)
    assert goal.answer == ["x"] and len(goal.atoms) == 2
    assert goal.render() == goal_text
    assert parse_goal("check: Maya moved to Lisbon").answer == []
    rule_text = "Maya visited (y:cafe) last week & Maya had (x:drink) at (y:cafe) => Maya had (x:drink) at the cafe"
    rule = parse_rule(rule_text)
    assert rule.render() == rule_text and len(rule.body) == 2 and len(rule.head) == 1
    assert parse_rule(rule.render()) == rule


def test_substitution_round_trip_and_application() -> None:
    subst = Substitution().bind(Term.var("y", "cafe"), Term.const("Blue Finch"))
    subst = subst.bind(Term.var("x", "drink"), Term.const('iced "matcha" latte', "drink"))
    assert parse_substitution(subst.render()) == subst
    assert subst.value("y") == "Blue Finch" and subst.bindings["y"].type == "cafe"
    goal = parse_goal("find x: Maya had (x:drink) at (y:cafe)")
    grounded = goal.apply(subst)
    assert grounded.answer == [] and grounded.atoms[0].is_ground()
    assert grounded.render() == 'check: Maya had ("iced \\"matcha\\" latte":drink) at ("Blue Finch":cafe)'
    assert parse_goal(grounded.render()) == grounded


def test_lenient_forms() -> None:
    atom = parse_atom("Maya had (x:drink) at (Blue Finch:cafe) (with oat milk)")
    assert atom.args[1] == Term.const("Blue Finch", "cafe")
    assert len(atom.args) == 2 and "(with oat milk)" in atom.text()
    assert parse_term("(x:drink)").variable and not parse_term('("Ana":person)').variable


@pytest.mark.parametrize(
    "text, message",
    [
        ("Maya had (x:drink", "unclosed"),
        ("Maya had x:drink)", "unmatched"),
        ("Maya had (x:drink) & (x:cafe) is nice", "two types"),
        ("", "empty"),
    ],
)
def test_syntax_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(NLLogicSyntaxError, match=message):
        parse_atom(text)


def test_goal_and_rule_errors() -> None:
    with pytest.raises(NLLogicSyntaxError, match="answer variables"):
        parse_goal("find z: Maya had (x:drink)")
    with pytest.raises(NLLogicSyntaxError, match="exactly one '=>'"):
        parse_rule("Maya had (x:drink)")
    with pytest.raises(NLLogicSyntaxError, match="one atomic formula"):
        parse_atom("a (x:t) & b (x:t)")


def test_conflicting_binding_rejected() -> None:
    subst = Substitution().bind(Term.var("y", "cafe"), Term.const("Blue Finch", "cafe"))
    with pytest.raises(BindingConflict, match="already 'Blue Finch'"):
        subst.bind(Term.var("y", "cafe"), Term.const("Rua das Flores", "cafe"))
    # The same thing in other words is agreement, not a conflict.
    assert subst.bind(Term.var("y", "cafe"), Term.const("the Blue Finch")) == subst


def test_type_mismatch_rejected() -> None:
    with pytest.raises(TypeMismatch, match="type mismatch"):
        Substitution().bind(Term.var("x", "drink"), Term.const("Blue Finch", "cafe"))
    assert types_compatible("drink", "iced drink") and types_compatible("drink", "Drinks")
    assert types_compatible("thing", "cafe") and not types_compatible("cafe", "drink")
    with pytest.raises(UnificationError):
        Substitution().bind(Term.var("x", "drink"), Term.var("z", "drink"))


def test_without_lexical_checks_only_mechanical_problems_remain() -> None:
    """Another judge of type and equality (the LLM unifier): its bindings keep only the mechanical checks."""
    flavor = Term.var("f", "flavor")
    assert binding_problem(flavor, Term.const("matcha", "ingredient")).startswith("type mismatch")
    assert binding_problem(flavor, Term.const("matcha", "ingredient"), lexical=False) is None
    subst = Substitution().bind(flavor, Term.const("matcha", "ingredient"), lexical=False)
    assert subst.as_dict() == {"f": "matcha"} and subst.bind(flavor, Term.const("green tea"), lexical=False) == subst
    assert "bind it to a constant" in binding_problem(flavor, Term.var("g", "flavor"), lexical=False)
    assert "empty value" in binding_problem(flavor, Term.const("the"), lexical=False)


def test_unify_atoms() -> None:
    pattern = parse_atom("Maya had (x:drink) at (y:cafe)")
    fact = parse_atom('Maya had ("iced matcha latte":drink) at ("Blue Finch":cafe)')
    assert unify_atoms(pattern, fact).as_dict() == {"x": "iced matcha latte", "y": "Blue Finch"}
    earlier = Substitution().bind(Term.var("y", "cafe"), Term.const("Pasteis de Belem"))
    with pytest.raises(BindingConflict):
        unify_atoms(pattern, fact, earlier)
    with pytest.raises(TypeMismatch):
        unify_atoms(pattern, parse_atom('Maya had ("Lisbon":city) at ("Blue Finch":cafe)'))
    with pytest.raises(UnificationError, match="different relations"):
        unify_atoms(pattern, parse_atom('Leo had ("coffee":drink) at ("home":place)'))


def test_same_value() -> None:
    assert same_value("an iced matcha latte with oat milk", "iced matcha latte")
    assert not same_value("Blue Finch", "Rua das Flores")


def test_goal_validation() -> None:
    with pytest.raises(ValueError):
        Goal(atoms=[parse_atom("Maya had (x:drink)")], answer=["y"])
    with pytest.raises(ValueError):
        Term(name="X", type="drink", variable=True)
    with pytest.raises(ValueError):
        Term(name="x", type=None, variable=True)


_TEXT = st.text(alphabet='ab ()&\\=>":', max_size=8)
_NAMES = st.sampled_from(["x", "y", "cafe_1"])
_TYPES = st.sampled_from(["drink", "cafe", "iced drink", "person"])
_CONSTS = st.text(alphabet='Ab ()"\\:&', min_size=1, max_size=8).filter(lambda s: s.strip())


@st.composite
def atoms(draw: st.DrawFn) -> Atom:
    n = draw(st.integers(min_value=0, max_value=3))
    terms = []
    types: dict[str, str] = {}
    for _ in range(n):
        if draw(st.booleans()):
            name = draw(_NAMES)
            types.setdefault(name, draw(_TYPES))
            terms.append(Term.var(name, types[name]))
        else:
            terms.append(Term.const(draw(_CONSTS), draw(st.one_of(st.none(), _TYPES))))
    segments = [draw(_TEXT) for _ in range(n + 1)]
    segments[0] = segments[0].lstrip()
    segments[-1] = segments[-1].rstrip()
    if n == 0 and not segments[0].strip():
        segments[0] = "something happened"
    return Atom(segments=segments, args=terms)


@settings(max_examples=200, deadline=None)
@given(atoms())
def test_any_atom_round_trips(atom: Atom) -> None:
    rendered = atom.render()
    assert parse_atom(rendered) == atom
    assert parse_atom(rendered).render() == rendered
