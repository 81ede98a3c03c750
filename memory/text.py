"""Word tokens for lexical matching (BM25, the hashing embedder, extractive answers).

Lowercased, stop words dropped, a light plural strip; the same everywhere so scores agree.
"""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "query_readings", "stem", "tokenize", "without_names"]

_TOKEN = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    "a an the and or of to in on at for with is was were are be been it its this that i you he she we they "
    "my your his her our their me him them do did does so but if as by from about what which who when where "
    "why how".split()
)


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without stop words, with a light plural/suffix strip."""
    tokens = []
    for tok in _TOKEN.findall(text.lower()):
        if tok in STOP_WORDS:
            continue
        if len(tok) > 4 and tok.endswith("s") and not tok.endswith("ss"):
            tok = tok[:-1]
        tokens.append(tok)
    return tokens




def stem(word: str) -> str:
    """A crude suffix strip so "finish" meets "finished", "name" meets "named" and "moving" meets "move"."""
    for suffix in ("ing", "ed", "es"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)].rstrip("e")
    return word.rstrip("e") if len(word) > 3 else word


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
