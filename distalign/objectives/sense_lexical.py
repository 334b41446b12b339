"""Sense-level BabelBERT objective: InfoNCE over words encoded together with their glosses.

Paper: Green, Ponzetto & Glavaš (2022), "BabelBERT: Massively Multilingual Transformers Meet a
Massively Multilingual Lexical Resource". Each word of a constraint pair is encoded as
``[CLS] word [SEP] gloss [SEP]`` (``distalign.data.gloss_inputs``); its sense vector is the mean of
the word's subword states (``word_mask``), and the pairs are contrasted with the same multi-positive
InfoNCE as the type-level objective (``distalign.objectives.lexical.info_nce``)::

    loss = info_nce(w_1, w_2, synset) + gloss_weight * info_nce(g_1, g_2, synset)[pairs with both glosses]

``w_s`` / ``g_s`` pool one encoder pass of side ``s`` over ``word_mask`` / ``gloss_mask``. The
gloss term (``gloss_weight > 0``) also aligns the glosses of a synset across languages; it only
uses the pairs whose two rows both have gloss tokens (a row without a gloss pools to a zero
vector, which would be a meaningless item), and is 0 when no pair has both.

Example
-------
>>> import torch
>>> states = torch.randn(2, 3, 5, 8)          # two sides, 3 pairs, 5 tokens, d = 8
>>> word = torch.tensor([[0, 1, 0, 0, 0]] * 3); gloss = torch.tensor([[0, 0, 0, 1, 1]] * 3)
>>> sense_info_nce(states[0], states[1], word, word, gloss, gloss, torch.tensor([0, 1, 1]), gloss_weight=0.5).dim()
0
"""

from __future__ import annotations

import torch
from torch import nn

from distalign.models.pooling import mean_pool
from distalign.objectives.lexical import info_nce


def sense_info_nce(states1: torch.Tensor, states2: torch.Tensor, word_mask1: torch.Tensor, word_mask2: torch.Tensor,
                   gloss_mask1: torch.Tensor, gloss_mask2: torch.Tensor, synset_ids: torch.Tensor,
                   temperature: float = 0.07, gloss_weight: float = 0.0) -> torch.Tensor:
    """[N, T, d] states of both sides' ``word + gloss`` encodings and their [N, T] masks -> scalar loss."""
    if gloss_weight < 0:
        raise ValueError(f"gloss_weight must be >= 0, got {gloss_weight}")
    loss = info_nce(mean_pool(states1, word_mask1).float(), mean_pool(states2, word_mask2).float(), synset_ids,
                    temperature)
    if gloss_weight == 0:
        return loss
    both = (gloss_mask1.sum(1) > 0) & (gloss_mask2.sum(1) > 0)
    if not both.any():
        return loss
    g1 = mean_pool(states1[both], gloss_mask1[both]).float()
    g2 = mean_pool(states2[both], gloss_mask2[both]).float()
    return loss + gloss_weight * info_nce(g1, g2, torch.as_tensor(synset_ids, device=g1.device)[both], temperature)


class SenseLexicalObjective(nn.Module):
    """Sense-level BabelBERT objective on a ``constraints`` batch from ``tokenize_sense_constraint_batch``."""

    batch_key = "constraints"

    def __init__(self, temperature: float = 0.07, gloss_weight: float = 0.0):
        super().__init__()
        if gloss_weight < 0:
            raise ValueError(f"gloss_weight must be >= 0, got {gloss_weight}")
        self.temperature = temperature
        self.gloss_weight = gloss_weight

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        # One encoder pass per side serves both the word and the gloss pool.
        states1 = model.layer_states(batch["input_ids1"], batch["attention_mask1"])
        states2 = model.layer_states(batch["input_ids2"], batch["attention_mask2"])
        return sense_info_nce(states1, states2, batch["word_mask1"], batch["word_mask2"], batch["gloss_mask1"],
                              batch["gloss_mask2"], batch["synset"], self.temperature, self.gloss_weight)
