"""The trainable module: the encoder plus the weighted objectives of the run.

One ``forward(batches)`` computes every active objective on its stream's batch and their
weighted sum, so DDP and DeepSpeed see one forward and one backward per step whatever the mix.
"""

from __future__ import annotations

import torch
from torch import nn

from distalign.models.encoder import Encoder


class TrainingModule(Encoder):
    def __init__(
        self, masked_lm: nn.Module, objectives: dict[str, nn.Module], weights: dict[str, float], word_layer: int = -1
    ):
        super().__init__(masked_lm, word_layer)
        self.objectives = nn.ModuleDict(objectives)
        self.weights = dict(weights)

    def forward(self, batches: dict[str, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        losses = {
            name: objective(self, batches[objective.stream])  # type: ignore[index]
            for name, objective in self.objectives.items()
        }
        losses["loss"] = sum(self.weights[name] * loss for name, loss in losses.items())
        return losses
