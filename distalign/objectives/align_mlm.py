"""ALIGN-MLM word-embedding alignment loss.

Paper: Tang, Deshpande & Narasimhan (2022), "Align-MLM: Word Embedding
Alignment is Crucial for Multilingual Pre-training".

ALIGN-MLM adds to the MLM loss an alignment term that pulls the input
embeddings of bilingual-dictionary translation pairs together::

    L_align = - (1/N) * sum_i cos(E[src_i], E[tgt_i])

where ``E`` is the ``[V, d]`` input-embedding matrix. The total objective is
``L_mlm + alpha * L_align``; the weight ``alpha`` is applied by the caller.

Inputs
------
embedding_weight : FloatTensor ``[V, d]`` (e.g. ``model.get_input_embeddings().weight``).
src_ids, tgt_ids : LongTensor ``[N]`` (one token per word) or ``[N, T]`` padded
    with ``-1`` (multi-token words); a word's vector is then the mean of the
    embedding rows of its valid subword ids. The two sides may use different
    layouts / padding widths but must have the same ``N``.

Returns a scalar tensor, differentiable w.r.t. ``embedding_weight``.

Example
-------
>>> import torch
>>> E = torch.eye(4, requires_grad=True)
>>> align_loss(E, torch.tensor([0, 1]), torch.tensor([0, 2]))   # cos = 1, 0
tensor(-0.5000, grad_fn=<NegBackward0>)
>>> round(align_loss(E, torch.tensor([[0, 1], [2, -1]]), torch.tensor([0, 2])).item(), 4)
-0.8536
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from distalign.objectives.base import Objective

PAD_ID = -1


def _word_vectors(weight: torch.Tensor, ids: torch.Tensor, name: str) -> torch.Tensor:
    """Return ``[N, d]`` word vectors: embedding rows, or means of valid subword rows."""
    ids = torch.as_tensor(ids, device=weight.device)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got {ids.dtype}")
    if ids.dim() == 1:
        ids = ids.unsqueeze(1)
    elif ids.dim() != 2:
        raise ValueError(f"{name} must be 1-D [N] or 2-D [N, T], got shape {tuple(ids.shape)}")
    ids = ids.long()
    valid = ids != PAD_ID
    V = weight.shape[0]
    bad = valid & ((ids < 0) | (ids >= V))
    if bad.any():
        row = int(bad.any(1).nonzero()[0])
        raise ValueError(f"{name} row {row} has an id outside [0, {V}) (pad id is {PAD_ID}): {ids[row].tolist()}")
    counts = valid.sum(1)
    if ids.shape[0] and (counts == 0).any():
        row = int((counts == 0).nonzero()[0])
        raise ValueError(f"{name} row {row} has no valid token id (all padding)")
    rows = weight[ids.clamp_min(0)]                       # [N, T, d]
    rows = rows * valid.unsqueeze(-1).to(rows.dtype)
    return rows.sum(1) / counts.unsqueeze(-1).to(rows.dtype)


def align_loss(embedding_weight: torch.Tensor, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
    """ALIGN-MLM loss ``-mean_i cos(E[src_i], E[tgt_i])`` (see module docstring)."""
    if embedding_weight.dim() != 2:
        raise ValueError(f"embedding_weight must be [V, d], got shape {tuple(embedding_weight.shape)}")
    n_src, n_tgt = torch.as_tensor(src_ids).shape[:1], torch.as_tensor(tgt_ids).shape[:1]
    if n_src != n_tgt:
        raise ValueError(f"src_ids and tgt_ids must have the same number of words N, got {n_src} vs {n_tgt}")
    if n_src == (0,) or len(n_src) == 0:
        raise ValueError("src_ids/tgt_ids must contain at least one word")
    s = _word_vectors(embedding_weight, src_ids, "src_ids")
    t = _word_vectors(embedding_weight, tgt_ids, "tgt_ids")
    return -F.cosine_similarity(s, t, dim=-1).mean()


def word_token_ids(input_ids: torch.Tensor, word_mask: torch.Tensor) -> torch.Tensor:
    """``[N, T]`` ids of each word's own subword tokens, ``PAD_ID`` elsewhere (specials, padding)."""
    return torch.where(word_mask.bool(), input_ids, torch.full_like(input_ids, PAD_ID))


@dataclass
class AlignConfig:
    # weight = alpha (10 in the paper) on -mean cos of the input embeddings of the training pairs
    # (data.constraints / data.dictionaries; their share: data.dictionary_fraction)
    weight: float = 0.0


class AlignObjective(Objective):
    """ALIGN-MLM's alignment term on the dictionary (constraint) pairs of a batch.

    A multi-token word is the mean of its subword embedding rows (single-token words are their
    row). Only the rows the batch uses are looked up, through the embedding module's forward: under
    DeepSpeed ZeRO-3 ``.weight`` is a partitioned placeholder, while the forward gathers it.
    The weight alpha (10 in the paper) is this objective's ``objectives.align.weight``.
    """

    Config = AlignConfig
    stream = "constraints"
    consumes = ("input_ids1", "word_mask1", "input_ids2", "word_mask2")
    reference = "Tang, Deshpande & Narasimhan 2022, ALIGN-MLM"

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        src = word_token_ids(batch["input_ids1"], batch["word_mask1"])
        tgt = word_token_ids(batch["input_ids2"], batch["word_mask2"])
        used = torch.cat([src[src != PAD_ID], tgt[tgt != PAD_ID]]).unique()  # sorted
        rows = model.masked_lm.get_input_embeddings()(used)

        def compact(ids):  # ids -> positions in `used`, padding kept
            return torch.where(ids == PAD_ID, ids, torch.searchsorted(used, ids.clamp_min(0)))

        return align_loss(rows.float(), compact(src), compact(tgt))
