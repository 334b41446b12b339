"""TLM, translation language modelling (Conneau & Lample 2019, §3.3): XLM's cross-lingual objective, the
XLM baseline of ALIGN-MLM (Hu et al. 2023, App. G.3).

A translation pair (a, b) of languages (l_a, l_b) is one sequence in the tokenizer's own pair layout,
``[CLS] a [SEP] b [SEP]`` for BERT, ``<s> a </s></s> b </s>`` for XLM-R (``distalign.data.stream_plugins``'s
``parallel`` stream; each side keeps at most half of ``data.max_seq_length``, as ALIGN-MLM's 256 + 256 of
512). MLM masking (``distalign.objectives.mlm.MLMMasking``: ``mask_prob`` of the words, or tokens, of
*both* sentences, 80/10/10) lets the model predict a masked word from its own sentence or from the
translation. The loss is the cross-entropy of the masked LM head over the labelled tokens of both sides:

    L = -1/|M| Σ_{t∈M} log p(x_t | x̃_a, x̃_b)

As XLM does:

- ``reset_positions``: the second sentence's tokens get the positions they would have alone (positions
  restart at the target sentence), so position alone cannot tell which side a token is on, nor how far it
  is from its translation.
- ``language_embeddings``: a per-token language embedding (the side's language) is added to the input. It
  is zero-initialised and lives in this objective, as DICT-MLM's (``distalign.models.language_embeddings``):
  a continued-pre-training run starts from the unchanged model and the exported model has no language
  table. Unlike XLM, the corpus MLM batches (``objectives.mlm``) get none; ``false`` drops it here too.

Mixing with MLM (XLM's "MLM + TLM", ALIGN-MLM's Table 1): the loss of a step is
``mlm.weight · L_MLM + tlm.weight · L_TLM``, each over its own batch, so a step holds
``train.parallel_batch_size`` TLM sequences beside ``train.corpus_batch_size`` MLM ones: TLM's share of the
sequences that reach the losses is ``parallel_batch_size / (parallel_batch_size + corpus_batch_size)`` (ALIGN-MLM's
default of 25 % parallel data relative to MLM is a share of 0.2: e.g. 4 beside 16).

The amount of parallel data (ALIGN-MLM's Table 1: 0, 10, 50, 100 % of the MLM corpus): ``parallel_share``
keeps that share of the MLM corpus's sentence count in the pairs' first language as distinct pairs, drawn
with the run's seed from those read (``distalign.preparation.inputs``); the batches then cycle over them.
It sets how many different translations TLM sees, not how much of a step is TLM (``parallel_batch_size``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from distalign.data.batches import LABEL_INDEX
from distalign.data.run_facts import RunFacts
from distalign.errors import require
from distalign.models.language_embeddings import LanguageEmbeddings, position_ids
from distalign.objectives.base import DataContext, Objective, ObjectiveContext
from distalign.objectives.mlm import MASKED_TENSORS, Granularity, MLMMasking, mlm_loss


@dataclass
class TLMConfig:
    weight: float = 0.0  # 0 disables the objective; its pairs come from data.parallel
    mask_prob: float = 0.15  # share of masking units (words or tokens) selected, over both sentences
    granularity: Granularity = "word"  # as objectives.mlm.granularity
    language_embeddings: bool = True  # XLM's per-token language embeddings at the input
    reset_positions: bool = True  # XLM's positions restarting at the second sentence
    # distinct pairs kept, as a share of the MLM corpus's sentences in the pairs' first language (ALIGN-MLM's
    # Table 1 varies it 0-1; 0 there is MLM alone: weight 0); null = every pair of data.parallel
    parallel_share: float | None = None


def model_position_ids(masked_lm: nn.Module, positions: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``positions`` (0 = a sequence's first token) as the model's position ids."""
    embeddings = masked_lm.base_model.embeddings
    if not hasattr(embeddings, "create_position_ids_from_input_ids"):  # BERT: numbered from 0
        return positions
    # RoBERTa family (XLM-R): numbered from past the padding index, which padding keeps
    return torch.where(attention_mask.bool(), positions + embeddings.padding_idx + 1, embeddings.padding_idx)


class TLMObjective(Objective):
    """Cross-entropy of the masked LM head on masked translation pairs (the ``parallel`` stream)."""

    Config = TLMConfig
    stream = "parallel"
    consumes = ("masked_ids", "attention_mask", "labels", "lang_ids", "positions")
    prepares = MASKED_TENSORS
    uses_lm_head = True
    reference = "Conneau & Lample 2019, XLM (TLM)"

    def __init__(
        self, hidden_size: int, num_languages: int, language_embeddings: bool = True, reset_positions: bool = True
    ):
        super().__init__()
        self.language_embeddings = LanguageEmbeddings(num_languages, hidden_size) if language_embeddings else None
        self.reset_positions = reset_positions

    @classmethod
    def validate(cls, cfg: TLMConfig, facts: RunFacts, key: str) -> None:
        require(0 < cfg.mask_prob < 1, f"{key}.mask_prob", "must be in (0, 1)")
        require(
            cfg.parallel_share is None or 0 < cfg.parallel_share <= 1,
            f"{key}.parallel_share",
            "must be in (0, 1] (no parallel data at all: weight 0)",
        )
        require(
            facts.has_parallel_data,
            "data.parallel",
            f"{key} reads translation pairs: list TSV or line-aligned files there (the synthetic world's "
            f"sentences are drawn independently per language: it has no parallel twins)",
        )

    @classmethod
    def batch_preparer(cls, cfg: TLMConfig, ctx: DataContext) -> MLMMasking:
        return MLMMasking.for_tokenizer(ctx.tokenizer_path, cfg.mask_prob, cfg.granularity)

    @classmethod
    def build(cls, cfg: TLMConfig, ctx: ObjectiveContext) -> TLMObjective:
        return cls(ctx.masked_lm.config.hidden_size, len(ctx.languages), cfg.language_embeddings, cfg.reset_positions)

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        masked_lm, ids, attention = model.masked_lm, batch["masked_ids"], batch["attention_mask"]
        inputs = (
            {"input_ids": ids}
            if self.language_embeddings is None
            else {"inputs_embeds": self.language_embeddings(masked_lm, ids, batch["lang_ids"])}
        )
        if self.reset_positions:
            inputs["position_ids"] = model_position_ids(masked_lm, batch["positions"], attention)
        elif self.language_embeddings is not None:  # given embeddings, XLM-R would not see the padding
            inputs["position_ids"] = position_ids(masked_lm, ids)
        return mlm_loss(masked_lm, batch["labels"], batch.get(LABEL_INDEX), **inputs, attention_mask=attention)
