"""The bare PyTorch loop the bench compares distalign against: the quickstart's objectives (MLM + lexical
InfoNCE) as a user would write them around a Hugging Face masked LM, and one optimizer step.

Its own module so that ``perf`` (CPU step overhead) and ``gpu`` (the Hugging Face Trainer row) both
import it from below, not from each other.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from distalign import collectives
from distalign.objectives.mlm import mlm_loss


class BareObjectives(nn.Module):
    """The quickstart's objectives as a user would write them around a Hugging Face masked LM: MLM on the
    corpus batch (its logits at the masked positions only, as distalign computes them: the benches compare the
    loops, not the heads); on the constraint batch, BabelBERT's multi-positive InfoNCE over the mean-pooled
    last-layer word states of both sides, the negatives gathered from every process."""

    def __init__(self, masked_lm: nn.Module, temperature: float):
        super().__init__()
        self.masked_lm, self.temperature = masked_lm, temperature

    def forward(self, corpus: dict[str, torch.Tensor], pairs: dict[str, torch.Tensor]) -> torch.Tensor:
        mlm = mlm_loss(
            self.masked_lm, corpus["labels"], input_ids=corpus["masked_ids"], attention_mask=corpus["attention_mask"]
        )
        states = self.masked_lm.base_model(
            input_ids=torch.cat([pairs["input_ids1"], pairs["input_ids2"]]),  # type: ignore[operator]
            attention_mask=torch.cat([pairs["attention_mask1"], pairs["attention_mask2"]]),
        ).last_hidden_state
        mask = torch.cat([pairs["word_mask1"], pairs["word_mask2"]]).unsqueeze(-1).to(states.dtype)
        words, synsets = (states * mask).sum(1) / mask.sum(1).clamp(min=1), pairs["synset"]
        if collectives.distributed():
            n = len(synsets)
            sides = torch.cat(collectives.all_gather_with_grad(torch.cat([words[:n], words[n:]], 1)))  # [N_all, 2d]
            words = torch.cat([sides[:, : words.shape[1]], sides[:, words.shape[1] :]])
            synsets = torch.cat(collectives.all_gather_tensors(synsets))
        return mlm + self.info_nce(F.normalize(words, dim=-1), synsets.repeat(2))

    def info_nce(self, words: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """For each pair of items of one synset: -log of its score's softmax against the item's negatives."""
        scores = words @ words.T / self.temperature
        same = labels[:, None] == labels[None, :]
        positive = same & ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        negatives = torch.logsumexp(scores.masked_fill(same, float("-inf")), 1, keepdim=True)
        return (torch.logaddexp(scores, negatives) - scores)[positive].mean()


def bare_step(model: nn.Module, optimizer: torch.optim.Optimizer, batches: dict[str, dict[str, torch.Tensor]]) -> None:
    loss = model(batches["corpus"], batches["constraints"])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
