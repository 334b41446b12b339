"""Tokenisation into fixed-size numpy arrays (the tensors of the training streams and of evaluation)."""

from __future__ import annotations

import numpy as np


def encode_words(tokenizer, words: list[str], max_tokens: int) -> dict[str, np.ndarray]:
    """Each word alone as ``[CLS] word [SEP]``; ``word_mask`` marks the word's own subword tokens."""
    enc = tokenizer(list(words), max_length=max_tokens, truncation=True, padding="max_length",
                    return_special_tokens_mask=True, return_tensors="np")
    attention = enc["attention_mask"].astype(np.int64)
    return {
        "input_ids": enc["input_ids"].astype(np.int64),
        "attention_mask": attention,
        "word_mask": attention * (1 - enc["special_tokens_mask"].astype(np.int64)),
    }


def encode_sentences(tokenizer, texts: list[str], max_length: int) -> dict[str, np.ndarray]:
    """Whitespace-split sentences; ``word_ids`` gives each token's word index, -1 for special/padding."""
    enc = tokenizer([t.split() for t in texts], is_split_into_words=True, max_length=max_length,
                    truncation=True, padding="max_length", return_tensors="np")
    word_ids = np.full(enc["input_ids"].shape, -1, dtype=np.int64)
    for row in range(len(texts)):
        ids = enc.word_ids(row)
        word_ids[row] = [-1 if w is None else w for w in ids]
    return {
        "input_ids": enc["input_ids"].astype(np.int64),
        "attention_mask": enc["attention_mask"].astype(np.int64),
        "word_ids": word_ids,
    }
