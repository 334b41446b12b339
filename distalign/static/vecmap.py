"""VecMap's multi-step mapping of two static spaces (Artetxe, Labaka & Agirre 2018, AAAI), supervised
and semi-supervised (self-learning, Artetxe et al. 2018, ACL), as the static-contextual paper uses it.

With seed pairs stacked as rows ``X`` (source) and ``Z`` (target) of the normalised spaces (unit
length, mean-centred, unit length: :func:`distalign.static.procrustes.normalize_embeddings`), both
spaces are transformed, each step a ``d x d`` matrix (the paper's §3, VecMap's recommended
``--supervised`` setting):

1. whitening:    ``W_x1 = (X^T X)^{-1/2}``, ``W_z1 = (Z^T Z)^{-1/2}`` (the seed rows become decorrelated);
2. orthogonal:   ``U S V^T = svd((X W_x1)^T (Z W_z1))``, ``W_x2 = U``, ``W_z2 = V``;
3. re-weighting: ``W_x3 = S^p_src``, ``W_z3 = S^p_trg`` (p = 0.5 both);
4. de-whitening: ``W_x4 = U^T W_x1^{-1} U`` (source de-whitened by its own inverse whitening, expressed
   in the mapped basis), ``W_z4 = V^T W_z1^{-1} V``; either side may take the other's instead.

The source is mapped by ``W_x = W_x1 W_x2 W_x3 W_x4`` and the target by ``W_z`` likewise: unlike
Procrustes, the target space moves too, so compare a mapped source with the *mapped* target.

Semi-supervised self-learning (VecMap's ``--semi_supervised``): the seed fixes the first map; then
each round induces a new dictionary from the ``vocabulary_cutoff`` most frequent words of each side
(the first rows) as the union of forward (source -> target) and backward nearest neighbours under
CSLS on the mapped vectors' dot products, refits on it (the seed is not kept), and stops when the
mean best similarity improves by less than ``threshold``. VecMap's stochastic dictionary induction
(dropout on the scores) is for its unsupervised mode and is left out: this is its deterministic case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from distalign.static.procrustes import normalize_embeddings, seed_index_pairs

Dewhiten = Literal["src", "trg", "none"]
CHUNK_ROWS = 2048  # rows of a similarity block: [2048, cutoff] float64 at a time


@dataclass(frozen=True, kw_only=True)
class VecMapSettings:
    """VecMap's supervised recommendation (``--supervised``); ``self_learning`` makes it semi-supervised."""

    whiten: bool = True
    src_reweight: float = 0.5
    trg_reweight: float = 0.5
    src_dewhiten: Dewhiten = "src"
    trg_dewhiten: Dewhiten = "trg"
    self_learning: bool = False
    vocabulary_cutoff: int = 20_000
    csls_k: int = 10
    threshold: float = 1e-6  # least gain in the mean best similarity that keeps self-learning going
    max_iterations: int = 100  # a bound the threshold normally reaches first

    def __post_init__(self):
        for side in ("src_dewhiten", "trg_dewhiten"):
            if getattr(self, side) not in ("src", "trg", "none"):
                raise ValueError(f"{side} must be 'src', 'trg' or 'none', got {getattr(self, side)!r}")
        if self.vocabulary_cutoff < 1 or self.csls_k < 0 or self.max_iterations < 1:
            raise ValueError("vocabulary_cutoff and max_iterations must be >= 1, csls_k >= 0")


def whitening_transform(m: np.ndarray) -> np.ndarray:
    """``(M^T M)^{-1/2}`` from ``svd(M) = U S V^T`` as ``V S^{-1} V^T``; ``M [n, d]`` needs rank d."""
    m = np.asarray(m, dtype=np.float64)
    _, s, vt = np.linalg.svd(m, full_matrices=False)
    if m.shape[0] < m.shape[1] or s[-1] <= s[0] * 1e-10:
        raise ValueError(
            f"whitening needs {m.shape[1]} linearly independent dictionary rows (one per dimension); "
            f"got {m.shape[0]} rows of rank {int((s > s[0] * 1e-10).sum())}: give more seed pairs "
            "or turn whitening off"
        )
    return vt.T @ np.diag(1.0 / s) @ vt


