"""Masked language modelling with whole-word masking (Devlin et al. 2019, BERT's WWM release).

Each word (all its subword tokens together) is selected with probability ``mask_prob`` (15%);
a selected word's tokens are replaced by ``<mask>`` 80% of the time, by random tokens 10%, and
left unchanged 10% (decided once per word). Labels are the original ids at selected positions and
-100 elsewhere, so the loss is the cross-entropy over selected tokens only.
"""

from __future__ import annotations

import torch
from torch import nn

IGNORE_INDEX = -100


def whole_word_mask(
    input_ids: torch.Tensor,
    word_ids: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (masked input ids, labels).

    ``word_ids`` [B, T] gives each token's word index within its sentence, -1 for special and
    padding tokens (which are never masked). At least one word in the batch is always selected so
    the loss is defined.
    """
    batch, _ = input_ids.shape
    is_word = word_ids >= 0
    max_words = int(word_ids.max().item()) + 1 if is_word.any() else 1
    chosen = torch.rand(batch, max_words, generator=generator) < mask_prob
    if not (chosen.gather(1, word_ids.clamp(min=0)) & is_word).any() and is_word.any():
        first = int(is_word.any(dim=1).nonzero()[0])
        chosen[first, int(word_ids[first][is_word[first]][0])] = True
    action = torch.rand(batch, max_words, generator=generator)  # <0.8 mask, <0.9 random, else keep
    index = word_ids.clamp(min=0)
    selected = chosen.gather(1, index) & is_word
    token_action = action.gather(1, index)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    masked = input_ids.clone()
    masked[selected & (token_action < 0.8)] = mask_token_id
    to_random = selected & (token_action >= 0.8) & (token_action < 0.9)
    masked[to_random] = torch.randint(vocab_size, (int(to_random.sum()),), generator=generator)
    return masked, labels


class MLMObjective(nn.Module):
    """Cross-entropy of the masked LM head on a corpus batch already masked by ``whole_word_mask``."""

    batch_key = "corpus"

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = model.masked_lm(input_ids=batch["masked_ids"], attention_mask=batch["attention_mask"],
                              labels=batch["labels"])
        return out.loss
