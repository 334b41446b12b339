"""The MLM validation loss: the masked LM head's cross-entropy on held-out sentences, per language.

The sentences are tokenised and masked exactly as the corpus stream's batches are, each worker its own share
(``distalign.preparation.validation``), with masks seeded by (run seed, epoch 0, row), so every evaluation of a
run scores the same targets and two evaluations differ only by the model. A share is kept as int32 without its
padding (``RaggedRows``) and padded a forward pass at a time. The loss is a mean over labelled tokens, not over
sentences: the Hugging Face Trainer's evaluation loss, which the static-contextual authors select checkpoints by.
"""

from __future__ import annotations

import numpy as np
import torch

from distalign.data.ragged import RaggedRows
from distalign.data.stream_plugins import collated_width
from distalign.objectives.mlm import IGNORE_INDEX, labelled_logits

MLM_LOSS_METRIC = "eval/mlm/loss"


TOKEN_TENSORS = ("masked_ids", "attention_mask", "labels")  # per token; ``lang_id`` is per row


@torch.no_grad()
def mlm_loss_sums(
    masked_lm, held: RaggedRows, num_languages: int, batch_size: int, device: torch.device, forwards: int = 0
) -> torch.Tensor:
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
            rows = held.rows(min(start, len(held)), min(start + batch_size, len(held)))
            if not len(rows):  # a forward the other ranks run too (ZeRO-3's gathers), its result unused
                first = (
                    padded_tensors(held.rows(0, 1))
                    if len(held)
                    else {key: torch.zeros(1, 1, dtype=torch.long) for key in TOKEN_TENSORS}  # host-side: moved below
                )
                masked_lm(
                    input_ids=first["masked_ids"].to(device),
                    attention_mask=torch.ones_like(first["attention_mask"]).to(device),
                )
                continue
            batch = padded_tensors(rows)
            labels = batch["labels"]
            labelled = labels != IGNORE_INDEX
            logits = labelled_logits(
                masked_lm,
                labels.to(device),  # at the labelled positions only
                input_ids=batch["masked_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
            )
            token_loss = (
                torch.nn.functional.cross_entropy(logits.float(), labels[labelled].to(device), reduction="none")
                .double()
                .cpu()
            )
            # host-side: the languages index the host sums, as token_loss (.cpu() above)
            lang = torch.from_numpy(rows.columns["lang_id"].astype(np.int64))[labelled.nonzero()[:, 0]]
            sums[:, 0].index_add_(0, lang, token_loss)
            sums[:, 1].index_add_(0, lang, torch.ones_like(token_loss))
    finally:
        masked_lm.train(was_training)
    return sums


def held_out_rows(batch: dict[str, np.ndarray]) -> RaggedRows:
    """A padded batch of ``TOKEN_TENSORS`` and ``lang_id`` kept without its padding (int32)."""
    return RaggedRows.from_padded(batch, TOKEN_TENSORS)


def padded_tensors(rows: RaggedRows) -> dict[str, torch.Tensor]:  # host-side: the caller moves them
    """``rows``' token tensors as int64, padded as the training loop's batches are (``collated_width``: a full
    row's trailing fill is only given back at the rows' width); host-side: .to(device) by the caller."""
    padded = rows.padded(collated_width(rows))
    return {key: torch.from_numpy(padded[key]) for key in TOKEN_TENSORS}


def mlm_loss_metrics(sums: torch.Tensor, languages: list[str]) -> dict[str, float]:
    """``eval/mlm/<lang>/loss`` per language with labelled tokens, and ``eval/mlm/loss`` over all of them."""
    metrics = {
        f"eval/mlm/{languages[i]}/loss": float(total / count)
        for i, (total, count) in enumerate(sums.tolist())
        if count > 0
    }
    total, count = sums.sum(0).tolist()
    if count > 0:
        metrics[MLM_LOSS_METRIC] = float(total / count)
    return metrics
