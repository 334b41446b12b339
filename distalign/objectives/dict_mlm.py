"""DICT-MLM: masked language modelling whose labels may be cross-lingual synonyms.

Paper: Chaudhary, Raman, Srinivasan & Chen (2020), "DICT-MLM: Improved Multilingual Pre-Training
using Bilingual Dictionaries". Instead of always predicting the masked word, the model must
sometimes predict a translation of it taken from a bilingual dictionary, which pushes words and
their translations towards the same contextual representation.

For a sentence in language ``l``:

1. Masking: whole-word masking (``mask_prob`` = 15% of words, 80% ``<mask>`` / 10% random /
   10% unchanged per word, ``distalign.objectives.mlm.whole_word_mask``) restricted to words
   ``w`` with a dictionary entry ``D(l, w) = {(l', s)}``. A sentence without any such word falls
   back to plain whole-word masking over all its words, so it still trains the ordinary MLM
   signal (labels then keep their original words).
2. Labels (§2.3): for each masked word, with probability ``synonym_share`` (x/100 in the paper's
   DICT-MLM-x, x ∈ {50, 70, 90}) ``l' ~ Uniform{languages of D(l, w)}``,
   ``s ~ Uniform{synonyms of w in l'}``, and the label becomes the token ids of ``s`` with target
   language ``l'``; the other (100 − x)% of the time the label stays ``w`` in language ``l``. Choosing the language
   first stops a language with many listed synonyms from dominating.
3. Loss: mean cross-entropy over labelled tokens of the target-language-conditioned head
   (``distalign.models.language_embeddings``), with language embeddings added at the input:

       L = -1/|M| Σ_{t∈M} log softmax(head(h_t, target_lang_t))[label_t]

Multi-subword words: the label of each of the word's positions is the synonym's token at the
same offset, so only synonyms that tokenise into exactly as many subwords as the word are kept
(``build_synonym_table`` drops the other pairs and counts them in ``dropped``). Truncating or
padding with -100 instead would train the model to emit word fragments (a truncated synonym)
or to predict a whole word in the first of several masks; keeping only equal lengths means
every label sequence is a complete word, at the cost of fewer usable dictionary pairs.
Synonyms are the direct dictionary pairs, in both directions, between different languages
(no pivoting through a third language).

dict-TLM variant (§2.3): the sentence is code-switched as in §2.2 (a dictionary word is replaced
by a random cross-lingual synonym, chosen as in 2., with probability ``switch_prob``: 15%, the
share §2.2 selects) and concatenated with the original as ``[CLS] orig [SEP] switched [SEP]``
(whole words only, both halves cut to the same words so they stay parallel); then, as in TLM,
15% of the concatenation's words are masked (whole words, any word) and predicted with the plain
MLM objective: every label is the token at its position, in its own language.

Masking happens on the data side (``DictMLMPreparer`` in Ray Data, one random stream per row:
``distalign.data.row_random``); ``DictMLMObjective`` computes the loss of an already masked batch.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pyarrow as pa
import torch
from torch import nn

from distalign.data.batches import TensorSpec
from distalign.data.row_random import RowRandom
from distalign.errors import require
from distalign.models.language_embeddings import (
    LanguageConditionedLMHead,
    LanguageEmbeddings,
    position_ids,
    pretrained_lm_head,
    pretrained_lm_transform,
)
from distalign.objectives.base import DataContext, Objective, ObjectiveContext
from distalign.objectives.mlm import IGNORE_INDEX, MASKED_TENSORS, masked_lm_loss, whole_word_mask

DICTIONARY_COLUMNS = ("word1", "lang1", "word2", "lang2")
log = logging.getLogger("distalign")


@dataclass(frozen=True)
class SynonymTable:
    """Cross-lingual synonyms as token ids, flattened into offset tensors for vectorised sampling.

    Entry ``e`` = one (source language id, word token ids) key of ``entries``. Its target-language
    groups are ``group_offsets[e]:group_offsets[e+1]`` (language ``group_lang[g]``); group ``g``'s
    synonyms are rows ``synonym_offsets[g]:synonym_offsets[g+1]`` of ``synonym_ids`` (token ids,
    padded with -1; a synonym has as many tokens as its entry's word). ``synonym_entry[s]`` is the
    entry of synonym ``s`` as a word of its own language (it always exists: pairs are symmetric).
    """

    languages: tuple[str, ...]
    entries: dict[tuple[int, tuple[int, ...]], int]
    group_offsets: torch.Tensor
    group_lang: torch.Tensor
    synonym_offsets: torch.Tensor
    synonym_ids: torch.Tensor
    synonym_entry: torch.Tensor
    dropped: dict[str, int]  # dictionary rows not used, by reason


def build_synonym_table(dictionary: pa.Table, tokenizer, languages: Sequence[str]) -> SynonymTable:
    """Tokenise every dictionary word as ``encode_sentences`` tokenises a corpus word; index the pairs.

    ``dictionary`` has columns word1, lang1, word2, lang2 (e.g. ``readers.read_dictionary`` output,
    several concatenated); language ids are positions in ``languages``. Dropped rows: same
    language on both sides, multi-word expressions (never one corpus word), and pairs whose
    tokenisations differ in length (see the module docstring).
    """
    missing = [c for c in DICTIONARY_COLUMNS if c not in dictionary.column_names]
    if missing:
        raise ValueError(f"dictionary: missing column(s) {missing}; expected {list(DICTIONARY_COLUMNS)}")
    lang_index = {lang: i for i, lang in enumerate(languages)}
    if len(lang_index) != len(languages):
        raise ValueError(f"languages: duplicates in {list(languages)}")
    rows = list(zip(*(dictionary[c].to_pylist() for c in DICTIONARY_COLUMNS)))
    for row, (word1, lang1, word2, lang2) in enumerate(rows):
        if not word1 or not word2:
            raise ValueError(f"dictionary row {row}: empty word ({word1!r}, {word2!r})")
        for lang in (lang1, lang2):
            if lang not in lang_index:
                raise ValueError(f"dictionary row {row}: language {lang!r} is not in languages {list(languages)}")
    words = sorted({w for r in rows for w in (r[0], r[2])})
    encoded = tokenizer([[w] for w in words], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    spans = {w: tuple(ids) for w, ids in zip(words, encoded)}

    synonyms: dict[tuple[int, tuple[int, ...]], dict[int, set[tuple[int, ...]]]] = {}
    dropped: Counter[str] = Counter()
    for word1, lang1, word2, lang2 in rows:
        if lang1 == lang2:
            dropped["same_language"] += 1
        elif any(c.isspace() for c in word1 + word2):
            dropped["multiword"] += 1
        elif len(spans[word1]) != len(spans[word2]):
            dropped["length_mismatch"] += 1
        else:
            a, b = (lang_index[lang1], spans[word1]), (lang_index[lang2], spans[word2])
            synonyms.setdefault(a, {}).setdefault(b[0], set()).add(b[1])
            synonyms.setdefault(b, {}).setdefault(a[0], set()).add(a[1])

    keys = sorted(synonyms)
    entries = {key: e for e, key in enumerate(keys)}
    group_offsets, group_lang, synonym_offsets, synonym_rows, synonym_entry = [0], [], [0], [], []
    for key in keys:
        for lang in sorted(synonyms[key]):
            group_lang.append(lang)
            for span in sorted(synonyms[key][lang]):
                synonym_rows.append(span)
                synonym_entry.append(entries[(lang, span)])
            synonym_offsets.append(len(synonym_rows))
        group_offsets.append(len(group_lang))
    width = max((len(s) for s in synonym_rows), default=0)
    synonym_ids = torch.full((len(synonym_rows), width), -1, dtype=torch.long)
    for s, span in enumerate(synonym_rows):
        synonym_ids[s, : len(span)] = torch.tensor(span, dtype=torch.long)
    as_long = functools.partial(torch.tensor, dtype=torch.long)
    return SynonymTable(tuple(languages), entries, as_long(group_offsets), as_long(group_lang),
                        as_long(synonym_offsets), synonym_ids, as_long(synonym_entry), dict(dropped))


def dictionary_entry_ids(input_ids: torch.Tensor, word_ids: torch.Tensor, lang_ids: torch.Tensor,
                         table: SynonymTable) -> torch.Tensor:
    """[B, T]: the synonym-table entry of each token's word (sentence language ``lang_ids`` [B]), -1 if none."""
    input_ids, word_ids, lang_ids = (torch.as_tensor(x) for x in (input_ids, word_ids, lang_ids))
    if lang_ids.shape != input_ids.shape[:1]:
        raise ValueError(f"lang_ids must be [B] = [{input_ids.shape[0]}], got {list(lang_ids.shape)}")
    entry_ids = torch.full(input_ids.shape, -1, dtype=torch.long)
    for row, (ids, words, lang) in enumerate(zip(input_ids.tolist(), word_ids.tolist(), lang_ids.tolist())):
        positions: dict[int, list[int]] = {}
        for pos, word in enumerate(words):
            if word >= 0:
                positions.setdefault(word, []).append(pos)
        for span in positions.values():
            entry = table.entries.get((lang, tuple(ids[p] for p in span)))
            if entry is not None:
                entry_ids[row, span] = entry
    return entry_ids


def _word_uniforms(word_ids: torch.Tensor, count: int, random: RowRandom):
    """``count`` uniform [B, T] tensors drawn once per word (equal on all tokens of a word)."""
    uniforms = random.rand(count, word_ids.shape[1]).transpose(0, 1)  # [count, B, T], indexed by word index
    return uniforms.gather(2, word_ids.clamp(min=0).expand(count, -1, -1)).unbind(0)


def _offset_in_word(word_ids: torch.Tensor) -> torch.Tensor:
    """Each token's index within its word (garbage on tokens with word id -1)."""
    batch, length = word_ids.shape
    positions = torch.arange(length).expand(batch, length)
    index = word_ids.clamp(min=0)
    starts = torch.full((batch, length), length).scatter_reduce(
        1, index, torch.where(word_ids >= 0, positions, length), reduce="amin")
    return positions - starts.gather(1, index)


def _substitute_synonyms(tokens: torch.Tensor, word_ids: torch.Tensor, entry_ids: torch.Tensor,
                         chosen: torch.Tensor, r_lang: torch.Tensor, r_syn: torch.Tensor, table: SynonymTable):
    """Replace the tokens of the ``chosen`` words by a synonym: language uniform, then synonym uniform.

    ``r_lang``/``r_syn`` are per-word uniforms, so every token of a word draws the same synonym.
    Returns (new tokens, synonym row per chosen token, target language per chosen token).
    """
    entry = entry_ids[chosen]
    first_group = table.group_offsets[entry]
    groups = table.group_offsets[entry + 1] - first_group
    group = first_group + torch.minimum((r_lang[chosen] * groups).long(), groups - 1)
    first_synonym = table.synonym_offsets[group]
    synonyms = table.synonym_offsets[group + 1] - first_synonym
    synonym = first_synonym + torch.minimum((r_syn[chosen] * synonyms).long(), synonyms - 1)
    new_tokens = table.synonym_ids[synonym, _offset_in_word(word_ids)[chosen]]
    if (new_tokens < 0).any():
        raise ValueError("entry_ids do not match the word spans: a synonym is shorter than its word")
    out = tokens.clone()
    out[chosen] = new_tokens
    return out, synonym, table.group_lang[group]


def dict_whole_word_mask(input_ids: torch.Tensor, word_ids: torch.Tensor, entry_ids: torch.Tensor,
                         mask_token_id: int, vocab_size: int, mask_prob: float,
                         random: RowRandom) -> tuple[torch.Tensor, torch.Tensor]:
    """``whole_word_mask`` over the words with a dictionary entry (all words of a row that has none)."""
    eligible = entry_ids >= 0
    eligible = torch.where(eligible.any(1, keepdim=True), eligible, word_ids >= 0)
    return whole_word_mask(input_ids, torch.where(eligible, word_ids, -1), mask_token_id, vocab_size,
                           mask_prob, random)


def replace_labels(labels: torch.Tensor, word_ids: torch.Tensor, entry_ids: torch.Tensor,
                   token_lang_ids: torch.Tensor, table: SynonymTable, synonym_share: float,
                   random: RowRandom) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (labels, label language ids): each labelled word with an entry takes a synonym's token
    ids and language with probability ``synonym_share``, else keeps its label. Label language ids
    are the token's own language where the label is kept, -100 where there is no label."""
    if not 0.0 <= synonym_share <= 1.0:
        raise ValueError(f"synonym_share must be in [0, 1], got {synonym_share}")
    r_synonym, r_lang, r_syn = _word_uniforms(word_ids, 3, random)
    labelled = labels != IGNORE_INDEX
    replace = labelled & (entry_ids >= 0) & (r_synonym < synonym_share)
    new_labels, _, target_lang = _substitute_synonyms(labels, word_ids, entry_ids, replace, r_lang, r_syn, table)
    label_lang_ids = torch.where(labelled, token_lang_ids, IGNORE_INDEX)
    label_lang_ids[replace] = target_lang
    return new_labels, label_lang_ids


def code_switch_concat(input_ids: torch.Tensor, word_ids: torch.Tensor, entry_ids: torch.Tensor,
                       lang_ids: torch.Tensor, table: SynonymTable, *, cls_id: int, sep_id: int, pad_id: int,
                       max_length: int, switch_prob: float, random: RowRandom) -> dict[str, torch.Tensor]:
    """dict-TLM input ``[CLS] orig [SEP] switched [SEP] pad…`` of width ``max_length``.

    Returns input_ids, attention_mask, word_ids (switched words numbered after the original ones),
    entry_ids (a switched word's entry is its synonym's) and per-token lang_ids (a switched word has
    its synonym's language; everything else the sentence language ``lang_ids`` [B]).
    """
    if max_length < 3:
        raise ValueError(f"max_length must be >= 3 (three special tokens), got {max_length}")
    if not 0.0 <= switch_prob <= 1.0:
        raise ValueError(f"switch_prob must be in [0, 1], got {switch_prob}")
    r_switch, r_lang, r_syn = _word_uniforms(word_ids, 3, random)
    sentence_lang = lang_ids[:, None].expand_as(input_ids)
    switch = (entry_ids >= 0) & (r_switch < switch_prob)
    switched_ids, synonym, synonym_lang = _substitute_synonyms(input_ids, word_ids, entry_ids, switch, r_lang,
                                                               r_syn, table)
    switched_lang, switched_entry = sentence_lang.clone(), entry_ids.clone()
    switched_lang[switch] = synonym_lang
    switched_entry[switch] = table.synonym_entry[synonym]

    batch = input_ids.shape[0]
    out = {"input_ids": torch.full((batch, max_length), pad_id),
           "attention_mask": torch.zeros(batch, max_length, dtype=torch.long),
           "word_ids": torch.full((batch, max_length), -1), "entry_ids": torch.full((batch, max_length), -1),
           "lang_ids": lang_ids[:, None].repeat(1, max_length)}
    budget = (max_length - 3) // 2  # tokens per half
    for row in range(batch):
        positions = (word_ids[row] >= 0).nonzero().flatten()
        words = word_ids[row, positions]
        # Same synonym length => both halves have the same tokens per word: cut both at a word boundary.
        kept = len(positions) if len(positions) <= budget else int(torch.searchsorted(words, words[budget]))
        positions, words = positions[:kept], words[:kept]
        halves = kept + 1  # each half with its closing separator
        specials = torch.tensor([-1])
        layout = {
            "input_ids": (torch.tensor([cls_id]), input_ids[row, positions], torch.tensor([sep_id]),
                          switched_ids[row, positions], torch.tensor([sep_id])),
            "word_ids": (specials, words, specials, words + (int(words.max()) + 1 if kept else 0), specials),
            "entry_ids": (specials, entry_ids[row, positions], specials, switched_entry[row, positions], specials),
        }
        for name, parts in layout.items():
            out[name][row, : 2 * halves + 1] = torch.cat(parts)
        out["lang_ids"][row, halves + 1: 2 * halves] = switched_lang[row, positions]
        out["attention_mask"][row, : 2 * halves + 1] = 1
    return out


@dataclass(frozen=True)
class DictMLMMasking:
    """Settings of the collate step: special ids from the tokenizer, the rest from the config."""

    mask_token_id: int
    vocab_size: int
    cls_id: int
    sep_id: int
    pad_id: int
    mask_prob: float = 0.15
    synonym_share: float = 0.5  # x/100 of the paper's DICT-MLM-x
    tlm: bool = False  # dict-TLM: mask [CLS] orig [SEP] code-switched [SEP]
    switch_prob: float = 0.15  # dict-TLM: share of dictionary words code-switched (§2.2's 15%)
    max_length: int = 64  # dict-TLM: width of the concatenation
    mask_words: str = "dictionary"  # "dictionary": words with an entry (§2.2); "all": every word


def mask_dict_mlm_batch(corpus: dict[str, torch.Tensor], table: SynonymTable, masking: DictMLMMasking,
                        random: RowRandom) -> dict[str, torch.Tensor]:
    """The data-side preparation: corpus batch (input_ids, attention_mask, word_ids [B, T],
    lang_id [B]) -> the batch ``DictMLMObjective`` reads (masked_ids, labels, label_lang_ids,
    lang_ids [B, T], attention_mask)."""
    sentence_lang = corpus["lang_id"]
    tokens = {"input_ids": corpus["input_ids"], "attention_mask": corpus["attention_mask"],
              "word_ids": corpus["word_ids"],
              "entry_ids": dictionary_entry_ids(corpus["input_ids"], corpus["word_ids"], sentence_lang, table),
              "lang_ids": sentence_lang[:, None].repeat(1, corpus["input_ids"].shape[1])}
    if masking.tlm:
        tokens = code_switch_concat(tokens["input_ids"], tokens["word_ids"], tokens["entry_ids"], sentence_lang,
                                    table, cls_id=masking.cls_id, sep_id=masking.sep_id, pad_id=masking.pad_id,
                                    max_length=masking.max_length, switch_prob=masking.switch_prob,
                                    random=random)
        masked_ids, labels = whole_word_mask(tokens["input_ids"], tokens["word_ids"], masking.mask_token_id,
                                             masking.vocab_size, masking.mask_prob, random)
        label_lang_ids = torch.where(labels != IGNORE_INDEX, tokens["lang_ids"], IGNORE_INDEX)
    else:
        if masking.mask_words == "all":
            masked_ids, labels = whole_word_mask(tokens["input_ids"], tokens["word_ids"], masking.mask_token_id,
                                                 masking.vocab_size, masking.mask_prob, random)
        else:
            masked_ids, labels = dict_whole_word_mask(tokens["input_ids"], tokens["word_ids"], tokens["entry_ids"],
                                                      masking.mask_token_id, masking.vocab_size, masking.mask_prob,
                                                      random)
        labels, label_lang_ids = replace_labels(labels, tokens["word_ids"], tokens["entry_ids"], tokens["lang_ids"],
                                                table, masking.synonym_share, random)
    return {"masked_ids": masked_ids, "labels": labels, "label_lang_ids": label_lang_ids,
            "lang_ids": tokens["lang_ids"], "attention_mask": tokens["attention_mask"]}


@dataclass(frozen=True)
class DictMLMPreparer:
    """Data-side preparer of a corpus batch: dictionary-aware masking (and dict-TLM code-switching).

    The synonym table is built once, on the driver, and travels with the preparer to the Ray Data tasks.
    """

    table: SynonymTable
    masking: DictMLMMasking

    def __call__(self, batch: dict[str, np.ndarray], random: RowRandom) -> dict[str, np.ndarray]:
        names = ("input_ids", "attention_mask", "word_ids", "lang_id")
        corpus = {name: torch.from_numpy(batch[name]) for name in names}
        out = mask_dict_mlm_batch(corpus, self.table, self.masking, random)
        return {name: tensor.numpy() for name, tensor in out.items()}


@dataclass
class DictMLMConfig:
    # DICT-MLM (Chaudhary et al. 2020): replaces objectives.mlm (both mask the corpus batch)
    weight: float = 0.0
    mask_prob: float = 0.15  # share of dictionary words masked (whole words)
    # the paper's x (DICT-MLM-50/70/90): a masked word's label is a cross-lingual synonym x% of the time
    synonym_label_percent: int = 50
    # one language table at the input and in the head (§2.3, the paper's setup); false = two tables
    couple_language_embeddings: bool = True
    tlm: bool = False  # dict-TLM: [CLS] sentence [SEP] code-switched copy [SEP], masked together
    switch_prob: float = 0.15  # dict-TLM: share of dictionary words switched in the copy (§2.2's 15%)
    # words that may be masked: "dictionary" (§2.2: those with an entry; a sentence with none, all) or "all"
    # (ALIGN-MLM's re-run, its App. G.4: every word, a masked word with an entry taking a synonym label x% of the time)
    mask_words: Literal["dictionary", "all"] = "dictionary"
    # the language-conditioned head (§2.3); false: the model's own MLM head, language embeddings still at the
    # input (ALIGN-MLM's re-run: "we did not include the language conditioning layer", App. G.4)
    conditioned_head: bool = True


class DictMLMObjective(Objective):
    """DICT-MLM loss of a masked batch; owns the language embeddings and the conditioned head, which are
    trained and checkpointed with the objective; the input language table is also exported beside the HF
    model (``exported_input_table``), the head is not."""

    Config = DictMLMConfig
    stream = "corpus"
    consumes = ("masked_ids", "labels", "label_lang_ids", "lang_ids", "attention_mask")
    prepares = MASKED_TENSORS + (
        TensorSpec("label_lang_ids", "int64", "B,T", "language of each label (a synonym's), -100 unlabelled"),
        TensorSpec("lang_ids", "int64", "B,T", "each input token's language"),
        TensorSpec("attention_mask", "int64", "B,T", "of the (code-switched) input"))
    uses_word_pairs = True
    reference = "Chaudhary, Raman, Srinivasan & Chen 2020, DICT-MLM"
    exported_input_table = "language_embeddings.embedding.weight"  # §3.1: added at fine-tuning and test time

    def __init__(self, hidden_size: int, num_languages: int, lang_dim: int | None = None,
                 layer_norm_eps: float = 1e-5, coupled: bool = True, conditioned_head: bool = True):
        super().__init__()
        self.language_embeddings = LanguageEmbeddings(num_languages, hidden_size)
        # coupled (the paper's setup): the head reads the input's language table; None: the model's own head
        self.head = LanguageConditionedLMHead(hidden_size, num_languages, lang_dim, layer_norm_eps,
                                              own_table=not coupled) if conditioned_head else None

    @classmethod
    def validate(cls, cfg: DictMLMConfig, experiment, key: str) -> None:
        require(0 < cfg.mask_prob < 1, f"{key}.mask_prob", "must be in (0, 1)")
        require(0 <= cfg.synonym_label_percent <= 100, f"{key}.synonym_label_percent", "must be in [0, 100]")
        require(0 <= cfg.switch_prob <= 1, f"{key}.switch_prob", "must be in [0, 1]")
        require(not (cfg.tlm and experiment.data.pack_sequences), f"{key}.tlm",
                "pairs one sentence with its code-switched copy: set data.pack_sequences=false")

    @classmethod
    def batch_preparer(cls, cfg: DictMLMConfig, ctx: DataContext) -> DictMLMPreparer:
        from distalign.models.loading import load_tokenizer

        tokenizer = load_tokenizer(ctx.tokenizer_path)
        masking = DictMLMMasking(tokenizer.mask_token_id, len(tokenizer), tokenizer.cls_token_id,
                                 tokenizer.sep_token_id, tokenizer.pad_token_id, cfg.mask_prob,
                                 cfg.synonym_label_percent / 100, cfg.tlm, cfg.switch_prob, ctx.max_seq_length,
                                 cfg.mask_words)
        table = build_synonym_table(ctx.word_pairs, tokenizer, ctx.languages)
        log.info("DICT-MLM: %d dictionary entries over %d languages, pairs dropped %s", len(table.entries),
                 len(ctx.languages), dict(table.dropped))
        return DictMLMPreparer(table, masking)

    @classmethod
    def build(cls, cfg: DictMLMConfig, ctx: ObjectiveContext) -> DictMLMObjective:
        return cls.for_model(ctx.masked_lm, len(ctx.languages), coupled=cfg.couple_language_embeddings,
                             conditioned_head=cfg.conditioned_head)

    @classmethod
    def for_model(cls, masked_lm: nn.Module, num_languages: int, lang_dim: int | None = None,
                  coupled: bool = True, conditioned_head: bool = True) -> DictMLMObjective:
        """Sized for ``masked_lm``, a conditioned head's transform copied from its pretrained MLM head."""
        config = masked_lm.config
        objective = cls(config.hidden_size, num_languages, lang_dim, config.layer_norm_eps, coupled, conditioned_head)
        if objective.head is not None:
            objective.head.load_pretrained_transform(*pretrained_lm_transform(masked_lm))
        return objective

    def forward(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        masked_lm, ids = model.masked_lm, batch["masked_ids"]
        states = masked_lm.base_model(
            inputs_embeds=self.language_embeddings(masked_lm, ids, batch["lang_ids"]),
            position_ids=position_ids(masked_lm, ids), attention_mask=batch["attention_mask"],
        ).last_hidden_state
        labelled = batch["labels"] != IGNORE_INDEX
        # Logits only where there is a label: the vocabulary projection dominates the cost.
        if self.head is None:
            logits = pretrained_lm_head(masked_lm)(states[labelled])
        else:
            logits = self.head(states[labelled], batch["label_lang_ids"][labelled],
                               masked_lm.get_output_embeddings(), self.language_embeddings.embedding)
        return masked_lm_loss(logits, batch["labels"][labelled])
