"""Alignment of contextual word vectors with static (type-level) word vectors.

Two objectives that tie an encoder's contextual representation ``h`` of a word
to a fixed static embedding ``v`` of the same word (e.g. aligned fastText):

* ``mse_loss(h, v) = mean((h - v) ** 2)`` over all ``N * d`` elements.

* ``dcca_loss(h1, h2, k)`` -- the paper's "DCCA" loss, which its code computes
  as the Deep *Generalized* CCA objective (Benton, Khayrallah, Gujral, Reisinger,
  Zhang & Arora 2019, "Deep Generalized Canonical Correlation Analysis",
  RepL4NLP) in Arjmand's implementation (DeepGCCA-pytorch, 2020, ``GCCA_loss``),
  copied as ``dgcca_loss`` in continued_pretraining/DGCCA.py of
  github.com/KathyHaem/combining-static-contextual, here for two views. Each
  view ``H [N, d]`` is column-centred and reduced to its ``k`` leading left
  singular vectors ``A [N, k]`` (thin SVD ``H = A diag(s) B^T``)::

      t    = sqrt(max(s^2 / (s^2 + eps), eps))       (~1; eps = 1e-8 as theirs)
      M    = [A1 diag(t1), A2 diag(t2)]               [N, 2k]
      loss = - (sum of the k largest singular values of M)

  With ``t = 1`` the singular values of ``M`` are ``sqrt(1 +- rho_i)``, where
  ``rho_i`` are the cosines of the principal angles between span(A1) and
  span(A2), i.e. the canonical correlations between the two views' top-k
  principal components: ``loss = - sum_i sqrt(1 + rho_i)``, from ``-k``
  (unrelated) to ``-k sqrt(2)`` (the views' leading principal subspaces
  coincide). Unlike two-view CCA of the full views (Andrew et al. 2013) it is
  not invariant to invertible linear maps of a view: it pulls together the
  directions of largest variance. Only 2k sample directions enter, so the loss
  is degenerate only when ``N - 1 < 2k`` (see ``dcca_forced_correlations``),
  not when ``N - 1 < d1 + d2`` as full-view CCA is.

  Deviations from their code: their "centring" line subtracts row means
  scattered over the matrix by ``H.mean(dim=1).repeat(m, 1).view(-1, m)``
  (for N = 64, m = 768 a constant per column that does not centre it); we
  centre each column, as DGCCA assumes. Their ``r = 1e-4`` is never used, so
  there is no ridge term here either. Gradients of the top-k singular vectors
  use an explicit backward that leaves out pairs of equal singular values: the
  loss does not depend on their rotation, and torch's SVD backward turns the
  repeated zeros of a rank-deficient batch (e.g. a dimension constant over the
  batch) into NaN. Float32/float16 inputs are computed in float64 and the
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
>>> v = 3 * h.detach() + 1                     # the same principal subspace
>>> round(dcca_loss(h, v, k=4).item(), 3)     # -4 * sqrt(2)
-5.657
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import torch
from torch.autograd.function import once_differentiable

from distalign.data.run_facts import RunFacts
from distalign.errors import require
from distalign.objectives.base import Objective, ObjectiveContext
from distalign.objectives.static_mapping import StaticMapping

log = logging.getLogger("distalign")


def mse_loss(h: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Mean squared error between contextual ``h [N, d]`` and static ``v [N, d]``."""
    if h.shape != v.shape:
        raise ValueError(f"h and v must have the same shape, got {tuple(h.shape)} vs {tuple(v.shape)}")
    return ((h - v) ** 2).mean()


class _LeadingSingular(torch.autograd.Function):
    """``(A[:, :k], s[:k])`` of the thin SVD ``H = A diag(s) B^T``; the backward stays finite on repeated values."""

    @staticmethod
    def forward(ctx, H: torch.Tensor, k: int):
        A, s, Bt = torch.linalg.svd(H, full_matrices=False)
        ctx.save_for_backward(A, s, Bt)
        ctx.k = k
        return A[:, :k], s[:k]

    @staticmethod
    @once_differentiable
    def backward(ctx, gA: torch.Tensor, gs: torch.Tensor):
        # Townsend (2016), "Differentiating the singular value decomposition", with no gradient on B:
        # gH = A [(F o (A^T G - G^T A)) diag(s) + diag(gs)] B^T + (I - A A^T) G diag(1/s) B^T,
        # G = [gA, 0], F_ij = 1 / (s_j^2 - s_i^2)
        A, s, Bt = ctx.saved_tensors
        k = ctx.k
        AtG = A.T @ gA
        K = torch.zeros(s.shape[0], s.shape[0], dtype=s.dtype, device=s.device)
        K[:, :k] += AtG
        K[:k, :] -= AtG.T
        gap = s[None, :] ** 2 - s[:, None] ** 2
        # equal values: the loss does not depend on their rotation (inside the top k) or on them at all (beyond it)
        F = torch.where(gap == 0, torch.zeros_like(gap), 1 / gap)
        inner = F * K * s[None, :]
        inner.diagonal()[:k] += gs
        s_inv = torch.where(s[:k] > 0, 1 / s[:k], torch.zeros_like(s[:k]))
        return A @ inner @ Bt + ((gA - A @ AtG) * s_inv) @ Bt[:k], None


def dcca_forced_correlations(n: int, k: int) -> int:
    """How many of ``dcca_loss``'s k correlations are 1 whatever the views: two k-dim subspaces of the
    (n - 1)-dim space of centred batch columns share at least ``2k - (n - 1)`` dimensions."""
    return max(0, 2 * k - (n - 1))


