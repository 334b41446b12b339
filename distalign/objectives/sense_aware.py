"""Sense-aware MLM with a sense-level translation loss.

Paper: Liu, Nguyen, Joty, Bing & Si (2022), "Towards Multi-Sense Cross-Lingual Alignment of
Contextual Embeddings" (COLING; arXiv 2103.06459).

The MLM softmax runs over (token, sense) classes: each vocabulary entry v has S output vectors
w[v, s] and biases b[v, s] (untied from the input embeddings), class index ``v * S + s``. For a
masked position with gold token t and prediction-head state h (the state the original decoder
reads: after the head's dense → GELU → LayerNorm transform),

    p(v, s | h) = softmax over allowed (v, s) of  w[v, s]·h + b[v, s]     (others masked to −inf)

The first label is (t, s*) with s* the sense of t whose centre is nearest to the projected state
z = Pᵀ h (``SenseState``; not centred, as the paper's h P). The translation label is found among
the dictionary translations t′ of t: over every allowed (t′, s′), the pair whose centre is most
cosine-similar to the same z (the paper's cossim(h P, c P), §3.2). The per-position loss is

    ℓ = CE(t, s*)                                      without a translation
    ℓ = (1 − λ) CE(t, s*) + λ CE(t′, s′)               with one (λ = 0.5: the paper's mean)

averaged over masked positions.

Decisions made here:
- All S output vectors of v start as copies of the model's decoder row (and bias), so sense 0
  reproduces the original MLM logits at initialisation; when warm-up ends, sense 0's trained
  vectors are copied into the other senses again.
- Translations are single tokens (a dictionary word that tokenises to several pieces is left out
  by the caller); a token is never its own translation.
- The objective's parameters (the sense output layer) and its state are not part of the masked LM,
  so ``masked_lm.save_pretrained`` exports the original architecture. The state travels in the
  objective's ``state_dict`` as extra state, so a checkpoint of the training module holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import torch
import torch.nn.functional as F
from torch import nn

from distalign.collectives import all_gather_rows
from distalign.data.batches import LABEL_INDEX
from distalign.data.run_facts import RunFacts
from distalign.errors import require
from distalign.objectives.base import DataContext, EditParameters, Objective, ObjectiveContext, edit_in_place
from distalign.objectives.mlm import IGNORE_INDEX, MASKED_TENSORS, MLMMasking, labelled_rows
from distalign.objectives.sense_state import SenseState

NO_TRANSLATION = -1


def build_translation_table(
    src_ids: Sequence[int], tgt_ids: Sequence[int], vocab_size: int, max_translations: int = 8, symmetric: bool = True
) -> torch.Tensor:  # host-side
    """[V, max_translations] table of translation token ids per token, padded with -1.

    Pairs are taken in order (duplicates and self-pairs dropped, at most ``max_translations`` kept
    per token); ``symmetric`` also lists each source as a translation of its target.
    """
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"src_ids and tgt_ids differ in length: {len(src_ids)} vs {len(tgt_ids)}")
    if max_translations < 1:
        raise ValueError(f"max_translations must be >= 1, got {max_translations}")
    translations: dict[int, list[int]] = {}
    for index, (src, tgt) in enumerate(zip(src_ids, tgt_ids)):
        for name, token in (("src_ids", src), ("tgt_ids", tgt)):
            if not 0 <= token < vocab_size:
                raise ValueError(f"{name}[{index}] = {token} is outside [0, {vocab_size})")
        directions = [(src, tgt), (tgt, src)] if symmetric else [(src, tgt)]
        for word, translation in directions:
            row = translations.setdefault(word, [])
            if word != translation and translation not in row and len(row) < max_translations:
                row.append(translation)
    table = torch.full((vocab_size, max_translations), NO_TRANSLATION, dtype=torch.long)
    for word, row in translations.items():
        table[word, : len(row)] = torch.tensor(row, dtype=torch.long)
    return table


def translation_labels(
    targets: torch.Tensor, projected: torch.Tensor, centres: torch.Tensor, allowed: torch.Tensor, table: torch.Tensor
) -> torch.Tensor:
    """Class index [N] (t′·S + s′) of the nearest allowed translation sense, IGNORE_INDEX if none.

    ``targets`` [N] gold tokens, ``projected`` [N, d′], ``centres`` [V, S, d′], ``allowed`` [V, S],
    ``table`` [V, K] (-1 padded). Ties go to the earliest translation, then the lowest sense.
    """
    num_senses = centres.shape[1]
    candidates = table[targets]  # [N, K]
    token = candidates.clamp(min=0)
    usable = (candidates != NO_TRANSLATION).unsqueeze(-1) & allowed[token]  # [N, K, S]
    cos = F.cosine_similarity(projected[:, None, None, :], centres[token], dim=-1)
    best = cos.masked_fill(~usable, float("-inf")).flatten(1).argmax(1)
    chosen_token = token.gather(1, (best // num_senses).unsqueeze(1)).squeeze(1)
    labels = chosen_token * num_senses + best % num_senses
    return torch.where(usable.flatten(1).any(1), labels, torch.full_like(labels, IGNORE_INDEX))


def sense_aware_loss(
    logits: torch.Tensor, labels: torch.Tensor, translation_labels: torch.Tensor, translation_weight: float = 0.5
) -> torch.Tensor:
    """Mean over positions with a label of CE(label), mixed with CE(translation label) where one exists; 0 (still
    attached to the graph) where no position has a label.

    ``logits`` [N, C]; ``labels`` and ``translation_labels`` [N], IGNORE_INDEX for none.
    """
    if logits.dim() != 2 or labels.shape != (logits.shape[0],) or translation_labels.shape != labels.shape:
        raise ValueError(
            f"logits must be [N, C] and both label tensors [N]; got {tuple(logits.shape)}, "
            f"{tuple(labels.shape)}, {tuple(translation_labels.shape)}"
        )
    if not 0.0 <= translation_weight <= 1.0:
        raise ValueError(f"translation_weight must be in [0, 1], got {translation_weight}")
    has_label = labels != IGNORE_INDEX
    has_translation = has_label & (translation_labels != IGNORE_INDEX)
    # one fp32 log-softmax read at both labels (two cross-entropies would each keep one: [N, V·S] is the largest
    # tensor of the step, 15 GB in fp32 for XLM-R at 64 x 512 tokens); no boolean indexing, no host sync
    log_probs = F.log_softmax(logits, -1, dtype=torch.promote_types(logits.dtype, torch.float32))
    label = labels.clamp(min=0)
    # one gather of both classes (its backward fills one [N, V·S] gradient, not one per label)
    label_nll, translation_nll = (
        -log_probs.gather(1, torch.stack([label, torch.where(has_translation, translation_labels, label)], 1))
    ).unbind(1)
    mixed = (1 - translation_weight) * label_nll + translation_weight * translation_nll
    per_position = torch.where(has_translation, mixed, label_nll) * has_label
    return per_position.sum() / has_label.sum().clamp(min=1)


def prediction_transform(masked_lm: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """The MLM head's transform before its decoder (dense → GELU → LayerNorm), for BERT and RoBERTa/XLM-R."""
    predictions = getattr(getattr(masked_lm, "cls", None), "predictions", None)
    if predictions is not None and hasattr(predictions, "transform"):
        return predictions.transform
    head = getattr(masked_lm, "lm_head", None)
    if head is not None and hasattr(head, "dense") and hasattr(head, "layer_norm"):
        return lambda states: head.layer_norm(F.gelu(head.dense(states)))  # BERT's exact (erf) GELU
    raise ValueError(
        f"{type(masked_lm).__name__}: no known MLM head (expected BERT's cls.predictions or RoBERTa/XLM-R's lm_head)"
    )


