"""Alignment of contextual word vectors with static (type-level) word vectors.

Two objectives that tie an encoder's contextual representation ``h`` of a word
to a fixed static embedding ``v`` of the same word (e.g. aligned fastText):

* ``mse_loss(h, v) = mean((h - v) ** 2)`` over all ``N * d`` elements.

* ``dcca_loss(h1, h2, k)`` -- Deep CCA, Andrew, Arora, Bilmes & Livescu (2013),
  "Deep Canonical Correlation Analysis", ICML. With column-centred views
  ``H1 [N, d1]`` and ``H2 [N, d2]``::

      S11 = H1^T H1 / (N - 1) + r1 I,   S22 = H2^T H2 / (N - 1) + r2 I,
      S12 = H1^T H2 / (N - 1),
      T   = S11^{-1/2} S12 S22^{-1/2},
      loss = - (sum of the k largest singular values of T)

  i.e. minus the sum of the top-k (regularised) canonical correlations.
  T is computed with Cholesky factors instead of inverse square roots:
  with S11 = L1 L1^T, L1^{-1} = O S11^{-1/2} for an orthogonal O, so
  L1^{-1} S12 L2^{-T} has the singular values of T. Unlike an
  eigendecomposition, whose gradient divides by eigenvalue gaps, this stays
  differentiable when eigenvalues repeat: in a batch of N < d words all but
  N - 1 of them equal r up to rounding, and exactly when a dimension is
  constant over the batch (an eigh-based version diverged on the tiny model).
  ``eps`` is added to both diagonals so that unregularised rank-deficient
  views still factor. Float32/float16 inputs are computed in float64 and the
  result is cast back to the input dtype. Gradients flow to both views; detach
  the static side yourself when it must not learn.

Inputs: ``h``/``h1`` contextual vectors ``[N, d]`` / ``[N, d1]``; ``v``/``h2``
static vectors ``[N, d]`` / ``[N, d2]``. Both return a scalar tensor.

Example
-------
>>> import torch
>>> h = torch.randn(64, 8, requires_grad=True)
>>> mse_loss(h, torch.zeros(64, 8)).shape
torch.Size([])
>>> v = h.detach() @ torch.randn(8, 8)        # an invertible linear map of h
>>> round(dcca_loss(h, v, k=4, r1=1e-8, r2=1e-8).item(), 3)   # perfectly correlated
-4.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from distalign.errors import require
from distalign.objectives.base import Objective, ObjectiveContext


def mse_loss(h: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Mean squared error between contextual ``h [N, d]`` and static ``v [N, d]``."""
    if h.shape != v.shape:
        raise ValueError(f"h and v must have the same shape, got {tuple(h.shape)} vs {tuple(v.shape)}")
    return ((h - v) ** 2).mean()


def _cholesky_factor(S: torch.Tensor, eps: float) -> torch.Tensor:
    """Lower-triangular ``L`` with ``L L^T = S + eps I`` (``S`` symmetric PSD)."""
    return torch.linalg.cholesky(S + eps * torch.eye(S.shape[0], dtype=S.dtype, device=S.device))