def dcca_loss(h1: torch.Tensor, h2: torch.Tensor, k: int, eps: float = 1e-8) -> torch.Tensor:
    """Deep Generalized CCA loss of ``h1 [N, d1]`` and ``h2 [N, d2]`` over their top-``k`` principal directions."""
    if h1.dim() != 2 or h2.dim() != 2:
        raise ValueError(f"h1 and h2 must be 2-D [N, d], got {tuple(h1.shape)} and {tuple(h2.shape)}")
    n = h1.shape[0]
    if h2.shape[0] != n:
        raise ValueError(f"h1 and h2 must have the same number of rows N, got {n} vs {h2.shape[0]}")
    if not 1 <= int(k) <= min(h1.shape[1], h2.shape[1], n - 1):
        raise ValueError(
            f"k must satisfy 1 <= k <= min(d1, d2, N - 1) = {min(h1.shape[1], h2.shape[1], n - 1)} "
            f"(a centred batch of N rows has rank <= N - 1), got {k}"
        )
    out_dtype = torch.promote_types(h1.dtype, h2.dtype)
    columns = []
    for h in (h1, h2):
        H = h.to(torch.float64)
        A, s = _LeadingSingular.apply(H - H.mean(0, keepdim=True), int(k))
        t = torch.sqrt(torch.clamp(s * s / (s * s + eps), min=eps))
        columns.append(A * t)
    corr = torch.linalg.svdvals(torch.cat(columns, 1))  # descending order
    return (-corr[: int(k)].sum()).to(out_dtype)


@dataclass(kw_only=True)
class StaticAlignConfig:
    # a word's contextual vector (encoded alone, model.word_layer) pulled to its static vector from
    # data.static_vectors; the static side is fixed, only the encoder learns
    weight: float = 0.0
    loss: Literal["mse", "dcca"] = "mse"  # mse needs static dim == hidden size
    # k of Deep (G)CCA, theirs: leading principal directions per view and correlations summed (needs
    # train.static_batch_size > k; above 2k, or some correlations are 1 whatever the encoder does)
    dcca_k: int = 10
    # Without data.static_vectors the targets are derived from the starting model before training:
    # X2Static vectors per corpus language, mapped (below) onto the first language by the training pairs
    extract_layer: int = 6  # X2Static teacher layer (6 for XLM-R base; 0 = embeddings, -1 = last)
    extract_epochs: int = 1  # X2Static training epochs over the corpus
    align_iterations: int = 1  # self-learning rounds after the seed-dictionary fit (0 = seed only)
    # where the driver extracts them, before Ray Train starts: cpu, or cuda on a driver with a GPU of its own (Ray
    # does not count the driver's use: on a worker node's GPU it would share it with a training worker)
    extract_device: Literal["cpu", "cuda"] = "cpu"
    # procrustes (orthogonal, onto the pivot's normalised space) or vecmap (whitening, orthogonal map, re-weighting,
    # de-whitening; needs at least as many seed pairs with vectors as the vectors have dimensions)
    mapping: StaticMapping = "procrustes"


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
    def validate(cls, cfg: StaticAlignConfig, facts: RunFacts, key: str) -> None:
        require(cfg.extract_epochs >= 1, f"{key}.extract_epochs", "must be >= 1")
        require(cfg.align_iterations >= 0, f"{key}.align_iterations", "must be >= 0")
        require(
            cfg.loss == "mse" or facts.static_batch_size > cfg.dcca_k,
            "train.static_batch_size",
            f"must exceed {key}.dcca_k for Deep CCA",
        )
        layers = facts.tiny_model_layers
        if not facts.has_static_vectors and layers is not None:  # targets derived from the tiny model
            require(
                -(layers + 1) <= cfg.extract_layer <= layers,
                f"{key}.extract_layer",
                f"must be in [{-(layers + 1)}, {layers}] for the tiny model (model.tiny.num_layers={layers})",
            )

    @classmethod
    def check_targets(cls, cfg: StaticAlignConfig, facts: RunFacts, dim: int, hidden_size: int) -> None:
        """Its rules for the static stream's targets, checked when the driver reads them
        (``distalign.preparation.static_targets``): ``dim``-dimensional vectors for a model of ``hidden_size``."""
        if cfg.loss == "mse" and dim != hidden_size:
            raise ValueError(
                f"data.static_vectors: {dim}-dimensional vectors, but objectives.static.loss=mse "
                f"needs the model's hidden size {hidden_size} (use loss=dcca for other sizes)"
            )
        batch = facts.static_batch_size
        if cfg.loss == "dcca" and (forced := dcca_forced_correlations(batch, cfg.dcca_k)):
            # each view's k leading directions lie in the (N - 1)-dim centred batch space: 2k > N - 1 makes them overlap
            log.warning(
                "train.static_batch_size=%d words per worker with objectives.static.dcca_k=%d: %d of Deep "
                "CCA's %d correlations are 1 whatever the encoder does and teach nothing; use "
                "train.static_batch_size > 2 * objectives.static.dcca_k",
                batch,
                cfg.dcca_k,
                forced,
                cfg.dcca_k,
            )

    @classmethod
    def build(cls, cfg: StaticAlignConfig, ctx: ObjectiveContext) -> StaticAlignObjective:
        return cls(cfg.loss, cfg.dcca_k)

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        h = model.encode_words(batch["input_ids"], batch["attention_mask"], batch["word_mask"]).float()
        v = batch["vector"].to(h.device).detach()  # the static side never learns
        return mse_loss(h, v) if self.loss == "mse" else dcca_loss(h, v, self.dcca_k)
