"""No word list or pattern of the no-LLM code is fitted to the bundled conversations (issue 19, item 9), nor to
the public development conversations (``../shared/data/locomo-dev5.json``, issue 31; skipped without it).

The word lists (sets, lists, dicts, ``"...".split()`` strings) and regular expressions of the no-LLM
modules may use a word that occurs in ``data/*.json`` only when it belongs to a general class of
``memory/language/lexicon.py`` (function words, interjections, time words, units, kinship terms, ...). Relation-name
tables are the schema the LLM extractor shares; they are checked for names and sample-only words.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from logicmap.memory.language.lexicon import (
    GENERAL_WORDS,
    IRREGULAR_VERBS,
    NUMBER_WORDS,
    SKLEARN_STOP_WORDS,
    TEMPORAL_WORDS,
)

ROOT = Path(__file__).resolve().parents[2]
# Every module whose code answers or builds memory without a model (the no-LLM policy and the fallbacks).
NO_LLM_MODULES = [
    "agents/compass_policy.py",
    "agents/fact_extractor.py",
    "agents/item_ranking.py",
    "agents/goalmem_forward.py",
    "agents/goalmem_heuristics.py",
    "agents/r2.py",
    "agents/real.py",
    "agents/relations.py",
    "agents/segmenter.py",
    "graphs/strategies/reconstruct.py",
    "memory/indexes/cue_extraction.py",
    "memory/indexes/cue_index.py",
    "memory/records/cues.py",
    "memory/retrieval/fact_paths.py",
    "memory/records/facts.py",
    "memory/records/nl_logic.py",
    "memory/records/r2.py",
    "memory/retrieval/ranking.py",
    "memory/retrieval/ranking_keys.py",
    "evals/loco.py",
    "memory/language/text.py",
    "memory/language/timeparse.py",
    "memory/retrieval/turn_scoring.py",
]
# Relation-name tables: identifiers such as ``lives_in`` that the LLM extractor's prompt shares.
SCHEMA_TABLES = {"DEFAULT_CARDINALITY", "RELATION_ALIASES", "CAUSAL_RELATIONS", "HYPONYM_RELATIONS"}
# Names, not text: the public names, the learned ranker's feature names, the rank of each cue kind, the
# memory manager's operations.
IDENTIFIER_TABLES = {
    "__all__",
    "FEATURES",
    "_KIND_RANK",
    "DECISION_ORDER",
    "GRAPH_FEATURES",
    "BASE_FEATURES",
    "ALL_FEATURES",
    "CANDIDATE_FEATURES",
    "BASE",
    "COMPONENTS",
    "REPLACES",
    "CHOSEN",
    "CATEGORIES",
    "PREVIOUS_COEFFICIENTS",
}
# Words the issue names as fitted to the sample (and a phrase); the vocabulary check below generalises them.
NAMED_IN_ISSUE = {"retriever", "balcony", "pack", "nata", "pasteis", "custard"}
# Capitalised by convention without being names: months and weekdays ("Sun", "May"), "Fourth", "co", "rose".
_CAPITALISED_CLASSES = TEMPORAL_WORDS | NUMBER_WORDS | SKLEARN_STOP_WORDS | set(IRREGULAR_VERBS)
_RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
_WORD = re.compile(r"[a-zà-ÿ]{2,}")


def _json_strings(value: object, texts: list[str]) -> None:
    """Every string inside a JSON value, in order, appended to ``texts``."""
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _json_strings(item, texts)
    elif isinstance(value, list):
        for item in value:
            _json_strings(item, texts)


def _conversation_texts() -> list[str]:
    texts: list[str] = []

    for path in sorted((ROOT / "data").glob("*.json")):
        _json_strings(json.loads(path.read_text()), texts)
    return texts


def data_vocabulary() -> tuple[set[str], set[str]]:
    """Lowercase words of every conversation in data/ (turns, captions, questions, answers), and the proper
    nouns among them (words that only ever occur capitalised)."""
    lower, capitalised = set(), set()
    for text in _conversation_texts():
        for match in re.finditer(r"[A-Za-zÀ-ÿ]+", text):
            token, before = match.group(0), text[: match.start()].rstrip()
            if token[0].islower():
                lower.add(token)
            elif before and before[-1] not in ".!?:;\"'(-" and not token.isupper():
                capitalised.add(token.lower())  # capitalised inside a sentence: a name
    return lower | capitalised | {
        t.lower() for text in _conversation_texts() for t in re.findall(r"[A-Za-zÀ-ÿ]+", text)
    }, capitalised - lower - _CAPITALISED_CLASSES


def _regex_words(pattern: str) -> list[str]:
    pattern = re.sub(r"\(\?P<\w+>", "(", pattern)  # group names are not matched text
    pattern = re.sub(r"\\[A-Za-z]", " ", pattern)  # \b \s \d \w
    pattern = re.sub(r"\[[^\]]*\]", " ", pattern)  # character classes
    return _WORD.findall(pattern.lower())


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.BinOp):
        return _strings(node.left) + _strings(node.right)
    return []


def word_lists(source: str) -> dict[str, set[str]]:
    """The words each word list or regular expression of a module's source holds, by where it is.

    Module-level collections, ``"...".split()`` strings and regexes (``re.compile(...)``, ``re.search(...)``
    anywhere in the module, the first argument of a pattern table's constructor) are read; snake_case
    identifiers (relation names, field names) and docstrings are not.
    """
    found: dict[str, set[str]] = {}

    def add(where: str, words: list[str]) -> None:
        if words:
            found.setdefault(where, set()).update(words)

    tree = ast.parse(source)
    for stmt in tree.body:
        target = None
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            target = stmt.targets[0].id
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            target = stmt.target.id
        if target is None or target in SCHEMA_TABLES or target in IDENTIFIER_TABLES:
            continue
        if isinstance(stmt.value, ast.Subscript):  # a type alias: Literal["person", "place", ...]
            continue
        for node in ast.walk(stmt.value):
            if isinstance(node, (ast.Set, ast.List, ast.Tuple, ast.Dict)):
                items = [*node.keys, *node.values] if isinstance(node, ast.Dict) else node.elts
                for item in items:
                    for text in _strings(item) if item is not None else []:
                        if not re.fullmatch(r"[a-z]+(?:_[a-z]+)+", text):
                            add(f"{target} (line {stmt.lineno})", _WORD.findall(text.lower()))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "split" and not node.args:
            for text in _strings(func.value):
                add(f"split string (line {node.lineno})", _WORD.findall(text.lower()))
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in _RE_FUNCTIONS
            and isinstance(func.value, ast.Name)
            and func.value.id == "re"
            and node.args
        ) or (isinstance(func, ast.Name) and func.id.endswith("Pattern") and node.args):
            for text in _strings(node.args[0]):
                add(f"regex (line {node.lineno})", _regex_words(text))
    return found


def fitted_words(source: str, vocabulary: set[str]) -> dict[str, set[str]]:
    """Words of a module's word lists that occur in the conversations and belong to no general class."""
    hits = {}
    for where, words in word_lists(source).items():
        bad = {w for w in words if w in vocabulary and w not in GENERAL_WORDS}
        if bad:
            hits[where] = bad
    return hits


@pytest.fixture(scope="module")
def vocabulary() -> tuple[set[str], set[str]]:
    return data_vocabulary()


def test_the_check_finds_a_fitted_word_and_spares_general_ones(vocabulary) -> None:
    words, _ = vocabulary
    source = (
        '_THINGS = frozenset("dog balcony custard".split())\n'
        '_GENERAL = frozenset({"the", "yesterday", "sister"})\n'
        'def f(q):\n    return re.search(r"\\b(before moving|when)\\b", q)\n'
    )
    hits = fitted_words(source, words)
    flagged = set().union(*hits.values())
    assert {"dog", "balcony", "custard", "moving"} <= flagged
    assert not flagged & {"the", "yesterday", "sister", "when", "before"}


@pytest.mark.parametrize("module", NO_LLM_MODULES)
def test_no_llm_word_lists_hold_only_general_words(module: str, vocabulary) -> None:
    words, _ = vocabulary
    hits = fitted_words((ROOT / module).read_text(), words)
    assert not hits, f"{module}: words of data/ outside memory/language/lexicon.py's general classes: {hits}"


@pytest.mark.parametrize("module", NO_LLM_MODULES)
def test_no_llm_code_names_no_person_or_place_of_the_data(module: str, vocabulary) -> None:
    """Not in any string of the module, schema tables included: proper nouns of data/ and the issue's words."""
    _, proper = vocabulary
    tree = ast.parse((ROOT / module).read_text())
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)
    }
    capitalised, lowercase = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for word in re.findall(r"[A-Za-zÀ-ÿ]{3,}", node.value):
                (capitalised if word[0].isupper() else lowercase).add(word.lower())
    # A name is written capitalised in code as in the data ("Rua", "Porto"); "auto" or "chain" in a message
    # is not the shop "Auto ..." of a conversation.
    named = (capitalised & proper) | ((capitalised | lowercase) & NAMED_IN_ISSUE)
    assert not named, f"{module} names words of data/: {sorted(named)}"


