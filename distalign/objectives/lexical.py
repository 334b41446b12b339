"""BabelBERT-style multilingual lexical-constraint InfoNCE loss.

Paper: Green, Ponzetto & Glavaš (2022), "BabelBERT: Massively Multilingual
Transformers Meet a Massively Multilingual Lexical Resource" -- lexical
specialisation of a multilingual encoder with a contrastive (InfoNCE) loss
over word pairs that share a BabelNet synset.

The ``2N`` items ``x = [a_1..a_N, b_1..b_N]`` carry the labels
``[synset_ids, synset_ids]``. With ``s_ij = cos(x_i, x_j)`` and temperature
``tau``, every ordered pair ``(i, j)``, ``i != j``, with the same label is a
positive; the negatives ``n`` of ``i`` are the items with another label::

    l_ij = -log( exp(s_ij/tau) / (exp(s_ij/tau) + sum_n exp(s_in/tau)) )
    loss = mean over all positive pairs (i, j) of l_ij

Computed as ``logaddexp(s_ij/tau, logsumexp_n s_in/tau) - s_ij/tau`` with
masking (no Python loops); an item without negatives contributes ``0`` for each
of its positives (they still count in the mean).

Inputs: ``a``, ``b`` float ``[N, d]`` encodings of the two words of each
constraint pair; ``synset_ids`` integer ``[N]``; ``temperature > 0``.
Returns a scalar tensor.

Example
-------
>>> import torch
>>> a, b = torch.randn(4, 16, requires_grad=True), torch.randn(4, 16)
>>> loss = info_nce(a, b, torch.tensor([0, 1, 1, 2]))
>>> loss.backward(); a.grad.shape
torch.Size([4, 16])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(a: torch.Tensor, b: torch.Tensor, synset_ids: torch.Tensor, temperature: float = 0.07) -> torch.Tensor:
    """Multi-positive InfoNCE over the ``2N`` items of ``N`` constraint pairs (see module docstring)."""
    if a.dim() != 2 or a.shape != b.shape:
        raise ValueError(f"a and b must both be [N, d] with equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
    synset_ids = torch.as_tensor(synset_ids, device=a.device)
    if synset_ids.shape != a.shape[:1]:
        raise ValueError(f"synset_ids must have shape [N] = [{a.shape[0]}], got {tuple(synset_ids.shape)}")
    if a.shape[0] == 0:
        raise ValueError("info_nce needs at least one pair (N >= 1)")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")

    x = F.normalize(torch.cat([a, b], 0), dim=-1)
    logits = x @ x.T / temperature                          # [2N, 2N]
    labels = torch.cat([synset_ids, synset_ids])
    same = labels[:, None] == labels[None, :]
    pos = same & ~torch.eye(len(labels), dtype=torch.bool, device=a.device)
    neg = ~same
    # logsumexp over each row's negatives (-inf for a row without any: its positives then cost 0;
    # masked_fill's backward zeroes the masked entries, so no NaN gradient arises)
    lse_neg = torch.logsumexp(logits.masked_fill(~neg, float("-inf")), 1, keepdim=True)
    per_pair = torch.logaddexp(logits, lse_neg) - logits    # -log softmax of s_ij vs {s_ij} U negatives
    return per_pair[pos].mean()


class LexicalObjective(torch.nn.Module):
    """Type-level BabelBERT objective: both words of each constraint pair encoded alone, pooled, InfoNCE."""

    batch_key = "constraints"

    def __init__(self, temperature: float = 0.07):
        super().__init__()
        self.temperature = temperature

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        a = model.encode_words(batch["input_ids1"], batch["attention_mask1"], batch["word_mask1"])
        b = model.encode_words(batch["input_ids2"], batch["attention_mask2"], batch["word_mask2"])
        return info_nce(a.float(), b.float(), batch["synset"], self.temperature)
