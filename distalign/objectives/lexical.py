"""BabelBERT-style multilingual lexical-constraint InfoNCE loss.

Paper: Green, Ponzetto & Glavaš (2022), "BabelBERT: Massively Multilingual
Transformers Meet a Massively Multilingual Lexical Resource" -- lexical
specialisation of a multilingual encoder with a contrastive (InfoNCE) loss
over word pairs that share a BabelNet synset.

The ``2N`` items ``x = [a_1..a_N, b_1..b_N]`` carry the labels
``[synset_ids, synset_ids]``. With ``s_ij = cos(x_i, x_j)`` and temperature
``tau``, every ordered pair ``(i, j)``, ``i != j``, with the same label is a
positive; the negatives ``n`` of ``i`` are the items with another label::

    l_ij = -log( exp(s_ij/tau) / (exp(s_ij/tau) + sum_n exp(s_in/tau)) )
    loss = mean over all positive pairs (i, j) of l_ij

Computed as ``logaddexp(s_ij/tau, logsumexp_n s_in/tau) - s_ij/tau`` with
masking (no Python loops); an item without negatives contributes ``0`` for each
of its positives (they still count in the mean).

Inputs: ``a``, ``b`` float ``[N, d]`` encodings of the two words of each
constraint pair; ``synset_ids`` integer ``[N]``; ``temperature > 0``.
Returns a scalar tensor.

Example
-------
>>> import torch
>>> a, b = torch.randn(4, 16, requires_grad=True), torch.randn(4, 16)
>>> loss = info_nce(a, b, torch.tensor([0, 1, 1, 2]))
>>> loss.backward(); a.grad.shape
torch.Size([4, 16])

Across workers (``global_info_nce``, ``global_negatives: true``): the items of every rank's pairs form one
contrastive set; each rank computes the rows of its own items against all ranks' items, its share scaled so that
the ranks' averaged gradients are the whole loss's.

Sense level (``sense_info_nce``): Each word of a constraint pair is encoded as
``[CLS] word [SEP] gloss [SEP]`` (``distalign.data.gloss_inputs``); its sense vector is the mean of
the word's subword states (``word_mask``), and the pairs are contrasted with the same multi-positive
InfoNCE as the type-level objective (``distalign.objectives.lexical.info_nce``)::

    loss = info_nce(w_1, w_2, synset) + gloss_weight * info_nce(g_1, g_2, synset)[pairs with both glosses]

``w_s`` / ``g_s`` pool one encoder pass of side ``s`` over ``word_mask`` / ``gloss_mask``. The
gloss term (``gloss_weight > 0``) also aligns the glosses of a synset across languages; it only
uses the pairs whose two rows both have gloss tokens (a row without a gloss pools to a zero
vector, which would be a meaningless item), and is 0 when no pair has both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from distalign import collectives
from distalign.data.run_facts import RunFacts
from distalign.data.stream_plugins import WordPairTokens
from distalign.errors import require
from distalign.models.pooling import mean_pool
from distalign.objectives.base import Objective, ObjectiveContext


@dataclass
class LexicalConfig:
    weight: float = 1.0  # 0 disables the objective
    temperature: float = 0.07  # tau of the InfoNCE softmax over cosine similarities
    # sense level: each word encoded with its synset gloss ([CLS] word [SEP] gloss [SEP]), only the
    # word's subwords pooled; pairs without glosses fall back to the word alone
    sense_level: bool = False
    gloss_weight: float = 0.0  # > 0 adds the same InfoNCE on the gloss spans (sense level only)
    max_sense_tokens: int = 64  # subword budget of word + gloss
    # negatives from the pairs of every worker (encodings gathered with their gradients): BabelBERT's
    # batch is one contrastive set; false = each worker's own pairs only
    global_negatives: bool = True


def info_nce(
    a: torch.Tensor,
    b: torch.Tensor,
    synset_ids: torch.Tensor,
    temperature: float = LexicalConfig.temperature,
    pairs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Multi-positive InfoNCE over the ``2N`` items of ``N`` constraint pairs (see module docstring).

    ``pairs`` [N] bool: the pairs taking part (default all): the loss of ``a[pairs], b[pairs]`` without selecting
    them (a selection's size would have to be read from the device); 0 when none does."""
    items, labels, taking = _items(a, b, synset_ids, temperature, pairs)
    total, positives = info_nce_share(items, labels, taking, 0, len(items), temperature)
    # the mean over positive pairs, without a host sync (no indexing); 0 without any
    return total / positives.clamp(min=1)


