"""The trainable module: a Hugging Face masked LM plus the weighted objectives of the run.

One ``forward(batch)`` computes every active objective and their weighted sum, so DDP and
DeepSpeed see one forward and one backward per step whatever the objective mix.
"""

from __future__ import annotations

import torch
from torch import nn

from distalign.models.pooling import mean_pool


class AlignmentModel(nn.Module):
    def __init__(self, masked_lm: nn.Module, objectives: dict[str, nn.Module], weights: dict[str, float],
                 word_layer: int = -1):
        super().__init__()
        self.masked_lm = masked_lm
        self.objectives = nn.ModuleDict(objectives)
        self.weights = dict(weights)
        self.word_layer = word_layer

    def layer_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, layer: int | None = None):
        encoder = self.masked_lm.base_model
        out = encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return out.hidden_states[self.word_layer if layer is None else layer]

    def encode_words(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, word_mask: torch.Tensor,
                     layer: int | None = None):
        """Mean of the word's subword states; ``word_mask`` excludes special tokens and padding."""
        return mean_pool(self.layer_states(input_ids, attention_mask, layer), word_mask)

    def forward(self, batch: dict[str, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        losses = {name: objective(self, batch[objective.batch_key]) for name, objective in self.objectives.items()}
        losses["loss"] = sum(self.weights[name] * loss for name, loss in losses.items())
        return losses
