"""The Porter stemmer as NLTK's ``PorterStemmer()`` runs it by default (mode NLTK_EXTENSIONS).

LoCoMo's scorer stems with NLTK; this copy keeps the scores identical without depending on NLTK.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

__all__ = ["porter_stem"]

_VOWELS = frozenset("aeiou")

# NLTK_EXTENSIONS: irregular forms looked up before stemming.
_IRREGULAR = {
    "sky": ["sky", "skies"],
    "die": ["dying"],
    "lie": ["lying"],
    "tie": ["tying"],
    "news": ["news"],
    "inning": ["innings", "inning"],
    "outing": ["outings", "outing"],
    "canning": ["cannings", "canning"],
    "howe": ["howe"],
    "proceed": ["proceed"],
    "exceed": ["exceed"],
    "succeed": ["succeed"],
}
_POOL = {form: root for root, forms in _IRREGULAR.items() for form in forms}

Rule = tuple[str, str, "Callable[[str], bool] | None"]


def _is_consonant(word: str, i: int) -> bool:
    if word[i] in _VOWELS:
        return False
    if word[i] == "y":
        return True if i == 0 else not _is_consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    pattern = "".join("c" if _is_consonant(stem, i) else "v" for i in range(len(stem)))
    return pattern.count("vc")


def _positive_measure(stem: str) -> bool:
    return _measure(stem) > 0


def _contains_vowel(stem: str) -> bool:
    return any(not _is_consonant(stem, i) for i in range(len(stem)))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _ends_cvc(word: str) -> bool:
    return (
        len(word) >= 3
        and _is_consonant(word, len(word) - 3)
        and not _is_consonant(word, len(word) - 2)
        and _is_consonant(word, len(word) - 1)
        and word[-1] not in "wxy"
    ) or (len(word) == 2 and not _is_consonant(word, 0) and _is_consonant(word, 1))


def _replace_suffix(word: str, suffix: str, replacement: str) -> str:
    return word + replacement if suffix == "" else word[: -len(suffix)] + replacement


def _apply_rules(word: str, rules: list[Rule]) -> str:
    """The first rule whose suffix matches decides: applied when its condition holds, else nothing changes."""
    for suffix, replacement, condition in rules:
        if suffix == "*d" and _ends_double_consonant(word):
            stem = word[:-2]
            return stem + replacement if condition is None or condition(stem) else word
        if word.endswith(suffix):
            stem = _replace_suffix(word, suffix, "")
            return stem + replacement if condition is None or condition(stem) else word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return _replace_suffix(word, "ies", "ie")
    return _apply_rules(word, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return _replace_suffix(word, "ied", "ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = _replace_suffix(word, "eed", "")
        return stem + "ee" if _measure(stem) > 0 else word
    intermediate = None
    for suffix in ("ed", "ing"):
        if word.endswith(suffix):
            candidate = _replace_suffix(word, suffix, "")
            if _contains_vowel(candidate):
                intermediate = candidate
                break
    if intermediate is None:
        return word
    last = intermediate[-1]
    return _apply_rules(
        intermediate,
        [
            ("at", "ate", None),
            ("bl", "ble", None),
            ("iz", "ize", None),
            ("*d", last, lambda stem: last not in "lsz"),
            ("", "e", lambda stem: _measure(stem) == 1 and _ends_cvc(stem)),
        ],
    )


def _step1c(word: str) -> str:
    return _apply_rules(word, [("y", "i", lambda stem: len(stem) > 1 and _is_consonant(stem, len(stem) - 1))])


def _step2(word: str) -> str:
    if word.endswith("alli") and _positive_measure(_replace_suffix(word, "alli", "")):
        return _step2(_replace_suffix(word, "alli", "al"))
    rules: list[Rule] = [
        ("ational", "ate", _positive_measure),
        ("tional", "tion", _positive_measure),
        ("enci", "ence", _positive_measure),
        ("anci", "ance", _positive_measure),
        ("izer", "ize", _positive_measure),
        ("bli", "ble", _positive_measure),
        ("alli", "al", _positive_measure),
        ("entli", "ent", _positive_measure),
        ("eli", "e", _positive_measure),
        ("ousli", "ous", _positive_measure),
        ("ization", "ize", _positive_measure),
        ("ation", "ate", _positive_measure),
        ("ator", "ate", _positive_measure),
        ("alism", "al", _positive_measure),
        ("iveness", "ive", _positive_measure),
        ("fulness", "ful", _positive_measure),
        ("ousness", "ous", _positive_measure),
        ("aliti", "al", _positive_measure),
        ("iviti", "ive", _positive_measure),
        ("biliti", "ble", _positive_measure),
        ("fulli", "ful", _positive_measure),
        # The 'l' of 'logi' stays with the stem, so short stems like 'geo' and 'theo' are stemmed too.
        ("logi", "log", lambda stem: _positive_measure(word[:-3])),
    ]
    return _apply_rules(word, rules)


def _step3(word: str) -> str:
    return _apply_rules(
        word,
        [
            ("icate", "ic", _positive_measure),
            ("ative", "", _positive_measure),
            ("alize", "al", _positive_measure),
            ("iciti", "ic", _positive_measure),
            ("ical", "ic", _positive_measure),
            ("ful", "", _positive_measure),
            ("ness", "", _positive_measure),
        ],
    )


def _step4(word: str) -> str:
    def gt1(stem: str) -> bool:
        return _measure(stem) > 1

    return _apply_rules(
        word,
        [
            ("al", "", gt1),
            ("ance", "", gt1),
            ("ence", "", gt1),
            ("er", "", gt1),
            ("ic", "", gt1),
            ("able", "", gt1),
            ("ible", "", gt1),
            ("ant", "", gt1),
            ("ement", "", gt1),
            ("ment", "", gt1),
            ("ent", "", gt1),
            ("ion", "", lambda stem: _measure(stem) > 1 and stem[-1:] in ("s", "t")),
            ("ou", "", gt1),
            ("ism", "", gt1),
            ("ate", "", gt1),
            ("iti", "", gt1),
            ("ous", "", gt1),
            ("ive", "", gt1),
            ("ize", "", gt1),
        ],
    )


def _step5a(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _ends_cvc(stem)):
            return stem
    return word


def _step5b(word: str) -> str:
    return _apply_rules(word, [("ll", "l", lambda stem: _measure(word[:-1]) > 1)])


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    """The Porter stem of ``word`` (lowercased), matching ``nltk.stem.PorterStemmer().stem``."""
    stem = word.lower()
    if word in _POOL:
        return _POOL[stem]
    if len(word) <= 2:
        return stem
    for step in (_step1a, _step1b, _step1c, _step2, _step3, _step4, _step5a, _step5b):
        stem = step(stem)
    return stem
