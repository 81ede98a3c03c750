"""Embedders: the lexical hashing embedder and the text-hash cache."""

from __future__ import annotations

import numpy as np
from langchain_core.embeddings import Embeddings

from logicmap.memory.indexes.embeddings import CachedEmbeddings, HashingEmbeddings, cosine_matrix


class CountingEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.inner = HashingEmbeddings()
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_hashing_embeddings_are_deterministic_unit_and_lexical() -> None:
    emb = HashingEmbeddings()
    a, b, c = emb.embed_documents(["my dog Biscuit", "my dog Biscuit", "a quarterly tax report"])
    assert a == b
    assert abs(np.linalg.norm(a) - 1.0) < 1e-5
    sims = cosine_matrix([emb.embed_query("dog Biscuit")], [a, c])[0]
    assert sims[0] > 0.5 > sims[1]


def test_cache_batches_misses_and_serves_hits() -> None:
    inner = CountingEmbeddings()
    cached = CachedEmbeddings(inner)
    first = cached.embed_documents(["one", "two"])
    second = cached.embed_documents(["two", "three", "one"])
    assert inner.batches == [["one", "two"], ["three"]]
    assert second[0] == first[1] and second[2] == first[0]
    assert cached.hits == 2 and cached.misses == 3


class WideEmbeddings(CountingEmbeddings):
    """Vectors a float32 cannot hold exactly (as a remote API's JSON floats)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[0.1 + i / 3 for i in range(384)] for _ in texts]


def test_cache_keeps_vectors_compact_and_gives_back_the_same_floats() -> None:
    for inner in (HashingEmbeddings(), WideEmbeddings()):
        cached = CachedEmbeddings(inner)
        texts = [f"text number {i} about a dog" for i in range(50)]
        missed = cached.embed_documents(texts)
        hit = cached.embed_documents(texts)
        assert hit == missed and all(type(x) is float for x in hit[0])
        per_entry = max(v.nbytes for v in cached._cache.values())  # the footprint is the point
        assert per_entry <= 384 * (4 if isinstance(inner, HashingEmbeddings) else 8)
