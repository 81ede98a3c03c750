"""Deterministic Goal-Mem roles: goal parsing from the wh-word, decompositions, lexical unification.

They are the LLM roles' fallbacks and the whole no-LLM policy, so every step has a reproducible answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from logicmap.memory.language.text import FUNCTION_WORDS, NO_ANSWER, pattern_text, stem
from logicmap.memory.language.text import content_stems as text_content_stems
from logicmap.memory.language.timeparse import MONTHS, date_text, find_time_phrases, parse_timestamp, resolve_relative
from logicmap.memory.records.nl_logic import Atom, Goal, Substitution, Term, normalize_type, normalize_value
from logicmap.memory.runtime.deadline import check_deadline
from logicmap.prompts.goalmem_unify import Binding, SubgoalResult, Unification

__all__ = [
    "LEXICAL_ENTAILMENT",
    "MemoryLine",
    "content_stems",
    "coverage",
    "extract_value",
    "heuristic_answer",
    "heuristic_decompositions",
    "heuristic_goal",
    "lexical_unification",
]

LEXICAL_ENTAILMENT = 0.5
"""Share of a subgoal's relation words (stemmed) a memory must contain to entail it lexically."""

MemoryLine = tuple[str, str, str | None]
"""(memory id, text, ISO date or None)."""

# Word lists here are closed-class English (auxiliaries, determiners, wh-words, time words), none read off data/.
_AUX = frozenset("did does do is are was were has have had will would can could should may might am".split())
_BE = frozenset("is are was were am".split())
_PHRASE_END = frozenset(
    "with at on in for from to about because when while and but last yesterday today tonight this next "
    "before after during since until so which that who i it was is were are".split()
)
_DETERMINERS = frozenset("a an the my his her our their your some".split())
_NOT_ANCHOR = frozenset("now today currently still always usually ever never again already".split())
_DATE_TYPES = frozenset("date time day month year when".split())
_WH_TYPES = {"who": "person", "whom": "person", "when": "date", "where": "place", "why": "reason"}
_HOW_TYPES = {"many": "number", "much": "amount", "long": "duration", "old": "age", "often": "frequency"}
_PREPOSITION = {
    "date": "on",
    "place": "in",
    "reason": "because of",
    "manner": "by",
    "duration": "for",
    "frequency": "every",
    "age": "at the age of",
}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*|[.,;:!?]")
_DAY_MONTH = re.compile(rf"\b\d{{1,2}} (?:{'|'.join(MONTHS)})\b(?: \d{{4}})?")
_ID_PREFIX = re.compile(r"^\s*[\[(][^\])]*[\])]\s*")
_SENTENCE_REACH = 200  # tokens; conversational sentences are far shorter


def content_stems(text: str) -> list[str]:
    """Stems of a text's content words, in order (``memory.language.text.content_stems`` without function words)."""
    return text_content_stems(text, stop=FUNCTION_WORDS)


def coverage(needed: Sequence[str], text_stems: set[str]) -> float:
    unique = set(needed)
    return len(unique & text_stems) / len(unique) if unique else 0.0


# ------------------------------------------------------------------------------------------ goal parsing


def _subject_len(words: Sequence[str]) -> int:
    """How many words make the subject: a capitalized name run (``Maya``, ``Leo's sister``) or one word."""
    n = 1
    while n < len(words) and words[n][:1].isupper():
        n += 1
    return n


