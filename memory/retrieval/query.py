"""A search text as query vectors, and the shipped reranker's turn scores: generic retrieval with no LLM.

``QueryEncoder`` embeds a search text as unit vectors, one row per reading (the text and, unless turned off, the
text without its names); ``learned_turn_scores`` scores every turn of a snapshot for a question with the
graph-feature reranker (``memory.retrieval.ranking``), after the second hop along the event graph when asked
(``memory.retrieval.traversal``). The CompassMem policy, the reranker strategy and ``LogicMapStore``'s search use
them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from langchain_core.embeddings import Embeddings

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.language.text import query_readings
from logicmap.memory.retrieval.ranking import default_ranker
from logicmap.memory.retrieval.traversal import default_traversal_ranker
from logicmap.memory.store import NamespaceSnapshot

__all__ = ["QueryEncoder", "learned_turn_scores"]


@dataclass(frozen=True)
class QueryEncoder:
    """Search texts as unit query vectors, one row per reading: the text and, unless turned off, the text
    without its names (``memory.language.text.query_readings``): names dominate a sentence embedding."""

    embeddings: Embeddings
    name_free_readings: bool = True

    def readings(self, text: str) -> list[str]:
        """What a search text is matched as."""
        return query_readings(text) if self.name_free_readings else [text]

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, one row each."""
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return normalize(np.asarray(self.embeddings.embed_documents(texts), dtype=np.float32))

    def vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's reading vectors (one matrix per text), in one embedding call."""
        readings = [self.readings(t) for t in texts]
        flat = self.embed([r for rs in readings for r in rs])
        bounds = np.cumsum([0, *(len(rs) for rs in readings)])
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def learned_turn_scores(
    snapshot: NamespaceSnapshot, question: str, encoder: QueryEncoder, *, traversal: bool = False
) -> dict[str, float]:
    """Every turn's score for ``question`` by the shipped graph-feature reranker (``memory.retrieval.ranking``); with
    ``traversal``, after the second hop from its best turns along the event graph (``memory.retrieval.traversal``)."""
    ranker = default_traversal_ranker() if traversal else default_ranker()
    return ranker.scores(snapshot, question, encoder.embed(encoder.readings(question)))