def _items(
    a: torch.Tensor, b: torch.Tensor, synset_ids: torch.Tensor, temperature: float, pairs: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The checked inputs as the ``2N`` items ``[a; b]``, their labels and which take part (None: all)."""
    if a.dim() != 2 or a.shape != b.shape:
        raise ValueError(f"a and b must both be [N, d] with equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
    synset_ids = torch.as_tensor(synset_ids, device=a.device)
    if synset_ids.shape != a.shape[:1]:
        raise ValueError(f"synset_ids must have shape [N] = [{a.shape[0]}], got {tuple(synset_ids.shape)}")
    if a.shape[0] == 0:
        raise ValueError("info_nce needs at least one pair (N >= 1)")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return (
        torch.cat([a, b]),
        torch.cat([synset_ids, synset_ids]),
        None if pairs is None else torch.cat([pairs, pairs]),
    )


def info_nce_share(
    items: torch.Tensor, labels: torch.Tensor, taking: torch.Tensor | None, first: int, count: int, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The share of the rows ``items[first:first + count]`` in the InfoNCE over all ``items`` [M, d] (labels [M],
    ``taking`` [M] bool or None): the sum of ``l_ij`` over the positive pairs (i, j) whose i is one of those rows,
    and how many such pairs there are. Each row's candidates are all M items but itself. Memory: the items in fp32
    and a few [count, M] matrices, so a rank that takes its own rows pays O(M·d + count·M), not O(M²)."""
    # fp32 similarities even under bf16 autocast (DDP's): at tau 0.07 bf16 products err by ~0.06 in the logits,
    # and DeepSpeed's bf16 runs, which have no autocast, would train another loss
    with torch.autocast(items.device.type, enabled=False):
        keys = F.normalize(items.to(torch.promote_types(items.dtype, torch.float32)), dim=-1)
        logits = keys[first : first + count] @ keys.T / temperature  # [count, M]
    rows = slice(first, first + count)
    same = labels[rows, None] == labels[None, :]
    itself = (
        torch.arange(first, first + count, device=items.device)[:, None]
        == torch.arange(len(items), device=items.device)[None, :]
    )
    pos, neg = same & ~itself, ~same
    if taking is not None:  # items of the other pairs are neither positives nor negatives of anything
        both = taking[rows, None] & taking[None, :]
        pos, neg = pos & both, neg & both
    # logsumexp over each row's negatives (-inf for a row without any: its positives then cost 0;
    # masked_fill's backward zeroes the masked entries, so no NaN gradient arises)
    lse_neg = torch.logsumexp(logits.masked_fill(~neg, float("-inf")), 1, keepdim=True)
    per_pair = torch.logaddexp(logits, lse_neg) - logits  # -log softmax of s_ij vs {s_ij} U negatives
    return (per_pair * pos).sum(), pos.sum()


def global_info_nce(
    a: torch.Tensor,
    b: torch.Tensor,
    synset_ids: torch.Tensor,
    temperature: float = LexicalConfig.temperature,
    pairs: torch.Tensor | None = None,
) -> torch.Tensor:
    """``info_nce`` of the pairs of every rank (each rank passes its own, as many on every rank), each rank
    computing only its own items' rows against all ranks' items: O(W·B·d + B·W·B) memory a rank, not O((W·B)²).

    The items travel in the dtype they come in (bf16 under autocast; the similarities are fp32 as in
    ``info_nce``), with their gradients: in backward each rank's items receive what every rank's rows sent them.
    DDP and DeepSpeed average the ranks' gradients, so a rank's share, scaled by W, gives their average the
    gradient of the whole batch's loss; the value returned is that loss on every rank (the ranks' shares and
    positive counts summed), as before any split. Without a process group it is ``info_nce``."""
    items, labels, taking = _items(a, b, synset_ids, temperature, pairs)
    everyone = collectives.all_gather_rows(items, with_grad=True, same_size=True)  # [W·2B, d], rank after rank
    marks = labels[:, None] if taking is None else torch.stack([labels, taking.long()], 1)
    marks = collectives.all_gather_rows(marks, same_size=True)
    total, positives = info_nce_share(
        everyone,
        marks[:, 0],
        None if taking is None else marks[:, 1].bool(),
        collectives.rank() * len(items),
        len(items),
        temperature,
    )
    whole_total, whole_positives = collectives.all_reduce_sum(
        torch.stack([total.detach().double(), positives.double()])
    ).unbind()
    whole_positives = whole_positives.clamp(min=1)  # 0 without any positive pair, as info_nce
    share = total * collectives.world_size() / whole_positives.to(total.dtype)
    # the value of the whole loss, the gradient of the share (the detached part has none)
    return share + ((whole_total / whole_positives).to(total.dtype) - share).detach()


def sense_info_nce(
    states1: torch.Tensor,
    states2: torch.Tensor,
    word_mask1: torch.Tensor,
    word_mask2: torch.Tensor,
    gloss_mask1: torch.Tensor,
    gloss_mask2: torch.Tensor,
    synset_ids: torch.Tensor,
    temperature: float,
    gloss_weight: float,
    contrast: Callable[..., torch.Tensor] = info_nce,
) -> torch.Tensor:
    """[N, T, d] states of both sides' ``word + gloss`` encodings and their [N, T] masks -> scalar loss.

    ``contrast``: the InfoNCE of the pooled rows, ``info_nce`` (this worker's pairs) or ``global_info_nce``
    (every worker's pairs are one contrastive set).
    """
    if gloss_weight < 0:
        raise ValueError(f"gloss_weight must be >= 0, got {gloss_weight}")
    synset_ids = torch.as_tensor(synset_ids, device=states1.device)
    words1, words2 = mean_pool(states1, word_mask1), mean_pool(states2, word_mask2)
    loss = contrast(words1, words2, synset_ids, temperature)
    if gloss_weight == 0:
        return loss
    # the pairs with a gloss on both sides take part (every pair's rows go in: as many on every rank)
    both = (gloss_mask1.sum(1) > 0) & (gloss_mask2.sum(1) > 0)
    glosses1, glosses2 = mean_pool(states1, gloss_mask1), mean_pool(states2, gloss_mask2)
    return loss + gloss_weight * contrast(glosses1, glosses2, synset_ids, temperature, both)


def encode_both_sides(model, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, T, d] states of side 1 and side 2 from one encoder pass over the 2N inputs (one pass keeps the
    matrix multiplications large; the sides are padded to one length, which the streams already give)."""
    ids1, ids2, mask1, mask2 = (
        batch["input_ids1"],
        batch["input_ids2"],
        batch["attention_mask1"],
        batch["attention_mask2"],
    )
    length = max(ids1.shape[1], ids2.shape[1])

    def padded(t: torch.Tensor) -> torch.Tensor:  # padding positions are masked out of attention and pooling
        return torch.nn.functional.pad(t, (0, length - t.shape[1]))

    states = model.layer_states(torch.cat([padded(ids1), padded(ids2)]), torch.cat([padded(mask1), padded(mask2)]))
    return states[: len(ids1), : ids1.shape[1]], states[len(ids1) :, : ids2.shape[1]]


class LexicalObjective(Objective):
    """BabelBERT on a constraints batch: type level (each word alone) or sense level (word + gloss).

    Both levels pool the word's own subword states (``word_mask``) of one encoder pass per side;
    the sense level may add the gloss-span term (``sense_info_nce`` above). Built from its validated
    config, which alone holds the defaults.
    """

    Config = LexicalConfig
    stream = "constraints"
    consumes = (
        "input_ids1",
        "attention_mask1",
        "word_mask1",
        "gloss_mask1",
        "input_ids2",
        "attention_mask2",
        "word_mask2",
        "gloss_mask2",
        "synset",
    )
    reference = "Green, Ponzetto & Glavaš 2022, BabelBERT"

    def __init__(self, cfg: LexicalConfig):
        super().__init__()
        if cfg.gloss_weight < 0:
            raise ValueError(f"gloss_weight must be >= 0, got {cfg.gloss_weight}")
        self.temperature, self.gloss_weight = cfg.temperature, cfg.gloss_weight
        self.contrast = global_info_nce if cfg.global_negatives else info_nce

    @classmethod
    def validate(cls, cfg: LexicalConfig, facts: RunFacts, key: str) -> None:
        require(cfg.temperature > 0, f"{key}.temperature", "must be > 0")
        require(cfg.gloss_weight >= 0, f"{key}.gloss_weight", "must be >= 0")
        require(cfg.gloss_weight == 0 or cfg.sense_level, f"{key}.gloss_weight", f"needs {key}.sense_level: true")
        require(cfg.max_sense_tokens >= 6, f"{key}.max_sense_tokens", "must be >= 6")

    @classmethod
    def stream_settings(cls, cfg: LexicalConfig, facts: RunFacts, settings: WordPairTokens) -> WordPairTokens:
        return (
            dataclasses.replace(settings, with_gloss=True, max_tokens=cfg.max_sense_tokens)
            if cfg.sense_level
            else settings
        )

    @classmethod
    def build(cls, cfg: LexicalConfig, ctx: ObjectiveContext) -> LexicalObjective:
        return cls(cfg)

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        states1, states2 = encode_both_sides(model, batch)
        return sense_info_nce(
            states1,
            states2,
            batch["word_mask1"],
            batch["word_mask2"],
            batch["gloss_mask1"],
            batch["gloss_mask2"],
            batch["synset"],
            self.temperature,
            self.gloss_weight,
            self.contrast,
        )