def heuristic_goal(question: str) -> Goal:
    """The question as a goal: the wh-word gives the answer variable's type and where it goes.

    ``What drink did Maya have at the cafe?`` -> ``find x: Maya have (x:drink) at the cafe``.
    """
    words = question.strip().rstrip("?.! ").replace("&", "and").replace("(", " ").replace(")", " ").split()
    if not words:
        return Goal(atoms=[Atom.of(Term.var("x", "thing"), " was said")], answer=["x"])
    first = words[0].lower()
    if first in _AUX:
        return Goal(atoms=[Atom.of(" ".join(words[1:]) or " ".join(words))], answer=[])
    rest = words[1:]
    if first in ("what", "which", "whose"):
        i = 0
        while i < len(rest) and rest[i].lower() not in _AUX:
            i += 1
        noun, tail = rest[:i], rest[i:]
        if noun and not tail:
            # "What happened at ...": the wh-word is the subject.
            return _goal(Atom.of(Term.var("x", "thing"), " " + " ".join(rest)))
        type_name = (normalize_type(noun[-1]) if noun else None) or "thing"
        return _goal(_place_variable(type_name, tail, subject_slot=False, prefix=noun[:-1]))
    if first == "how":
        if rest and rest[0].lower() in _HOW_TYPES:
            type_name = _HOW_TYPES[rest[0].lower()]
            i = 1
            while i < len(rest) and rest[i].lower() not in _AUX:
                i += 1
            counted, tail = rest[1:i], rest[i:]
            if type_name in ("number", "amount") and counted:
                return _goal(_place_variable(type_name, tail, subject_slot=False, suffix=counted))
            return _goal(_place_variable(type_name, rest[1:] if not tail else tail, subject_slot=False, trailing=True))
        return _goal(_place_variable("manner", rest, subject_slot=False, trailing=True))
    if first in _WH_TYPES:
        type_name = _WH_TYPES[first]
        if first in ("who", "whom"):
            return _goal(_place_variable(type_name, rest, subject_slot=True))
        return _goal(_place_variable(type_name, rest, subject_slot=False, trailing=True))
    return _goal(Atom.of(" ".join(words) + " ", Term.var("x", "thing")))


def _goal(atom: Atom) -> Goal:
    return Goal(atoms=[atom], answer=[v.name for v in atom.variables()][:1])


def _place_variable(
    type_name: str,
    tail: Sequence[str],
    *,
    subject_slot: bool,
    trailing: bool = False,
    prefix: Sequence[str] = (),
    suffix: Sequence[str] = (),
) -> Atom:
    """Put ``(x:type)`` where the wh-word's answer goes in the declarative form of ``tail``."""
    var = Term.var("x", type_name or "thing")
    tail = list(tail)
    if not tail:
        return Atom.of(var, " is asked about")
    aux, body = tail[0].lower(), tail[1:]
    if aux not in _AUX:
        # No auxiliary: the wh-phrase is the subject ("Who helped Maya pack?").
        return Atom.of(var, " " + " ".join(tail))
    if not body:
        return Atom.of(var, f" {aux}")
    if trailing:
        words = list(body)
        if aux in _BE:
            words.append(aux)
        preposition = _PREPOSITION.get(type_name, "")
        return Atom.of(" ".join(words) + (f" {preposition} " if preposition else " "), var)
    if subject_slot or aux in _BE:
        # "What is the name of Maya's dog?" -> "(x:thing) is the name of Maya's dog".
        return Atom.of(var, f" {aux} " + " ".join(body))
    n = _subject_len(body)
    subject, verb, after = body[:n], body[n : n + 1], body[n + 1 :]
    head = " ".join([*subject, *verb, *prefix]) + " "
    tail_words = [*suffix, *after]
    return Atom.of(head, var, (" " + " ".join(tail_words)) if tail_words else "")


# ------------------------------------------------------------------------------------------ decomposition

_CONTEXT_MARKERS = frozenset("at in on from with during after before when that which who because for to".split())


def _split_atom(atom: Atom) -> list[Atom]:
    """``Maya have (x:drink) at the cafe she visited`` -> ``Maya have (x:drink)`` & ``Maya at the cafe she visited``."""
    if len(atom.args) != 1 or not atom.args[0].variable:
        return [atom]
    before, after = atom.segments[0], atom.segments[1]
    words = after.split()
    cut = next((i for i, w in enumerate(words) if w.lower() in _CONTEXT_MARKERS), None)
    if cut is None:
        return [atom]
    core = Atom.of(before, atom.args[0], (" " + " ".join(words[:cut])) if cut else "")
    lead = before.split()
    subject = " ".join(lead[: _subject_len(lead)]) if lead and lead[0][:1].isupper() else ""
    context_words = " ".join([subject, *words[cut:]]).strip()
    if len(content_stems(context_words)) < 2:
        return [atom]
    return [core, Atom.of(context_words)]


def _keyword_atom(goal: Goal) -> list[Atom]:
    """One subgoal per answer variable: the variable with the goal's content words around it."""
    atoms = []
    for var in goal.answer_terms() or goal.variables()[:1]:
        words = [w for w in re.findall(r"[A-Za-z0-9']+", goal.text()) if w.lower() not in FUNCTION_WORDS]
        words = [w for w in words if stem(w) != stem(var.type or "")]
        atoms.append(Atom.of(var, " is mentioned with " + " ".join(dict.fromkeys(words))))
    return atoms or goal.atoms


