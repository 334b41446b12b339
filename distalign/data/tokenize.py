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


def encode_packed_sentences(tokenizer, texts: list[str], langs: list[int], rows: list[int],
                            max_length: int) -> dict[str, np.ndarray]:
    """Consecutive sentences of one language concatenated into sequences of at most ``max_length`` tokens
    (BERT's and ALIGN-MLM's pre-training instances: add sentences until one more would not fit). A sequence
    is ``[CLS] s1 s2 ... [SEP]`` in the tokenizer's own specials; a sentence longer than a whole sequence is
    truncated, none is split across two. ``word_ids`` count the words across the sequence's sentences;
    ``row`` is its first sentence's row (the seed of its data-side randomness) and ``lang_id`` its language.
    """
    encoded = tokenizer([t.split() for t in texts], is_split_into_words=True, add_special_tokens=False)
    prefix, suffix = special_tokens_around(tokenizer)
    room = max_length - len(prefix) - len(suffix)
    sequences: list[tuple[list[int], list[int], int, int]] = []  # ids, word ids, lang, row
    open_by_lang: dict[int, int] = {}  # language -> index of its sequence still being filled
    for i, (lang, row) in enumerate(zip(langs, rows)):
        ids = encoded["input_ids"][i][:room]
        words = encoded.word_ids(i)[:room]
        current = open_by_lang.get(lang)
        if current is None or len(sequences[current][0]) + len(ids) > room:
            sequences.append(([], [], lang, row))
            current = open_by_lang[lang] = len(sequences) - 1
        seq_ids, seq_words, _, _ = sequences[current]
        offset = seq_words[-1] + 1 if seq_words else 0
        seq_ids.extend(ids)
        seq_words.extend(offset + w for w in words)
    out = {"input_ids": np.full((len(sequences), max_length), tokenizer.pad_token_id, dtype=np.int64),
           "attention_mask": np.zeros((len(sequences), max_length), dtype=np.int64),
           "word_ids": np.full((len(sequences), max_length), -1, dtype=np.int64),
           "lang_id": np.array([s[2] for s in sequences], dtype=np.int64),
           "row": np.array([s[3] for s in sequences], dtype=np.int64)}
    for r, (ids, words, _, _) in enumerate(sequences):
        full = prefix + ids + suffix
        out["input_ids"][r, : len(full)] = full
        out["attention_mask"][r, : len(full)] = 1
        out["word_ids"][r, len(prefix): len(prefix) + len(words)] = words
    return out


def special_tokens_around(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids the tokenizer puts before and after one sequence ([CLS] / [SEP], <s> / </s>)."""
    probe = tokenizer([["a"]], is_split_into_words=True)
    ids, words = probe["input_ids"][0], probe.word_ids(0)
    content = [i for i, w in enumerate(words) if w is not None]
    return ids[: content[0]], ids[content[-1] + 1:]


def encode_sentence_pairs(tokenizer, texts1: list[str], texts2: list[str], max_length: int) -> dict[str, np.ndarray]:
    """Translation pairs as one sequence in the tokenizer's own pair layout (``[CLS] a [SEP] b [SEP]``,
    XLM-R's ``<s> a </s></s> b </s>``), the input of XLM's TLM.

    Each side keeps at most half of the room the specials leave (ALIGN-MLM's XLM: at most 256 + 256 of 512), so
    a long source never crowds out its translation. ``word_ids`` number the second side's words after the
    first side's (whole-word masking treats them as distinct words); ``segment`` is 0 on the first part (its
    prefix, words and the separator(s) between the sides), 1 on the second (words and closing specials), -1
    on padding; ``positions`` restart on the second part at the position its first word would have alone
    (XLM resets positions at the target sentence), 0 on padding.
    """
    prefix, middle, suffix = special_tokens_of_pairs(tokenizer)
    half = (max_length - len(prefix) - len(middle) - len(suffix)) // 2
    if half < 1:
        raise ValueError(f"max_length={max_length} leaves no room for a sentence pair's words")
    sides = [tokenizer([t.split() for t in texts], is_split_into_words=True, add_special_tokens=False,
                       truncation=True, max_length=half) for texts in (texts1, texts2)]
    shape = (len(texts1), max_length)
    out = {"input_ids": np.full(shape, tokenizer.pad_token_id, dtype=np.int64),
           "attention_mask": np.zeros(shape, dtype=np.int64), "word_ids": np.full(shape, -1, dtype=np.int64),
           "segment": np.full(shape, -1, dtype=np.int64), "positions": np.zeros(shape, dtype=np.int64)}
    for row in range(len(texts1)):
        (ids1, ids2), (words1, words2) = ([side["input_ids"][row] for side in sides],
                                          [side.word_ids(row) for side in sides])
        first, second = prefix + ids1 + middle, ids2 + suffix
        end = len(first) + len(second)
        out["input_ids"][row, :end] = first + second
        out["attention_mask"][row, :end] = 1
        out["segment"][row, :end] = [0] * len(first) + [1] * len(second)
        out["positions"][row, :end] = list(range(len(first))) + list(range(len(prefix), len(prefix) + len(second)))
        offset = words1[-1] + 1 if words1 else 0
        out["word_ids"][row, len(prefix): len(prefix) + len(words1)] = words1
        out["word_ids"][row, len(first): len(first) + len(words2)] = [offset + w for w in words2]
    return out


def special_tokens_of_pairs(tokenizer) -> tuple[list[int], list[int], list[int]]:
    """The special token ids the tokenizer puts before, between and after the two sequences of a pair."""
    probe = tokenizer([["a"]], [["b"]], is_split_into_words=True)
    ids, sides = probe["input_ids"][0], probe.sequence_ids(0)
    a, b = sides.index(0), sides.index(1)
    return ids[:a], ids[a + 1: b], ids[b + 1:]
