"""Bilingual lexicon induction (BLI): gold ranks under cosine / CSLS retrieval (``distalign.similarity``), MRR and
P@k. Embeddings are torch tensors with one row per word; all-zero rows stay zero (cosine 0 to everything)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import torch

from distalign.similarity import CHUNK_SIZE, prepared_spaces, scored_chunks

__all__ = [
    "gold_ranks",
    "mrr",
    "precision_at_k",
    "ranking_metrics",
]


def _gold_index(gold: Sequence[Iterable[int] | int], n: int, m: int):  # host-side: the caller moves rows, cols
    """Flatten gold sets into (row, col) pairs plus per-query offsets into them."""
    if hasattr(gold, "tolist"):  # a tensor or array: [n] target indices, or [n, k] sets
        gold = gold.tolist()
    if isinstance(gold, (str, bytes)) or len(gold) != n:
        raise ValueError(f"gold must hold one set of target indices per query ({n}), got {len(gold)}")
    sets = [
        [int(g)] if isinstance(g, numbers.Integral) or (hasattr(g, "ndim") and g.ndim == 0) else [int(x) for x in g]
        for g in gold
    ]
    lengths = torch.tensor([len(g) for g in sets], dtype=torch.long)
    if (lengths == 0).any():
        raise ValueError(f"query {int((lengths == 0).nonzero()[0])} has an empty gold set")
    cols = torch.tensor([int(j) for g in sets for j in g], dtype=torch.long)
    if cols.min() < 0 or cols.max() >= m:
        raise ValueError(f"gold target indices must lie in [0, {m}), got range [{int(cols.min())}, {int(cols.max())}]")
    rows = torch.repeat_interleave(torch.arange(n), lengths)
    offsets = torch.zeros(n + 1, dtype=torch.long)
    offsets[1:] = lengths.cumsum(0)
    return rows, cols, offsets


def gold_ranks(
    src: torch.Tensor,
    tgt_vocab: torch.Tensor,
    gold: Sequence[Iterable[int] | int],
    similarity: str = "cosine",
    k: int = 10,
    *,
    chunk_size: int = CHUNK_SIZE,
    src_space: torch.Tensor | None = None,
) -> torch.Tensor:
    """LongTensor [n]: 1-based rank of the best-scoring gold translation of each query.

    ``src`` [n, d] holds one row per test query, ``tgt_vocab`` [m, d] the candidate
    targets, ``gold[i]`` the target indices correct for query i (an iterable, or a
    single int). rank_i = 1 + #{non-gold j : score(i, j) >= max_{g in gold_i} score(i, g)}.
    Ties count against the gold (pessimistic): a non-gold candidate scoring exactly as
    high as the best gold ranks above it. An encoder that maps many words to one
    vector (e.g. all to ``<unk>``) therefore scores near 0, not near 1; distinct
    real-valued vectors almost never tie. Empty gold sets raise ValueError.
    ``similarity``/``k``/``src_space`` are as in :func:`similarity_matrix`.
    """
    s, t, r_s = prepared_spaces(src, tgt_vocab, similarity, k, chunk_size, src_space)
    rows, cols, offsets = _gold_index(gold, s.shape[0], t.shape[0])
    rows, cols = rows.to(s.device), cols.to(s.device)
    ranks = torch.empty(s.shape[0], dtype=torch.long, device=s.device)
    for start, scores in scored_chunks(s, t, r_s, k, chunk_size):
        stop = start + scores.shape[0]
        lo, hi = int(offsets[start]), int(offsets[stop])
        local_rows = rows[lo:hi] - start
        best_gold = torch.full((scores.shape[0],), float("-inf"), dtype=scores.dtype, device=scores.device)
        best_gold.scatter_reduce_(0, local_rows, scores[local_rows, cols[lo:hi]], reduce="amax")
        # Gold candidates are not competitors: push them below every score before counting ties.
        scores[local_rows, cols[lo:hi]] = float("-inf")
        # In place (scores -> 0/1) to avoid a [chunk, m] temporary; 0/1 float sums are exact below 2**24.
        beats = scores.ge_(best_gold[:, None]).sum(dim=1, dtype=torch.float64 if t.shape[0] >= 2**24 else None)
        ranks[start:stop] = 1 + beats.long()
    return ranks


def mrr(
    src: torch.Tensor,
    tgt_vocab: torch.Tensor,
    gold: Sequence[Iterable[int] | int],
    similarity: str = "cosine",
    k: int = 10,
    **options,
) -> float:
    """Mean reciprocal rank: mean_i 1 / rank_i, ranks from :func:`gold_ranks` (ties count against gold;
    ``options``: its keyword-only ``chunk_size`` and ``src_space``)."""
    ranks = gold_ranks(src, tgt_vocab, gold, similarity, k, **options)
    return ranks.double().reciprocal().mean().item()


def precision_at_k(
    src: torch.Tensor,
    tgt_vocab: torch.Tensor,
    gold: Sequence[Iterable[int] | int],
    k_values: Iterable[int] = (1, 5, 10),
    similarity: str = "cosine",
    csls_k: int = 10,
    *,
    chunk_size: int = CHUNK_SIZE,
    src_space: torch.Tensor | None = None,
) -> dict[int, float]:
    """{k: fraction of queries with rank <= k} for each k in ``k_values`` (ranks from :func:`gold_ranks`).

    ``csls_k`` is the CSLS neighbourhood size (unrelated to the precision cut-offs).
    """
    ranks = gold_ranks(src, tgt_vocab, gold, similarity, csls_k, chunk_size=chunk_size, src_space=src_space)
    return {k: value for k, value in ranking_metrics(ranks, k_values).items() if k != "mrr"}


def ranking_metrics(ranks: torch.Tensor, k_values: Iterable[int] = (1, 5, 10)) -> dict:
    """``{"mrr": mean 1/rank, k: fraction of ranks <= k ...}`` from one ranking (score once, report all)."""
    k_values = [int(k) for k in k_values]
    if any(k < 1 for k in k_values):
        raise ValueError(f"precision cut-offs must be >= 1, got {k_values}")
    ranks = torch.as_tensor(ranks)  # host-side: a tensor keeps its device
    return {
        "mrr": ranks.double().reciprocal().mean().item(),
        **{k: (ranks <= k).double().mean().item() for k in k_values},
    }
