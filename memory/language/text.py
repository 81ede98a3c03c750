"""The one text toolkit: tokens, stems, stop words, sentences, and the sentence that best answers a question.

BM25, the hashing embedder, the roles' no-LLM fallbacks and the cue layer all read text through here, so
their scores agree. ``tokenize`` (BM25 and the hashing embedder) keeps its light plural strip; everything
that compares words across inflections uses ``stem``: NLTK's Porter stemmer (the one LoCoMo's scorer
uses) after a small table of irregular verb forms Porter cannot know (``went`` -> ``go``).
"""

from __future__ import annotations

import builtins
import importlib.util
import math
import os
import re
import sys
import types
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from logicmap.memory.language.lexicon import IRREGULAR_VERBS

__all__ = [
    "FUNCTION_WORDS",
    "NO_ANSWER",
    "PATTERN_SENTENCE_LIMIT",
    "PATTERN_TEXT_LIMIT",
    "STOP_WORDS",
    "best_sentence",
    "content_stems",
    "is_no_answer",
    "pattern_sentences",
    "pattern_text",
    "printable",
    "printable_json",
    "query_readings",
    "sentence_scores",
    "singular",
    "split_sentences",
    "stem",
    "tokenize",
    "verb_stemmed_tokens",
    "without_names",
]

NO_ANSWER = "Not mentioned in the conversation"
"""What a no-LLM answerer says when the text it was given does not answer the question (LoCoMo's own
phrase for an unanswerable question, which its scorer counts as abstaining)."""

_TOKEN = re.compile(r"[a-z0-9]+")
# Word lists here: closed-class English (function words, auxiliaries, interjections, irregular verbs).
STOP_WORDS = frozenset(
    "a an the and or of to in on at for with is was were are be been it its this that i you he she we they "
    "my your his her our their me him them do did does so but if as by from about what which who when where "
    "why how".split()
)
"""Words BM25 and the hashing embedder leave out."""
FUNCTION_WORDS = STOP_WORDS | frozenset(
    "am these those us whom whose there here then than just also very really too not no yes oh hey hi would "
    "could should will can may might shall".split()
)
"""``STOP_WORDS`` plus the other words that carry no content in a question or a memory (auxiliaries,
demonstratives, interjections)."""
_IRREGULAR = IRREGULAR_VERBS  # past forms -> base forms: a general grammar table (memory/language/lexicon.py)
PATTERN_TEXT_LIMIT = 32_000
"""Characters of one turn the no-LLM fact and cue patterns read (``pattern_text``): a turn longer than this
(a pasted document, a 1 MB message) is read up to here and the ingest report says so. Conversational
turns are far shorter (the conversations in ``data/`` stay under 300 characters), so no fact of a normal
turn is dropped; the cap bounds the facts, cues and tags one turn can add, which the store must write."""
PATTERN_SENTENCE_LIMIT = 1_000
"""Characters of one sentence a pattern sees at once (``pattern_sentences``): a longer run without a
sentence end is read in pieces cut at a space, so no per-sentence scan grows with the whole turn."""


def _nltk_file(root: str, dotted: str) -> str:
    """The source file of NLTK's module ``dotted`` (``nltk.stem.api``) in the installed package ``root``."""
    return os.path.join(root, *dotted.split(".")[1:]) + ".py"


def _load_nltk_module(root: str, dotted: str) -> types.ModuleType:
    """NLTK's module ``dotted`` executed from its own file, its ``nltk.*`` imports resolved the same way.

    The module is registered nowhere (``sys.modules`` keeps no ``nltk`` entry), so a later ``import nltk``
    runs NLTK's own ``__init__`` as usual; an import of anything else goes through Python's own ``__import__``."""
    loaded: dict[str, types.ModuleType] = {}

    def nltk_import(
        name: str, globals_: Any = None, locals_: Any = None, fromlist: Sequence[str] = (), level: int = 0
    ) -> Any:
        if level or not (name == "nltk" or name.startswith("nltk.")):
            return builtins.__import__(name, globals_, locals_, fromlist, level)
        if name == "nltk":  # ``from nltk import redos``: the package's submodules, each from its file
            return types.SimpleNamespace(**{part: load(f"nltk.{part}") for part in fromlist})
        if not fromlist:  # ``import nltk.x`` binds the whole package: only NLTK's own __init__ gives that
            return builtins.__import__(name, globals_, locals_, fromlist, level)
        return load(name)

    def load(module_name: str) -> types.ModuleType:
        if module_name not in loaded:
            spec = importlib.util.spec_from_file_location(f"{__name__}.{module_name}", _nltk_file(root, module_name))
            if spec is None or spec.loader is None:
                raise ImportError(f"NLTK's module {module_name} is missing from {root}")
            module = importlib.util.module_from_spec(spec)
            # A module's own builtins: its import statements call their ``__import__``.
            vars(module)["__builtins__"] = {**vars(builtins), "__import__": nltk_import}
            spec.loader.exec_module(module)
            loaded[module_name] = module
        return loaded[module_name]

    return load(dotted)


