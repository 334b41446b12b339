"""Similarity between two embedding spaces, one row per word: cosine on L2-normalised rows, and CSLS (Conneau et al.
2018), which discounts hubs. Shared by BLI's ranking (``distalign.eval.bli_metrics``), cross-lingual alignment
scores and Procrustes' dictionary refinement (``distalign.static``). Query rows are scored ``chunk_size`` at a time,
so only a ``[chunk_size, n_tgt]`` block is held in memory (100K-word target vocabularies fit)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

CHUNK_SIZE = 4096
SIMILARITIES = ("cosine", "csls")


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit L2 norm (non-float input becomes float; zero rows stay zero)."""
    x = torch.as_tensor(x)  # host-side: a tensor keeps its device, an array lands on CPU
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    return F.normalize(x, p=2, dim=-1)


def normalized_pair(a, b, *, same_shape: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
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


def check_chunk_size(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")


def _mean_topk_cos(x: torch.Tensor, y: torch.Tensor, k: int, chunk_size: int) -> torch.Tensor:
    """r(x_i) = mean of the min(k, len(y)) largest cosines of unit row x_i to the unit rows of y."""
    k = min(k, y.shape[0])
    return torch.cat(
        [(x[i : i + chunk_size] @ y.T).topk(k, dim=1).values.mean(dim=1) for i in range(0, x.shape[0], chunk_size)]
    )


def prepared_spaces(src, tgt, similarity: str, k: int, chunk_size: int, src_space=None):
    """Validate arguments; return unit rows (s, t) and r_S over targets (None for cosine)."""
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}; expected one of {SIMILARITIES}")
    check_chunk_size(chunk_size)
    s, t = normalized_pair(src, tgt)
    r_s = None
    if similarity == "csls":
        if k < 1:
            raise ValueError(f"CSLS neighbourhood size k must be >= 1, got {k}")
        space = s if src_space is None else normalized_pair(src_space, tgt)[0].to(s.dtype)
        r_s = _mean_topk_cos(t, space, k, chunk_size)  # r_S(y): y's k nearest rows of the source space
    return s, t, r_s


def scored_chunks(s, t, r_s, k: int, chunk_size: int) -> Iterator[tuple[int, torch.Tensor]]:
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
    s, t, r_s = prepared_spaces(src, tgt, similarity, k, chunk_size, src_space)
    return torch.cat([scores for _, scores in scored_chunks(s, t, r_s, k, chunk_size)])
