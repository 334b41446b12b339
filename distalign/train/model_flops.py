"""Model FLOPs of a training step: the numerator of model FLOPs utilisation (``perf/mfu`` and the GPU bench row).

Counted as the literature counts it: the matrix products of the forward pass (a multiply-add is 2 FLOPs), times
3 for forward and backward (the backward pass multiplies twice, for the inputs' and the weights' gradients).
For a sequence of ``n`` real tokens through an encoder of ``L`` layers of width ``d``:

    forward = 2 · W · n  +  4 · L · d · n²  +  2 · H · m          step = 3 · Σ forward (every sequence of every stream)

- ``W``: the weights of the encoder's matrix products (per layer Q, K, V and output projections, 4·d², and the
  feed-forward's 2·d·d_ff; adapters' too): the 2N per token of Kaplan et al. 2020 (§2.1, Table 1).
- ``4·L·d·n²``: attention's own products, QKᵀ and AV (2·n²·d each per layer), the whole square since an encoder
  attends both ways. Per token this is Chowdhery et al. 2022 (PaLM, Appendix B): 6N + 12·L·H·Q·T for training,
  H·Q = d, T = n; Narayanan et al. 2021 (eq. 3, without its recomputation pass) has the same three terms.
- ``H``: the MLM head's weights (its d x d transform and the d x V vocabulary projection, tied to the input
  embeddings) at the ``m`` labelled positions of the sequence (``labels != -100``): the loss needs logits
  there only, and the objectives compute them only there. A loop computing logits at every position does more
  work than this credits it with: MFU counts the work the model needs, not the work a loop happens to do
  (PaLM's model FLOPs, against hardware FLOPs).

Also by that definition: only real tokens (``attention_mask`` ones) count, so padding lowers MFU and packing
(``data.pack_sequences``) raises it; recomputation under gradient checkpointing is not counted; embedding
look-ups, normalisation, activations and softmax are not matrix products. Objectives' own heads (DICT-MLM's
language-conditioned transform, sense-aware's per-sense output layer) are counted as the model's MLM head, and
a stream an objective encodes twice counts once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from distalign.models.language_embeddings import known_lm_head
from distalign.objectives.mlm import IGNORE_INDEX


def matmul_weights(module: nn.Module) -> int:
    """Weights of the ``nn.Linear`` layers in ``module`` (a ZeRO-3 partitioned weight by its full size)."""
    return sum(getattr(m.weight, "ds_numel", m.weight.numel()) for m in module.modules() if isinstance(m, nn.Linear))


@dataclass(frozen=True)
class ModelFlops:
    """What a masked LM's training FLOPs depend on; ``flops`` counts them on a step's ``StepCounts``."""

    encoder_weights: int  # W: every layer's matrix-product weights, adapters included
    layers: int  # L
    attention_width: int  # d: query/key width summed over heads
    head_weights: int  # H: the MLM head's transform and vocabulary projection

    @classmethod
    def of(cls, masked_lm: nn.Module) -> ModelFlops:
        """Read from the model; call it before ZeRO-3 partitions the parameters or after (``ds_numel``)."""
        config = masked_lm.config
        head = known_lm_head(masked_lm)
        return cls(
            matmul_weights(masked_lm.base_model),
            config.num_hidden_layers,
            config.hidden_size,
            matmul_weights(head) if head is not None else config.hidden_size * config.vocab_size,
        )

    def step_flops(self, micro_batches: list[dict[str, dict[str, torch.Tensor]]]) -> float:
        """One optimizer step's FLOPs (``count_step`` of its micro-batches)."""
        return self.flops(count_step(micro_batches))

    def flops(self, counts: StepCounts) -> float:
        return 3.0 * (
            2.0 * self.encoder_weights * counts.real_tokens
            + 4.0 * self.layers * self.attention_width * counts.squared_lengths
            + 2.0 * self.head_weights * counts.labelled
        )


@dataclass(frozen=True)
class StepCounts:
    """What one step's batches hold: every ``attention_mask*`` tensor of every stream is a set of sequences
    through the encoder; every ``labels`` tensor's labelled positions go through the MLM head."""

    sequences: int
    positions: int  # padded
    real_tokens: int
    squared_lengths: int  # Σ n² over sequences: attention's cost
    labelled: int

    @property
    def padding(self) -> int:
        return self.positions - self.real_tokens


def count_step(micro_batches: list[dict[str, dict[str, torch.Tensor]]]) -> StepCounts:
    """One walk over a step's micro-batches (host tensors: the batches before they move to the device, so that
    counting never waits on the GPU)."""
    sequences = positions = real = squares = labelled = 0
    for batches in micro_batches:
        for batch in batches.values():
            for name, mask in batch.items():
                if name.startswith("attention_mask"):
                    lengths = mask.sum(1).long()
                    sequences += mask.shape[0]
                    positions += mask.numel()
                    real += int(lengths.sum())
                    squares += int((lengths * lengths).sum())
            if "labels" in batch:
                labelled += int((batch["labels"] != IGNORE_INDEX).sum())
    return StepCounts(sequences, positions, real, squares, labelled)
