"""Embedding alignment score: how often a row's cosine nearest neighbour is its translation."""

from __future__ import annotations

import torch

from distalign.eval.bli import CHUNK_SIZE, _check_chunk_size, _normalized_pair

__all__ = ["aligned_nn_hits", "alignment_score"]


def aligned_nn_hits(queries: torch.Tensor, candidates: torch.Tensor, *, chunk_size: int = CHUNK_SIZE) -> torch.Tensor:
    """BoolTensor [n]: hit_i = cos(q_i, c_i) >= max_j cos(q_i, c_j).

    Rows i of ``queries`` and ``candidates`` are aligned pairs (same shape, else
    ValueError). Ties in the argmax count as a hit only when i is among the maximal
    candidates. Query rows are scored ``chunk_size`` at a time.
    """
    _check_chunk_size(chunk_size)
    q, c = _normalized_pair(queries, candidates, same_shape=True)
    hits = []
    for start in range(0, q.shape[0], chunk_size):
        sims = q[start : start + chunk_size] @ c.T
        # Aligned score taken from the same matrix as the maximum, so exact ties compare equal.
        hits.append(sims.diagonal(offset=start) >= sims.amax(dim=1))
    return torch.cat(hits)


def alignment_score(e_src: torch.Tensor, e_tgt: torch.Tensor, *, chunk_size: int = CHUNK_SIZE) -> float:
    """100 * mean_i [argmax_j cos(e_src[i], e_tgt[j]) == i]; ties count as correct if i is among the maxima."""
    return 100.0 * aligned_nn_hits(e_src, e_tgt, chunk_size=chunk_size).double().mean().item()
