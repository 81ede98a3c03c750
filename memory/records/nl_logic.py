"""NL-Logic: typed terms, atomic formulas with natural-language relations, goals, rules, substitutions.

Owns the ``(x:type)`` text form (parse and render, round-trip stable) and the unification checks.

Text form::

    term      (x:drink)            a variable: a lowercase identifier and a type
              ("Blue Finch":cafe)  a typed constant (quotes inside escaped as \\")
              ("Maya")             an untyped constant
    atom      Maya had (x:drink) at (y:cafe)        relation words around the terms
    goal      find x: Maya had (x:drink) at (y:cafe)       answer variables after ``find``
              check: Maya visited ("Blue Finch":cafe)      a yes/no goal
    rule      Maya visited (y:cafe) last week & Maya had (x:drink) at (y:cafe) => Maya had (x:drink) at the cafe
    subst     {x/("iced matcha latte":drink), y/("Blue Finch":cafe)}

In relation words, ``\\``, ``(``, ``)``, ``&`` and the ``>`` of ``=>`` are escaped with a backslash when rendered. When
parsing leniently, ``(name:type)`` whose name is not a lowercase identifier (``(Blue Finch:cafe)``) is a
constant, and parentheses without a colon are plain words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

R = TypeVar("R")

__all__ = [
    "Atom",
    "BindingConflict",
    "Goal",
    "NLLogicSyntaxError",
    "Rule",
    "Substitution",
    "Term",
    "TypeMismatch",
    "UnificationError",
    "binding_problem",
    "normalize_type",
    "normalize_value",
    "parse_atom",
    "parse_atoms",
    "parse_goal",
    "parse_rule",
    "parse_substitution",
    "parse_term",
    "same_value",
    "types_compatible",
    "unify_atoms",
]

VARIABLE_NAME = re.compile(r"[a-z_][a-z0-9_]*")  # used with fullmatch: "x\n" is no variable
# Word lists here: generic type names and articles (closed class).
_GENERIC_TYPES = frozenset({"thing", "entity", "object", "any", "something", "value"})
_ARTICLES = frozenset({"a", "an", "the"})
_ESCAPED = "\\()&"


class NLLogicSyntaxError(ValueError):
    """Text that is not NL-Logic; the message says where and why (a model can read it and retry)."""


class UnificationError(ValueError):
    """A binding that cannot be added to a substitution."""


class BindingConflict(UnificationError):
    """The variable is already bound to a different value."""


class TypeMismatch(UnificationError):
    """The value's type does not fit the variable's type."""


def normalize_type(type_name: str | None) -> str | None:
    """Lowercase words, the last one singular: ``Drinks`` -> ``drink``, ``hobbies`` -> ``hobby``."""
    if type_name is None:
        return None
    words = re.findall(r"[a-z0-9]+", type_name.lower())
    if not words:
        return None
    last = words[-1]
    if len(last) > 3 and last.endswith("ies"):
        last = last[:-3] + "y"
    elif len(last) > 3 and last.endswith("s") and not last.endswith("ss"):
        last = last[:-1]
    return " ".join([*words[:-1], last])


def types_compatible(variable_type: str | None, value_type: str | None) -> bool:
    """A value fits a variable when either type is unknown or generic, the types are equal, or the
    value's type is a more specific phrase with the same head noun (``hot drink`` fits ``drink``)."""
    expected, given = normalize_type(variable_type), normalize_type(value_type)
    if expected is None or given is None or expected in _GENERIC_TYPES:
        return True
    if expected == given:
        return True
    return given.endswith(" " + expected)


def normalize_value(value: str) -> str:
    """Lowercase words without articles and punctuation: ``the Blue Finch.`` -> ``blue finch``."""
    words = [w for w in re.findall(r"[a-z0-9]+", value.lower()) if w not in _ARTICLES]
    return " ".join(words)


def same_value(a: str, b: str) -> bool:
    """Two values name the same thing when their words are equal or one's words contain the other's
    (``iced matcha latte`` and ``an iced matcha latte with oat milk``)."""
    na, nb = normalize_value(a), normalize_value(b)
    if na == nb:
        return True
    wa, wb = set(na.split()), set(nb.split())
    return bool(wa and wb) and (wa <= wb or wb <= wa)


