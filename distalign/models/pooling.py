"""Word representations: the mean of a word's subword states at a chosen layer."""

import torch


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T, d] states, [B, T] 0/1 mask of the word's subword tokens -> [B, d] means.

    Special tokens and padding must be 0 in ``mask``. A row with no token gives a zero vector.
    """
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
