"""ALIGN-MLM word-embedding alignment loss.

Paper: Tang, Deshpande & Narasimhan (2022), "Align-MLM: Word Embedding
Alignment is Crucial for Multilingual Pre-training".

ALIGN-MLM adds to the MLM loss an alignment term that pulls the input
embeddings of bilingual-dictionary translation pairs together::

    L_align = - (1/N) * sum_i cos(E[src_i], E[tgt_i])

where ``E`` is the ``[V, d]`` input-embedding matrix and the mean runs over the whole dictionary
each step (the paper's 1/|B| sum; the authors' code, princeton-nlp/align-mlm ``modeling_roberta.py``,
looks up every aligned row in every forward). The total objective is ``L_mlm + alpha * L_align``; the
weight ``alpha`` is applied by the caller.

Inputs
------
embedding_weight : FloatTensor ``[V, d]`` (e.g. ``model.get_input_embeddings().weight``).
src_ids, tgt_ids : LongTensor ``[N]`` (one token per word) or ``[N, T]`` padded
    with ``-1`` (multi-token words); a word's vector is then the mean of the
    embedding rows of its valid subword ids. The two sides may use different
    layouts / padding widths but must have the same ``N``.

Returns a scalar tensor, differentiable w.r.t. ``embedding_weight``.

Example
-------
>>> import torch
>>> E = torch.eye(4, requires_grad=True)
>>> align_loss(E, torch.tensor([0, 1]), torch.tensor([0, 2]))   # cos = 1, 0
tensor(-0.5000, grad_fn=<NegBackward0>)
>>> round(align_loss(E, torch.tensor([[0, 1], [2, -1]]), torch.tensor([0, 2])).item(), 4)
-0.8536
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from distalign.data.run_facts import RunFacts
from distalign.device import to_device
from distalign.errors import require
from distalign.objectives.base import Objective, ObjectiveContext

log = logging.getLogger("distalign")

PAD_ID = -1


def _word_vectors(weight: torch.Tensor, ids: torch.Tensor, name: str, validate: bool = True) -> torch.Tensor:
    """Return ``[N, d]`` word vectors: embedding rows, or means of valid subword rows. ``validate``: check the
    ids' range and that no row is all padding (it reads the device: a caller that checked them leaves it off)."""
    ids = torch.as_tensor(ids, device=weight.device)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got {ids.dtype}")
    if ids.dim() == 1:
        ids = ids.unsqueeze(1)
    elif ids.dim() != 2:
        raise ValueError(f"{name} must be 1-D [N] or 2-D [N, T], got shape {tuple(ids.shape)}")
    ids = ids.long()
    valid = ids != PAD_ID
    V = weight.shape[0]
    counts = valid.sum(1)
    if validate:
        bad = valid & ((ids < 0) | (ids >= V))
        if bad.any():
            row = int(bad.any(1).nonzero()[0])
            raise ValueError(f"{name} row {row} has an id outside [0, {V}) (pad id is {PAD_ID}): {ids[row].tolist()}")
        if ids.shape[0] and (counts == 0).any():
            row = int((counts == 0).nonzero()[0])
            raise ValueError(f"{name} row {row} has no valid token id (all padding)")
    rows = weight[ids.clamp_min(0)]  # [N, T, d]
    rows = rows * valid.unsqueeze(-1).to(rows.dtype)
    return rows.sum(1) / counts.unsqueeze(-1).to(rows.dtype)


def align_loss(
    embedding_weight: torch.Tensor, src_ids: torch.Tensor, tgt_ids: torch.Tensor, validate: bool = True
) -> torch.Tensor:
    """ALIGN-MLM loss ``-mean_i cos(E[src_i], E[tgt_i])`` (see module docstring); ``validate``: see
    ``_word_vectors``."""
    if embedding_weight.dim() != 2:
        raise ValueError(f"embedding_weight must be [V, d], got shape {tuple(embedding_weight.shape)}")
    n_src, n_tgt = torch.as_tensor(src_ids).shape[:1], torch.as_tensor(tgt_ids).shape[:1]  # host-side: shapes
    if n_src != n_tgt:
        raise ValueError(f"src_ids and tgt_ids must have the same number of words N, got {n_src} vs {n_tgt}")
    if n_src == (0,) or len(n_src) == 0:
        raise ValueError("src_ids/tgt_ids must contain at least one word")
    s = _word_vectors(embedding_weight, src_ids, "src_ids", validate)
    t = _word_vectors(embedding_weight, tgt_ids, "tgt_ids", validate)
    return -F.cosine_similarity(s, t, dim=-1).mean()


WORD_START_MARKERS = "▁Ġ"  # SentencePiece's and byte-level BPE's word-start marks


