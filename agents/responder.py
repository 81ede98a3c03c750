"""Responder role: a short answer from the evidence handed to it, and nothing else.

Fallback (and no-LLM policy): extractive, the evidence sentence that best matches the question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import RoleOutcome, run_role
from logicmap.memory.text import NO_ANSWER, best_sentence, content_stems, split_sentences
from logicmap.memory.timeparse import date_text, find_time_phrases, parse_timestamp, resolve_relative
from logicmap.prompts import respond as prompt
from logicmap.prompts.respond import Answer

__all__ = ["EvidenceText", "extractive_answer", "respond"]

_LEAD = re.compile(r"^(\[[^\]]*\]\s*|\([^)]*\)\s*)+")
_TRAIL = re.compile(r"(?<!\s)\s*\((?:\d{4}[-\d]*|undated)\)$")  # (?<!\s): tried once per run of spaces
_SPEAKER = re.compile(r"^[A-Z][\w .'-]{0,30}:\s+")
_LINE_DATE = re.compile(r"\((\d{4}-\d{2}-\d{2})\)\s*$")
_WHEN = re.compile(r"^\s*when\b|\bwhat (?:date|day|month|year)\b", re.IGNORECASE)


class EvidenceText:
    """One evidence item as the responder sees it."""

    def __init__(self, id: str, text: str, time: str | None = None) -> None:  # noqa: A002 - mirrors records
        self.id, self.text, self.time = id, text, time

    def render(self) -> str:
        return f"[{self.id}]{f' ({self.time})' if self.time else ''} {self.text}"


def extractive_answer(question: str, evidence: Sequence[EvidenceText]) -> Answer:
    """The evidence sentence that best answers the question (``best_sentence``: idf-weighted shared words,
    the speakers' names not counting); earlier evidence wins ties.

    A "when" question is answered with the date the sentence's time phrase means on the day its turn was said.
    """
    lines = [_LEAD.sub("", line.strip()) for item in evidence for line in item.text.splitlines()]
    speakers = [m.group(0) for line in lines if (m := _SPEAKER.match(line))]
    sentences: list[tuple[str, str, datetime | None]] = []
    seen: dict[str, int] = {}
    for item in evidence:
        for line in item.text.splitlines():
            # The date a turn was said: its line's "(YYYY-MM-DD)", else the evidence item's time.
            said = _LINE_DATE.search(line)
            anchor = parse_timestamp(said.group(1) if said else (item.time or "")[:10])
            for sentence in split_sentences(_SPEAKER.sub("", _LEAD.sub("", line.strip()))):
                sentence = _TRAIL.sub("", _SPEAKER.sub("", sentence))
                if not content_stems(sentence):
                    continue
                if sentence in seen:  # a summary repeats its turns: keep one, dated by the turn's own line
                    if said:
                        i = seen[sentence]
                        sentences[i] = (*sentences[i][:2], anchor)
                    continue
                seen[sentence] = len(sentences)
                sentences.append((sentence, item.id, anchor))
    best = best_sentence(question, [s for s, _, _ in sentences], ignore=speakers)
    if best is None:
        return Answer(answer=NO_ANSWER, cited_ids=[])
    sentence, item_id, anchor = sentences[best]
    if _WHEN.search(question):  # "yesterday", said on 8 May 2023, answers "When ...?" with 7 May 2023
        for phrase in find_time_phrases(sentence):
            resolved = resolve_relative(phrase, anchor)
            if resolved:
                return Answer(answer=date_text(resolved), cited_ids=[item_id])
    return Answer(answer=sentence, cited_ids=[item_id])


def respond(
    llm: BaseChatModel | None,
    question: str,
    evidence: Sequence[EvidenceText],
    *,
    question_date: str | None = None,
    abstain: bool = True,
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict | None = None,
) -> RoleOutcome[Answer]:
    """The answer from ``evidence``. ``abstain=False``: CompassMem's Appendix F.2 prompt, which never states
    that the information is insufficient (the extractive fallback keeps its ``NO_ANSWER``)."""
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
        messages=prompt.build_messages(question, "\n".join(e.render() for e in evidence) or "(no evidence)", question_date,
                                       abstain=abstain),
        schema=Answer,
        validate=validate,
        fallback=lambda: extractive_answer(question, evidence),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": prompt.VERSION},
    )
