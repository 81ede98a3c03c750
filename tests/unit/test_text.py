"""The text toolkit: stems, content words, sentences, the best-matching sentence, the one no-answer string."""

from __future__ import annotations

from logicmap.memory.language.text import (
    NO_ANSWER,
    best_sentence,
    content_stems,
    is_no_answer,
    split_sentences,
    stem,
    tokenize,
    verb_stemmed_tokens,
)


def test_stem_is_porter_after_irregular_forms() -> None:
    assert [stem(w) for w in ("visited", "cafes", "moving", "named", "Maya's")] == [
        "visit",
        "cafe",
        "move",
        "name",
        "maya",
    ]
    assert stem("went") == stem("go") and stem("had") == stem("have") and stem("ate") == stem("eating")


def test_tokenize_keeps_its_light_plural_strip() -> None:
    # BM25 and the hashing embedder read these tokens: no stemming beyond the plural strip.
    assert tokenize("The custard tarts and the dogs were moving") == ["custard", "tart", "dogs", "moving"]


def test_verb_stemmed_tokens_stem_only_ing_and_ed_forms() -> None:
    # The reranker's stemmed lexical keys: "researching" meets "research", "likely" stays apart from "like".
    assert verb_stemmed_tokens("Researching agencies, she camped likely near the painted lake") == [
        "research",
        "agencie",
        "camp",
        "likely",
        "near",
        "paint",
        "lake",
    ]
    assert verb_stemmed_tokens("What did Caroline research?") == ["caroline", "research"]


def test_content_stems_drop_stop_words_and_lone_letters() -> None:
    assert content_stems("What did Maya's dog eat?") == ["maya", "dog", "eat"]


def test_split_sentences_needs_a_capital_after_the_stop() -> None:
    assert split_sentences("I ran 3.5 km. It was hard! e.g. this stays. Ok?") == [
        "I ran 3.5 km.",
        "It was hard! e.g. this stays.",
        "Ok?",
    ]


def test_best_sentence() -> None:
    sentences = ["Hi Leo!", "At the Blue Finch I had an iced matcha latte.", "It was the best drink."]
    assert best_sentence("What drink did Maya have?", sentences, ignore=["Leo"]) == 1
    assert best_sentence("Quantum chromodynamics?", sentences) is None
    assert best_sentence("Where did Leo go?", ["Hi Leo!"], ignore=["Leo"]) is None


def test_no_answer() -> None:
    assert (
        is_no_answer(NO_ANSWER) and is_no_answer("not in memory") and is_no_answer("I don't know.") and is_no_answer("")
    )
    assert not is_no_answer("Biscuit") and not is_no_answer("She was not mentioned... no, Biscuit")
