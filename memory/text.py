"""Word tokens for lexical matching (BM25, the hashing embedder, extractive answers).

Lowercased, stop words dropped, a light plural strip; the same everywhere so scores agree.
"""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "stem", "tokenize"]

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
