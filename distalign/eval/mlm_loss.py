"""The MLM validation loss: the masked LM head's cross-entropy on held-out sentences, per language.

The sentences are tokenised and masked once, on the driver, exactly as the corpus stream's batches are
(``distalign.preparation.validation``), so every evaluation of a run scores the same targets and two
evaluations differ only by the model. The loss is a mean over labelled tokens, not over sentences: the
Hugging Face Trainer's evaluation loss, which the static-contextual authors select checkpoints by.
"""

from __future__ import annotations

import numpy as np
import torch

from distalign.objectives.mlm import IGNORE_INDEX, labelled_logits

MLM_LOSS_METRIC = "eval/mlm/loss"


@torch.no_grad()
def mlm_loss_sums(masked_lm, batch: dict[str, np.ndarray], rows: np.ndarray, num_languages: int,
                  batch_size: int, device: torch.device, forwards: int = 0) -> torch.Tensor:
    """[num_languages, 2] float64: per language id, the summed cross-entropy of the labelled tokens of
    ``batch[rows]`` and their count (sums: ranks scoring disjoint rows add them up).

    ``forwards``: the forward passes to run, at least those ``rows`` need; the ones past them score the first
    row again and are not counted. Ranks scoring shares of unequal length pass the longest share's count: under
    DeepSpeed ZeRO-3 every forward gathers the parameters from all ranks, and a rank that ran fewer would leave
    the others waiting for it until the collective timed out."""
    sums = torch.zeros(num_languages, 2, dtype=torch.float64)  # host-side: summed from .cpu() values below
    was_training = masked_lm.training
    masked_lm.eval()  # no dropout: the loss of the model, not of one noisy draw
    try:
        needed = -(-len(rows) // batch_size)
        for start in range(0, max(forwards, needed) * batch_size, batch_size):
            index = rows[start:start + batch_size]
            if not len(index):  # a forward the other ranks run too (ZeRO-3's gathers), its result unused
                masked_lm(input_ids=torch.from_numpy(batch["masked_ids"][:1]).to(device),
                          attention_mask=torch.from_numpy(batch["attention_mask"][:1]).to(device))
                continue
            labels = torch.from_numpy(batch["labels"][index])  # host-side: crosses with .to(device) below
            labelled = labels != IGNORE_INDEX
            logits = labelled_logits(masked_lm, labels.to(device),  # at the labelled positions only
                                     input_ids=torch.from_numpy(batch["masked_ids"][index]).to(device),
                                     attention_mask=torch.from_numpy(batch["attention_mask"][index]).to(device))
            token_loss = torch.nn.functional.cross_entropy(logits.float(), labels[labelled].to(device),
                                                           reduction="none").double().cpu()
            # host-side: the languages index the host sums, as token_loss (.cpu() above)
            lang = torch.from_numpy(batch["lang_id"][index])[labelled.nonzero()[:, 0]]  # each labelled token's
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