def test_the_general_classes_hold_no_name_of_the_data(vocabulary) -> None:
    _, proper = vocabulary
    named = GENERAL_WORDS & (proper | NAMED_IN_ISSUE)
    assert not named, sorted(named)


# -- the public development conversations (issue 31) --------------------------------------------------------
DEV_DATA = "shared/data/locomo-dev5.json"
# Regex fragments and one type name that the word check reads as words of the development conversations:
# ``[a-z]+ed`` (a suffix), ``[Oo]ur`` (a case class), ``object`` (nl_logic's generic entity types), all written
# before the development data was at hand.
DEV_FRAGMENTS = {"ed", "ur", "object"}


def _dev_file() -> Path | None:
    """``../shared/data/locomo-dev5.json`` beside the repository (or beside a worktree's parent folders)."""
    for folder in ROOT.parents:
        if (folder / DEV_DATA).is_file():
            return folder / DEV_DATA
    return None


@pytest.fixture(scope="module")
def dev_vocabulary() -> tuple[set[str], set[str]]:
    path = _dev_file()
    if path is None:
        pytest.skip(f"the public development conversations ({DEV_DATA} beside the repository) are absent")
    texts: list[str] = []

    _json_strings(json.loads(path.read_text()), texts)
    global _conversation_texts
    bundled = _conversation_texts
    _conversation_texts = lambda: texts  # noqa: E731 - data_vocabulary reads this module's function
    try:
        return data_vocabulary()
    finally:
        _conversation_texts = bundled


