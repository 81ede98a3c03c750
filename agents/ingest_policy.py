"""Ingestion's policy: who makes each decision of the ingest graph, the chat model's roles or the no-LLM rules.

One object per run, chosen by ``ingest_policy`` from the run's pinned policy name (the only place that
compares it): ``LLMIngestPolicy`` calls the roles (segmenter or session analyst, relation extractor,
coreference judge, topic abstractor, REAL fact extractor, MRAgent cue extractor, Memory-R2 extractor and
manager), each with its validation, one retry and recorded fallback; ``RuleIngestPolicy`` is the no-LLM
construction (embedding change points, a temporal chain, similarity verdicts, shared-participant links,
unlabelled topics, fact patterns, the lexical cue builder, one fact per turn and the deterministic manager).
A run that asked for the LLM policy without a chat model gets the rules, with the missing model recorded.

The graphs (``graphs.ingest.nodes``, ``graphs.ingest.redo`` and the enrichers ``graphs.ingest.facts``,
``graphs.ingest.cues``, ``graphs.ingest.r2``) ask the object and never test the policy name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Generic, Literal, Protocol, TypeVar

import numpy as np
from langchain_core.language_models import BaseChatModel

from logicmap.agents.base import Cost, FallbackRecord, RoleOutcome
from logicmap.agents.coref import CandidatePair, judge_pairs, judge_pairs_paper, similarity_verdicts
from logicmap.agents.cue_extractor import session_cue_links, window_links
from logicmap.agents.fact_extractor import extract_session_facts, pattern_extraction
from logicmap.agents.r2 import candidates_from, extract_facts, fallback_extraction, heuristic_edits, manage_memory
from logicmap.agents.relations import chain_relations, relate_session
from logicmap.agents.segmenter import changepoint_segments, finalize_times, segment_session
from logicmap.agents.session_analyst import SessionLayers, analyze_session, combined_pays
from logicmap.agents.topic_abstractor import TopicCluster, abstract_topics
from logicmap.agents.windowing import ContextBudget, WindowedOutcome, plan_windows, prompt_chars, run_windows
from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.records.cues import CueLink
from logicmap.memory.records.r2 import CandidateFact, FactEdit, FactMemory
from logicmap.memory.records.records import Event, Relation, Topic, Turn, relation_id
from logicmap.prompts import r2_extract
from logicmap.prompts.abstract_topics import TopicAbstractSet
from logicmap.prompts.coref import CorefVerdicts
from logicmap.prompts.r2_extract import FactExtraction as R2Extraction
from logicmap.prompts.real_extract import FactExtraction
from logicmap.prompts.relate import RelationSet
from logicmap.prompts.segment import Segmentation

__all__ = [
    "COMBINED_SKIPPED_NOTE",
    "Decided",
    "IngestPolicy",
    "LLMIngestPolicy",
    "RuleIngestPolicy",
    "SHARED_PARTICIPANT_LINKS",
    "SHARED_PARTICIPANT_MIN_SIMILARITY",
    "ingest_policy",
    "shared_participant_links",
]

SHARED_PARTICIPANT_MIN_SIMILARITY = 0.3
SHARED_PARTICIPANT_LINKS = 2
COMBINED_SKIPPED_NOTE = (
    "session_analyst: the combined prompt does not fit the context budget, or needs more calls than one per role, "
    "for this session; the roles were called separately"
)

T = TypeVar("T")


@dataclass
class Decided(Generic[T]):
    """A decision with what it cost: its fallbacks, its notes, and whether the rules made all of it (their caveats,
    such as the patterns reading only a long turn's beginning, then apply to the whole session)."""

    output: T
    cost: Cost = field(default_factory=Cost)
    fallbacks: list[FallbackRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    by_rules: bool = False


class IngestPolicy(Protocol):
    """The decisions of ingestion that a chat model or the no-LLM rules make, one method per decision."""

    @property
    def name(self) -> Literal["llm", "heuristic"]:
        """What the run records as its sessions' policy."""
        ...

    @property
    def llm(self) -> BaseChatModel | None:
        """The chat model the policy calls (None for the rules)."""
        ...

    def run_fallbacks(self) -> list[FallbackRecord]:
        """What the run records once before its first session (the model it asked for is missing)."""
        ...

    def segment(
        self,
        turns: Sequence[Turn],
        vectors: np.ndarray,
        session_time: datetime | None,
        *,
        combined: bool,
        facts: bool,
        cues: bool,
    ) -> tuple[WindowedOutcome[Segmentation], SessionLayers | None]:
        """The session's events; with ``combined``, the session analyst's facts and cue parts of the same calls."""
        ...

    def relate(
        self, summaries: Sequence[str], event_turns: Sequence[Sequence[str]], turns: Sequence[Turn]
    ) -> WindowedOutcome[RelationSet]:
        """Relations between the session's events, keyed ``E1..`` in order."""
        ...

    def judge(self, pairs: Sequence[CandidatePair]) -> RoleOutcome[CorefVerdicts]:
        """Whether each new event is a stored one (merge), overlaps it (link) or neither."""
        ...

    def judge_paper(self, pairs: Sequence[CandidatePair], threshold: float) -> RoleOutcome[CorefVerdicts]:
        """The paper's judge (``IngestContext.faithful``): each pair in its own call with the Coreference & Overlap
        Prompt; ``threshold``: the merge threshold, below which the fallback judges "neither"."""
        ...

    def participant_links(
        self, kept: Sequence[Event], vectors: Mapping[str, Any], graph: EventGraph, namespace: str, session_id: str
    ) -> list[Relation]:
        """Extra edges from stored events to the session's new ones (``vectors``: the new events' embeddings)."""
        ...

    def label_topics(
        self, topics: Sequence[Topic], clusters: Callable[[], Sequence[TopicCluster]]
    ) -> RoleOutcome[TopicAbstractSet] | None:
        """Label and describe ``topics`` in place (MRAgent's Eq. 18; ``clusters`` builds their events on demand);
        None when the policy leaves topics unlabelled."""
        ...

    def extract_facts(self, turns: Sequence[Turn], speakers: Sequence[str]) -> Decided[FactExtraction]:
        """REAL's temporal facts of the session's turns."""
        ...

    def cue_links(
        self,
        turns: Sequence[Turn],
        events: Sequence[Event],
        session_time: datetime | None,
        layers: SessionLayers | None,
    ) -> Decided[list[CueLink]]:
        """MRAgent's cue links of the session (``by_rules``: the lexical builder makes them all)."""
        ...

    def r2_edits(
        self, memory: FactMemory, turns: Sequence[Turn], speakers: Sequence[str], session_date: str | None
    ) -> Decided[tuple[list[CandidateFact], list[FactEdit]]]:
        """Memory-R2: the session's candidate facts and the manager's edit batch against ``memory``."""
        ...


def shared_participant_links(
    kept: Sequence[Event], vectors: Mapping[str, Any], graph: EventGraph, namespace: str, session_id: str
) -> list[Relation]:
    """Without an LLM: each new event linked to up to two similar stored events that share a participant."""
    links: list[Relation] = []
    if not graph.ids:
        return links
    for event in kept:
        sims = graph.similarities(vectors[event.id])
        count = 0
        for index in np.argsort(-sims, kind="stable"):
            if sims[index] < SHARED_PARTICIPANT_MIN_SIMILARITY or count >= SHARED_PARTICIPANT_LINKS:
                break
            other = graph.events[graph.ids[index]]
            if set(other.participants) & set(event.participants):
                rid = relation_id(other.id, "shared_participant", event.id)
                links.append(
                    Relation(
                        id=rid,
                        namespace=namespace,
                        source=other.id,
                        target=event.id,
                        label="shared_participant",
                        turn_ids=[],
                        session_id=session_id,
                    )
                )
                count += 1
    return links


@dataclass(frozen=True)
class RuleIngestPolicy:
    """The no-LLM construction. ``missing_model``: the run asked for the LLM policy and has no chat model (each
    role that would have called it records so)."""

    missing_model: bool = False

    @property
    def name(self) -> Literal["llm", "heuristic"]:
        return "heuristic"

    @property
    def llm(self) -> BaseChatModel | None:
        return None

    def _missing(self, role: str, reason: str = "no chat model configured") -> list[FallbackRecord]:
        return [FallbackRecord(role=role, reason=reason)] if self.missing_model else []

    def run_fallbacks(self) -> list[FallbackRecord]:
        return self._missing("ingest", "no chat model configured: heuristic policy used")

    def segment(
        self,
        turns: Sequence[Turn],
        vectors: np.ndarray,
        session_time: datetime | None,
        *,
        combined: bool,
        facts: bool,
        cues: bool,
    ) -> tuple[WindowedOutcome[Segmentation], SessionLayers | None]:
        """Change points of the turn embeddings, dated from the turns' time phrases."""
        segmentation = finalize_times(changepoint_segments(turns, vectors), turns, session_time)
        return WindowedOutcome(output=segmentation, cost=Cost()), None

    def relate(
        self, summaries: Sequence[str], event_turns: Sequence[Sequence[str]], turns: Sequence[Turn]
    ) -> WindowedOutcome[RelationSet]:
        """A temporal chain of the events in order."""
        keys = [f"E{i + 1}" for i in range(len(summaries))]
        return WindowedOutcome(output=chain_relations(keys, event_turns), cost=Cost())

    def judge(self, pairs: Sequence[CandidatePair]) -> RoleOutcome[CorefVerdicts]:
        """Similarity verdicts."""
        return RoleOutcome(output=similarity_verdicts(pairs), cost=Cost())

    def judge_paper(self, pairs: Sequence[CandidatePair], threshold: float) -> RoleOutcome[CorefVerdicts]:
        """The paper judge's rule (no model asked, nothing recorded): the similarity verdicts at the threshold or
        above, "neither" below it."""
        outcome = judge_pairs_paper(None, pairs, threshold=threshold)
        return RoleOutcome(output=outcome.output, cost=Cost())

    def participant_links(
        self, kept: Sequence[Event], vectors: Mapping[str, Any], graph: EventGraph, namespace: str, session_id: str
    ) -> list[Relation]:
        return shared_participant_links(kept, vectors, graph, namespace, session_id)

    def label_topics(
        self, topics: Sequence[Topic], clusters: Callable[[], Sequence[TopicCluster]]
    ) -> RoleOutcome[TopicAbstractSet] | None:
        """Topics stay unlabelled (the no-LLM memory and answers do not depend on labels)."""
        return None

    def extract_facts(self, turns: Sequence[Turn], speakers: Sequence[str]) -> Decided[FactExtraction]:
        """The fact patterns."""
        return Decided(pattern_extraction(turns, speakers), fallbacks=self._missing("fact_extractor"), by_rules=True)

    def cue_links(
        self,
        turns: Sequence[Turn],
        events: Sequence[Event],
        session_time: datetime | None,
        layers: SessionLayers | None,
    ) -> Decided[list[CueLink]]:
        """No model links: the lexical cue builder makes them all."""
        return Decided([], by_rules=True)

    def r2_edits(
        self, memory: FactMemory, turns: Sequence[Turn], speakers: Sequence[str], session_date: str | None
    ) -> Decided[tuple[list[CandidateFact], list[FactEdit]]]:
        """One third-person fact per turn, and the deterministic manager (never a random choice)."""
        candidates = candidates_from(fallback_extraction(turns, speakers))
        return Decided(
            (candidates, heuristic_edits(memory, candidates)), fallbacks=self._missing("r2_extractor"), by_rules=True
        )


def _turn_chars(turn: Turn) -> int:
    return len(turn.dia_id) + len(turn.speaker) + len(turn.text) + len(turn.image_caption or "") + 32


@dataclass(frozen=True)
class LLMIngestPolicy:
    """The chat model's roles, with the run's structured-output ``method``, context ``budget`` and trace
    ``tags``/``metadata``; every role validates, retries once and falls back to its rule (recorded)."""

    chat_model: BaseChatModel
    method: str = "function_calling"
    budget: ContextBudget = field(default_factory=ContextBudget)
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    paper_prompts: bool = False
    """The papers' construction prompts where a paper gives one (``IngestContext.faithful``): MRAgent's Dialogue
    Processing Prompt for the cue extractor, Memory-R2's extraction prompt (Fig. 6)."""

    @property
    def name(self) -> Literal["llm", "heuristic"]:
        return "llm"

    @property
    def llm(self) -> BaseChatModel | None:
        return self.chat_model

    def _trace(self) -> dict[str, Any]:
        return {"tags": list(self.tags), "metadata": dict(self.metadata)}

    def run_fallbacks(self) -> list[FallbackRecord]:
        return []

    def segment(
        self,
        turns: Sequence[Turn],
        vectors: np.ndarray,
        session_time: datetime | None,
        *,
        combined: bool,
        facts: bool,
        cues: bool,
    ) -> tuple[WindowedOutcome[Segmentation], SessionLayers | None]:
        """The segmenter or, ``combined``, the session analyst (events, facts and cue parts in one call per window).

        A session without memory turns needs no call (the rules segment nothing). A context too small for the
        combined prompt, or a session so long that it would need more calls than the separate roles, is segmented
        alone, and the facts and cues call their own roles (the outcome notes it)."""
        if not turns:
            return RuleIngestPolicy().segment(turns, vectors, session_time, combined=combined, facts=facts, cues=cues)
        options: dict[str, Any] = {
            "session_time": session_time,
            "method": self.method,
            "budget": self.budget,
            **self._trace(),
        }
        if combined:
            session_date = session_time.isoformat() if session_time else None
            if combined_pays(turns, session_date, self.budget, facts=facts, cues=cues):
                return analyze_session(self.chat_model, turns, vectors, facts=facts, cues=cues, **options)
            outcome = segment_session(self.chat_model, turns, vectors, **options)
            outcome.notes.append(COMBINED_SKIPPED_NOTE)
            return outcome, None
        return segment_session(self.chat_model, turns, vectors, **options), None

    def relate(
        self, summaries: Sequence[str], event_turns: Sequence[Sequence[str]], turns: Sequence[Turn]
    ) -> WindowedOutcome[RelationSet]:
        """The relation extractor."""
        return relate_session(
            self.chat_model, summaries, event_turns, turns, method=self.method, budget=self.budget, **self._trace()
        )

    def judge(self, pairs: Sequence[CandidatePair]) -> RoleOutcome[CorefVerdicts]:
        """The coreference judge."""
        return judge_pairs(self.chat_model, pairs, method=self.method, **self._trace())

    def judge_paper(self, pairs: Sequence[CandidatePair], threshold: float) -> RoleOutcome[CorefVerdicts]:
        """The paper's coreference judge, one call per pair."""
        return judge_pairs_paper(self.chat_model, pairs, threshold=threshold, method=self.method, **self._trace())

    def participant_links(
        self, kept: Sequence[Event], vectors: Mapping[str, Any], graph: EventGraph, namespace: str, session_id: str
    ) -> list[Relation]:
        """None: the model's relations and the coreference judge's links stand for them."""
        return []

    def label_topics(
        self, topics: Sequence[Topic], clusters: Callable[[], Sequence[TopicCluster]]
    ) -> RoleOutcome[TopicAbstractSet] | None:
        """The topic abstractor, one call for every topic; a topic it gives no entry stays unlabelled."""
        outcome = abstract_topics(self.chat_model, clusters(), budget=self.budget, method=self.method, **self._trace())
        source: Literal["llm", "fallback"] = "fallback" if outcome.fallback else "llm"
        by_id = {item.topic: item for item in outcome.output.topics}
        for topic in topics:
            item = by_id.get(topic.id)
            topic.label, topic.description = (item.label, item.description) if item else (None, None)
            topic.label_source = source if item else None
        return outcome

    def extract_facts(self, turns: Sequence[Turn], speakers: Sequence[str]) -> Decided[FactExtraction]:
        """The fact extractor, one call per window (a window that falls back gets the patterns)."""
        outcome = extract_session_facts(self.chat_model, turns, method=self.method, budget=self.budget, **self._trace())
        return Decided(outcome.output, outcome.cost, list(outcome.fallbacks), list(outcome.notes))

    def cue_links(
        self,
        turns: Sequence[Turn],
        events: Sequence[Event],
        session_time: datetime | None,
        layers: SessionLayers | None,
    ) -> Decided[list[CueLink]]:
        """The session analyst's cue part when it ran (``layers``), else the cue extractor's own calls."""
        if layers is not None and layers.cue_windows is not None:
            windows = [(w.start, w.end) for w in layers.cue_windows]
            links = window_links(turns, events, windows, [w.extraction for w in layers.cue_windows])
            return Decided(links, fallbacks=list(layers.cue_fallbacks))
        links, outcome = session_cue_links(
            self.chat_model,
            turns,
            events,
            session_time=session_time,
            method=self.method,
            budget=self.budget,
            paper=self.paper_prompts,
            **self._trace(),
        )
        return Decided(links, outcome.cost, list(outcome.fallbacks), list(outcome.notes))

    def _r2_extract(
        self, turns: Sequence[Turn], speakers: Sequence[str], date: str | None
    ) -> tuple[list[CandidateFact], Cost, list[FallbackRecord]]:
        """The session's candidate facts: one extractor call per window of turns that fits the model's context."""
        room = self.budget.prompt_chars - prompt_chars(
            r2_extract.build_messages("", date, list(speakers), paper=self.paper_prompts)
        )
        sizes = [_turn_chars(t) for t in turns]
        windows = plan_windows(len(turns), lambda start, end: sum(sizes[start:end]), room)
        tasks = [
            partial(
                extract_facts,
                self.chat_model,
                turns[start:end],
                session_date=date,
                speakers=speakers,
                method=self.method,
                paper=self.paper_prompts,
                **self._trace(),
            )
            for start, end in windows
        ]
        outcomes: list[RoleOutcome[R2Extraction]] = run_windows(tasks)
        candidates = [c for outcome in outcomes for c in candidates_from(outcome.output)]
        cost = sum((o.cost for o in outcomes), Cost())
        return candidates, cost, [o.fallback for o in outcomes if o.fallback is not None]

    def r2_edits(
        self, memory: FactMemory, turns: Sequence[Turn], speakers: Sequence[str], session_date: str | None
    ) -> Decided[tuple[list[CandidateFact], list[FactEdit]]]:
        """The R2 extractor per window, then the manager's batch: an invalid batch is retried once with its
        problems, then the deterministic manager decides (recorded); no rng and no temperature, so it never samples."""
        candidates, cost, fallbacks = self._r2_extract(turns, speakers, session_date)
        decision = manage_memory(
            self.chat_model, memory, candidates, method=self.method, on_invalid="fallback", **self._trace()
        )
        fallbacks += [decision.fallback] if decision.fallback is not None else []
        return Decided((candidates, decision.edits), cost + decision.cost, fallbacks)


def ingest_policy(
    name: str,
    llm: BaseChatModel | None = None,
    *,
    model: Callable[[], BaseChatModel | None] | None = None,
    method: str = "function_calling",
    budget: ContextBudget | None = None,
    tags: Sequence[str] = (),
    metadata: Mapping[str, Any] | None = None,
    paper_prompts: bool = False,
) -> IngestPolicy:
    """The run's ingest policy from its policy name (``auto`` already resolved: ``graphs.runtime.resources.resolve_policy``):
    the rules for ``heuristic``; the model's roles for ``llm``, or the rules recording the missing model when there
    is none. ``model`` supplies the chat model lazily (asked only for ``llm``, so a no-LLM run builds no model)."""
    if name not in ("llm", "heuristic"):
        raise ValueError(f"unknown ingest policy {name!r}; choose llm or heuristic (resolve auto first)")
    if name == "heuristic":
        return RuleIngestPolicy()
    chat_model = llm if llm is not None else (model() if model is not None else None)
    if chat_model is None:
        return RuleIngestPolicy(missing_model=True)
    return LLMIngestPolicy(
        chat_model,
        method=method,
        budget=budget or ContextBudget(),
        tags=tuple(tags),
        metadata=dict(metadata or {}),
        paper_prompts=paper_prompts,
    )
