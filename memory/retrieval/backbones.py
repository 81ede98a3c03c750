"""Retrieval backbones by name, the event-graph backbone, and adapters to and from LangChain retrievers.

``make_backbone("bm25" | "dense" | "events" | a BaseRetriever | a Backbone, ...)`` gives one ``search(query, k)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, cast

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from logicmap.memory.indexes.graph import EventGraph
from logicmap.memory.records.records import stable_hash
from logicmap.memory.retrieval.retrieval import Backbone, Hit, MemoryRetriever, reciprocal_rank_fusion
from logicmap.memory.runtime.deadline import check_deadline
from logicmap.memory.store import SnapshotReader

__all__ = [
    "BACKBONE_NAMES",
    "BackboneRetriever",
    "EventGraphBackbone",
    "LangChainBackbone",
    "make_backbone",
]

BACKBONE_NAMES = ("bm25", "dense", "events")

EmbeddingsSource = Embeddings | Callable[[], Embeddings] | None


def _resolve(embeddings: EmbeddingsSource) -> Embeddings | None:
    if embeddings is None or isinstance(embeddings, Embeddings):
        return embeddings
    return embeddings()


class EventGraphBackbone:
    """Events of the event graph: seeds by fused BM25 + dense rank, then their graph neighbours.

    A neighbour linked by a relation often holds the other half of a multi-hop answer (the cause,
    the earlier step), which neither lexical nor dense similarity to the query would rank high.
    """

    def __init__(
        self,
        store: SnapshotReader,
        namespace: str,
        embeddings: EmbeddingsSource = None,
        *,
        neighbor_share: float = 1 / 3,
        neighbor_weight: float = 0.5,
    ) -> None:
        self.store, self.namespace = store, namespace
        self._embeddings = embeddings
        self.neighbor_share, self.neighbor_weight = neighbor_share, neighbor_weight
        self.name = "event_graph"

    def search(self, query: str, k: int) -> list[Hit]:
        if k <= 0:
            return []
        lexical = MemoryRetriever(self.store, self.namespace, method="bm25", unit="events")
        pool = max(2 * k, 10)
        rankings = [[h.id for h in lexical.search(query, pool) if h.score > 0]]
        embeddings = _resolve(self._embeddings)
        if embeddings is not None:
            dense = MemoryRetriever(self.store, self.namespace, method="dense", unit="events", embeddings=embeddings)
            rankings.append([h.id for h in dense.search(query, pool)])
        fused = reciprocal_rank_fusion([r for r in rankings if r])
        if not fused:
            return []
        snapshot = self.store.snapshot(self.namespace)
        graph = EventGraph.of(snapshot)
        score_of = dict(fused)
        n_seeds = max(1, k - math.floor(k * self.neighbor_share))
        chosen: dict[str, float] = {eid: score for eid, score in fused[:n_seeds]}
        neighbours: list[tuple[str, float]] = []
        for seed, seed_score in list(chosen.items()):
            check_deadline("while expanding retrieved events to their neighbours")
            for nb in graph.neighbors(seed):
                if nb.event_id not in chosen:
                    own = score_of.get(nb.event_id, 0.0)
                    neighbours.append((nb.event_id, max(own, seed_score * self.neighbor_weight)))
        for eid, score in sorted(neighbours, key=lambda kv: -kv[1]):
            if len(chosen) >= k:
                break
            chosen.setdefault(eid, score)
        for eid, score in fused[n_seeds:]:
            if len(chosen) >= k:
                break
            chosen.setdefault(eid, score)
        hits = []
        for eid, score in chosen.items():
            event = snapshot.events[eid]
            hits.append(Hit("event", eid, event.render(), list(event.turn_ids), float(score), event.time))
        return hits[:k]


class LangChainBackbone:
    """Any LangChain ``BaseRetriever`` as a backbone. Document metadata may carry ``id``, ``dia_id``,
    ``turn_ids``, ``kind``, ``time`` and ``score``; missing ids are derived from the text."""

    def __init__(self, retriever: BaseRetriever, name: str | None = None) -> None:
        self.retriever = retriever
        self.name = name or f"langchain:{type(retriever).__name__}"

    def search(self, query: str, k: int) -> list[Hit]:
        if k <= 0:
            return []
        documents = self.retriever.invoke(query)
        hits = []
        for rank, doc in enumerate(documents[:k]):
            meta = dict(doc.metadata or {})
            dia_id = meta.get("dia_id")
            rid = str(meta.get("id") or dia_id or doc.id or f"doc-{stable_hash(doc.page_content)}")
            turn_ids = meta.get("turn_ids") or ([dia_id] if dia_id else [])
            found = meta.get("kind") or ("turn" if dia_id else "fact")
            kind = cast(Literal["turn", "event", "fact"], found if found in ("turn", "event", "fact") else "fact")
            score = meta.get("score")
            hits.append(
                Hit(
                    kind,
                    rid,
                    doc.page_content,
                    [str(t) for t in turn_ids],
                    float(score) if isinstance(score, (int, float)) else 1.0 / (rank + 1),
                    meta.get("time"),
                )
            )
        return hits


class BackboneRetriever(BaseRetriever):
    """A backbone as a LangChain ``BaseRetriever`` (documents carry the hit's id, turn ids and score)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    backbone: Any
    k: int = 5

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [
            Document(
                page_content=hit.text,
                id=hit.id,
                metadata={
                    "id": hit.id,
                    "kind": hit.kind,
                    "turn_ids": hit.turn_ids,
                    "score": hit.score,
                    "time": hit.time,
                },
            )
            for hit in self.backbone.search(query, self.k)
        ]


def make_backbone(
    spec: str | Backbone | BaseRetriever,
    store: SnapshotReader,
    namespace: str,
    embeddings: EmbeddingsSource = None,
) -> Backbone:
    """The backbone named ``bm25`` (turns), ``dense`` (turns) or ``events`` (event graph), or the given one.

    Also accepts ``bm25_turns``, ``dense_turns``, ``bm25_events``, ``dense_events``; a LangChain
    retriever is wrapped; an object with ``search(query, k)`` is used as it is.
    """
    if isinstance(spec, BaseRetriever):
        return LangChainBackbone(spec)
    if not isinstance(spec, str):
        if callable(getattr(spec, "search", None)):
            return spec
        raise ValueError(f"not a backbone: {spec!r}; pass a name, a BaseRetriever or an object with search(query, k)")
    name = spec.strip().lower()
    if name in ("bm25", "bm25_turns"):
        return MemoryRetriever(store, namespace, method="bm25", unit="turns")
    if name in ("events", "event_graph", "graph"):
        return EventGraphBackbone(store, namespace, embeddings)
    if name == "bm25_events":
        return MemoryRetriever(store, namespace, method="bm25", unit="events")
    if name in ("dense", "dense_turns", "dense_events"):
        resolved = _resolve(embeddings)
        if resolved is None:
            raise ValueError(f"the {name} backbone needs an embedder")
        unit: Literal["turns", "events"] = "events" if name == "dense_events" else "turns"
        return MemoryRetriever(store, namespace, method="dense", unit=unit, embeddings=resolved)
    raise ValueError(f"unknown backbone {spec!r}; choose one of {', '.join(BACKBONE_NAMES)} or pass a BaseRetriever")
