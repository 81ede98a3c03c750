"""Responder role: a short answer from the evidence handed to it, and nothing else.

Fallback (and no-LLM policy): extractive, the evidence sentence that best matches the question.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel

from agents.base import RoleOutcome, run_role
from memory.text import stem, tokenize
from prompts import respond as prompt
from prompts.respond import Answer

__all__ = ["EvidenceText", "extractive_answer", "respond"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(r"^(\[[^\]]*\]\s*|\([^)]*\)\s*)+")
_TRAIL = re.compile(r"\s*\((?:\d{4}[-\d]*|undated)\)$")
_SPEAKER = re.compile(r"^[A-Z][\w .'-]{0,30}:\s+")


class EvidenceText:
    """One evidence item as the responder sees it."""

    def __init__(self, id: str, text: str, time: str | None = None) -> None:  # noqa: A002 - mirrors records
        self.id, self.text, self.time = id, text, time

    def render(self) -> str:
        return f"[{self.id}]{f' ({self.time})' if self.time else ''} {self.text}"


def _words(text: str) -> set[str]:
    """Stemmed content words; a lone letter (the "s" of "Maya's" or "That's") is not a word."""
    return {stem(w) for w in tokenize(text) if len(w) > 1}


def extractive_answer(question: str, evidence: Sequence[EvidenceText]) -> Answer:
    """The evidence sentence whose words best match the question (idf-weighted); earlier evidence wins ties.

    The speakers' names do not count as a match (they are in every greeting: "That's wonderful, Maya!"),
    and a sentence that adds nothing to the question's words is unlikely to answer it.
    """
    lines = [_LEAD.sub("", line.strip()) for item in evidence for line in item.text.splitlines()]
    speakers = {stem(w) for line in lines if (m := _SPEAKER.match(line)) for w in tokenize(m.group(0))}
    asked = _words(question)
    wanted = asked - speakers or asked
    sentences: list[tuple[int, str, str, set[str]]] = []
    for rank, item in enumerate(evidence):
        pieces = [
            sentence
            for line in item.text.splitlines()
            for sentence in _SENTENCE.split(_SPEAKER.sub("", _LEAD.sub("", line.strip())))
        ]
        for sentence in pieces:
            sentence = _TRAIL.sub("", _SPEAKER.sub("", sentence.strip()))
            words = _words(sentence)
            if words:
                sentences.append((rank, sentence, item.id, words))
    if not sentences:
        return Answer(answer="Not mentioned", cited_ids=[])
    df: dict[str, int] = {}
    for *_, words in sentences:
        for w in words:
            df[w] = df.get(w, 0) + 1
    n = len(sentences)
    best: tuple[float, int] | None = None
    chosen = sentences[0]
    for rank, sentence, item_id, words in sentences:
        score = sum(math.log(1 + n / df[w]) for w in wanted & words) / (len(words) ** 0.3)
        if sentence.endswith("?"):  # a question in the evidence rarely answers the question asked
            score *= 0.3
        if not words - wanted:  # nothing the question does not already say: no answer in it
            score *= 0.3
        if best is None or (score, -rank) > best:
            best, chosen = (score, -rank), (rank, sentence, item_id, words)
    if best is None or best[0] == 0:
        return Answer(answer="Not mentioned", cited_ids=[])
    return Answer(answer=chosen[1], cited_ids=[chosen[2]])


def respond(
    llm: BaseChatModel | None,
    question: str,
    evidence: Sequence[EvidenceText],
    *,
    question_date: str | None = None,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict | None = None,
) -> RoleOutcome[Answer]:
    ids = {e.id for e in evidence}

    def validate(result: Answer) -> list[str]:
        problems = []
        if not result.answer.strip():
            problems.append("empty answer")
        unknown = [c for c in result.cited_ids if c not in ids]
        if unknown:
            problems.append(f"cited ids {unknown} are not evidence ids {sorted(ids)}")
        return problems

    return run_role(
        llm,
        role="responder",
        messages=prompt.build_messages(question, "\n".join(e.render() for e in evidence) or "(no evidence)", question_date),
        schema=Answer,
        validate=validate,
        fallback=lambda: extractive_answer(question, evidence),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
