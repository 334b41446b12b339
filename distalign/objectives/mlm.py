"""Masked language modelling (Devlin et al. 2019), at one of two granularities (``objectives.mlm.granularity``):

- ``word``: whole-word masking (BERT's WWM release). Each word (all its subword tokens together) is
  selected with probability ``mask_prob`` (15%); a selected word's tokens are replaced by ``<mask>`` 80%
  of the time, by random tokens 10%, and left unchanged 10% (decided once per word).
- ``token``: each subword token on its own, as Hugging Face's ``DataCollatorForLanguageModeling`` does
  (the masking of the ALIGN-MLM and static-contextual authors' code): the same 15% and 80/10/10, drawn
  per token.

Special and padding tokens are never masked. Labels are the original ids at selected positions and
-100 elsewhere, so the loss is the cross-entropy over selected tokens only:

    L = -1/|M| Σ_{t∈M} log p(x_t | x̃)

Masking runs on the data side (``MLMMasking`` in Ray Data), one random stream per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from distalign.data.batches import IGNORE_INDEX, LABEL_INDEX, TensorSpec
from distalign.data.row_random import RowRandom
from distalign.data.run_facts import RunFacts
from distalign.errors import require
from distalign.models.language_embeddings import known_lm_head
from distalign.objectives.base import DataContext, Objective

Granularity = Literal["token", "word"]
MASKED_TENSORS = (
    TensorSpec("masked_ids", "int64", "B,T", "input ids after masking"),
    TensorSpec("labels", "int64", "B,T", "original id where masked, -100 elsewhere"),
)


def draw_word_masking(
    word_ids: torch.Tensor, vocab_size: int, mask_prob: float, random: RowRandom
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``whole_word_mask``'s draws: (selected [B, T] bool, action [B, T] uniform, random tokens [B, T]).

    ``selected`` and ``action`` are per token but drawn per word (equal on all tokens of a word);
    ``random_tokens`` are per position. DICT-MLM draws here, splices synonyms in, then corrupts.
    """
    _, length = word_ids.shape
    uniforms = random.rand(2, length)  # [B, 2, T]: per word index, selection and action
    random_tokens = random.randint(vocab_size, length)
    index = word_ids.clamp(min=0)
    selected = (uniforms[:, 0].gather(1, index) < mask_prob) & (word_ids >= 0)
    return selected, uniforms[:, 1].gather(1, index), random_tokens


def corrupt_selected(
    input_ids: torch.Tensor,
    selected: torch.Tensor,
    action: torch.Tensor,
    random_tokens: torch.Tensor,
    mask_token_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked input ids, labels): BERT's 80/10/10 on the ``selected`` tokens (action <0.8 mask, <0.9 random,
    else keep); labels are the ids at selected positions, -100 elsewhere."""
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    masked = torch.where(selected & (action < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(selected & (action >= 0.8) & (action < 0.9), random_tokens, masked)
    return masked, labels


def whole_word_mask(
    input_ids: torch.Tensor,
    word_ids: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    mask_prob: float,
    random: RowRandom,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (masked input ids, labels).

    ``word_ids`` [B, T] gives each token's word index within its sentence, -1 for special and
    padding tokens (which are never masked). Each row draws a fixed number of values from its
    own stream in ``random`` (a word's draws are indexed by its word index), so a row's mask does
    not depend on the other rows of the batch. A row may end up with no masked word (the loss
    then ignores it).
    """
    return corrupt_selected(input_ids, *draw_word_masking(word_ids, vocab_size, mask_prob, random), mask_token_id)


def token_units(word_ids: torch.Tensor) -> torch.Tensor:
    """Each token as its own masking unit: its position where ``word_ids`` marks a word's token, -1 elsewhere;
    ``whole_word_mask`` over these units masks single subword tokens."""
    positions = torch.arange(word_ids.shape[1], device=word_ids.device).expand_as(word_ids)
    return torch.where(word_ids >= 0, positions, -1)