def _porter_stemmer() -> Any:
    """NLTK's ``PorterStemmer``, without running ``nltk/__init__``: that imports all of NLTK, SciPy and
    scikit-learn (about 2.5 s and 140 MB in every process that answers a question; ``python -X importtime -c
    "from nltk.stem.porter import PorterStemmer"``). ``nltk/stem/porter.py`` is executed from its file, with its
    NLTK imports (``nltk.stem.api``, ``nltk.redos``, ``nltk.termsec``: standard library only) executed from theirs;
    nothing is placed in ``sys.modules``. In a process that has imported NLTK already, its own class is used."""
    if "nltk.stem.porter" in sys.modules:
        return sys.modules["nltk.stem.porter"].PorterStemmer
    spec = importlib.util.find_spec("nltk")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the text toolkit needs nltk (pip install nltk)")
    return _load_nltk_module(list(spec.submodule_search_locations)[0], "nltk.stem.porter").PorterStemmer


_PORTER = _porter_stemmer()()  # NLTK_EXTENSIONS mode, as LoCoMo's scorer runs it
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'A-ZÀ-Þ0-9])")
_ANSWER_KIND = re.compile(r"\b(?:what|which)\s+([a-z]+)", re.IGNORECASE)
_ABSTAIN = re.compile(r"^\W*(?:not mentioned|not in memory|i don'?t know|no information available)\b", re.IGNORECASE)


def singular(word: str) -> str:
    """The light plural strip: ``tarts`` -> ``tart``; words of four letters or fewer and ``-ss`` words stay."""
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without stop words, with the light plural strip (BM25, the hashing embedder)."""
    return [singular(tok) for tok in _TOKEN.findall(text.lower()) if tok not in STOP_WORDS]


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The word's stem: irregular verb forms to their base (``went`` -> ``go``), then NLTK's Porter stemmer
    (``visited`` -> ``visit``, ``cafes`` -> ``cafe``, ``moving`` -> ``move``); a possessive ``'s`` goes first."""
    lowered = word.lower().strip("'").removesuffix("'s")
    return str(_PORTER.stem(_IRREGULAR.get(lowered, lowered)))


def verb_stemmed_tokens(text: str) -> list[str]:
    """``tokenize``'s tokens with the ``-ing`` and ``-ed`` forms stemmed (``researching`` and ``researched`` ->
    ``research``, ``camped`` -> ``camp``), the others as they are: the reranker's stemmed lexical keys
    (``memory.retrieval.ranking_keys``). Only those inflections: a full stem would also fold derived words into
    common ones (``likely`` -> ``like``), which cost recall on public conversations (docs/performance.md)."""
    return [stem(tok) if tok.endswith(("ing", "ed")) else tok for tok in tokenize(text)]


def content_stems(text: str, *, stop: frozenset[str] = STOP_WORDS) -> list[str]:
    """Stems of the content words of a text, in order: words of two characters or more not in ``stop``
    (the "s" of "Maya's" is no word)."""
    return [stem(w) for w in _TOKEN.findall(text.lower()) if len(w) > 1 and w not in stop]


