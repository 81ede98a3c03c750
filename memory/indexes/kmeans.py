"""k-means in numpy: the labels scikit-learn's ``KMeans(n_clusters=k, n_init=n, random_state=seed)`` gives.

The topic layer re-clusters a namespace's events every few steps (``memory.indexes.topics``). scikit-learn's ``KMeans`` did
it, and importing it (scikit-learn with scipy) cost every process that stores memory about 85 MB of resident memory,
more than 2,000 stored items (docs/performance.md, "Footprint"). This is the same computation in numpy, step for
step and in the same precision, so the labels are the same: the data centred on its mean; k-means++ seeding
(greedy, ``2 + ln k`` local trials, distances computed on float64 copies as scikit-learn's
``_euclidean_distances_upcast``); Lloyd iterations on 256-row chunks (squared distances as ``|c|^2 - 2 x.c``,
each point's first nearest centre, centres as running float32 sums in point order, empty clusters given the points
farthest from their centres); stop at unchanged labels or a total centre shift within ``tol`` times the mean
feature variance; of ``n_init`` runs, the first of the lowest inertia that is not the same clustering.
``tests/unit/test_kmeans.py`` checks the labels against scikit-learn's where it is installed.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["kmeans_labels"]

CHUNK = 256  # rows per Lloyd step chunk (scikit-learn's ``CHUNK_SIZE``)


def kmeans_labels(
    data: np.ndarray, k: int, *, n_init: int = 3, random_state: int = 0, max_iter: int = 300, tol: float = 1e-4
) -> np.ndarray:
    """Each row's cluster (``0 .. k-1``) by k-means++ and Lloyd, the best of ``n_init`` runs (see the module)."""
    x: np.ndarray = np.array(data, dtype=np.float32 if np.asarray(data).dtype == np.float32 else np.float64, order="C")
    if x.ndim != 2 or not 1 <= k <= len(x):
        raise ValueError(f"k-means: {k} clusters of {x.shape} data")
    tolerance = float(np.mean(np.var(x, axis=0)) * tol) if tol else 0.0  # compared with float32 sums: exact
    x -= x.mean(axis=0)
    norms = np.einsum("ij,ij->i", x, x)
    weights = np.ones(len(x), dtype=x.dtype)
    rng = np.random.RandomState(random_state)
    best: tuple[np.ndarray, float] | None = None
    for _ in range(n_init):
        labels, inertia = _lloyd(x, weights, _seeds(x, k, norms, weights, rng), max_iter, tolerance)
        if best is None or (inertia < best[1] and not _same_clustering(labels, best[0], k)):
            best = labels, inertia
    assert best is not None
    return best[0]