def heuristic_decompositions(goal: Goal) -> list[list[Atom]]:
    """Different decompositions in the order a breadth loop tries them: the goal itself, each atom split
    into its core and its context, then keyword subgoals around the answer variables."""
    candidates = [list(goal.atoms), [part for atom in goal.atoms for part in _split_atom(atom)], _keyword_atom(goal)]
    unique: list[list[Atom]] = []
    keys: list[frozenset[str]] = []
    for candidate in candidates:
        key = frozenset(a.key() for a in candidate)
        if key not in keys:
            keys.append(key)
            unique.append(candidate)
    return unique


# ------------------------------------------------------------------------------------------ unification


def _tokens(text: str) -> list[str]:
    return _WORD.findall(_ID_PREFIX.sub("", pattern_text(text)))


def _sentence_bounds(tokens: Sequence[str], index: int) -> tuple[int, int]:
    """The sentence around ``tokens[index]``, at most ``_SENTENCE_REACH`` tokens to each side of it: a value
    is read near its anchor word, and a text without sentence ends is not rescanned whole at each anchor."""
    start = index
    while start > 0 and index - start < _SENTENCE_REACH and tokens[start - 1] not in ".!?":
        start -= 1
    end = index
    while end < len(tokens) and end - index < _SENTENCE_REACH and tokens[end] not in ".!?":
        end += 1
    return start, end


def _proper_name(tokens: Sequence[str], start: int, end: int, taken: set[str]) -> str | None:
    """The first run of capitalized words in ``tokens[start:end]`` that is not a sentence opener, ``I``,
    a speaker label or an already bound value."""
    i = start
    while i < end:
        tok = tokens[i]
        opener = i == 0 or tokens[i - 1] in ".!?:"
        if (
            tok[:1].isupper()
            and tok != "I"
            and not (opener and tok.lower() in FUNCTION_WORDS)
            and not (i + 1 < len(tokens) and tokens[i + 1] == ":")
        ):
            j = i
            while j < end and tokens[j][:1].isupper() and tokens[j] != "I":
                j += 1
            name = " ".join(tokens[i:j])
            if normalize_value(name) not in taken:
                return name
            i = j
            continue
        i += 1
    return None


def _phrase(tokens: Sequence[str], start: int, step: int) -> str:
    """Words from ``start`` going forward (step 1) or backward (-1) until punctuation or a function word."""
    out: list[str] = []
    i = start
    while 0 <= i < len(tokens) and len(out) < 6:
        tok = tokens[i]
        if not tok[:1].isalnum() or tok.lower() in _PHRASE_END:
            break
        out.append(tok)
        i += step
    if step < 0:
        out.reverse()
    while out and out[0].lower() in _DETERMINERS:
        out.pop(0)
    return " ".join(out)


def _date_value(text: str, when: str | None) -> str | None:
    anchor = parse_timestamp(when) if when else None
    text = pattern_text(text)
    for phrase in find_time_phrases(text):
        resolved = resolve_relative(phrase, anchor)
        if resolved:
            return date_text(resolved)
    match = _DAY_MONTH.search(text)
    if match:
        return match.group(0)
    if anchor is not None and isinstance(anchor, date):
        return date_text(anchor)
    return None


