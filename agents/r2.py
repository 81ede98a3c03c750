"""Memory-R2 roles: fact extractor and memory manager, two roles of one chat model; a fact answerer.

Each role runs through ``run_role``. Without a model the extractor writes one third-person fact per
turn and the manager decides by lexical similarity; that manager can also sample among valid edit
alternatives (seeded, with a temperature) so rollouts from one snapshot differ. The sampling is for
training-data generation only (``evals.train``): ingest (``graphs.ingest.r2``) passes no rng and no
temperature, so its manager and the fallback of the LLM manager are deterministic.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, ConfigDict, Field

from logicmap.agents.answerers import answer_from_best_fact, retrieve_facts
from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome, parse_json_reply, run_role
from logicmap.memory.language.lexicon import (
    ADVERBS,
    CONTRACTIONS,
    HEDGES,
    INTERJECTIONS,
    SKLEARN_STOP_WORDS,
    TEMPORAL_WORDS,
)
from logicmap.memory.language.text import content_stems, stem, tokenize
from logicmap.memory.records.r2 import (
    CandidateFact,
    EditReport,
    FactEdit,
    FactMemory,
    FactRecord,
    InvalidEditBatch,
    canonical_order,
    normalize_fact_text,
)
from logicmap.prompts import r2_extract, r2_manage
from logicmap.prompts.r2_extract import ExtractedFact, FactExtraction
from logicmap.prompts.r2_manage import FactAnswer, ManagerEdit, MemoryEdits

__all__ = [
    "DUPLICATE_SIMILARITY",
    "ManagerOutcome",
    "SessionUpdate",
    "answer_from_facts",
    "candidates_from",
    "content_tokens",
    "edits_completion",
    "extract_facts",
    "fact_key",
    "fact_similarity",
    "fallback_extraction",
    "heuristic_edits",
    "manage_memory",
    "manager_messages",
    "messages_as_dicts",
    "parse_completion",
    "related_memories",
    "render_candidates",
    "retrieve_facts",
    "sample_edits",
    "third_person",
    "update_fact_memory",
    "validate_extraction",
    "validate_procedure",
]

# Token-set Jaccard at or above which a new fact counts as already held (NOOP).
DUPLICATE_SIMILARITY = 0.7
# Related memories shown per new fact (the most similar ones, plus every one about the same subject and attribute).
RELATED_PER_FACT = 5


class TurnLike(Protocol):
    dia_id: str
    speaker: str
    text: str
    image_caption: str | None


# -- extractor -----------------------------------------------------------------------------------

_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'll|I'd|[Mm]y|[Mm]e|[Mm]ine|[Mm]yself|[Ww]e|[Oo]ur|[Oo]urs|us)\b")


def third_person(text: str, speaker: str, listener: str | None = None) -> str:
    """The turn rewritten in the third person: 'I', 'my', 'you' become the speakers' names.

    Verb agreement is left alone ('Maya love it'): the fact stays readable and every name is explicit.
    """
    both = f"{speaker} and {listener}" if listener else speaker
    rules: list[tuple[str, str]] = [
        (r"\bI'm\b|\bI am\b", f"{speaker} is"),
        (r"\bI've\b|\bI have\b", f"{speaker} has"),
        (r"\bI'll\b", f"{speaker} will"),
        (r"\bI'd\b", f"{speaker} would"),
        (r"\bI\b", speaker),
        (r"\b[Mm]yself\b", speaker),
        (r"\b[Mm]y\b|\b[Mm]ine\b", f"{speaker}'s"),
        (r"\b[Mm]e\b", speaker),
        (r"\b[Ww]e're\b", f"{both} are"),
        (r"\b[Ww]e've\b", f"{both} have"),
        (r"\b[Ww]e\b|\bus\b", both),
        (r"\b[Oo]urs?\b", f"{both}'s"),
    ]
    if listener:
        rules += [
            (r"\b[Yy]ou're\b", f"{listener} is"),
            (r"\b[Yy]ou've\b", f"{listener} has"),
            (r"\b[Yy]ourself\b", listener),
            (r"\b[Yy]ours?\b", f"{listener}'s"),
            (r"\b[Yy]ou\b", listener),
        ]
    out = text.replace("\u2019", "'")
    for pattern, replacement in rules:
        out = re.sub(pattern, replacement, out)
    return out


def fallback_extraction(turns: Sequence[TurnLike], speakers: Sequence[str] = ()) -> FactExtraction:
    """One fact per turn, in the third person; a turn that never names its speaker is prefixed 'X said:'."""
    names = list(dict.fromkeys([*speakers, *(t.speaker for t in turns)]))
    facts = []
    for turn in turns:
        others = [n for n in names if n != turn.speaker]
        listener = others[0] if len(others) == 1 else None
        text = third_person(turn.text.strip(), turn.speaker, listener)
        if turn.image_caption:
            text += f" ({turn.speaker} shared an image of {turn.image_caption.strip()})"
        if not re.search(rf"\b{re.escape(turn.speaker)}\b", text):
            text = f"{turn.speaker} said: {text}"
        if text.strip():
            facts.append(ExtractedFact(text=text, turn_ids=[turn.dia_id]))
    return FactExtraction(facts=facts)


def validate_extraction(result: FactExtraction, turns: Sequence[TurnLike]) -> list[str]:
    """Problems a retry can fix: empty facts, unknown or missing turn ids, first-person wording."""
    known = {t.dia_id for t in turns}
    problems = []
    for i, fact in enumerate(result.facts):
        if not fact.text.strip():
            problems.append(f"fact {i}: empty text")
        if not fact.turn_ids:
            problems.append(f"fact {i}: cites no turn ids")
        unknown = [t for t in fact.turn_ids if t not in known]
        if unknown:
            problems.append(f"fact {i}: unknown turn ids {unknown}; valid ids are {sorted(known)}")
        pronoun = _FIRST_PERSON.search(fact.text)
        if pronoun:
            problems.append(f"fact {i}: write it in the third person with names instead of {pronoun.group(0)!r}")
    return problems


def _render_turn(turn: TurnLike) -> str:
    line = f"[{turn.dia_id}] {turn.speaker}: {turn.text}"
    return line + (f" [shares an image: {turn.image_caption}]" if turn.image_caption else "")


def extract_facts(
    llm: BaseChatModel | None,
    turns: Sequence[TurnLike],
    *,
    session_date: str | None = None,
    speakers: Sequence[str] = (),
    method: str = "function_calling",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    paper: bool = False,
) -> RoleOutcome[FactExtraction]:
    """The facts of a batch of turns. Fallback: one third-person fact per turn. ``paper``: the extraction prompt
    of Fig. 6 (its categories; ``IngestContext.faithful``)."""
    names = list(dict.fromkeys([*speakers, *(t.speaker for t in turns)]))
    return run_role(
        llm,
        role="r2_extractor",
        messages=r2_extract.build_messages("\n".join(_render_turn(t) for t in turns), session_date, names, paper=paper),
        schema=FactExtraction,
        validate=lambda r: validate_extraction(r, turns),
        fallback=lambda: fallback_extraction(turns, names),
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": r2_extract.PAPER_VERSION if paper else r2_extract.VERSION},
    )


def candidates_from(extraction: FactExtraction) -> list[CandidateFact]:
    return [CandidateFact(text=f.text.strip(), turn_ids=tuple(f.turn_ids)) for f in extraction.facts if f.text.strip()]


def render_candidates(candidates: Sequence[CandidateFact]) -> str:
    lines = [f"{i}: {c.text}" + (f" [{', '.join(c.turn_ids)}]" if c.turn_ids else "") for i, c in enumerate(candidates)]
    return "\n".join(lines) if lines else "(none)"


# -- lexical similarity and the subject/attribute key ------------------------------------------

_SAID = re.compile(r"^\s*[A-Z][\w'-]*\s+said:\s*")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
_CLAUSE = re.compile(r"[.!?;:()]+\s*")
# Capitalised words that open a sentence without being its subject: memory/language/lexicon.py closed classes.
_NOT_SUBJECT = (
    SKLEARN_STOP_WORDS | INTERJECTIONS | CONTRACTIONS | TEMPORAL_WORDS | ADVERBS | HEDGES | frozenset({"mostly"})
)
# Words between a subject and its attribute that say nothing about which attribute it is.
_AUXILIARY = frozenset(
    "is was are were am be been being has have had will would can could should may might must does did do "
    "still also now just really finally currently usually always never not already then even only "
    "recently soon".split()
)


def content_tokens(text: str) -> frozenset[str]:
    """Lowercased, stemmed content words (no stop words)."""
    return frozenset(content_stems(text))


def fact_similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two token sets."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def fact_key(text: str) -> tuple[str, str] | None:
    """(subject, attribute) of a fact: a proper name and the first content word after it in its sentence.

    'Maya lives in Porto' and 'Maya lives in Lisbon' share the key ('maya', 'live'): the newer one
    updates the older. None when no sentence has a recognisable subject.
    """
    for clause in _CLAUSE.split(_SAID.sub("", text)):
        words = _WORD.findall(clause)
        for i, word in enumerate(words):
            lowered = word.lower().removesuffix("'s")
            if not word[0].isupper() or lowered in _NOT_SUBJECT or lowered in _AUXILIARY:
                continue
            for follower in words[i + 1 :]:
                attribute = follower.lower().removesuffix("'s").strip("'-")
                if len(attribute) < 3 or attribute in _AUXILIARY or not tokenize(attribute):
                    continue
                return lowered, stem(attribute)
    return None


# -- manager -------------------------------------------------------------------------------------


def _alternatives(
    candidate: CandidateFact,
    index: int,
    live: Sequence[FactRecord],
    live_tokens: dict[str, frozenset[str]],
    live_keys: dict[str, tuple[str, str] | None],
    taken_texts: set[str],
    added_tokens: list[frozenset[str]],
    targeted: set[str],
    max_update_targets: int,
) -> tuple[FactEdit, list[FactEdit]]:
    """The greedy decision for one new fact and every valid alternative, given the batch so far."""
    tokens = content_tokens(candidate.text)
    norm = normalize_fact_text(candidate.text)
    ranked = sorted(((fact_similarity(tokens, live_tokens[r.id]), -n, r.id) for n, r in enumerate(live)), reverse=True)
    best_sim, _, best_id = ranked[0] if ranked else (0.0, 0, None)
    text_taken = norm in taken_texts
    duplicate_id = best_id if best_sim >= DUPLICATE_SIMILARITY else None

    greedy: FactEdit
    if text_taken or duplicate_id is not None:
        greedy = FactEdit(op="NOOP", fact=index, id=duplicate_id)
    elif any(fact_similarity(tokens, t) >= DUPLICATE_SIMILARITY for t in added_tokens):
        greedy = FactEdit(op="NOOP", fact=index)
    else:
        key = fact_key(candidate.text)
        same = [rid for _, _, rid in ranked if key is not None and live_keys[rid] == key and rid not in targeted]
        greedy = FactEdit(op="UPDATE", fact=index, id=same[0]) if same else FactEdit(op="ADD", fact=index)

    options: list[FactEdit] = [greedy]
    if not text_taken:
        options.append(FactEdit(op="ADD", fact=index))
    options.append(FactEdit(op="NOOP", fact=index, id=duplicate_id))
    related = [rid for sim, _, rid in ranked if sim > 0 and rid not in targeted]
    if not text_taken:
        options += [FactEdit(op="UPDATE", fact=index, id=rid) for rid in related[:max_update_targets]]
    options += [FactEdit(op="DELETE", fact=index, id=rid) for rid in related[:1]]
    unique = list(dict.fromkeys(options))
    return greedy, unique


def sample_edits(
    memory: FactMemory,
    candidates: Sequence[CandidateFact],
    *,
    rng: random.Random | None = None,
    temperature: float = 0.0,
    max_update_targets: int = 2,
) -> list[FactEdit]:
    """A valid edit batch. Temperature 0 (or no rng) gives the deterministic manager:
    NOOP for a near-duplicate, UPDATE for the same subject and attribute, else ADD.

    With a temperature, each new fact's edit is drawn from its valid alternatives (ADD, NOOP,
    UPDATE of the two most similar facts, DELETE of the most similar) by a softmax over scores
    where the greedy choice scores 1 and the others 0: p(greedy) = e^(1/T) / (e^(1/T) + n - 1).
    Alternatives are recomputed after each choice, so the batch as a whole always validates.
    """
    live = memory.live()
    live_tokens = {r.id: content_tokens(r.text) for r in live}
    live_keys = {r.id: fact_key(r.text) for r in live}
    taken_texts = {normalize_fact_text(r.text) for r in live}
    added_tokens: list[frozenset[str]] = []
    targeted: set[str] = set()
    edits: list[FactEdit] = []
    for index, candidate in enumerate(candidates):
        greedy, options = _alternatives(
            candidate, index, live, live_tokens, live_keys, taken_texts, added_tokens, targeted, max_update_targets
        )
        choice = greedy
        if rng is not None and temperature > 0 and len(options) > 1:
            weights = [math.exp(min(1.0 / temperature, 50.0)) if o == greedy else 1.0 for o in options]
            choice = rng.choices(options, weights=weights, k=1)[0]
        edits.append(choice)
        if choice.op in ("ADD", "UPDATE"):
            taken_texts.add(normalize_fact_text(candidate.text))
        if choice.op == "ADD":
            added_tokens.append(content_tokens(candidate.text))
        if choice.op in ("UPDATE", "DELETE") and choice.id:
            targeted.add(choice.id)
    return canonical_order(edits)


def heuristic_edits(memory: FactMemory, candidates: Sequence[CandidateFact]) -> list[FactEdit]:
    """The deterministic manager (the LLM role's fallback and the no-LLM policy)."""
    return sample_edits(memory, candidates)


def edits_completion(edits: Sequence[FactEdit]) -> str:
    """The edit batch as the manager's JSON reply, in the fixed decision order."""
    payload = [e.model_dump(exclude_none=True) for e in canonical_order(edits)]
    return json.dumps({"edits": payload}, ensure_ascii=False, separators=(",", ":"))


def parse_completion(text: str) -> list[FactEdit]:
    """A manager reply (JSON text) as edits; raises ``ValueError`` when it is not a MemoryEdits object."""
    data = parse_json_reply(AIMessage(content=text))
    return [FactEdit.model_validate(e.model_dump()) for e in MemoryEdits.model_validate(data).edits]


def messages_as_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """Chat messages in the conversational format trainers read: [{role, content}]."""
    roles = {"system": "system", "human": "user", "ai": "assistant"}
    return [{"role": roles.get(m.type, m.type), "content": str(m.content)} for m in messages]


class ManagerOutcome(BaseModel):
    """One manager decision: the prompt it saw, the edits (valid, or empty when skipped) and the cost."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    edits: list[FactEdit]
    messages: list[dict[str, str]]
    completion: str
    skipped: bool = False
    fallback: FallbackRecord | None = None
    cost: Cost = Field(default_factory=Cost)
    attempts: int = 0


def related_memories(
    memory: FactMemory, candidates: Sequence[CandidateFact], k: int = RELATED_PER_FACT
) -> dict[int, list[str]]:
    """Per new fact, the ids of its related memories: the ``k`` live facts most similar to it (content-word Jaccard
    above 0) and every live fact with its subject and attribute (``fact_key``), most similar first.

    Memory-R2 gives each new fact its ``related_memory_ids`` without saying how they are found (the paper text we
    have is a review page); we retrieve them lexically. The set always holds what the no-LLM manager would name, so
    its batch (the role's fallback) is a valid answer to the same prompt."""
    live = memory.live()
    tokens = {r.id: content_tokens(r.text) for r in live}
    keys = {r.id: fact_key(r.text) for r in live}
    related: dict[int, list[str]] = {}
    for index, candidate in enumerate(candidates):
        mine = content_tokens(candidate.text)
        key = fact_key(candidate.text)
        ranked = sorted(((fact_similarity(mine, tokens[r.id]), -n, r.id) for n, r in enumerate(live)), reverse=True)
        similar = [rid for sim, _, rid in ranked if sim > 0][:k]
        same = [rid for _, _, rid in ranked if key is not None and keys[rid] == key]
        related[index] = list(dict.fromkeys([*similar, *same]))
    return related


def manager_messages(
    memory: FactMemory, candidates: Sequence[CandidateFact]
) -> tuple[list[BaseMessage], dict[int, list[str]]]:
    """The manager's prompt: each new fact with its related memory ids, and those memories' text."""
    related = related_memories(memory, candidates)
    shown = {rid for ids in related.values() for rid in ids}
    memory_text = "\n".join(r.render() for r in memory.live() if r.id in shown)
    memory_text = memory_text or ("(no related memories)" if memory.size else "(memory is empty)")
    lines = [
        f"{i}: {c.text}"
        + (f" [{', '.join(c.turn_ids)}]" if c.turn_ids else "")
        + f" (related: {', '.join(related[i]) or 'none'})"
        for i, c in enumerate(candidates)
    ]
    return r2_manage.build_messages(memory_text, "\n".join(lines) or "(none)"), related


def validate_procedure(edits: Sequence[FactEdit], related: dict[int, list[str]]) -> list[str]:
    """The paper's procedure, beyond what memory checks: an UPDATE, DELETE or NOOP names one of its fact's related
    memories, and every fact gets one ADD, UPDATE or NOOP (a DELETE alone loses the new fact)."""
    problems: list[str] = []
    decided = {e.fact for e in edits if e.op != "DELETE"}
    for e in edits:
        allowed = related.get(e.fact, [])
        if e.id is not None and e.op != "ADD" and e.fact in related and e.id not in allowed:
            problems.append(
                f"{e.op} for new fact {e.fact} names {e.id}, which is not one of its related memories "
                f"({', '.join(allowed) or 'none'})"
            )
    for index in sorted({e.fact for e in edits} - decided):
        problems.append(
            f"new fact {index} has only DELETE edits: after deleting what it contradicts, decide the "
            "fact itself (ADD, UPDATE or NOOP)"
        )
    return problems


def _at_temperature(llm: BaseChatModel, temperature: float | None) -> BaseChatModel:
    """The model sampling at ``temperature`` when it has such a field (ChatOpenAI does)."""
    if temperature is None or "temperature" not in type(llm).model_fields:
        return llm
    return llm.model_copy(update={"temperature": temperature})


def manage_memory(
    llm: BaseChatModel | None,
    memory: FactMemory,
    candidates: Sequence[CandidateFact],
    *,
    method: str = "function_calling",
    on_invalid: Literal["skip", "fallback"] = "skip",
    rng: random.Random | None = None,
    temperature: float | None = None,
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> ManagerOutcome:
    """The manager's edits for the new facts; memory is not changed here.

    With a model, a batch still invalid after the retry is skipped (``on_invalid="skip"``, edits
    empty, recorded) or replaced by the deterministic manager (``"fallback"``). Without a model the
    deterministic manager decides, sampling among valid alternatives when ``temperature`` > 0.
    ``temperature`` None leaves the model's own setting alone.
    """
    messages, related = manager_messages(memory, candidates)
    as_dicts = messages_as_dicts(messages)
    if not candidates:
        return ManagerOutcome(edits=[], messages=as_dicts, completion=edits_completion([]))

    def to_edits(result: MemoryEdits) -> list[FactEdit]:
        return [FactEdit.model_validate(e.model_dump()) for e in result.edits]

    def sampled() -> MemoryEdits:
        chosen = sample_edits(memory, candidates, rng=rng, temperature=temperature or 0.0)
        return MemoryEdits(edits=[ManagerEdit.model_validate(e.model_dump()) for e in chosen])

    skip = llm is not None and on_invalid == "skip"
    outcome = run_role(
        _at_temperature(llm, temperature) if llm is not None else None,
        role="r2_manager",
        messages=messages,
        schema=MemoryEdits,
        validate=lambda r: memory.validate(to_edits(r), candidates) + validate_procedure(to_edits(r), related),
        fallback=(lambda: MemoryEdits(edits=[])) if skip else sampled,
        method=method,
        tags=tags,
        metadata={**(metadata or {}), "prompt_version": r2_manage.VERSION},
    )
    edits = to_edits(outcome.output)
    skipped = skip and outcome.fallback is not None
    return ManagerOutcome(
        edits=edits,
        messages=as_dicts,
        completion=edits_completion(edits),
        skipped=skipped,
        fallback=outcome.fallback,
        cost=outcome.cost,
        attempts=outcome.attempts,
    )


class SessionUpdate(BaseModel):
    """What one session did to a fact memory."""

    session_id: str
    candidates: list[CandidateFact]
    manager: ManagerOutcome
    report: EditReport | None = None
    skipped_reason: str | None = None
    fallbacks: list[FallbackRecord] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)


def update_fact_memory(
    llm: BaseChatModel | None,
    memory: FactMemory,
    turns: Sequence[TurnLike],
    *,
    session_id: str,
    session_date: str | None = None,
    speakers: Sequence[str] = (),
    method: str = "function_calling",
    on_invalid: Literal["skip", "fallback"] = "skip",
) -> SessionUpdate:
    """Extract a session's facts, let the manager decide, apply the batch (or skip it, recorded)."""
    extraction = extract_facts(llm, turns, session_date=session_date, speakers=speakers, method=method)
    candidates = candidates_from(extraction.output)
    decision = manage_memory(llm, memory, candidates, method=method, on_invalid=on_invalid)
    fallbacks = [fb for fb in (extraction.fallback, decision.fallback) if fb is not None]
    update = SessionUpdate(
        session_id=session_id,
        candidates=candidates,
        manager=decision,
        fallbacks=fallbacks,
        cost=extraction.cost + decision.cost,
    )
    if decision.skipped:
        update.skipped_reason = "manager output invalid after one retry; batch skipped"
        return update
    try:
        update.report = memory.apply(decision.edits, candidates)
    except InvalidEditBatch as exc:  # the role validated the same batch; kept as a guard, never half-applied
        update.skipped_reason = str(exc)
    return update


# -- answering from the fact memory (the training reward) ---------------------------------------


def answer_from_facts(
    llm: BaseChatModel | None,
    question: str,
    facts: Sequence[FactRecord],
    *,
    k: int = 3,
    method: str = "function_calling",
) -> RoleOutcome[FactAnswer]:
    """The model answers from the top-k facts; fallback (and no model): ``answers.answer_from_best_fact``."""
    top = retrieve_facts(question, facts, k=k)
    return run_role(
        llm,
        role="r2_answerer",
        messages=r2_manage.build_answer_messages(question, "\n".join(f.render() for f in top)),
        schema=FactAnswer,
        validate=lambda r: [] if r.answer.strip() else ["empty answer"],
        fallback=lambda: FactAnswer(answer=answer_from_best_fact(question, facts)),
        method=method,
        metadata={"prompt_version": r2_manage.ANSWER_VERSION},
    )