def dictionary_token_ids(word_pairs, tokenizer) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``[N, T]`` token ids of each pair's two words (``PAD_ID`` after a word's tokens) and the number of
    pairs left out. A word is tokenised as in a corpus sentence; a token that is only a word-start mark
    ("▁" alone) is left out of its word: both languages share it, so the loss could rise by growing that
    one row instead of aligning the pair. Pairs in one language, and words of no other token, are left out.
    """
    words = sorted({w for column in ("word1", "word2") for w in word_pairs[column].to_pylist()})
    encoded = tokenizer([[w] for w in words], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    used = sorted({i for ids in encoded for i in ids})
    marks = {i for i, token in zip(used, tokenizer.convert_ids_to_tokens(used)) if not token.strip(WORD_START_MARKERS)}
    tokens = {w: [i for i in ids if i not in marks] for w, ids in zip(words, encoded)}
    pairs = [
        (tokens[w1], tokens[w2])
        for w1, l1, w2, l2 in zip(*(word_pairs[c].to_pylist() for c in ("word1", "lang1", "word2", "lang2")))
        if l1 != l2 and tokens[w1] and tokens[w2]
    ]

    def padded(side: int) -> torch.Tensor:  # host-side: registered as buffers, they move with the module
        width = max((len(p[side]) for p in pairs), default=1)
        ids = torch.full((len(pairs), width), PAD_ID, dtype=torch.long)
        for row, pair in enumerate(pairs):
            ids[row, : len(pair[side])] = torch.tensor(pair[side], dtype=torch.long)
        return ids

    return padded(0), padded(1), len(word_pairs) - len(pairs)


def looked_up_rows(src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the sorted token ids the pairs use, ``src`` and ``tgt`` as positions among them, padding kept): host work,
    so that a step on the device has no boolean mask or ``unique`` to wait for."""
    used = torch.cat([src[src != PAD_ID], tgt[tgt != PAD_ID]]).unique()  # sorted

    def positions(ids: torch.Tensor) -> torch.Tensor:
        return torch.where(ids == PAD_ID, ids, torch.searchsorted(used, ids.clamp_min(0)))

    return used, positions(src), positions(tgt)


@dataclass
class AlignConfig:
    # weight = alpha (10 in the paper) on -mean cos of the input embeddings of the training pairs
    # (data.constraints / data.dictionaries; their share: data.dictionary_fraction)
    weight: float = 0.0
    # 0: every pair each step (the paper's mean over the whole dictionary); N: a new random N pairs each step,
    # for dictionaries too large to look up whole
    pairs_per_step: int = 0


class AlignObjective(Objective):
    """ALIGN-MLM's alignment term over the run's dictionary pairs, every pair each step as the paper's
    1/|B| sum and the authors' code (or ``pairs_per_step`` of them, drawn anew each step).

    A multi-token word is the mean of its subword embedding rows (single-token words are their
    row). Only the rows of the pairs are looked up, through the embedding module's forward: under
    DeepSpeed ZeRO-3 ``.weight`` is a partitioned placeholder, while the forward gathers it.
    The loss reads no batch: it runs beside the MLM on the corpus stream.
    """

    Config = AlignConfig
    stream = "corpus"
    consumes = ()
    uses_word_pairs = True
    reference = "Tang, Deshpande & Narasimhan 2022, ALIGN-MLM"

    def __init__(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor, pairs_per_step: int = 0, seed: int = 0):
        super().__init__()
        if len(src_ids) == 0:
            raise ValueError(
                "objectives.align: no dictionary pair left (pairs need two languages and a token "
                "besides the word-start mark on each side)"
            )
        draws_pairs = 0 < pairs_per_step < len(src_ids)
        self.pairs = (src_ids, tgt_ids) if draws_pairs else None  # on the host: the pairs a step draws from
        # every pair each step: the rows looked up and the pairs' positions among them, made once on the host
        for name, value in zip(
            ("used_ids", "src_positions", "tgt_positions"),
            (torch.empty(0, dtype=torch.long),) * 3  # host-side: buffers, moved with the module
            if draws_pairs
            else looked_up_rows(src_ids, tgt_ids),
        ):
            self.register_buffer(name, value, persistent=False)
        # checkpointed: the same draws on resume; host-side: a buffer moves with the module
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.draws: int | None = None  # the host's copy of ``steps``, read from it once (after a resume)
        self.register_load_state_dict_post_hook(lambda module, keys: setattr(module, "draws", None))
        self.pairs_per_step, self.seed = pairs_per_step, seed

    @classmethod
    def validate(cls, cfg: AlignConfig, facts: RunFacts, key: str) -> None:
        require(cfg.pairs_per_step >= 0, f"{key}.pairs_per_step", "must be >= 0 (0: every pair each step)")

    @classmethod
    def build(cls, cfg: AlignConfig, ctx: ObjectiveContext) -> AlignObjective:
        src, tgt, left_out = dictionary_token_ids(ctx.word_pairs, ctx.tokenizer)
        log.info(
            "ALIGN: %d dictionary pairs, %d left out (one language, or no token but the word-start mark)",
            len(src),
            left_out,
        )
        return cls(src, tgt, cfg.pairs_per_step, ctx.seed)

    def after_step(self) -> None:
        self.steps += 1
        if self.draws is not None:
            self.draws += 1

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        used, src, tgt = self.used_ids, self.src_positions, self.tgt_positions
        if self.pairs is not None:  # every rank draws the same pairs: DDP averages equal losses
            all_src, all_tgt = self.pairs
            if self.draws is None:
                self.draws = int(self.steps)  # once (a host sync): the step a resumed run draws from
            generator = torch.Generator(device="cpu").manual_seed(self.seed * 1_000_003 + self.draws)
            chosen = torch.randperm(len(all_src), generator=generator, device="cpu")[: self.pairs_per_step]
            drawn = to_device(
                dict(zip(("used", "src", "tgt"), looked_up_rows(all_src[chosen], all_tgt[chosen]))), used.device
            )
            used, src, tgt = drawn["used"], drawn["src"], drawn["tgt"]
        rows = model.masked_lm.get_input_embeddings()(used)
        # positions among the rows looked up, made on the host from pairs with a token on each side: valid
        return align_loss(rows.float(), src, tgt, validate=False)
