"""DICT-MLM: masked language modelling whose labels may be cross-lingual synonyms.

Paper: Chaudhary, Raman, Srinivasan & Chen (2020), "DICT-MLM: Improved Multilingual Pre-Training
using Bilingual Dictionaries". Instead of always predicting the masked word, the model must
sometimes predict a translation of it taken from a bilingual dictionary, which pushes words and
their translations towards the same contextual representation.

For a sentence in language ``l`` (``dict_mlm_mask``, in the paper's order: select, code-switch, mask):

1. Selection: 15% (``mask_prob``) of the whole words ``w`` with a dictionary entry
   ``D(l, w) = {(l', s)}`` (§2.2; ``mask_words="all"``: of every word, ALIGN-MLM's re-run). A
   sentence without any such word falls back to selecting among all its words, so it still trains
   the ordinary MLM signal (labels then keep their original words).
2. Code-switching (§2.2-2.3): each selected word with an entry is replaced, with probability
   ``synonym_share`` (x/100 in the paper's DICT-MLM-x, x ∈ {50, 70, 90}), by a synonym:
   ``l' ~ Uniform{languages of D(l, w)}``, ``s ~ Uniform{synonyms of w in l'}`` (choosing the
   language first stops a language with many listed synonyms from dominating). ``s`` is spliced
   into the token sequence with all of its subwords, however many ``w`` had: the row grows or
   shrinks (re-padded, or cut at a word boundary when it outgrows the width), as the paper's
   code-switched sentence does when it is tokenised after switching. The labels at those
   positions are ``s``'s tokens and their language (input and target) is ``l'``; the other
   (100 − x)% of the time the word and its label stay ``w`` in ``l``.
3. 80/10/10 per selected word, on the spliced sentence (BERT's rule, §2.3). For a replaced word
   80% of the time all of ``s``'s positions are ``<mask>``, 10% random tokens, 10% ``s`` itself is
   left in the input: BERT's "unchanged" shows the label, and the paper masks the code-switched
   sentence, where ``s`` is the word. The original ``w`` is never in the input of a replaced word.
4. Loss: mean cross-entropy over labelled tokens of the target-language-conditioned head
   (``distalign.models.language_embeddings``), with language embeddings added at the input:

       L = -1/|M| Σ_{t∈M} log softmax(head(h_t, target_lang_t))[label_t]

Every label sequence is a complete word (a synonym is never truncated or padded with -100; a word cut
off the end of a row takes its labels with it). Synonyms are the direct dictionary pairs, in both
directions, between different languages (no pivoting through a third language).

dict-TLM variant (§2.3): the sentence is code-switched as in §2.2 (a dictionary word is replaced
by a random cross-lingual synonym, chosen as in 2., with probability ``switch_prob``: 15%, the
share §2.2 selects) and concatenated with the original as ``[CLS] orig [SEP] switched [SEP]``
(whole words only, both halves cut to the same leading words so they stay parallel; a switched word
takes all its synonym's subwords, so the halves may differ in length); then, as in TLM,
15% of the concatenation's words are masked (whole words, any word) and predicted with the plain
MLM objective: every label is the token at its position, in its own language.

Masking happens on the data side (``DictMLMPreparer`` in Ray Data, one random stream per row:
``distalign.data.row_random``); ``DictMLMObjective`` computes the loss of an already masked batch.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import torch
from torch import nn

from distalign.data.batches import LABEL_INDEX, TensorSpec
from distalign.data.row_random import RowRandom
from distalign.data.run_facts import RunFacts
from distalign.errors import require
from distalign.models.language_embeddings import (
    LanguageConditionedLMHead,
    LanguageEmbeddings,
    position_ids,
    pretrained_lm_head,
    pretrained_lm_transform,
)
from distalign.objectives.base import DataContext, Objective, ObjectiveContext
from distalign.objectives.mlm import (
    IGNORE_INDEX,
    MASKED_TENSORS,
    corrupt_selected,
    draw_word_masking,
    labelled_rows,
    masked_lm_loss,
    whole_word_mask,
)

DICTIONARY_COLUMNS = ("word1", "lang1", "word2", "lang2")
log = logging.getLogger("distalign")


@dataclass(frozen=True, kw_only=True)
class SynonymTable:
    """Cross-lingual synonyms as token ids, flattened into offset tensors for vectorised sampling.

    Entry ``e`` = one (source language id, word token ids) key of ``entries``. Its target-language
    groups are ``group_offsets[e]:group_offsets[e+1]`` (language ``group_lang[g]``); group ``g``'s
    synonyms are rows ``synonym_offsets[g]:synonym_offsets[g+1]`` of ``synonym_ids`` (token ids,
    padded with -1; a synonym may have more or fewer tokens than its entry's word). ``synonym_entry[s]`` is the
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


def build_synonym_table(dictionary: pa.Table, tokenizer, languages: Sequence[str]) -> SynonymTable:  # host-side
    """Tokenise every dictionary word as ``encode_sentences`` tokenises a corpus word; index the pairs.

    ``dictionary`` has columns word1, lang1, word2, lang2 (e.g. ``readers.read_dictionary`` output,
    several concatenated); language ids are positions in ``languages``. Dropped rows: same
    language on both sides and multi-word expressions (never one corpus word). The two words of a
    pair may tokenise to different lengths: a synonym is spliced in whole (``splice_row``).
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
    return SynonymTable(
        languages=tuple(languages),
        entries=entries,
        group_offsets=as_long(group_offsets),
        group_lang=as_long(group_lang),
        synonym_offsets=as_long(synonym_offsets),
        synonym_ids=synonym_ids,
        synonym_entry=as_long(synonym_entry),
        dropped=dict(dropped),
    )


def dictionary_entry_ids(
    input_ids: torch.Tensor, word_ids: torch.Tensor, lang_ids: torch.Tensor, table: SynonymTable
) -> torch.Tensor:  # host-side: the data workers' batch preparer
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


def pick_synonyms(
    entry_ids: torch.Tensor, chosen: torch.Tensor, r_lang: torch.Tensor, r_syn: torch.Tensor, table: SynonymTable
) -> torch.Tensor:
    """[B, T]: a synonym row of ``table`` on every token of the ``chosen`` words, -1 elsewhere: the target
    language uniform among the entry's languages, then the synonym uniform within it. ``r_lang``/``r_syn``
    are per-word uniforms, so every token of a word draws the same synonym."""
    entry = entry_ids[chosen]
    first_group = table.group_offsets[entry]
    groups = table.group_offsets[entry + 1] - first_group
    group = first_group + torch.minimum((r_lang[chosen] * groups).long(), groups - 1)
    first_synonym = table.synonym_offsets[group]
    synonyms = table.synonym_offsets[group + 1] - first_synonym
    synonym = torch.full_like(entry_ids, -1)
    synonym[chosen] = first_synonym + torch.minimum((r_syn[chosen] * synonyms).long(), synonyms - 1)
    return synonym


def _synonym_languages(table: SynonymTable) -> list[int]:
    """The language of each synonym row of ``table``."""
    return table.group_lang.repeat_interleave(table.synonym_offsets.diff()).tolist()


def splice_row(
    columns: dict[str, list[int]], synonym: list[int], table: SynonymTable, languages: list[int]
) -> dict[str, list[int]]:
    """One row with every word that carries a synonym (``synonym`` >= 0 on its tokens) replaced by all of the
    synonym's subword tokens, however many: the row grows or shrinks, the code-switched sentence of §2.2
    tokenised. ``columns`` are per-token lists of equal length and must include input_ids and word_ids; a
    spliced token takes the synonym's id, its word's id, the synonym's language (``lang_ids``) and the
    synonym's own entry (``entry_ids``); any other column the value of the word's first token.
    ``languages``: ``_synonym_languages(table)``."""
    out: dict[str, list[int]] = {name: [] for name in columns}
    words, pos = columns["word_ids"], 0
    while pos < len(words):
        row = synonym[pos]
        if row < 0:
            for name, values in columns.items():
                out[name].append(values[pos])
            pos += 1
            continue
        end = pos
        while end < len(words) and words[end] == words[pos]:
            end += 1
        span = [t for t in table.synonym_ids[row].tolist() if t >= 0]
        spliced = {
            "input_ids": span,
            "lang_ids": [languages[row]] * len(span),
            "entry_ids": [int(table.synonym_entry[row])] * len(span),
        }
        for name, values in columns.items():
            out[name].extend(spliced.get(name, [values[pos]] * len(span)))
        pos = end
    return out


def _fit_row(row: dict[str, list[int]], width: int) -> dict[str, list[int]]:
    """Cut a spliced row that outgrew ``width`` at a word boundary, keeping its closing special tokens.

    Words are cut whole from the end of the text (a masked word's labels go with it), so every label
    sequence left is a complete word, as when the tokenizer truncates a code-switched sentence.
    """
    words = row["word_ids"]
    if len(words) <= width:
        return row
    tail = len(words)
    while tail > 0 and words[tail - 1] < 0:
        tail -= 1
    cut = max(0, width - (len(words) - tail))
    while 0 < cut < tail and words[cut] >= 0 and words[cut] == words[cut - 1]:
        cut -= 1
    return {name: values[:cut] + values[tail:] for name, values in row.items()}


def splice_synonyms(
    tokens: dict[str, torch.Tensor], synonym: torch.Tensor, table: SynonymTable, fill: dict[str, int]
) -> dict[str, torch.Tensor]:  # host-side: the data workers' batch preparer
    """``splice_row`` on every row of a [B, T] batch (attended tokens only), each row cut to T by ``_fit_row``
    and padded with ``fill`` (per column; ``lang_ids`` pads with the row's first language)."""
    batch, width = synonym.shape
    languages = _synonym_languages(table)
    out = {name: torch.full((batch, width), fill.get(name, 0), dtype=tokens[name].dtype) for name in tokens}
    lengths = tokens["attention_mask"].sum(1).tolist()
    for b in range(batch):
        n = lengths[b]
        row = splice_row(
            {name: values[b, :n].tolist() for name, values in tokens.items()}, synonym[b, :n].tolist(), table, languages
        )
        row = _fit_row(row, width)
        for name, values in row.items():
            out[name][b, : len(values)] = torch.tensor(values, dtype=out[name].dtype)
        out["lang_ids"][b, len(row["lang_ids"]) :] = tokens["lang_ids"][b, 0]
    return out


def dict_mlm_mask(
    tokens: dict[str, torch.Tensor],
    table: SynonymTable,
    mask_token_id: int,
    vocab_size: int,
    mask_prob: float,
    synonym_share: float,
    mask_words: str,
    pad_id: int,
    random: RowRandom,
) -> dict[str, torch.Tensor]:
    """DICT-MLM's masking of a corpus batch in the paper's order (§2.2-2.3): select words, code-switch a share
    of them, then BERT's 80/10/10 on the code-switched sentence.

    1. Select 15 % of whole words: those with a dictionary entry (``mask_words="dictionary"``, all words of a
       row that has none) or any word (``"all"``, ALIGN-MLM's re-run).
    2. Each selected word with an entry is replaced, with probability ``synonym_share`` (the paper's x/100),
       by a cross-lingual synonym (``pick_synonyms``) spliced in with all its subwords (``splice_synonyms``):
       the synonym's tokens are the labels, in the synonym's language (input and target language ids).
    3. 80/10/10 per selected word, on the spliced row (``corrupt_selected``): for a replaced word 80 % of the
       time all of the synonym's positions are ``<mask>``, 10 % random tokens, 10 % the synonym itself is
       shown (BERT's "unchanged" is the label; the original word is never in the input). This is the paper's
       pipeline read literally: it code-switches the sentence, tokenises it, then whole-word masks it.

    ``tokens``: input_ids, attention_mask, word_ids, entry_ids, lang_ids [B, T]. Returns masked_ids, labels,
    label_lang_ids, lang_ids, attention_mask, word_ids [B, T] of the spliced rows.
    """
    if not 0.0 <= synonym_share <= 1.0:
        raise ValueError(f"synonym_share must be in [0, 1], got {synonym_share}")
    word_ids, entry_ids = tokens["word_ids"], tokens["entry_ids"]
    if mask_words == "dictionary":
        eligible = entry_ids >= 0
        word_ids = torch.where(torch.where(eligible.any(1, keepdim=True), eligible, word_ids >= 0), word_ids, -1)
    selected, action, random_tokens = draw_word_masking(word_ids, vocab_size, mask_prob, random)
    r_synonym, r_lang, r_syn = _word_uniforms(tokens["word_ids"], 3, random)
    replace = selected & (entry_ids >= 0) & (r_synonym < synonym_share)
    synonym = pick_synonyms(entry_ids, replace, r_lang, r_syn, table)
    columns = {name: tokens[name] for name in ("input_ids", "attention_mask", "word_ids", "lang_ids")}
    spliced = splice_synonyms(
        {**columns, "selected": selected.long(), "action": action},
        synonym,
        table,
        {"input_ids": pad_id, "word_ids": -1},
    )
    masked_ids, labels = corrupt_selected(
        spliced["input_ids"], spliced["selected"].bool(), spliced["action"], random_tokens, mask_token_id
    )
    label_lang_ids = torch.where(labels != IGNORE_INDEX, spliced["lang_ids"], IGNORE_INDEX)
    return {
        "masked_ids": masked_ids,
        "labels": labels,
        "label_lang_ids": label_lang_ids,
        "lang_ids": spliced["lang_ids"],
        "attention_mask": spliced["attention_mask"],
        "word_ids": spliced["word_ids"],
    }


def code_switch_concat(
    input_ids: torch.Tensor,
    word_ids: torch.Tensor,
    entry_ids: torch.Tensor,
    lang_ids: torch.Tensor,
    table: SynonymTable,
    *,
    cls_id: int,
    sep_id: int,
    pad_id: int,
    max_length: int,
    switch_prob: float,
    random: RowRandom,
) -> dict[str, torch.Tensor]:  # host-side
    """dict-TLM input ``[CLS] orig [SEP] switched [SEP] pad…`` of width ``max_length``.

    Returns input_ids, attention_mask, word_ids (switched words numbered after the original ones),
    entry_ids (a switched word's entry is its synonym's) and per-token lang_ids (a switched word has
    its synonym's language; everything else the sentence language ``lang_ids`` [B]). A switched word
    takes all of its synonym's subwords (``splice_row``), so the halves may differ in length; both keep
    the same leading words, as many as fit together.
    """
    if max_length < 3:
        raise ValueError(f"max_length must be >= 3 (three special tokens), got {max_length}")
    if not 0.0 <= switch_prob <= 1.0:
        raise ValueError(f"switch_prob must be in [0, 1], got {switch_prob}")
    r_switch, r_lang, r_syn = _word_uniforms(word_ids, 3, random)
    synonym = pick_synonyms(entry_ids, (entry_ids >= 0) & (r_switch < switch_prob), r_lang, r_syn, table)
    languages = _synonym_languages(table)

    batch = input_ids.shape[0]
    out = {
        "input_ids": torch.full((batch, max_length), pad_id),
        "attention_mask": torch.zeros(batch, max_length, dtype=torch.long),
        "word_ids": torch.full((batch, max_length), -1),
        "entry_ids": torch.full((batch, max_length), -1),
        "lang_ids": lang_ids[:, None].repeat(1, max_length),
    }
    for row in range(batch):
        positions = (word_ids[row] >= 0).nonzero().flatten()
        original = {
            "input_ids": input_ids[row, positions].tolist(),
            "word_ids": word_ids[row, positions].tolist(),
            "entry_ids": entry_ids[row, positions].tolist(),
            "lang_ids": [int(lang_ids[row])] * len(positions),
        }
        switched = splice_row(original, synonym[row, positions].tolist(), table, languages)
        # the longest common run of leading words whose two halves fit beside the three special tokens
        total = Counter(original["word_ids"]) + Counter(switched["word_ids"])
        kept_words, used = 0, 0
        for word in dict.fromkeys(original["word_ids"]):
            if used + total[word] > max_length - 3:
                break
            kept_words, used = kept_words + 1, used + total[word]
        kept = set(list(dict.fromkeys(original["word_ids"]))[:kept_words])
        halves = [
            {name: [v for v, w in zip(values, half["word_ids"]) if w in kept] for name, values in half.items()}
            for half in (original, switched)
        ]
        offset = max(halves[0]["word_ids"], default=-1) + 1
        halves[1]["word_ids"] = [w + offset for w in halves[1]["word_ids"]]
        special = {
            "input_ids": (cls_id, sep_id, sep_id),
            "word_ids": (-1,) * 3,
            "entry_ids": (-1,) * 3,
            "lang_ids": (int(lang_ids[row]),) * 3,
        }
        for name, (first, middle, last) in special.items():
            values = [first, *halves[0][name], middle, *halves[1][name], last]
            out[name][row, : len(values)] = torch.tensor(values)
        out["attention_mask"][row, : len(halves[0]["word_ids"]) + len(halves[1]["word_ids"]) + 3] = 1
    return out


@dataclass(frozen=True, kw_only=True)
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


def mask_dict_mlm_batch(
    corpus: dict[str, torch.Tensor], table: SynonymTable, masking: DictMLMMasking, random: RowRandom
) -> dict[str, torch.Tensor]:
    """The data-side preparation: corpus batch (input_ids, attention_mask, word_ids [B, T],
    lang_id [B]) -> the batch ``DictMLMObjective`` reads (masked_ids, labels, label_lang_ids,
    lang_ids [B, T], attention_mask) and the word_ids of that (spliced or code-switched) layout; the
    batch's input_ids stay the corpus's."""
    sentence_lang = corpus["lang_id"]
    tokens = {
        "input_ids": corpus["input_ids"],
        "attention_mask": corpus["attention_mask"],
        "word_ids": corpus["word_ids"],
        "entry_ids": dictionary_entry_ids(corpus["input_ids"], corpus["word_ids"], sentence_lang, table),
        "lang_ids": sentence_lang[:, None].repeat(1, corpus["input_ids"].shape[1]),
    }
    if not masking.tlm:
        return dict_mlm_mask(
            tokens,
            table,
            masking.mask_token_id,
            masking.vocab_size,
            masking.mask_prob,
            masking.synonym_share,
            masking.mask_words,
            masking.pad_id,
            random,
        )
    tokens = code_switch_concat(
        tokens["input_ids"],
        tokens["word_ids"],
        tokens["entry_ids"],
        sentence_lang,
        table,
        cls_id=masking.cls_id,
        sep_id=masking.sep_id,
        pad_id=masking.pad_id,
        max_length=masking.max_length,
        switch_prob=masking.switch_prob,
        random=random,
    )
    masked_ids, labels = whole_word_mask(
        tokens["input_ids"], tokens["word_ids"], masking.mask_token_id, masking.vocab_size, masking.mask_prob, random
    )
    label_lang_ids = torch.where(labels != IGNORE_INDEX, tokens["lang_ids"], IGNORE_INDEX)
    return {
        "masked_ids": masked_ids,
        "labels": labels,
        "label_lang_ids": label_lang_ids,
        "lang_ids": tokens["lang_ids"],
        "attention_mask": tokens["attention_mask"],
        "word_ids": tokens["word_ids"],
    }


@dataclass(frozen=True)
class DictMLMPreparer:
    """Data-side preparer of a corpus batch: dictionary-aware masking (and dict-TLM code-switching).

    The synonym table is built once, on the driver, and travels with the preparer to the Ray Data tasks.
    """

    table: SynonymTable
    masking: DictMLMMasking

    def __call__(self, batch: dict[str, np.ndarray], random: RowRandom) -> dict[str, np.ndarray]:
        names = ("input_ids", "attention_mask", "word_ids", "lang_id")
        corpus = {name: torch.from_numpy(batch[name]) for name in names}  # host-side: a Ray Data preparer
        out = mask_dict_mlm_batch(corpus, self.table, self.masking, random)
        return {name: tensor.numpy() for name, tensor in out.items()}


@dataclass(kw_only=True)
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
        TensorSpec("attention_mask", "int64", "B,T", "of the (code-switched) input"),
        TensorSpec("word_ids", "int64", "B,T", "word index of each token of the (code-switched) input, -1 specials"),
    )
    uses_word_pairs = True
    reference = "Chaudhary, Raman, Srinivasan & Chen 2020, DICT-MLM"
    exported_input_table = "language_embeddings.embedding.weight"  # §3.1: added at fine-tuning and test time

    def __init__(
        self,
        hidden_size: int,
        num_languages: int,
        lang_dim: int | None = None,
        layer_norm_eps: float = 1e-5,
        coupled: bool = True,
        conditioned_head: bool = True,
    ):
        super().__init__()
        self.language_embeddings = LanguageEmbeddings(num_languages, hidden_size)
        # coupled (the paper's setup): the head reads the input's language table; None: the model's own head
        self.head = (
            LanguageConditionedLMHead(hidden_size, num_languages, lang_dim, layer_norm_eps, own_table=not coupled)
            if conditioned_head
            else None
        )

    @classmethod
    def validate(cls, cfg: DictMLMConfig, facts: RunFacts, key: str) -> None:
        require(0 < cfg.mask_prob < 1, f"{key}.mask_prob", "must be in (0, 1)")
        require(0 <= cfg.synonym_label_percent <= 100, f"{key}.synonym_label_percent", "must be in [0, 100]")
        require(0 <= cfg.switch_prob <= 1, f"{key}.switch_prob", "must be in [0, 1]")
        require(
            not (cfg.tlm and facts.pack_sequences),
            f"{key}.tlm",
            "pairs one sentence with its code-switched copy: set data.pack_sequences=false",
        )

    @classmethod
    def batch_preparer(cls, cfg: DictMLMConfig, ctx: DataContext) -> DictMLMPreparer:
        from distalign.models.loading import load_tokenizer

        tokenizer = load_tokenizer(ctx.tokenizer_path)
        masking = DictMLMMasking(
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=len(tokenizer),
            cls_id=tokenizer.cls_token_id,
            sep_id=tokenizer.sep_token_id,
            pad_id=tokenizer.pad_token_id,
            mask_prob=cfg.mask_prob,
            synonym_share=cfg.synonym_label_percent / 100,
            tlm=cfg.tlm,
            switch_prob=cfg.switch_prob,
            max_length=ctx.max_seq_length,
            mask_words=cfg.mask_words,
        )
        table = build_synonym_table(ctx.word_pairs, tokenizer, ctx.languages)
        log.info(
            "DICT-MLM: %d dictionary entries over %d languages, pairs dropped %s",
            len(table.entries),
            len(ctx.languages),
            dict(table.dropped),
        )
        return DictMLMPreparer(table, masking)

    @classmethod
    def build(cls, cfg: DictMLMConfig, ctx: ObjectiveContext) -> DictMLMObjective:
        return cls.for_model(
            ctx.masked_lm,
            len(ctx.languages),
            coupled=cfg.couple_language_embeddings,
            conditioned_head=cfg.conditioned_head,
        )

    @classmethod
    def for_model(
        cls,
        masked_lm: nn.Module,
        num_languages: int,
        lang_dim: int | None = None,
        coupled: bool = True,
        conditioned_head: bool = True,
    ) -> DictMLMObjective:
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
            position_ids=position_ids(masked_lm, ids),
            attention_mask=batch["attention_mask"],
        ).last_hidden_state
        labels, label_index = batch["labels"], batch.get(LABEL_INDEX)

        def labelled(tensor: torch.Tensor) -> torch.Tensor:
            return labelled_rows(tensor, labels, label_index)

        # Logits only where there is a label: the vocabulary projection dominates the cost.
        if self.head is None:
            logits = pretrained_lm_head(masked_lm)(labelled(states))
        else:
            logits = self.head(
                labelled(states),
                labelled(batch["label_lang_ids"]),
                masked_lm.get_output_embeddings(),
                self.language_embeddings.embedding,
            )
        return masked_lm_loss(logits, labelled(labels))