@dataclass(frozen=True)
class MLMMasking:
    """Data-side preparer of a corpus batch: adds ``masked_ids`` and ``labels``."""

    mask_token_id: int
    vocab_size: int
    mask_prob: float = 0.15
    granularity: Granularity = "word"

    @classmethod
    def for_tokenizer(cls, tokenizer_path: str, mask_prob: float, granularity: Granularity = "word") -> MLMMasking:
        from distalign.models.loading import load_tokenizer

        tokenizer = load_tokenizer(tokenizer_path)
        return cls(tokenizer.mask_token_id, len(tokenizer), mask_prob, granularity)

    def __call__(self, batch: dict[str, np.ndarray], random: RowRandom) -> dict[str, np.ndarray]:  # host-side: Ray Data
        word_ids = torch.from_numpy(batch["word_ids"])
        units = word_ids if self.granularity == "word" else token_units(word_ids)
        masked, labels = whole_word_mask(
            torch.from_numpy(batch["input_ids"]), units, self.mask_token_id, self.vocab_size, self.mask_prob, random
        )
        return {"masked_ids": masked.numpy(), "labels": labels.numpy()}


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` [..., V] over the labelled positions of ``labels`` [...]; 0 (still attached
    to the graph) when none is labelled.

    Logits already taken at the labelled positions (``labelled_logits``: [M, V], every label set) are read as they
    are: selecting them again would copy [M, V] and give it a zero-filled gradient of the same size (about 4 GB at
    64 x 512 tokens with XLM-R's 250k words), and testing for "any label" would wait for the device. The log-softmax
    runs in fp32 (bf16 logits keep 3 significant digits).
    """
    flat_labels = labels.reshape(-1)
    total = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), flat_labels, ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return total / (flat_labels != IGNORE_INDEX).sum().clamp(min=1)


def labelled_rows(tensor: torch.Tensor, labels: torch.Tensor, label_index: torch.Tensor | None = None) -> torch.Tensor:
    """[M, ...]: the rows of ``tensor`` [B, T, ...] at the M labelled positions of ``labels`` [B, T], in row-major
    order: through the batch's ``label_index`` (``distalign.data.batches.with_label_index``: no host sync) where
    it has one, else through a boolean mask (a batch made outside the training loop)."""
    if label_index is None:
        return tensor[labels != IGNORE_INDEX]
    return tensor.flatten(0, 1).index_select(0, label_index)


def labelled_logits(
    masked_lm: torch.nn.Module, labels: torch.Tensor, label_index: torch.Tensor | None = None, **inputs: torch.Tensor
) -> torch.Tensor:
    """[M, V]: the masked LM's logits at the M labelled positions of ``labels`` (row-major order; ``label_index``:
    see ``labelled_rows``), given the encoder's ``inputs`` (``input_ids`` or ``inputs_embeds``,
    ``attention_mask``, ...).

    The encoder runs on every position, its MLM head (transform and vocabulary projection: for XLM-R, with 250k
    words, the largest matrix product of the model) only where the loss reads a logit, 15 % of the tokens. The
    head module is called, not its weight indexed, so DeepSpeed ZeRO-3's hooks gather it and adapters in the
    encoder stay in the path. A model whose head ``known_lm_head`` does not know computes every logit.
    """
    head = known_lm_head(masked_lm)
    if head is None:
        return labelled_rows(masked_lm(**inputs).logits, labels, label_index)
    return head(labelled_rows(masked_lm.base_model(**inputs).last_hidden_state, labels, label_index))  # type: ignore[operator]


def mlm_loss(
    masked_lm: torch.nn.Module, labels: torch.Tensor, label_index: torch.Tensor | None = None, **inputs: torch.Tensor
) -> torch.Tensor:
    """``masked_lm_loss`` from the logits at the labelled positions only (``labelled_logits``): the same loss
    and gradients as from every position's logits."""
    return masked_lm_loss(
        labelled_logits(masked_lm, labels, label_index, **inputs), labelled_rows(labels, labels, label_index)
    )


@dataclass
class MLMConfig:
    weight: float = 1.0  # 0 disables the objective
    mask_prob: float = 0.15  # share of masking units (words or tokens) selected
    granularity: Granularity = "word"  # word: whole-word masking; token: single subwords (the HF collator)


class MLMObjective(Objective):
    """Cross-entropy of the masked LM head on a corpus batch masked by ``MLMMasking``."""

    Config = MLMConfig
    stream = "corpus"
    consumes = ("masked_ids", "attention_mask", "labels")
    prepares = MASKED_TENSORS
    uses_lm_head = True
    reference = "Devlin et al. 2019, BERT (whole-word masking release)"

    @classmethod
    def validate(cls, cfg: MLMConfig, facts: RunFacts, key: str) -> None:
        require(0 < cfg.mask_prob < 1, f"{key}.mask_prob", "must be in (0, 1)")

    @classmethod
    def batch_preparer(cls, cfg: MLMConfig, ctx: DataContext) -> MLMMasking:
        return MLMMasking.for_tokenizer(ctx.tokenizer_path, cfg.mask_prob, cfg.granularity)

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return mlm_loss(
            model.masked_lm,
            batch["labels"],
            batch.get(LABEL_INDEX),
            input_ids=batch["masked_ids"],
            attention_mask=batch["attention_mask"],
        )
