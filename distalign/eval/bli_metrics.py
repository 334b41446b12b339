"""Bilingual lexicon induction (BLI): cosine / CSLS retrieval, gold ranks, MRR and P@k.

Embeddings are torch tensors with one row per word. Rows are L2-normalised, so
cosine similarity is a matrix product; all-zero rows stay zero (cosine 0 to
everything). Query rows are processed ``chunk_size`` at a time, so only a
``[chunk_size, n_tgt]`` score block is held in memory (100K-word target
vocabularies fit).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator, Sequence

import torch
import torch.nn.functional as F

__all__ = [
    "CHUNK_SIZE",
    "SIMILARITIES",
    "l2_normalize",
    "similarity_matrix",
    "gold_ranks",
    "mrr",
    "precision_at_k",
    "ranking_metrics",
]

CHUNK_SIZE = 4096
SIMILARITIES = ("cosine", "csls")


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit L2 norm (non-float input becomes float; zero rows stay zero)."""
    x = torch.as_tensor(x)  # host-side: a tensor keeps its device, an array lands on CPU
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    return F.normalize(x, p=2, dim=-1)


def _normalized_pair(a, b, *, same_shape: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate two non-empty 2-D matrices, cast to a common float dtype, L2-normalise rows."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)  # host-side: a tensor keeps its device, an array lands on CPU
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"expected 2-D [rows, dim] tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if same_shape and a.shape != b.shape:
        raise ValueError(f"shapes must match, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"embedding dims differ: {a.shape[1]} vs {b.shape[1]}")
    if a.shape[0] == 0 or b.shape[0] == 0:
        raise ValueError("embedding matrices must have at least one row")
    dtype = torch.promote_types(a.dtype, b.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    return l2_normalize(a.to(dtype)), l2_normalize(b.to(dtype))


def _check_chunk_size(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")


def _mean_topk_cos(x: torch.Tensor, y: torch.Tensor, k: int, chunk_size: int) -> torch.Tensor:
    """r(x_i) = mean of the min(k, len(y)) largest cosines of unit row x_i to the unit rows of y."""
    k = min(k, y.shape[0])
    return torch.cat(
        [(x[i : i + chunk_size] @ y.T).topk(k, dim=1).values.mean(dim=1) for i in range(0, x.shape[0], chunk_size)]
    )


def _prepare(src, tgt, similarity: str, k: int, chunk_size: int, src_space=None):
    """Validate arguments; return unit rows (s, t) and r_S over targets (None for cosine)."""
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}; expected one of {SIMILARITIES}")
    _check_chunk_size(chunk_size)
    s, t = _normalized_pair(src, tgt)
    r_s = None
    if similarity == "csls":
        if k < 1:
            raise ValueError(f"CSLS neighbourhood size k must be >= 1, got {k}")
        space = s if src_space is None else _normalized_pair(src_space, tgt)[0].to(s.dtype)
        r_s = _mean_topk_cos(t, space, k, chunk_size)  # r_S(y): y's k nearest rows of the source space
    return s, t, r_s


def _score_chunks(s, t, r_s, k: int, chunk_size: int) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield (start, scores of query rows start:start+chunk_size against all targets)."""
    for start in range(0, s.shape[0], chunk_size):
        scores = s[start : start + chunk_size] @ t.T
        if r_s is not None:
            r_t = scores.topk(min(k, t.shape[0]), dim=1).values.mean(dim=1)  # r_T(x)
            scores = scores.mul_(2).sub_(r_t[:, None]).sub_(r_s[None, :])
        yield start, scores


def similarity_matrix(
    src: torch.Tensor,
    tgt: torch.Tensor,
    similarity: str = "cosine",
    k: int = 10,
    *,
    chunk_size: int = CHUNK_SIZE,
    src_space: torch.Tensor | None = None,
) -> torch.Tensor:
    """[n_src, n_tgt] scores between rows of ``src`` and ``tgt``.

    cosine: cos(x, y) on L2-normalised rows.
    csls (Conneau et al. 2018): csls(x, y) = 2 cos(x, y) - r_T(x) - r_S(y), where
    r_T(x) is the mean cosine of x to its k nearest rows of ``tgt`` and r_S(y) the
    mean cosine of y to its k nearest rows of the source space (k clipped to the row count).
    The source space is ``src_space`` (Conneau et al.: the source vocabulary the queries come
    from, so a query's score does not depend on which other queries are evaluated), or ``src``.
    """
    s, t, r_s = _prepare(src, tgt, similarity, k, chunk_size, src_space)
    return torch.cat([scores for _, scores in _score_chunks(s, t, r_s, k, chunk_size)])


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
    s, t, r_s = _prepare(src, tgt_vocab, similarity, k, chunk_size, src_space)
    rows, cols, offsets = _gold_index(gold, s.shape[0], t.shape[0])
    rows, cols = rows.to(s.device), cols.to(s.device)
    ranks = torch.empty(s.shape[0], dtype=torch.long, device=s.device)
    for start, scores in _score_chunks(s, t, r_s, k, chunk_size):
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
