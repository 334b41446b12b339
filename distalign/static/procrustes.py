"""Orthogonal Procrustes alignment of two static word-vector spaces, with optional self-learning.

Given seed translation pairs stacked as rows ``X`` (source) and ``Z`` (target), the map is

    W* = argmin_{W orthogonal} ||X W - Z||_F = U V^T,   where U Σ V^T = svd(X^T Z)

(Schönemann 1966; for cross-lingual embeddings Xing et al. 2015, Smith et al. 2017), computed
by ``scipy.linalg.orthogonal_procrustes``. Following VecMap (Artetxe et al. 2018) the spaces can
first be normalised: unit length, mean-centred, unit length again. Because W is orthogonal it
preserves cosines within the source space; only the relation to the target space changes.

Self-learning (Artetxe et al. 2017, 2018): after mapping, the ``top_n`` most frequent source and
target words (the first rows: word2vec files are sorted by frequency) are paired by mutual nearest
neighbours under cosine or CSLS (Conneau et al. 2018; ``distalign.similarity.similarity_matrix``);
the new dictionary is those pairs united with the seed, and W is refitted. This repeats for
``iterations`` rounds or until the dictionary stops changing. The score matrix holds
``top_n²`` floats (10k words: 400 MB).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.linalg import orthogonal_procrustes

from distalign.data.readers import MAX_EXAMPLES
from distalign.similarity import similarity_matrix


def normalize_embeddings(vectors: np.ndarray) -> np.ndarray:
    """VecMap's ``unit center unit``: rows to unit length, columns to zero mean, rows to unit length."""

    def unit(x):
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(norms > 0, norms, 1.0)  # an all-zero row stays zero

    unit_rows = unit(np.asarray(vectors, dtype=np.float64))
    return unit(unit_rows - unit_rows.mean(0, keepdims=True))


def fit_orthogonal_map(x_src: np.ndarray, x_tgt: np.ndarray) -> np.ndarray:
    """Orthogonal ``W [d, d]`` minimising ``||x_src W - x_tgt||_F`` over aligned rows ``[n, d]``."""
    x_src, x_tgt = np.asarray(x_src, dtype=np.float64), np.asarray(x_tgt, dtype=np.float64)
    if x_src.ndim != 2 or x_src.shape != x_tgt.shape:
        raise ValueError(f"x_src and x_tgt must be [n, d] arrays of one shape, got {x_src.shape} and {x_tgt.shape}")
    if x_src.shape[0] == 0:
        raise ValueError("fit_orthogonal_map needs at least one pair of rows")
    return orthogonal_procrustes(x_src, x_tgt)[0]


def preprocess(vectors: np.ndarray, normalize: bool) -> np.ndarray:
    """The space a map is fitted in: float64, VecMap-normalised if ``normalize``."""
    return normalize_embeddings(vectors) if normalize else np.asarray(vectors, dtype=np.float64)


def apply_map(vectors: np.ndarray, w: np.ndarray, normalize: bool = True) -> np.ndarray:
    """Source vectors in the target space: the preprocessing of :func:`align_spaces`, then ``@ W``."""
    return preprocess(vectors, normalize) @ w


def mutual_nearest_neighbours(
    mapped_src: np.ndarray, tgt: np.ndarray, similarity: str = "csls", k: int = 10
) -> set[tuple[int, int]]:  # host-side: numpy in, index pairs out
    """Pairs ``(i, j)`` where target j is source i's best match and source i is target j's best match."""
    # float32 halves the [n_src, n_tgt] score matrix; neighbour ranks need no more precision.
    scores = similarity_matrix(torch.from_numpy(mapped_src).float(), torch.from_numpy(tgt).float(), similarity, k)
    best_tgt, best_src = scores.argmax(1), scores.argmax(0)
    sources = torch.nonzero(best_src[best_tgt] == torch.arange(len(best_tgt), device=best_tgt.device)).flatten()
    return {(int(i), int(best_tgt[i])) for i in sources}


def seed_index_pairs(src_words, tgt_words, seed_pairs, report: dict) -> set[tuple[int, int]]:
    """Row-index pairs of the seed pairs with a vector on both sides; the others counted in ``report``."""
    src_index = {w: i for i, w in enumerate(src_words)}
    tgt_index = {w: i for i, w in enumerate(tgt_words)}
    found = set()
    for src, tgt in seed_pairs:
        missing = [f"source {src!r}"] * (src not in src_index) + [f"target {tgt!r}"] * (tgt not in tgt_index)
        if missing:
            report["seed_missing"] += 1
            if len(report["missing_examples"]) < MAX_EXAMPLES:
                report["missing_examples"].append(f"({src}, {tgt}): no vector for {' and '.join(missing)}")
        else:
            found.add((src_index[src], tgt_index[tgt]))
    return found


def align_spaces(
    src_words: Sequence[str],
    src_vecs: np.ndarray,
    tgt_words: Sequence[str],
    tgt_vecs: np.ndarray,
    seed_pairs: Sequence[tuple[str, str]],
    iterations: int = 0,
    normalize: bool = True,
    top_n: int = 10_000,
    similarity: str = "csls",
    csls_k: int = 10,
) -> tuple[np.ndarray, dict]:
    """Fit the orthogonal source-to-target map (module docstring); map source vectors with :func:`apply_map`.

    Returns ``W`` and a report: ``seed_pairs`` given, ``seed_missing`` (pairs with a word lacking a
    vector) with ``missing_examples``, ``dictionary_sizes`` (the seed's used pairs, then the
    dictionary of each self-learning round), ``iterations_run`` and ``converged``.
    """
    src_vecs, tgt_vecs = np.asarray(src_vecs), np.asarray(tgt_vecs)
    if src_vecs.ndim != 2 or tgt_vecs.ndim != 2 or src_vecs.shape[1] != tgt_vecs.shape[1]:
        raise ValueError(f"src_vecs and tgt_vecs must be [n, d] with one d, got {src_vecs.shape} and {tgt_vecs.shape}")
    if len(src_words) != len(src_vecs) or len(tgt_words) != len(tgt_vecs):
        raise ValueError("src_words/tgt_words must have one word per row of src_vecs/tgt_vecs")
    if iterations < 0 or top_n < 1:
        raise ValueError(f"iterations must be >= 0 and top_n >= 1, got {iterations} and {top_n}")
    report: dict[str, Any] = {
        "seed_pairs": len(seed_pairs),
        "seed_missing": 0,
        "missing_examples": [],
        "dictionary_sizes": [],
        "iterations_run": 0,
        "converged": False,
    }
    seed = seed_index_pairs(src_words, tgt_words, seed_pairs, report)
    if not seed:
        raise ValueError(
            f"seed_pairs: none of the {len(seed_pairs)} pairs has vectors on both sides ({report['missing_examples']})"
        )
    src, tgt = preprocess(src_vecs, normalize), preprocess(tgt_vecs, normalize)

    def fit(pairs):
        rows, cols = map(list, zip(*sorted(pairs)))
        return fit_orthogonal_map(src[rows], tgt[cols])

    dictionary = seed
    w = fit(dictionary)
    report["dictionary_sizes"].append(len(dictionary))
    for _ in range(iterations):
        induced = mutual_nearest_neighbours(src[:top_n] @ w, tgt[:top_n], similarity, csls_k)
        new_dictionary = seed | induced
        report["iterations_run"] += 1
        report["dictionary_sizes"].append(len(new_dictionary))
        if new_dictionary == dictionary:
            report["converged"] = True
            break
        dictionary = new_dictionary
        w = fit(dictionary)
    return w, report