@pytest.mark.parametrize("module", NO_LLM_MODULES)
def test_no_llm_word_lists_hold_no_word_of_the_development_conversations(module: str, dev_vocabulary) -> None:
    words, _ = dev_vocabulary
    hits = {where: bad - DEV_FRAGMENTS for where, bad in fitted_words((ROOT / module).read_text(), words).items()}
    hits = {where: bad for where, bad in hits.items() if bad}
    assert not hits, f"{module}: words of {DEV_DATA} outside memory/language/lexicon.py's general classes: {hits}"


@pytest.mark.parametrize("module", NO_LLM_MODULES)
def test_no_llm_code_names_no_person_or_place_of_the_development_conversations(module: str, dev_vocabulary) -> None:
    _, proper = dev_vocabulary
    tree = ast.parse((ROOT / module).read_text())
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)
    }
    capitalised = {
        w.lower()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        for w in re.findall(r"[A-Z][a-zà-ÿ]{2,}", node.value)
    }
    named = capitalised & proper
    assert not named, f"{module} names people or places of {DEV_DATA}: {sorted(named)}"


def test_the_development_check_finds_a_name_and_a_fitted_word(dev_vocabulary) -> None:
    words, proper = dev_vocabulary
    assert {"caroline", "melanie"} <= proper  # the speakers of the first conversation
    hits = fitted_words('_CUES = frozenset("adoption the".split())\n', words)
    assert set().union(*hits.values()) == {"adoption"}
