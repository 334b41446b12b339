"""Evaluation tasks on a model: each returns result rows ``{task, pair, layer, metric, value}`` for every layer.

Layer 0 is the embedding output, layer L the last encoder layer (from ``*_all_layers`` encoders).
Pass an ``EncodingCache`` so a target vocabulary is encoded once per checkpoint.
"""

from __future__ import annotations

import math

import torch

from distalign.eval.alignment import alignment_score
from distalign.eval.bli import mrr, precision_at_k
from distalign.eval.encoders import EncodingCache, sentence_vectors, word_vectors
from distalign.eval.retrieval import tatoeba_accuracy_both_directions
from distalign.eval.xlsim import word_similarity_spearman


def _rows(task: str, pair: str, per_layer: list[dict[str, float]]) -> list[dict]:
    return [{"task": task, "pair": pair, "layer": layer, "metric": metric, "value": float(value)}
            for layer, metrics in enumerate(per_layer) for metric, value in metrics.items()]


def _unique_word_vectors(model, tokenizer, words: list[str], lang: str, cache, max_tokens: int,
                         batch_size: int) -> torch.Tensor:
    """[L+1, len(words), d], each distinct word encoded once."""
    distinct = list(dict.fromkeys(words))
    vectors = word_vectors(model, tokenizer, distinct, lang, cache, max_tokens, batch_size)
    position = {w: i for i, w in enumerate(distinct)}
    return vectors[:, [position[w] for w in words]]


def bli_task(model, tokenizer, lang1: str, lang2: str, test_pairs: list[tuple[str, str]],
             tgt_vocab_words: list[str], similarity: str = "cosine", k_values=(1, 5, 10), *,
             lowercase: bool = True, csls_k: int = 10, max_tokens: int = 16, batch_size: int = 256,
             cache: EncodingCache | None = None) -> list[dict]:
    """MRR, P@k (``p_at_<k>``) and the OOV query count of BLI lang1 -> lang2 against a target vocabulary.

    Pairs are grouped by source word (one query, all its translations gold). Gold words outside
    ``tgt_vocab_words`` are dropped; a query with no gold left is OOV: counted (``oov``) and not
    scored. The vocabulary is used as given, never extended with gold words. ``lowercase``
    lowercases queries, gold and vocabulary (the shared vocabularies are lower-case while G-BLI
    keeps e.g. German noun capitals). Task name ``bli`` (cosine) or ``bli_csls``.
    """
    norm = str.lower if lowercase else str
    vocab = list(dict.fromkeys(norm(w) for w in tgt_vocab_words))
    position = {w: i for i, w in enumerate(vocab)}
    translations: dict[str, set[int]] = {}
    for src, tgt in test_pairs:
        gold = translations.setdefault(norm(src), set())
        if norm(tgt) in position:
            gold.add(position[norm(tgt)])
    queries = [q for q, gold in translations.items() if gold]
    oov = len(translations) - len(queries)
    task = "bli" if similarity == "cosine" else f"bli_{similarity}"
    names = ["mrr", *(f"p_at_{k}" for k in k_values)]
    if not queries:
        num_layers = model.masked_lm.config.num_hidden_layers + 1
        return _rows(task, f"{lang1}-{lang2}", [dict.fromkeys(names, math.nan) | {"oov": oov}] * num_layers)
    gold = [sorted(translations[q]) for q in queries]
    src = word_vectors(model, tokenizer, queries, lang1, cache, max_tokens, batch_size)
    tgt = word_vectors(model, tokenizer, vocab, lang2, cache, max_tokens, batch_size)
    per_layer = []
    for s, t in zip(src, tgt):
        p_at = precision_at_k(s, t, gold, k_values, similarity, csls_k)
        per_layer.append({"mrr": mrr(s, t, gold, similarity, csls_k), **{f"p_at_{k}": p_at[k] for k in p_at},
                          "oov": oov})
    return _rows(task, f"{lang1}-{lang2}", per_layer)


def xlsim_task(model, tokenizer, lang1: str, lang2: str, rows: list[tuple[str, str, float]], *,
               max_tokens: int = 16, batch_size: int = 256, cache: EncodingCache | None = None) -> list[dict]:
    """Spearman's rho between cosine and human scores of (word1, word2, score) rows (Multi-SimLex)."""
    e1 = _unique_word_vectors(model, tokenizer, [r[0] for r in rows], lang1, cache, max_tokens, batch_size)
    e2 = _unique_word_vectors(model, tokenizer, [r[1] for r in rows], lang2, cache, max_tokens, batch_size)
    scores = [r[2] for r in rows]
    return _rows("xlsim", f"{lang1}-{lang2}",
                 [{"spearman": word_similarity_spearman(a, b, scores)} for a, b in zip(e1, e2)])


def tatoeba_task(model, tokenizer, lang: str, src_sentences: list[str], eng_sentences: list[str], *,
                 max_length: int = 128, batch_size: int = 64, cache: EncodingCache | None = None) -> list[dict]:
    """Retrieval accuracy in [0, 1]: ``acc_to_eng`` (lang -> eng), ``acc_from_eng`` and their mean ``acc``."""
    src = sentence_vectors(model, tokenizer, src_sentences, lang, cache, max_length, batch_size)
    eng = sentence_vectors(model, tokenizer, eng_sentences, "eng", cache, max_length, batch_size)
    per_layer = []
    for s, e in zip(src, eng):
        to_eng, from_eng = tatoeba_accuracy_both_directions(s, e)
        per_layer.append({"acc_to_eng": to_eng, "acc_from_eng": from_eng, "acc": (to_eng + from_eng) / 2})
    return _rows("tatoeba", f"{lang}-eng", per_layer)


def alignment_task(model, tokenizer, lang1: str, lang2: str, pairs: list[tuple[str, str]], *,
                   max_tokens: int = 16, batch_size: int = 256, cache: EncodingCache | None = None) -> list[dict]:
    """Alignment score (0-100): how often word i's cosine nearest neighbour among the targets is its translation."""
    e1 = _unique_word_vectors(model, tokenizer, [p[0] for p in pairs], lang1, cache, max_tokens, batch_size)
    e2 = _unique_word_vectors(model, tokenizer, [p[1] for p in pairs], lang2, cache, max_tokens, batch_size)
    return _rows("alignment", f"{lang1}-{lang2}", [{"score": alignment_score(a, b)} for a, b in zip(e1, e2)])