def dcca_loss(
    h1: torch.Tensor,
    h2: torch.Tensor,
    k: int,
    r1: float = 1e-3,
    r2: float = 1e-3,
    eps: float = 1e-9,
) -> torch.Tensor:
    """Negative sum of the top-``k`` canonical correlations of ``h1 [N, d1]`` and ``h2 [N, d2]``."""
    if h1.dim() != 2 or h2.dim() != 2:
        raise ValueError(f"h1 and h2 must be 2-D [N, d], got {tuple(h1.shape)} and {tuple(h2.shape)}")
    n, d1 = h1.shape
    if h2.shape[0] != n:
        raise ValueError(f"h1 and h2 must have the same number of rows N, got {n} vs {h2.shape[0]}")
    if n < 2:
        raise ValueError(f"dcca_loss needs N >= 2 samples, got {n}")
    d2 = h2.shape[1]
    if not 1 <= int(k) <= min(d1, d2):
        raise ValueError(f"k must satisfy 1 <= k <= min(d1, d2) = {min(d1, d2)}, got {k}")
    out_dtype = torch.promote_types(h1.dtype, h2.dtype)
    work = torch.float64 if out_dtype != torch.float64 else out_dtype
    H1 = h1.to(work)
    H2 = h2.to(work)
    H1 = H1 - H1.mean(0, keepdim=True)
    H2 = H2 - H2.mean(0, keepdim=True)
    S11 = H1.T @ H1 / (n - 1) + r1 * torch.eye(d1, dtype=work, device=H1.device)
    S22 = H2.T @ H2 / (n - 1) + r2 * torch.eye(d2, dtype=work, device=H2.device)
    S12 = H1.T @ H2 / (n - 1)
    L1, L2 = _cholesky_factor(S11, eps), _cholesky_factor(S22, eps)
    left = torch.linalg.solve_triangular(L1, S12, upper=False)  # L1^{-1} S12
    T = torch.linalg.solve_triangular(L2, left.T, upper=False).T  # (L1^{-1} S12) L2^{-T}
    corr = torch.linalg.svdvals(T)                        # descending order
    return (-corr[: int(k)].sum()).to(out_dtype)


@dataclass
class StaticAlignConfig:
    # a word's contextual vector (encoded alone, model.word_layer) pulled to its static vector from
    # data.static_vectors; the static side is fixed, only the encoder learns
    weight: float = 0.0
    loss: Literal["mse", "dcca"] = "mse"  # mse needs static dim == hidden size
    dcca_k: int = 10  # top-k canonical correlations (needs train.static_batch_size > k)
    # Without data.static_vectors the targets are derived from the starting model before training:
    # X2Static vectors per corpus language, Procrustes-mapped onto the first language by the training pairs
    extract_layer: int = 6  # X2Static teacher layer (6 for XLM-R base; 0 = embeddings, -1 = last)
    extract_epochs: int = 1
    align_iterations: int = 1  # self-learning rounds after the seed-dictionary fit (0 = seed only)


class StaticAlignObjective(Objective):
    """Words encoded alone and pooled at ``model.word_layer``, pulled to their fixed static vectors."""

    Config = StaticAlignConfig
    stream = "static"
    consumes = ("input_ids", "attention_mask", "word_mask", "vector")
    reference = "Hämmerl et al. 2022, combining static and contextual multilingual embeddings"

    def __init__(self, loss: str = "mse", dcca_k: int = 10):
        super().__init__()
        self.loss, self.dcca_k = loss, dcca_k

    @classmethod
    def validate(cls, cfg: StaticAlignConfig, experiment, key: str) -> None:
        require(cfg.extract_epochs >= 1, f"{key}.extract_epochs", "must be >= 1")
        require(cfg.align_iterations >= 0, f"{key}.align_iterations", "must be >= 0")
        require(cfg.loss == "mse" or experiment.train.static_batch_size > cfg.dcca_k, "train.static_batch_size",
                f"must exceed {key}.dcca_k for Deep CCA")
        model = experiment.model
        if not experiment.data.static_vectors and model.name_or_path == "tiny":  # targets derived from the tiny model
            layers = model.tiny.num_layers
            require(-(layers + 1) <= cfg.extract_layer <= layers, f"{key}.extract_layer",
                    f"must be in [{-(layers + 1)}, {layers}] for the tiny model (model.tiny.num_layers={layers})")

    @classmethod
    def build(cls, cfg: StaticAlignConfig, ctx: ObjectiveContext) -> StaticAlignObjective:
        return cls(cfg.loss, cfg.dcca_k)

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        h = model.encode_words(batch["input_ids"], batch["attention_mask"], batch["word_mask"]).float()
        v = batch["vector"].to(h.device).detach()  # the static side never learns
        return mse_loss(h, v) if self.loss == "mse" else dcca_loss(h, v, self.dcca_k)