def split_sentences(text: str) -> list[str]:
    """Sentences of a text (split after . ! ? followed by a capital, a quote or a digit), stripped, non-empty."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


def pattern_text(text: str | None) -> str:
    """The part of a turn the no-LLM patterns read: all of it up to ``PATTERN_TEXT_LIMIT`` characters, else
    its first ``PATTERN_TEXT_LIMIT`` characters cut back to a space."""
    text = text or ""
    if len(text) <= PATTERN_TEXT_LIMIT:
        return text
    cut = text.rfind(" ", PATTERN_TEXT_LIMIT // 2, PATTERN_TEXT_LIMIT + 1)
    return text[: cut if cut > 0 else PATTERN_TEXT_LIMIT]


def pattern_sentences(text: str | None) -> list[str]:
    """The sentences of ``pattern_text(text)`` (``split_sentences``), a sentence longer than
    ``PATTERN_SENTENCE_LIMIT`` characters in pieces of at most that length cut at a space."""
    pieces: list[str] = []
    for sentence in split_sentences(pattern_text(text)):
        while len(sentence) > PATTERN_SENTENCE_LIMIT:
            cut = sentence.rfind(" ", PATTERN_SENTENCE_LIMIT // 2, PATTERN_SENTENCE_LIMIT + 1)
            cut = cut if cut > 0 else PATTERN_SENTENCE_LIMIT
            head, sentence = sentence[:cut].strip(), sentence[cut:].strip()
            if head:
                pieces.append(head)
        if sentence:
            pieces.append(sentence)
    return pieces


def sentence_scores(question: str, sentences: Sequence[str], *, ignore: Iterable[str] = ()) -> list[float]:
    """How well each sentence answers ``question`` (0.0: it shares no content word with it).

    Shared content stems weigh by their idf over ``sentences`` and a long sentence is mildly penalised; a
    question ("...?") or a sentence that adds nothing to the question's words rarely answers it. The words
    of ``ignore`` (the speakers' names: they are in every greeting) do not count as a match, and the kind
    of answer asked for ("drink" in "What drink ...?") counts half: the sentence that answers often leaves
    it unsaid ("I had an iced matcha latte").
    """
    asked = set(content_stems(question))
    wanted = asked - set(content_stems(" ".join(ignore))) or asked
    kind = _ANSWER_KIND.search(question)
    half = set(content_stems(kind.group(1))) if kind else set()
    bags = [set(content_stems(s)) for s in sentences]
    df = Counter(w for bag in bags for w in bag)
    n = sum(1 for bag in bags if bag)
    scores = []
    for sentence, words in zip(sentences, bags, strict=True):
        score = sum(math.log(1 + n / df[w]) * (0.5 if w in half else 1.0) for w in wanted & words)
        score /= max(len(words), 1) ** 0.3
        if sentence.rstrip().endswith("?"):
            score *= 0.3
        if not words - wanted:
            score *= 0.3
        scores.append(score)
    return scores


def best_sentence(question: str, sentences: Sequence[str], *, ignore: Iterable[str] = ()) -> int | None:
    """The index of the sentence that best answers ``question`` (``sentence_scores``; the earlier sentence
    wins a tie), or ``None`` when none shares a content word with it."""
    scores = sentence_scores(question, sentences, ignore=ignore)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i), default=None)
    return best if best is not None and scores[best] > 0 else None


def is_no_answer(answer: str | None) -> bool:
    """Whether an answer is empty or says memory does not know: it opens with ``NO_ANSWER`` or another
    abstaining phrase ("not in memory", "I don't know", "no information available")."""
    return not (answer or "").strip() or bool(_ABSTAIN.search(answer or ""))


def without_names(text: str) -> str:
    """``text`` without its capitalised words after the first (the names in it), or "" when it has none or
    keeps no content word.

    Names dominate a sentence embedding: "Where exactly did Sam propose to Nadia?" is closest to every turn
    about Sam and Nadia, and "Where exactly did propose to" to "I proposed in Door County".
    """
    words = text.split()
    kept = [w for i, w in enumerate(words) if i == 0 or not w[:1].isupper() or w == "I"]
    if len(kept) == len(words) or not tokenize(" ".join(kept)):
        return ""
    return " ".join(kept)


def query_readings(text: str) -> list[str]:
    """The texts a search matches, the best match counting: ``text`` and, when it names someone or
    something, ``text`` without the names (``without_names``), which matches the predicate."""
    return [text, *filter(None, [without_names(text)])]


# Terminal escape sequences (ECMA-48): CSI (colours, cursor moves, screen clears; 7- and 8-bit), the string
# commands OSC / DCS / SOS / PM / APC when terminated (window titles, hyperlinks, clipboard writes), and
# the two-character escapes. An unterminated one is left to _UNPRINTABLE, which shows its ESC.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[P\]X^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
# What must not reach a terminal as is: C0 controls but tab and newline, DEL, C1 controls, the bidi
# overrides and isolates (they reorder what is shown), the Unicode line separators, lone surrogates.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return "\\r" if code == 0x0D else f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, one_line: bool = False) -> str:
    """``text`` made safe to print on a terminal: escape sequences removed, other control characters shown
    as escapes (``\\x07``, ``\\r``, ``\\u202e``). Tabs and newlines stay, unless ``one_line`` (a line a
    stored text must not break or forge) turns them into spaces.

    Only what is printed goes through here; stored memory keeps its text as it was written.
    """
    out = _UNPRINTABLE.sub(_escaped, _ESCAPE_SEQUENCE.sub("", str(text)))
    return re.sub(r"[\t\n]", " ", out) if one_line else out


def printable_json(text: str) -> str:
    """JSON text made safe to print: the characters JSON may carry unescaped but a terminal acts on (DEL,
    C1 controls, bidi overrides, line separators) as ``\\uXXXX`` escapes, which keeps it the same JSON."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