class SenseOutputLayer(nn.Module):
    """S output vectors and biases per vocabulary entry; row ``v * S + s`` is sense s of token v."""

    def __init__(self, decoder_weight: torch.Tensor, decoder_bias: torch.Tensor, num_senses: int):
        super().__init__()
        self.num_senses = num_senses
        self.weight = nn.Parameter(decoder_weight.detach().repeat_interleave(num_senses, dim=0).clone())
        self.bias = nn.Parameter(decoder_bias.detach().repeat_interleave(num_senses).clone())

    @classmethod
    def from_masked_lm(cls, masked_lm: nn.Module, num_senses: int) -> SenseOutputLayer:
        decoder = masked_lm.get_output_embeddings()  # type: ignore[operator]
        bias = decoder.bias if decoder.bias is not None else decoder.weight.new_zeros(decoder.weight.shape[0])
        return cls(decoder.weight, bias, num_senses)

    def forward(self, states: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """Logits [N, V·S] for ``states`` [N, d]; senses not ``allowed`` [V, S] get −inf (through the bias, [V·S],
        not a masked copy of the logits)."""
        return F.linear(states, self.weight, self.bias.masked_fill(~allowed.reshape(-1), float("-inf")))

    @torch.no_grad()
    def copy_sense_zero_(self, edit_parameters: EditParameters = edit_in_place) -> None:
        """Give every sense the current vectors of sense 0 (when the senses start to split), in the values the
        optimizer steps (``edit_parameters``: the engine's; DeepSpeed's are its fp32 master copies, and under
        ZeRO-3 the module holds only a partition)."""
        with edit_parameters([self.weight, self.bias]) as (weight, bias):
            senses = weight.view(-1, self.num_senses, weight.shape[-1])
            senses.copy_(senses[:, :1].expand_as(senses))
            bias = bias.view(-1, self.num_senses)
            bias.copy_(bias[:, :1].expand_as(bias))


def translation_table_from_dictionary(dictionary: pa.Table, tokenizer, max_translations: int = 8) -> torch.Tensor:
    """:func:`build_translation_table` from the cross-lingual pairs (word1, lang1, word2, lang2) whose two
    words are single tokens as a corpus word is tokenised (other pairs cannot be a token's label)."""

    def token(word: str) -> int | None:
        ids = tokenizer([[word]], is_split_into_words=True, add_special_tokens=False)["input_ids"][0]
        return ids[0] if len(ids) == 1 else None

    src, tgt = [], []
    for row in dictionary.select(["word1", "lang1", "word2", "lang2"]).to_pylist():
        a, b = token(row["word1"]), token(row["word2"])
        if row["lang1"] != row["lang2"] and a is not None and b is not None:
            src.append(a)
            tgt.append(b)
    return build_translation_table(src, tgt, len(tokenizer), max_translations)


@dataclass(kw_only=True)
class SenseAwareConfig:
    # multi-sense MLM + sense-level translation loss; replaces objectives.mlm. Only proj_dim = 14 (BERT)
    # is the paper's; the other defaults are ours. Translations: single-token training pairs.
    weight: float = 0.0
    mask_prob: float = (
        0.15  # share of words masked: whole words, the paper's masked unit (docs/explanations/fidelity.md)
    )
    num_senses: int = 3  # S sense output vectors per vocabulary entry
    proj_dim: int = 14  # d': PCA projection of the states the senses are chosen in
    queue_size: int = 4096  # Q recent states the projection is fitted on
    refit_every: int = 1000  # M steps between projection refits (and pruning)
    alpha: float = 0.01  # sense learning rate of the centre update c <- (1-alpha) c + alpha h
    warmup_steps: int = 1000  # W steps with a single sense
    prune_beta: float = 0.0  # prune senses chosen less than this share of a token's selections (0 = never)
    prune_min_count: int = 100  # only tokens selected at least this often are pruned
    translation_weight: float = 0.5  # share of the translation label's loss where one exists (0.5 = mean)
    max_translations: int = 8  # translation labels kept per token (the first, in the pairs' order)


class SenseAwareObjective(Objective):
    """Sense-aware MLM + sense-level translation loss on a corpus batch masked by ``whole_word_mask``.

    ``forward`` only reads the state; the training loop calls ``after_step()`` once per optimizer
    step on every rank (after the backward of all micro-batches) to move centres, queue, step,
    projection and pruning forward from the rows gathered over all ranks.
    """

    Config = SenseAwareConfig
    stream = "corpus"
    consumes = ("masked_ids", "attention_mask", "labels")
    prepares = MASKED_TENSORS
    uses_word_pairs = True
    reference = "Liu, Nguyen, Joty, Bing & Si 2022, multi-sense cross-lingual alignment (COLING)"

    def __init__(
        self,
        *,
        masked_lm: nn.Module,
        translation_table: torch.Tensor,
        num_senses: int = 3,
        proj_dim: int = 14,
        queue_size: int = 4096,
        refit_every: int = 1000,
        alpha: float = 0.01,
        warmup_steps: int = 1000,
        prune_beta: float = 0.0,
        prune_min_count: int = 100,
        translation_weight: float = 0.5,
        seed: int = 0,
    ):
        super().__init__()
        vocab_size, hidden_size = masked_lm.get_output_embeddings().weight.shape  # type: ignore[operator]
        if translation_table.dim() != 2 or translation_table.shape[0] != vocab_size:
            raise ValueError(f"translation_table must be [{vocab_size}, K], got {tuple(translation_table.shape)}")
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha (sense learning rate) must be in (0, 1], got {alpha}")
        if vocab_size * num_senses >= 2**24:  # class indices travel as fp32 beside the states (update_state)
            raise ValueError(f"{vocab_size} tokens x {num_senses} senses: at most 2^24 classes")
        self.alpha, self.translation_weight = alpha, translation_weight
        # Pruning runs at each projection refit after warm-up, for tokens selected >= prune_min_count times.
        self.prune_beta, self.prune_min_count = prune_beta, prune_min_count
        self.sense_output = SenseOutputLayer.from_masked_lm(masked_lm, num_senses)
        self.sense_state = SenseState(
            vocab_size=vocab_size,
            num_senses=num_senses,
            hidden_size=hidden_size,
            proj_dim=proj_dim,
            queue_size=queue_size,
            refit_every=refit_every,
            warmup_steps=warmup_steps,
            seed=seed,
        )
        self.translation_table = translation_table.long()
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    @classmethod
    def validate(cls, cfg: SenseAwareConfig, facts: RunFacts, key: str) -> None:
        require(0 < cfg.mask_prob < 1, f"{key}.mask_prob", "must be in (0, 1)")
        require(cfg.num_senses >= 1, f"{key}.num_senses", "must be >= 1")
        require(cfg.queue_size > cfg.proj_dim >= 1, f"{key}.queue_size", "must exceed proj_dim >= 1")
        require(0 < cfg.alpha <= 1, f"{key}.alpha", "must be in (0, 1]")
        require(0 <= cfg.prune_beta <= 1, f"{key}.prune_beta", "must be in [0, 1]")
        require(0 <= cfg.translation_weight <= 1, f"{key}.translation_weight", "must be in [0, 1]")

    @classmethod
    def batch_preparer(cls, cfg: SenseAwareConfig, ctx: DataContext) -> MLMMasking:
        return MLMMasking.for_tokenizer(ctx.tokenizer_path, cfg.mask_prob)

    @classmethod
    def build(cls, cfg: SenseAwareConfig, ctx: ObjectiveContext) -> SenseAwareObjective:
        table = translation_table_from_dictionary(ctx.word_pairs, ctx.tokenizer, cfg.max_translations)
        return cls(
            masked_lm=ctx.masked_lm,
            translation_table=table,
            num_senses=cfg.num_senses,
            proj_dim=cfg.proj_dim,
            queue_size=cfg.queue_size,
            refit_every=cfg.refit_every,
            alpha=cfg.alpha,
            warmup_steps=cfg.warmup_steps,
            prune_beta=cfg.prune_beta,
            prune_min_count=cfg.prune_min_count,
            translation_weight=cfg.translation_weight,
            seed=ctx.seed,
        )

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        masked_lm = model.masked_lm
        hidden = masked_lm.base_model(
            input_ids=batch["masked_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
        labels, label_index = batch["labels"], batch.get(LABEL_INDEX)
        states = prediction_transform(masked_lm)(labelled_rows(hidden, labels, label_index))
        targets = labelled_rows(labels, labels, label_index)
        state = self.sense_state.to(states.device)
        self.translation_table = self.translation_table.to(states.device)
        projected = state.project(states.detach())  # z = Pᵀ h for both labels
        senses = state.select(targets, projected)
        allowed = state.allowed()
        second = translation_labels(targets, projected, state.projected_centres, allowed, self.translation_table)
        logits = self.sense_output(states, allowed)
        if self.training:  # appended even when empty: every rank must join the gather in update_state
            self._pending.append((targets * state.num_senses + senses, states.detach().float()))
        # a batch whose rows drew no masked word gives 0 (the loss's mean over no position)
        return sense_aware_loss(logits, targets * state.num_senses + senses, second, self.translation_weight)

    def after_step(self) -> None:
        self.update_state()

    def update_state(self, gather: Callable[[torch.Tensor], torch.Tensor] = all_gather_rows) -> None:
        """Apply this step's (token, sense, state) rows, gathered over ranks, to the sense state: one gather of
        rows [n, 1 + d], each class index (token·S + sense, exact in fp32 below 2^24) beside its state."""
        if not self._pending:
            return
        classes, states = (torch.cat(part) for part in zip(*self._pending))
        self._pending.clear()
        rows = gather(torch.cat([classes[:, None].float(), states], 1))
        if not len(rows):
            return
        classes, states = rows[:, 0].long(), rows[:, 1:]
        state = self.sense_state
        targets, senses = classes // state.num_senses, classes % state.num_senses
        was_single = state.single_sense
        refitted = state.observe(targets, senses, states, self.alpha)
        if was_single and not state.single_sense:
            self.sense_output.copy_sense_zero_(self.edit_parameters)
        if self.prune_beta > 0 and refitted and not state.single_sense:
            state.prune(self.prune_beta, self.prune_min_count)

    def get_extra_state(self) -> dict[str, torch.Tensor]:
        return self.sense_state.state_dict()

    def set_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        self.sense_state.load_state_dict(state)
