"""Sense-level BabelBERT inputs: each word encoded together with its gloss.

Paper: Green, Ponzetto & Glavaš (2022), "BabelBERT: Massively Multilingual Transformers Meet a
Massively Multilingual Lexical Resource". Besides the type-level variant (a word encoded alone),
a word can be encoded with the BabelNet gloss of its synset as context, so its vector is that of
the word *sense*::

    [CLS] word [SEP] gloss [SEP]        (XLM-R: <s> word </s></s> gloss </s>; BERT: [CLS] w [SEP] g [SEP])

The layout is the fast tokenizer's own text-pair encoding (sequence 0 = word, sequence 1 = gloss),
so each model family gets its native special tokens. ``word_mask`` marks the tokens of sequence 0,
``gloss_mask`` those of sequence 1; special tokens and padding are in neither.

Rules for rows that do not fit the pair layout (every row keeps the same array shape):
- an empty or null gloss: the word is encoded alone, exactly as ``encode_words`` does (type-level
  layout), and its ``gloss_mask`` row is all zero;
- only the gloss is truncated (``truncation="only_second"``); a word whose subwords leave no room
  for even one gloss subword is also encoded alone (and truncated to ``max_tokens`` like
  ``encode_words``), with an all-zero ``gloss_mask``.
"""

from __future__ import annotations

import numpy as np

from distalign.data.tokenize import encode_words


def encode_words_with_gloss(
    tokenizer, words: list[str], glosses: list[str | None], max_tokens: int
) -> dict[str, np.ndarray]:
    """``[CLS] word [SEP] gloss [SEP]`` per row -> int64 arrays ``[len(words), max_tokens]``:
    ``input_ids``, ``attention_mask``, ``word_mask``, ``gloss_mask`` (see module docstring)."""
    words, glosses = list(words), list(glosses)
    if len(words) != len(glosses):
        raise ValueError(f"words and glosses must have equal lengths, got {len(words)} and {len(glosses)}")
    pair_specials = tokenizer.num_special_tokens_to_add(pair=True)
    if max_tokens < pair_specials + 2:
        raise ValueError(
            f"max_tokens={max_tokens} leaves no room for a word and a gloss subword "
            f"(the pair layout alone takes {pair_specials} special tokens)"
        )
    word_lengths = [len(ids) for ids in tokenizer(words, add_special_tokens=False)["input_ids"]] if words else []
    with_gloss = [
        i
        for i, (gloss, length) in enumerate(zip(glosses, word_lengths))
        if gloss is not None and gloss.strip() and length + pair_specials < max_tokens
    ]
    alone = sorted(set(range(len(words))) - set(with_gloss))

    shape = (len(words), max_tokens)
    out = {key: np.zeros(shape, dtype=np.int64) for key in ("input_ids", "attention_mask", "word_mask", "gloss_mask")}
    if alone:
        for key, value in encode_words(tokenizer, [words[i] for i in alone], max_tokens).items():
            out[key][alone] = value
    if with_gloss:
        enc = tokenizer(
            [words[i] for i in with_gloss],
            [glosses[i] for i in with_gloss],
            truncation="only_second",
            max_length=max_tokens,
            padding="max_length",
            return_tensors="np",
        )
        # sequence_ids: 0 for the word's tokens, 1 for the gloss's, None for specials and padding
        sequence = np.array([[-1 if s is None else s for s in enc.sequence_ids(row)] for row in range(len(with_gloss))])
        out["input_ids"][with_gloss] = enc["input_ids"]
        out["attention_mask"][with_gloss] = enc["attention_mask"]
        out["word_mask"][with_gloss] = sequence == 0
        out["gloss_mask"][with_gloss] = sequence == 1
    return out
