"""Attention masks the encoder takes without asking the GPU a question.

Given a [B, T] padding mask, transformers (5.x, ``masking_utils._ignore_bidirectional_mask_sdpa``) first asks
whether any position is padding (``padding_mask.all()``), to drop the mask where there is none: a host sync at
every encoder call, which makes the host wait for all the GPU's queued work (the previous step's optimizer, this
step's copies) before it can queue the forward. A mask already in the attention's 4-D shape is passed to PyTorch's
scaled-dot-product attention as it is. ``prepared_masks`` installs that conversion once on a loaded model: every
caller (training objectives, evaluation, fine-tuning) keeps passing its [B, T] mask.
"""

from __future__ import annotations

import torch
from torch import nn


def as_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, T] (1: attend, 0: padding) -> [B, 1, 1, T] bool, the shape SDPA broadcasts over heads and queries."""
    return attention_mask[:, None, None, :].bool()


def _prepared_mask_hook(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    mask = kwargs.get("attention_mask")
    if mask is None or mask.dim() != 2 or getattr(module.config, "_attn_implementation", None) != "sdpa":
        return None  # eager attention adds its mask as a float bias: it keeps transformers' own preparation
    return args, kwargs | {"attention_mask": as_attention_mask(mask)}


def prepared_masks(model: nn.Module) -> nn.Module:
    """``model`` (a masked LM or a task model) with its encoder given 4-D masks under SDPA; returns it."""
    encoder = getattr(model, "base_model", model)
    encoder.register_forward_pre_hook(_prepared_mask_hook, with_kwargs=True)
    return model
