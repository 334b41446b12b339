"""Tokenisation into fixed-size numpy arrays (the tensors of the training streams and of evaluation)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np


def encode_words(tokenizer, words: list[str], max_tokens: int) -> dict[str, np.ndarray]:
    """Each word alone as ``[CLS] word [SEP]``; ``word_mask`` marks the word's own subword tokens."""
    enc = tokenizer(
        list(words),
        max_length=max_tokens,
        truncation=True,
        padding="max_length",
        return_special_tokens_mask=True,
        return_tensors="np",
    )
    attention = enc["attention_mask"].astype(np.int64)
    return {
        "input_ids": enc["input_ids"].astype(np.int64),
        "attention_mask": attention,
        "word_mask": attention * (1 - enc["special_tokens_mask"].astype(np.int64)),
    }


def encode_sentences(tokenizer, texts: list[str], max_length: int) -> dict[str, np.ndarray]:
    """Whitespace-split sentences; ``word_ids`` gives each token's word index, -1 for special/padding. The
    tokenizer's own ``tokenizer(words, is_split_into_words=True, truncation=True, padding="max_length")``, from
    one batch encoding of the Rust tokenizer (``sentence_pieces``)."""
    pieces = sentence_pieces(tokenizer, texts)
    return laid_out(tokenizer, pieces, np.arange(len(texts)), max_length)


def encode_packed_sentences(
    tokenizer, texts: list[str], langs: list[int], rows: list[int], max_length: int
) -> dict[str, np.ndarray]:
    """Consecutive sentences of one language concatenated into sequences of at most ``max_length`` tokens
    (BERT's and ALIGN-MLM's pre-training instances: add sentences until one more would not fit). A sequence
    is ``[CLS] s1 s2 ... [SEP]`` in the tokenizer's own specials; a sentence longer than a whole sequence is
    truncated, none is split across two. ``word_ids`` count the words across the sequence's sentences;
    ``row`` is its first sentence's row (the seed of its data-side randomness) and ``lang_id`` its language.
    """
    pieces = sentence_pieces(tokenizer, texts)
    prefix, suffix = special_tokens_around(tokenizer)
    room = max_length - len(prefix) - len(suffix)
    sequence = np.empty(len(texts), dtype=np.int64)  # each sentence's sequence
    filled: list[int] = []  # tokens in each sequence so far
    open_by_lang: dict[int, int] = {}  # language -> its sequence still being filled
    for i, (lang, length) in enumerate(zip(langs, np.minimum(pieces.lengths, room).tolist())):
        current = open_by_lang.get(lang)
        if current is None or filled[current] + length > room:
            current = open_by_lang[lang] = len(filled)
            filled.append(0)
        filled[current] += length
        sequence[i] = current
    out = laid_out(tokenizer, pieces, sequence, max_length)
    first = np.unique(sequence, return_index=True)[1]  # sequences are opened in order of their first sentence
    out["lang_id"] = np.asarray(langs, dtype=np.int64)[first]
    out["row"] = np.asarray(rows, dtype=np.int64)[first]
    return out


@dataclass(frozen=True)
class SentencePieces:
    """Sentences' subword tokens without specials, end to end: ``ids`` and ``word_ids`` (the word of each
    token in its own sentence) of sentence i at ``offsets[i] : offsets[i] + lengths[i]``."""

    ids: np.ndarray
    word_ids: np.ndarray
    lengths: np.ndarray

    @property
    def offsets(self) -> np.ndarray:
        return np.cumsum(self.lengths) - self.lengths


def sentence_pieces(tokenizer, texts: list[str]) -> SentencePieces:
    """Whitespace-split sentences through the Rust tokenizer's batch encoding (its threads split the batch), read
    into numpy without the per-token Python of ``BatchEncoding``'s tensors (which took over half the time)."""
    backend = tokenizer.backend_tokenizer
    backend.no_truncation()  # a Hugging Face call leaves its own settings on the shared backend
    backend.no_padding()
    encodings = backend.encode_batch([text.split() for text in texts], is_pretokenized=True, add_special_tokens=False)
    lengths = np.fromiter((len(e) for e in encodings), dtype=np.int64, count=len(encodings))
    total = int(lengths.sum())
    ids = np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=total)
    words = np.fromiter(itertools.chain.from_iterable(e.word_ids for e in encodings), dtype=np.int64, count=total)
    return SentencePieces(ids, words, lengths)