def orthogonal_mapping(xw: np.ndarray, zw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(U, s, V)`` with ``U diag(s) V^T = svd(xw^T zw)``: ``xw U`` and ``zw V`` are maximally aligned."""
    u, s, vt = np.linalg.svd(np.asarray(xw, dtype=np.float64).T @ np.asarray(zw, dtype=np.float64))
    return u, s, vt.T


def dewhitening_transform(basis: np.ndarray, whitening: np.ndarray) -> np.ndarray:
    """``basis^T whitening^{-1} basis``: undo a whitening in the coordinates of the orthogonal map."""
    return basis.T @ np.linalg.inv(whitening) @ basis


def fit_vecmap(
    x: np.ndarray, z: np.ndarray, settings: VecMapSettings = VecMapSettings()
) -> tuple[np.ndarray, np.ndarray]:
    """The source and target maps ``(W_x, W_z)`` from aligned seed rows ``x``, ``z`` ``[n, d]`` (module steps 1-4)."""
    x, z = np.asarray(x, dtype=np.float64), np.asarray(z, dtype=np.float64)
    if x.ndim != 2 or x.shape != z.shape or x.shape[0] == 0:
        raise ValueError(f"x and z must be non-empty [n, d] arrays of one shape, got {x.shape} and {z.shape}")
    d = x.shape[1]
    wx1 = whitening_transform(x) if settings.whiten else np.eye(d)
    wz1 = whitening_transform(z) if settings.whiten else np.eye(d)
    u, s, v = orthogonal_mapping(x @ wx1, z @ wz1)
    # After step 2 both sides share one basis, so either side's inverse whitening can de-whiten either side.
    dewhiten = {"src": dewhitening_transform(u, wx1), "trg": dewhitening_transform(v, wz1), "none": np.eye(d)}
    wx = wx1 @ u @ np.diag(s**settings.src_reweight) @ dewhiten[settings.src_dewhiten]
    wz = wz1 @ v @ np.diag(s**settings.trg_reweight) @ dewhiten[settings.trg_dewhiten]
    return wx, wz


def _topk_mean(scores: np.ndarray, k: int) -> np.ndarray:
    k = min(k, scores.shape[1])
    return np.partition(scores, -k, axis=1)[:, -k:].mean(axis=1)


def induce_dictionary(xw: np.ndarray, zw: np.ndarray, csls_k: int = 10) -> tuple[set[tuple[int, int]], float]:
    """VecMap's ``union`` induction: ``{(i, fwd(i))} | {(bwd(j), j)}`` and the mean best similarity.

    Scores are dot products of the mapped rows; with ``csls_k`` > 0 each direction subtracts half the
    other side's mean top-k similarity (CSLS up to a per-query constant, so the same argmax).
    """

    def best(queries, keys, penalty):
        matches, best_sims = [], []
        for start in range(0, len(queries), CHUNK_ROWS):
            sims = queries[start : start + CHUNK_ROWS] @ keys.T
            best_sims.append(sims.max(axis=1))
            matches.append((sims - penalty[None, :] / 2).argmax(axis=1))
        return np.concatenate(matches), np.concatenate(best_sims)

    def knn(queries, keys):
        if csls_k == 0:
            return np.zeros(len(queries))
        return np.concatenate(
            [_topk_mean(queries[s : s + CHUNK_ROWS] @ keys.T, csls_k) for s in range(0, len(queries), CHUNK_ROWS)]
        )

    forward, best_forward = best(xw, zw, knn(zw, xw))
    backward, best_backward = best(zw, xw, knn(xw, zw))
    pairs = {(i, int(j)) for i, j in enumerate(forward)} | {(int(i), j) for j, i in enumerate(backward)}
    return pairs, float((best_forward.mean() + best_backward.mean()) / 2)


def vecmap_align(
    src_words: Sequence[str],
    src_vecs: np.ndarray,
    tgt_words: Sequence[str],
    tgt_vecs: np.ndarray,
    seed_pairs: Sequence[tuple[str, str]],
    settings: VecMapSettings = VecMapSettings(),
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Fit VecMap on normalised spaces (module docstring): ``(W_x, W_z, report)``; map with :func:`apply_vecmap`.

    The report has ``seed_pairs``, ``seed_missing``, ``missing_examples``, ``dictionary_sizes`` (the
    seed's used pairs, then each induced dictionary), ``objectives`` (mean best similarity per
    round), ``iterations_run`` and ``converged``, like :func:`distalign.static.procrustes.align_spaces`.
    """
    src_vecs, tgt_vecs = np.asarray(src_vecs), np.asarray(tgt_vecs)
    if src_vecs.ndim != 2 or tgt_vecs.ndim != 2 or src_vecs.shape[1] != tgt_vecs.shape[1]:
        raise ValueError(f"src_vecs and tgt_vecs must be [n, d] with one d, got {src_vecs.shape} and {tgt_vecs.shape}")
    if len(src_words) != len(src_vecs) or len(tgt_words) != len(tgt_vecs):
        raise ValueError("src_words/tgt_words must have one word per row of src_vecs/tgt_vecs")
    report: dict[str, Any] = {
        "seed_pairs": len(seed_pairs),
        "seed_missing": 0,
        "missing_examples": [],
        "dictionary_sizes": [],
        "objectives": [],
        "iterations_run": 0,
        "converged": False,
    }
    dictionary = seed_index_pairs(src_words, tgt_words, seed_pairs, report)
    if not dictionary:
        raise ValueError(
            f"seed_pairs: none of the {len(seed_pairs)} pairs has vectors on both sides ({report['missing_examples']})"
        )
    x, z = normalize_embeddings(src_vecs), normalize_embeddings(tgt_vecs)

    def fit(pairs):
        rows, cols = map(list, zip(*sorted(pairs)))
        return fit_vecmap(x[rows], z[cols], settings)

    wx, wz = fit(dictionary)
    report["dictionary_sizes"].append(len(dictionary))
    if settings.self_learning:
        cutoff, best = settings.vocabulary_cutoff, -np.inf
        for _ in range(settings.max_iterations):
            induced, objective = induce_dictionary(x[:cutoff] @ wx, z[:cutoff] @ wz, settings.csls_k)
            report["iterations_run"] += 1
            report["objectives"].append(objective)
            if objective - best < settings.threshold:
                report["converged"] = True
                break
            best = objective
            dictionary = induced
            report["dictionary_sizes"].append(len(dictionary))
            wx, wz = fit(dictionary)
    return wx, wz, report


def apply_vecmap(vectors: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A side's vectors in the shared space: normalised (as :func:`vecmap_align` fits them), then ``@ W``."""
    return normalize_embeddings(vectors) @ w