def extract_value(atom: Atom, variable: Term, text: str, taken: set[str], when: str | None = None) -> str | None:
    """A value for ``variable`` stated in ``text``, read next to the relation word beside the variable
    in ``atom`` (``had`` in ``Maya had (x:drink)`` -> the words after ``had``), else a proper name near
    the type word. Values already bound to other variables are skipped."""
    if normalize_value(variable.type or "") in _DATE_TYPES:
        return _date_value(text, when)
    tokens = _tokens(text)
    stems = [stem(t) for t in tokens]
    type_stem = stem((variable.type or "").split()[-1]) if variable.type else ""
    index = next(i for i, t in enumerate(atom.args) if t.variable and t.name == variable.name)
    before = [s for s in content_stems(atom.segments[index]) if s not in _NOT_ANCHOR]
    after = [s for s in content_stems(atom.segments[index + 1]) if s not in _NOT_ANCHOR]
    attempts: list[tuple[str, int]] = []
    if before:
        attempts.append((before[-1], 1))
    if after and not atom.segments[index].strip():
        # The variable is the subject ("(x:person) helped Maya"): read the words before the verb.
        attempts.append((after[0], -1))
    for anchor, step in attempts:
        for position, s in enumerate(stems):
            if s != anchor:
                continue
            phrase = _phrase(tokens, position + step, step)
            mentions_type = type_stem and type_stem in {stem(w) for w in phrase.split()}
            if phrase and not mentions_type and normalize_value(phrase) not in taken:
                return phrase
            if mentions_type or not phrase:
                lo, hi = _sentence_bounds(tokens, position)
                name = (
                    _proper_name(tokens, position + 1, hi, taken)
                    if step > 0
                    else _proper_name(tokens, lo, position, taken)
                )
                if name:
                    return name
    if type_stem:
        for position, s in enumerate(stems):
            if s == type_stem:
                lo, hi = _sentence_bounds(tokens, position)
                name = _proper_name(tokens, position + 1, hi, taken) or _proper_name(tokens, lo, position, taken)
                if name:
                    return name
    return None


def _needed(atom: Atom) -> list[str]:
    """Stems a memory must share with a subgoal: its relation words and its constants, not variable types."""
    words = " ".join([*atom.segments, *(t.name for t in atom.args if not t.variable)])
    return content_stems(words)


def lexical_unification(
    subgoals: Sequence[tuple[str, Atom]], memories: Sequence[MemoryLine], substitution: Substitution
) -> Unification:
    """Lexical entailment: a memory entails a subgoal when it shares at least half of its relation words;
    variables are read off the memory next to the relation word beside them (``extract_value``)."""
    results: list[SubgoalResult] = []
    local = substitution
    taken = {normalize_value(v.name) for v in substitution.bindings.values()}
    memory_stems = [set(content_stems(_ID_PREFIX.sub("", text))) for _, text, _ in memories]
    for sid, atom in subgoals:
        check_deadline("while Goal-Mem matched subgoals to memories")
        grounded = atom.apply(local)
        needed = _needed(grounded)
        type_stems = {stem(v.type.split()[-1]) for v in grounded.variables() if v.type}
        # A memory naming the unknown's type ("the best drink") is the likelier source of its value.
        ranked = sorted(
            (
                (coverage(needed, memory_stems[i]), len(type_stems & memory_stems[i]), -i, i)
                for i in range(len(memories))
            ),
            key=lambda r: (r[0] + 0.25 * r[1], r[2]),
            reverse=True,
        )
        result = SubgoalResult(subgoal=sid, resolved=False, reason="no retrieved memory states it")
        for score, _, _, i in ranked:
            check_deadline("while Goal-Mem matched subgoals to memories")
            if score < LEXICAL_ENTAILMENT or (len(set(needed)) >= 2 and len(set(needed) & memory_stems[i]) < 2):
                break
            mid, text, when = memories[i]
            bindings: list[Binding] = []
            for var in grounded.variables():
                value = extract_value(grounded, var, text, taken | {normalize_value(b.value) for b in bindings}, when)
                if value is None:
                    break
                bindings.append(Binding(variable=var.name, value=value, type=var.type))
            if len(bindings) != len(grounded.variables()):
                continue
            facts = [mid]
            missing = set(needed) - memory_stems[i]
            if missing:
                extra = max(
                    (j for j in range(len(memories)) if j != i),
                    key=lambda j: (len(missing & memory_stems[j]), -j),
                    default=None,
                )
                if extra is not None and missing & memory_stems[extra]:
                    facts.append(memories[extra][0])
            result = SubgoalResult(
                subgoal=sid, resolved=True, bindings=bindings, facts=facts, reason=f"lexical overlap {score:.2f}"
            )
            for b in bindings:
                local = local.bind(Term.var(b.variable, b.type or "thing"), Term.const(b.value, b.type))
                taken.add(normalize_value(b.value))
            break
        results.append(result)
    return Unification(results=results)


def heuristic_answer(goal: Goal, substitution: Substitution) -> str:
    """The answer variables' values, or ``Yes`` for a proved yes/no goal."""
    if not goal.answer:
        return "Yes"
    values = [substitution.value(name) for name in goal.answer]
    return ", ".join(v for v in values if v) or NO_ANSWER