def laid_out(tokenizer, pieces: SentencePieces, sequence: np.ndarray, max_length: int) -> dict[str, np.ndarray]:
    """Sentences placed one after the other in their ``sequence`` (non-decreasing per sequence in sentence order),
    each cut to the room the specials leave, every sequence ``prefix + sentences + suffix`` padded to
    ``max_length``; a sentence's word ids follow the words of the sentences before it in its sequence."""
    prefix, suffix = special_tokens_around(tokenizer)
    room = max_length - len(prefix) - len(suffix)
    count = int(sequence.max()) + 1 if len(sequence) else 0
    kept = np.minimum(pieces.lengths, room)
    words = (
        np.where(kept > 0, pieces.word_ids[np.minimum(pieces.offsets + kept - 1, len(pieces.ids) - 1)] + 1, 0)
        if len(pieces.ids)
        else np.zeros(len(kept), dtype=np.int64)
    )  # words each sentence keeps
    # where each sentence starts in its sequence, and its first word's index there
    token_start = _within_sequence(kept, sequence)
    word_start = _within_sequence(words, sequence)
    # every token of the pieces: its sentence, its place in it, whether the cut keeps it
    sentence = np.repeat(np.arange(len(kept)), pieces.lengths)
    place = np.arange(len(pieces.ids)) - np.repeat(pieces.offsets, pieces.lengths)
    keep = place < kept[sentence]
    sentence, place = sentence[keep], place[keep]
    rows, columns = sequence[sentence], len(prefix) + token_start[sentence] + place
    ends = len(prefix) + np.bincount(sequence, weights=kept, minlength=count).astype(np.int64)
    out = {
        "input_ids": np.full((count, max_length), tokenizer.pad_token_id, dtype=np.int64),
        "attention_mask": (np.arange(max_length)[None, :] < (ends + len(suffix))[:, None]).astype(np.int64),
        "word_ids": np.full((count, max_length), -1, dtype=np.int64),
    }
    out["input_ids"][:, : len(prefix)] = prefix
    out["input_ids"][rows, columns] = pieces.ids[keep]
    out["word_ids"][rows, columns] = pieces.word_ids[keep] + word_start[sentence]
    for j, token in enumerate(suffix):
        out["input_ids"][np.arange(count), ends + j] = token
    return out


def _within_sequence(sizes: np.ndarray, sequence: np.ndarray) -> np.ndarray:
    """For each sentence, the sum of ``sizes`` of the sentences before it in its sequence (packed sequences of
    several languages fill side by side, so a sequence's sentences need not be consecutive)."""
    order = np.argsort(sequence, kind="stable")
    ordered = sizes[order]
    before = np.cumsum(ordered) - ordered
    starts = np.flatnonzero(np.r_[True, np.diff(sequence[order]) != 0])  # each sequence's first sentence in order
    within = np.empty_like(before)
    within[order] = before - np.repeat(before[starts], np.diff(np.r_[starts, len(order)]))
    return within


@functools.lru_cache(maxsize=8)
def special_tokens_around(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids the tokenizer puts before and after one sequence ([CLS] / [SEP], <s> / </s>)."""
    probe = tokenizer([["a"]], is_split_into_words=True)
    ids, words = probe["input_ids"][0], probe.word_ids(0)
    content = [i for i, w in enumerate(words) if w is not None]
    return ids[: content[0]], ids[content[-1] + 1 :]


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
    sides = [
        tokenizer(
            [t.split() for t in texts],
            is_split_into_words=True,
            add_special_tokens=False,
            truncation=True,
            max_length=half,
        )
        for texts in (texts1, texts2)
    ]
    shape = (len(texts1), max_length)
    out = {
        "input_ids": np.full(shape, tokenizer.pad_token_id, dtype=np.int64),
        "attention_mask": np.zeros(shape, dtype=np.int64),
        "word_ids": np.full(shape, -1, dtype=np.int64),
        "segment": np.full(shape, -1, dtype=np.int64),
        "positions": np.zeros(shape, dtype=np.int64),
    }
    for row in range(len(texts1)):
        (ids1, ids2), (words1, words2) = (
            [side["input_ids"][row] for side in sides],
            [side.word_ids(row) for side in sides],
        )
        first, second = prefix + ids1 + middle, ids2 + suffix
        end = len(first) + len(second)
        out["input_ids"][row, :end] = first + second
        out["attention_mask"][row, :end] = 1
        out["segment"][row, :end] = [0] * len(first) + [1] * len(second)
        out["positions"][row, :end] = list(range(len(first))) + list(range(len(prefix), len(prefix) + len(second)))
        offset = words1[-1] + 1 if words1 else 0
        out["word_ids"][row, len(prefix) : len(prefix) + len(words1)] = words1
        out["word_ids"][row, len(first) : len(first) + len(words2)] = [offset + w for w in words2]
    return out


def special_tokens_of_pairs(tokenizer) -> tuple[list[int], list[int], list[int]]:
    """The special token ids the tokenizer puts before, between and after the two sequences of a pair."""
    probe = tokenizer([["a"]], [["b"]], is_split_into_words=True)
    ids, sides = probe["input_ids"][0], probe.sequence_ids(0)
    a, b = sides.index(0), sides.index(1)
    return ids[:a], ids[a + 1 : b], ids[b + 1 :]
