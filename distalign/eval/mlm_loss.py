"""The MLM validation loss: the masked LM head's cross-entropy on held-out sentences, per language.

The sentences are tokenised and masked exactly as the corpus stream's batches are, each worker its own share
(``distalign.preparation.validation``), with masks seeded by (run seed, epoch 0, row), so every evaluation of a
run scores the same targets and two evaluations differ only by the model. A share is kept as int32 without its
padding (``HeldOutRows``) and padded a forward pass at a time. The loss is a mean over labelled tokens, not over
sentences: the Hugging Face Trainer's evaluation loss, which the static-contextual authors select checkpoints by.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from distalign.objectives.mlm import IGNORE_INDEX, labelled_logits

MLM_LOSS_METRIC = "eval/mlm/loss"


TOKEN_TENSORS = ("masked_ids", "attention_mask", "labels")  # per token; ``lang_id`` is per row


@dataclass
class HeldOutRows:
    """Tokenised, masked held-out rows without padding: each token tensor's rows one after the other (int32), each
    row's length, and the values a forward pass pads them with."""

    lengths: np.ndarray  # [R] tokens of each row (its attention mask's ones, a prefix)
    tokens: dict[str, np.ndarray]  # TOKEN_TENSORS, each [sum(lengths)] int32
    lang_id: np.ndarray  # [R] int32
    pad: dict[str, int]  # TOKEN_TENSORS' padding values (labels: IGNORE_INDEX)

    @classmethod
    def of(cls, batch: dict[str, np.ndarray]) -> HeldOutRows:
        """From a padded batch of ``TOKEN_TENSORS`` and ``lang_id`` (right padding, as the tokenizers pad)."""
        lengths = batch["attention_mask"].sum(axis=1).astype(np.int32)
        kept = np.arange(batch["attention_mask"].shape[1]) < lengths[:, None]
        padded_at = np.argwhere(~kept)
        pad = {key: int(batch[key][tuple(padded_at[0])]) if len(padded_at) else 0 for key in TOKEN_TENSORS}
        return cls(lengths, {key: batch[key][kept].astype(np.int32) for key in TOKEN_TENSORS},
                   batch["lang_id"].astype(np.int32), pad | {"labels": IGNORE_INDEX})

    def __len__(self) -> int:
        return len(self.lengths)

    def padded(self, rows: np.ndarray) -> dict[str, torch.Tensor]:
        """``rows`` as int64 tensors [len(rows), their longest length]."""
        starts = np.concatenate([[0], np.cumsum(self.lengths, dtype=np.int64)])
        width = int(self.lengths[rows].max())
        out = {key: np.full((len(rows), width), self.pad[key], dtype=np.int64) for key in TOKEN_TENSORS}
        for i, row in enumerate(rows.tolist()):
            for key in TOKEN_TENSORS:
                out[key][i, :self.lengths[row]] = self.tokens[key][starts[row]:starts[row + 1]]
        return {key: torch.from_numpy(value) for key, value in out.items()}  # host-side: .to(device) by the caller


@torch.no_grad()
def mlm_loss_sums(masked_lm, held: HeldOutRows, num_languages: int, batch_size: int, device: torch.device,
                  forwards: int = 0) -> torch.Tensor:
    """[num_languages, 2] float64: per language id, the summed cross-entropy of the labelled tokens of ``held`` and
    their count (sums: ranks scoring disjoint rows add them up).

    ``forwards``: the forward passes to run, at least those ``held`` needs; the ones past them score its first
    row again and are not counted. Ranks scoring shares of unequal length pass the longest share's count: under
    DeepSpeed ZeRO-3 every forward gathers the parameters from all ranks, and a rank that ran fewer would leave
    the others waiting for it until the collective timed out."""
    sums = torch.zeros(num_languages, 2, dtype=torch.float64)  # host-side: summed from .cpu() values below
    was_training = masked_lm.training
    masked_lm.eval()  # no dropout: the loss of the model, not of one noisy draw
    try:
        needed = -(-len(held) // batch_size)
        for start in range(0, max(forwards, needed) * batch_size, batch_size):
            index = np.arange(start, min(start + batch_size, len(held)))
            if not len(index):  # a forward the other ranks run too (ZeRO-3's gathers), its result unused
                first = held.padded(np.zeros(1, dtype=np.int64)) if len(held) else \
                    {key: torch.zeros(1, 1, dtype=torch.long) for key in TOKEN_TENSORS}
                masked_lm(input_ids=first["masked_ids"].to(device),
                          attention_mask=torch.ones_like(first["attention_mask"]).to(device))
                continue
            batch = held.padded(index)
            labels = batch["labels"]
            labelled = labels != IGNORE_INDEX
            logits = labelled_logits(masked_lm, labels.to(device),  # at the labelled positions only
                                     input_ids=batch["masked_ids"].to(device),
                                     attention_mask=batch["attention_mask"].to(device))
            token_loss = torch.nn.functional.cross_entropy(logits.float(), labels[labelled].to(device),
                                                           reduction="none").double().cpu()
            # host-side: the languages index the host sums, as token_loss (.cpu() above)
            lang = torch.from_numpy(held.lang_id[index].astype(np.int64))[labelled.nonzero()[:, 0]]
            sums[:, 0].index_add_(0, lang, token_loss)
            sums[:, 1].index_add_(0, lang, torch.ones_like(token_loss))
    finally:
        masked_lm.train(was_training)
    return sums


def mlm_loss_metrics(sums: torch.Tensor, languages: list[str]) -> dict[str, float]:
    """``eval/mlm/<lang>/loss`` per language with labelled tokens, and ``eval/mlm/loss`` over all of them."""
    metrics = {f"eval/mlm/{languages[i]}/loss": float(total / count)
               for i, (total, count) in enumerate(sums.tolist()) if count > 0}
    total, count = sums.sum(0).tolist()
    if count > 0:
        metrics[MLM_LOSS_METRIC] = float(total / count)
    return metrics