def _seeds(x: np.ndarray, k: int, norms: np.ndarray, weights: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    """k-means++ initial centres: each next one the best of ``2 + ln k`` draws by squared distance."""
    del norms  # float32 norms are recomputed on the float64 copies, as scikit-learn does
    n = len(x)
    trials = 2 + int(np.log(k))
    centers = np.empty((k, x.shape[1]), dtype=x.dtype)
    first = rng.choice(n, p=weights / weights.sum())
    centers[0] = x[first]
    closest = _sq_distances(centers[0, np.newaxis], x)
    potential = closest @ weights
    for c in range(1, k):
        draws = rng.uniform(size=trials) * potential
        candidates = np.searchsorted(np.cumsum(weights * closest), draws)
        np.clip(candidates, None, closest.size - 1, out=candidates)
        to_candidates = _sq_distances(x[candidates], x)
        np.minimum(closest, to_candidates, out=to_candidates)
        potentials = to_candidates @ weights.reshape(-1, 1)
        chosen = np.argmin(potentials)
        potential = potentials[chosen]
        closest = to_candidates[chosen]
        centers[c] = x[candidates[chosen]]
    return centers


def _sq_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared distances of float32 rows, computed in float64 blocks (about 10% more memory, at least 10 MiB)."""
    if a.dtype != np.float32 or b.dtype != np.float32:
        d: np.ndarray = -2 * (a @ b.T)
        d += np.einsum("ij,ij->i", a, a)[:, None]
        d += np.einsum("ij,ij->i", b, b)[None, :]
        np.maximum(d, 0, out=d)
        return d
    features = a.shape[1]
    budget = max(((len(a) + len(b)) * features + len(a) * len(b)) / 10, 10 * 2**17)
    step = max(int((-2 * features + math.sqrt((2 * features) ** 2 + 4 * budget)) / 2), 1)
    out = np.empty((len(a), len(b)), dtype=np.float32)
    for i in range(0, len(a), step):
        a64 = a[i : i + step].astype(np.float64)
        a_norms = np.einsum("ij,ij->i", a64, a64)[:, None]
        for j in range(0, len(b), step):
            b64 = b[j : j + step].astype(np.float64)
            d = -2 * (a64 @ b64.T)
            d += a_norms
            d += np.einsum("ij,ij->i", b64, b64)[None, :]
            out[i : i + step, j : j + step] = d.astype(np.float32, copy=False)
    np.maximum(out, 0, out=out)
    return out


def _lloyd(
    x: np.ndarray, weights: np.ndarray, centers: np.ndarray, max_iter: int, tolerance: float
) -> tuple[np.ndarray, float]:
    """One k-means run from ``centers``: the labels and their inertia."""
    labels = np.full(len(x), -1, dtype=np.int32)
    previous = labels.copy()
    converged = False
    for _ in range(max_iter):
        moved = _step(x, weights, centers, labels)
        centers, shift = moved
        if np.array_equal(labels, previous):
            converged = True
            break
        if (shift**2).sum() <= tolerance:
            break
        previous[:] = labels
    if not converged:
        _assign(x, centers, labels)
    return labels, _inertia(x, weights, centers, labels)


def _assign(x: np.ndarray, centers: np.ndarray, labels: np.ndarray) -> None:
    """Each row's nearest centre (the first of equal ones), by ``|c|^2 - 2 x.c`` per chunk of rows."""
    center_norms = np.einsum("ij,ij->i", centers, centers)
    step = min(CHUNK, len(x))
    for start in range(0, len(x), step):
        d = center_norms[None, :] + x.dtype.type(-2.0) * (x[start : start + step] @ centers.T)
        labels[start : start + step] = np.argmin(d, axis=1)


def _step(x: np.ndarray, weights: np.ndarray, centers: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One Lloyd iteration: ``labels`` set in place; the new centres and how far each moved."""
    _assign(x, centers, labels)
    sums = np.zeros_like(centers)
    np.add.at(sums, labels, x * weights[:, None])
    mass = np.zeros(len(centers), dtype=x.dtype)
    np.add.at(mass, labels, weights)
    _relocate_empty(x, weights, centers, sums, mass, labels)
    heaviest = int(np.argmax(mass))
    for j in range(len(centers)):
        if mass[j] > 0:
            sums[j] *= x.dtype.type(1.0 / float(mass[j]))
        else:
            sums[j] = sums[heaviest]
    return sums, np.sqrt(_sq_sums(sums - centers))


def _relocate_empty(
    x: np.ndarray, weights: np.ndarray, old: np.ndarray, sums: np.ndarray, mass: np.ndarray, labels: np.ndarray
) -> None:
    """An empty cluster takes the point farthest from its centre (the farthest first), out of its own cluster."""
    empty = np.where(np.equal(mass, 0))[0]
    if not len(empty):
        return
    distances = ((x - old[labels]) ** 2).sum(axis=1)
    farthest = np.argpartition(distances, -len(empty))[: -len(empty) - 1 : -1]
    if np.max(distances) == 0:
        return
    for new, far in zip(empty, farthest):
        weight = weights[far]
        own = labels[far]
        sums[own] -= x[far] * weight
        sums[new] = x[far] * weight
        mass[new] = weight
        mass[own] -= weight


def _sq_sums(diff: np.ndarray) -> np.ndarray:
    """Per row, the sum of squares as scikit-learn's unrolled loop adds them: four at a time, then in order."""
    squares = diff * diff
    features = diff.shape[1]
    whole = features - features % 4
    quads = squares[:, :whole].reshape(len(diff), -1, 4)
    parts = ((quads[:, :, 0] + quads[:, :, 1]) + quads[:, :, 2]) + quads[:, :, 3]
    parts = np.concatenate([parts, squares[:, whole:]], axis=1)
    return np.add.accumulate(parts, axis=1)[:, -1] if parts.shape[1] else np.zeros(len(diff), dtype=diff.dtype)


def _inertia(x: np.ndarray, weights: np.ndarray, centers: np.ndarray, labels: np.ndarray) -> float:
    """The weighted sum of squared distances to the assigned centres, added in point order."""
    terms = _sq_sums(x - centers[labels]) * weights
    return float(np.add.accumulate(terms)[-1])


def _same_clustering(a: np.ndarray, b: np.ndarray, k: int) -> bool:
    """Whether two labelings are the same partition (labels renamed)."""
    mapping = np.full(k, -1, dtype=np.int64)
    for i, j in zip(a.tolist(), b.tolist()):
        if mapping[i] == -1:
            mapping[i] = j
        elif mapping[i] != j:
            return False
    return True