class Term(BaseModel):
    """A variable ``(x:drink)`` or a constant ``("Blue Finch":cafe)``; variables always have a type."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str | None = None
    variable: bool = False

    @model_validator(mode="after")
    def _check(self) -> Term:
        if not self.name.strip():
            raise ValueError("a term needs a name")
        if self.variable:
            if not VARIABLE_NAME.fullmatch(self.name):
                raise ValueError(f"variable name {self.name!r} must be a lowercase identifier like x or cafe_1")
            if not (self.type and self.type.strip()):
                raise ValueError(f"variable {self.name!r} needs a type, as in ({self.name}:thing)")
        if self.type is not None and re.search(r'[():"\\]', self.type):
            raise ValueError(f'type {self.type!r} may not contain ( ) : " or backslash')
        return self

    @classmethod
    def var(cls, name: str, type_name: str) -> Term:
        return cls(name=name, type=type_name, variable=True)

    @classmethod
    def const(cls, name: str, type_name: str | None = None) -> Term:
        return cls(name=name, type=type_name, variable=False)

    def render(self) -> str:
        if self.variable:
            return f"({self.name}:{self.type})"
        quoted = '"' + self.name.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return f"({quoted}:{self.type})" if self.type else f"({quoted})"

    def words(self) -> str:
        """How the term reads in plain text: a constant's name, a variable's type."""
        if self.variable:
            return self.type or self.name
        return self.name

    def __str__(self) -> str:
        return self.render()


class Atom(BaseModel):
    """An atomic formula: natural-language relation words around typed terms.

    ``segments`` are the words between the terms, so ``len(segments) == len(args) + 1``.
    """

    segments: list[str]
    args: list[Term] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> Atom:
        if len(self.segments) != len(self.args) + 1:
            raise ValueError("an atom has one more segment than terms")
        if not self.args and not "".join(self.segments).strip():
            raise ValueError("an empty atom")
        return self

    @classmethod
    def of(cls, *parts: str | Term) -> Atom:
        """Build from words and terms in reading order: ``Atom.of("Maya had ", Term.var("x", "drink"))``."""
        segments, args = [""], []
        for part in parts:
            if isinstance(part, Term):
                args.append(part)
                segments.append("")
            else:
                segments[-1] += part
        return cls(segments=segments, args=args)

    @property
    def relation(self) -> str:
        """The relation words with ``_`` where the terms go: ``Maya had _ at _``."""
        return " ".join(" _ ".join(_squash(s) for s in self.segments).split())

    def variables(self) -> list[Term]:
        seen: dict[str, Term] = {}
        for term in self.args:
            if term.variable and term.name not in seen:
                seen[term.name] = term
        return list(seen.values())

    def is_ground(self) -> bool:
        return not any(t.variable for t in self.args)

    def apply(self, substitution: Substitution) -> Atom:
        """The atom with bound variables replaced by their values (typed as the variable when untyped)."""
        return Atom(segments=list(self.segments), args=[substitution.resolve(t) for t in self.args])

    def render(self) -> str:
        out = []
        for i, segment in enumerate(self.segments):
            out.append(_escape(segment))
            if i < len(self.args):
                out.append(self.args[i].render())
        return "".join(out).strip()

    def text(self) -> str:
        """Plain words for search and reading: constants by name, unbound variables by their type."""
        out = []
        for i, segment in enumerate(self.segments):
            out.append(segment)
            if i < len(self.args):
                out.append(self.args[i].words())
        return " ".join("".join(out).split())

    def key(self) -> str:
        """Identity up to spacing, case and articles: two atoms with equal keys are the same formula."""
        return _atom_key(self)

    def __str__(self) -> str:
        return self.render()


class Goal(BaseModel):
    """A conjunction of atoms to prove and the variables whose values answer the question."""

    atoms: list[Atom] = Field(min_length=1)
    answer: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> Goal:
        known = {v.name for atom in self.atoms for v in atom.variables()}
        missing = [a for a in self.answer if a not in known]
        if missing:
            raise ValueError(f"answer variables {missing} do not occur in the goal")
        _check_consistent_types(self.atoms)
        return self

    def variables(self) -> list[Term]:
        return _variables(self.atoms)

    def answer_terms(self) -> list[Term]:
        by_name = {v.name: v for v in self.variables()}
        return [by_name[a] for a in self.answer]

    def apply(self, substitution: Substitution) -> Goal:
        """The goal with bound variables replaced; answer variables that got a value leave ``find``, so a
        fully grounded goal reads ``check: ...``."""
        return Goal(
            atoms=[a.apply(substitution) for a in self.atoms],
            answer=[a for a in self.answer if a not in substitution],
        )

    def render(self) -> str:
        head = f"find {', '.join(self.answer)}:" if self.answer else "check:"
        return f"{head} {' & '.join(a.render() for a in self.atoms)}"

    def text(self) -> str:
        return " and ".join(a.text() for a in self.atoms)

    def __str__(self) -> str:
        return self.render()


class Rule(BaseModel):
    """``body => head``: proving every body atom (the subgoals) proves the head (the goal's atoms)."""

    body: list[Atom] = Field(min_length=1)
    head: list[Atom] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Rule:
        _check_consistent_types([*self.body, *self.head])
        return self

    def render(self) -> str:
        return f"{' & '.join(a.render() for a in self.body)} => {' & '.join(a.render() for a in self.head)}"

    def body_key(self) -> frozenset[str]:
        """The subgoals as a set: two decompositions with equal keys ask for the same things."""
        return frozenset(a.key() for a in self.body)

    def __str__(self) -> str:
        return self.render()


def binding_problem(
    variable: Term, value: Term, substitution: Substitution | None = None, *, lexical: bool = True
) -> str | None:
    """Why ``value`` cannot be bound to ``variable``, or None. The mechanical checks always apply (a variable,
    a non-empty constant); ``lexical`` adds the word-level judgments (type mismatch, conflicting binding),
    which a caller that trusts another judge of type and equality (the LLM unifier) turns off."""
    if not variable.variable:
        return f"{variable.render()} is not a variable"
    if value.variable:
        return f"cannot bind {variable.name} to the variable {value.render()}; bind it to a constant"
    if not normalize_value(value.name):
        return f"empty value for {variable.name}"
    if not lexical:
        return None
    if not types_compatible(variable.type, value.type):
        return f"type mismatch: {variable.name} has type {variable.type!r} but {value.name!r} has type {value.type!r}"
    if substitution is not None:
        bound = substitution.bindings.get(variable.name)
        if bound is not None and not same_value(bound.name, value.name):
            return f"conflicting binding: {variable.name} is already {bound.name!r}, not {value.name!r}"
    return None


class Substitution(BaseModel):
    """Variable name -> constant. Immutable in use: ``bind`` returns a new substitution."""

    model_config = ConfigDict(frozen=True)

    bindings: dict[str, Term] = Field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self.bindings

    def __len__(self) -> int:
        return len(self.bindings)

    def value(self, name: str) -> str | None:
        term = self.bindings.get(name)
        return term.name if term else None

    def resolve(self, term: Term) -> Term:
        if not term.variable or term.name not in self.bindings:
            return term
        value = self.bindings[term.name]
        return value if value.type else Term.const(value.name, term.type)

    def bind(self, variable: Term, value: Term, *, lexical: bool = True) -> Substitution:
        """A new substitution with ``variable -> value``; raises ``TypeMismatch`` or ``BindingConflict``.
        With ``lexical=False`` only the mechanical checks apply and a bound variable keeps its value."""
        problem = binding_problem(variable, value, self, lexical=lexical)
        if problem is not None:
            if problem.startswith("type mismatch"):
                raise TypeMismatch(problem)
            if problem.startswith("conflicting"):
                raise BindingConflict(problem)
            raise UnificationError(problem)
        if variable.name in self.bindings:
            return self
        typed = value if value.type else Term.const(value.name, variable.type)
        return Substitution(bindings={**self.bindings, variable.name: typed})

    def merge(self, other: Substitution, types: dict[str, Term] | None = None) -> Substitution:
        """Both substitutions together; raises on a conflict. ``types`` gives the variables' types."""
        merged = self
        for name, value in other.bindings.items():
            variable = (types or {}).get(name) or Term.var(name, value.type or "thing")
            merged = merged.bind(variable, value)
        return merged

    def render(self) -> str:
        inner = ", ".join(f"{name}/{value.render()}" for name, value in self.bindings.items())
        return "{" + inner + "}"

    def as_dict(self) -> dict[str, str]:
        return {name: value.name for name, value in self.bindings.items()}

    def __str__(self) -> str:
        return self.render()


def unify_atoms(pattern: Atom, fact: Atom, substitution: Substitution | None = None) -> Substitution:
    """Syntactic unification of two atoms with the same relation words; raises ``UnificationError``.

    Used when memories are themselves NL-Logic atoms; retrieved text is unified by the LLM role.
    """
    subst = substitution or Substitution()
    if _words_key(pattern.relation) != _words_key(fact.relation) or len(pattern.args) != len(fact.args):
        raise UnificationError(f"different relations: {pattern.relation!r} vs {fact.relation!r}")
    for original_left, original_right in zip(pattern.args, fact.args, strict=True):
        left, right = subst.resolve(original_left), subst.resolve(original_right)
        if left.variable and right.variable:
            if left.name != right.name:
                raise UnificationError(f"cannot unify two unbound variables {left.name} and {right.name}")
            continue
        if left.variable:
            subst = subst.bind(left, right)
        elif right.variable:
            subst = subst.bind(right, left)
        else:
            if not same_value(left.name, right.name):
                bound = next((t for t in (original_left, original_right) if t.variable), None)
                if bound is not None:
                    raise BindingConflict(
                        f"conflicting binding: {bound.name} is already {subst.value(bound.name)!r}, "
                        f"not {(right if bound is original_left else left).name!r}"
                    )
                raise UnificationError(f"{left.name!r} is not {right.name!r}")
            if not (types_compatible(left.type, right.type) or types_compatible(right.type, left.type)):
                raise TypeMismatch(f"{left.render()} and {right.render()} have different types")
    return subst


# ---------------------------------------------------------------------------------------------- parsing

_QUOTED_TERM = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*(?::\s*([^():"\\]*?)\s*)?$', re.DOTALL)
# Neither side holds a colon, so the split is at the one colon; the sides are stripped after the match
# (spaces matched inside the regex made a run of spaces quadratic).
_NAME_TYPE = re.compile(r"^([^():\"\\]+):([^():\"\\]+)$")


def _escape(text: str) -> str:
    out = []
    for i, c in enumerate(text):
        # ``=>`` in relation words would read as a rule arrow: its ``>`` is escaped.
        if c in _ESCAPED or (c == ">" and i > 0 and text[i - 1] == "="):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _words_key(text: str) -> str:
    return " ".join(w for w in re.findall(r"[a-z0-9_]+", text.lower()) if w not in _ARTICLES)


def _atom_key(atom: Atom) -> str:
    parts = []
    for i, segment in enumerate(atom.segments):
        parts.append(_words_key(segment))
        if i < len(atom.args):
            term = atom.args[i]
            parts.append(f"?{term.name}" if term.variable else f"<{normalize_value(term.name)}>")
    return " ".join(p for p in parts if p)


def _variables(atoms: Iterable[Atom]) -> list[Term]:
    seen: dict[str, Term] = {}
    for atom in atoms:
        for v in atom.variables():
            seen.setdefault(v.name, v)
    return list(seen.values())


def _check_consistent_types(atoms: Sequence[Atom]) -> None:
    seen: dict[str, str | None] = {}
    for atom in atoms:
        for v in atom.variables():
            if v.name in seen and normalize_type(seen[v.name]) != normalize_type(v.type):
                raise ValueError(f"variable {v.name} has two types: {seen[v.name]!r} and {v.type!r}")
            seen[v.name] = v.type


def _parse_term_body(body: str) -> Term | None:
    """The term inside ``( )``, or None when the parentheses are plain words."""
    quoted = _QUOTED_TERM.match(body)
    if quoted:
        name = re.sub(r"\\(.)", r"\1", quoted.group(1))
        type_name = (quoted.group(2) or "").strip() or None
        return Term.const(name, type_name)
    pair = _NAME_TYPE.match(body)
    if pair:
        name, type_name = pair.group(1).strip(), pair.group(2).strip()
        if VARIABLE_NAME.fullmatch(name):
            return Term.var(name, type_name)
        return Term.const(name, type_name)
    return None


def _scan(text: str) -> Iterator[tuple[str, Any]]:
    """Tokens of NL-Logic text: ("char", c), ("term", Term), ("amp", "&"), ("arrow", "=>")."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 >= n:
                raise NLLogicSyntaxError(f"dangling backslash at the end of {text!r}")
            yield "char", text[i + 1]
            i += 2
            continue
        if c == "(":
            j, in_quotes = i + 1, False
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == '"':
                    in_quotes = not in_quotes
                elif text[j] == ")" and not in_quotes:
                    break
                elif text[j] == "(" and not in_quotes:
                    break
                j += 1
            if j >= n or text[j] != ")":
                raise NLLogicSyntaxError(f"unclosed '(' at position {i} in {text!r}")
            body = text[i + 1 : j]
            term = _parse_term_body(body)
            if term is None:
                for ch in text[i : j + 1]:
                    yield "char", ch
            else:
                yield "term", term
            i = j + 1
            continue
        if c == ")":
            raise NLLogicSyntaxError(f"unmatched ')' at position {i} in {text!r}")
        if c == "&":
            yield "amp", "&"
            i += 1
            continue
        if text.startswith("=>", i):
            yield "arrow", "=>"
            i += 2
            continue
        yield "char", c
        i += 1


def _split(text: str) -> list[list[tuple[str, Any]]]:
    """Split scanned tokens into formulas at ``&`` and ``=>`` (kept as separator groups)."""
    groups: list[list[tuple[str, Any]]] = [[]]
    for kind, value in _scan(text):
        if kind in ("amp", "arrow"):
            groups.append([(kind, value)])
            groups.append([])
        else:
            groups[-1].append((kind, value))
    return groups


def _atom_from_tokens(tokens: Sequence[tuple[str, Any]], source: str) -> Atom:
    # Characters are gathered in lists and joined once: ``segments[-1] += c`` copied the segment per character,
    # quadratic in a long question's length.
    parts: list[list[str]] = [[]]
    args = []
    for kind, value in tokens:
        if kind == "term":
            args.append(value)
            parts.append([])
        else:
            parts[-1].append(value)
    segments = ["".join(p) for p in parts]
    segments[0] = segments[0].lstrip()
    segments[-1] = segments[-1].rstrip()
    if not args and not "".join(segments).strip():
        raise NLLogicSyntaxError(f"empty formula in {source!r}")
    return Atom(segments=segments, args=args)


def _atoms_from_groups(groups: Sequence[list[tuple[str, Any]]], source: str) -> list[Atom]:
    atoms = []
    for group in groups:
        if group and group[0][0] == "amp":
            continue
        if group and group[0][0] == "arrow":
            raise NLLogicSyntaxError(f"unexpected '=>' in {source!r}")
        atoms.append(_atom_from_tokens(group, source))
    return atoms


def parse_term(text: str) -> Term:
    """``(x:drink)`` or ``("Blue Finch":cafe)``."""
    stripped = text.strip()
    if not (stripped.startswith("(") and stripped.endswith(")")):
        raise NLLogicSyntaxError(f"a term is written in parentheses, like (x:drink): {text!r}")
    term = _parse_term_body(stripped[1:-1])
    if term is None:
        raise NLLogicSyntaxError(f'not a term: {text!r}; write (x:type) or ("name":type)')
    return term


def _guard(fn: Callable[..., R]) -> Callable[..., R]:
    """Wraps pydantic errors into syntax errors the model can read."""

    def wrapper(text: str, *args: Any, **kwargs: Any) -> R:
        if not isinstance(text, str):
            raise NLLogicSyntaxError(f"expected NL-Logic text, got {type(text).__name__}")
        try:
            return fn(text, *args, **kwargs)
        except NLLogicSyntaxError:
            raise
        except ValueError as exc:
            message = str(exc).splitlines()
            detail = next((line.strip() for line in message if line.strip().startswith("Value error")), message[0])
            detail = re.sub(r"\s*\[type=.*$", "", detail.removeprefix("Value error, "))
            raise NLLogicSyntaxError(f"{detail} in {text!r}") from exc

    wrapper.__doc__ = fn.__doc__
    wrapper.__name__ = fn.__name__
    return wrapper


@_guard
def parse_atom(text: str) -> Atom:
    """One atomic formula: ``Maya had (x:drink) at (y:cafe)``."""
    atoms: list[Atom] = parse_atoms(text)
    if len(atoms) != 1:
        raise NLLogicSyntaxError(f"expected one atomic formula, got {len(atoms)} joined by '&' in {text!r}")
    return atoms[0]


@_guard
def parse_atoms(text: str) -> list[Atom]:
    """A conjunction ``atom & atom``."""
    atoms = _atoms_from_groups(_split(text), text)
    _check_consistent_types(atoms)
    return atoms


_GOAL_HEAD = re.compile(r"^\s*(find\s+([a-z_][a-z0-9_]*(?:\s*,\s*[a-z_][a-z0-9_]*)*)|check)\s*:\s*", re.IGNORECASE)


@_guard
def parse_goal(text: str) -> Goal:
    """``find x, y: atom & atom`` or ``check: atom``; a bare conjunction is a goal with no answer variable."""
    head = _GOAL_HEAD.match(text)
    answer: list[str] = []
    body = text
    if head:
        body = text[head.end() :]
        if head.group(2):
            answer = [a.strip() for a in head.group(2).split(",")]
    return Goal(atoms=parse_atoms(body), answer=answer)


@_guard
def parse_rule(text: str) -> Rule:
    """``body & body => head``."""
    groups = _split(text)
    arrows = [i for i, g in enumerate(groups) if g and g[0][0] == "arrow"]
    if len(arrows) != 1:
        raise NLLogicSyntaxError(f"a rule has exactly one '=>': {text!r}")
    cut = arrows[0]
    return Rule(body=_atoms_from_groups(groups[:cut], text), head=_atoms_from_groups(groups[cut + 1 :], text))


_BINDING = re.compile(r"\s*([a-z_][a-z0-9_]*)\s*/\s*")


@_guard
def parse_substitution(text: str) -> Substitution:
    """``{x/("iced matcha latte":drink), y/("Blue Finch":cafe)}``."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise NLLogicSyntaxError(f"a substitution is written in braces: {text!r}")
    body = body[1:-1]
    bindings: dict[str, Term] = {}
    pos = 0
    while body[pos:].strip():
        match = _BINDING.match(body, pos)
        if not match:
            raise NLLogicSyntaxError(f"expected 'name/(value)' at position {pos} in {text!r}")
        tokens = []
        pos = match.end()
        for kind, value in _scan(body[pos:]):
            tokens.append((kind, value))
            break
        if not tokens or tokens[0][0] != "term" or tokens[0][1].variable:
            raise NLLogicSyntaxError(f'the value of {match.group(1)} must be a constant like ("name":type)')
        close = _term_end(body, pos)
        bindings[match.group(1)] = tokens[0][1]
        pos = close
        rest = body[pos:].lstrip()
        if rest.startswith(","):
            pos = len(body) - len(rest) + 1
        elif rest:
            raise NLLogicSyntaxError(f"expected ',' between bindings in {text!r}")
    return Substitution(bindings=bindings)


def _term_end(text: str, start: int) -> int:
    """Index just after the parenthesized term starting at ``start`` (skipping spaces)."""
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    in_quotes = False
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == '"':
            in_quotes = not in_quotes
        elif text[j] == ")" and not in_quotes:
            return j + 1
        j += 1
    raise NLLogicSyntaxError(f"unclosed term in {text!r}")
