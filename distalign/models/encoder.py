"""A masked LM used as an encoder: hidden states of a layer, and word vectors pooled from them.

Evaluation encodes with it directly; training wraps it with objectives
(``distalign.train.module.TrainingModule``), and the objectives read words through it.
"""

from __future__ import annotations

import torch
from torch import nn

from distalign.models.pooling import mean_pool


class Encoder(nn.Module):
    def __init__(self, masked_lm: nn.Module, word_layer: int = -1):
        super().__init__()
        self.masked_lm = masked_lm
        self.word_layer = word_layer

    def layer_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, layer: int | None = None):
        encoder = self.masked_lm.base_model
        out = encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)  # type: ignore[operator]
        return out.hidden_states[self.word_layer if layer is None else layer]

    def encode_words(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, word_mask: torch.Tensor, layer: int | None = None
    ):
        """Mean of the word's subword states; ``word_mask`` excludes special tokens and padding."""
        return mean_pool(self.layer_states(input_ids, attention_mask, layer), word_mask)
