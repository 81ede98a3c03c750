"""The topic layer's k-means (``memory.indexes.kmeans``): scikit-learn's labels, without importing scikit-learn."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from logicmap.memory.indexes.embeddings import normalize
from logicmap.memory.indexes.kmeans import kmeans_labels
from logicmap.memory.indexes.topics import TopicLayer, n_clusters_for


def _clustered(n: int, seed: int, centres: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    anchors = rng.standard_normal((centres, 384))
    return normalize((anchors[rng.integers(0, centres, n)] + 0.3 * rng.standard_normal((n, 384))).astype(np.float32))


@pytest.mark.parametrize("n", [2, 5, 11, 64, 255, 256, 257, 513, 1200])
@pytest.mark.parametrize("kind", ["clustered", "noise"])
def test_the_labels_are_scikit_learns(n: int, kind: str) -> None:
    kmeans = pytest.importorskip("sklearn.cluster").KMeans
    x = (
        _clustered(n, n)
        if kind == "clustered"
        else normalize(np.random.default_rng(n).standard_normal((n, 384)).astype(np.float32))
    )
    k = n_clusters_for(n)
    expected = kmeans(n_clusters=k, n_init=3, random_state=0).fit_predict(x)
    assert np.array_equal(kmeans_labels(x, k, n_init=3, random_state=0), expected)


def test_separated_groups_are_found_whatever_the_seed() -> None:
    rng = np.random.default_rng(3)
    x = np.vstack([rng.normal(c, 0.01, (20, 8)) for c in (-5.0, 0.0, 5.0)]).astype(np.float32)
    for seed in range(5):
        labels = kmeans_labels(x, 3, random_state=seed)
        assert sorted(len(set(labels[i : i + 20].tolist())) for i in (0, 20, 40)) == [1, 1, 1]
        assert len(set(labels.tolist())) == 3


def test_a_bad_cluster_count_is_refused() -> None:
    with pytest.raises(ValueError, match="3 clusters"):
        kmeans_labels(np.zeros((2, 4), dtype=np.float32), 3)


def test_reclustering_topics_keeps_scikit_learn_out_of_the_process() -> None:
    # scikit-learn with scipy cost a storing process about 85 MB of resident memory (docs/performance.md).
    code = """
import json, sys
import numpy as np
from logicmap.memory.indexes.topics import TopicLayer
rng = np.random.default_rng(0)
topics = TopicLayer().recluster("ns", {f"E{i}": rng.standard_normal(16).astype(np.float32) for i in range(40)})
print(json.dumps({"topics": len(topics), "loaded": sorted(m for m in ("sklearn", "scipy") if m in sys.modules)}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGICMAP_")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found == {"topics": n_clusters_for(40), "loaded": []}


def test_topics_number_by_earliest_member() -> None:
    x = _clustered(30, 1, centres=3)
    topics = TopicLayer().recluster("ns", {f"E{i}": x[i] for i in range(30)})
    assert [t.id for t in topics] == [f"T{i}" for i in range(len(topics))]
    firsts = [int(t.members[0][1:]) for t in topics]
    assert firsts == sorted(firsts) and firsts[0] == 0
