"""BLI as a task on a model: encode words, rank the target vocabulary, report MRR per language pair.

Used in the training loop on held-out dictionary pairs. The target vocabulary of a language pair
is the set of distinct target words of its dictionary (the full 100K-word vocabularies belong to
the offline evaluation runner).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from distalign.data.tokenize import encode_words
from distalign.eval.bli import mrr

ENCODE_BATCH = 256


@dataclass
class BLITestSet:
    lang1: str
    lang2: str
    queries: list[str]  # distinct source words
    vocab: list[str]  # distinct target words
    gold: list[list[int]]  # gold[i] = vocab indices of the translations of queries[i]

    @property
    def name(self) -> str:
        return f"{self.lang1}-{self.lang2}"


def build_test_set(lang1: str, lang2: str, src: list[str], tgt: list[str], max_pairs: int = 0,
                   seed: int = 0) -> BLITestSet:
    """Group dictionary pairs by source word; keep at most ``max_pairs`` source words (seeded)."""
    translations: dict[str, list[str]] = {}
    for s, t in zip(src, tgt):
        translations.setdefault(s, []).append(t)
    queries = list(translations)
    if 0 < max_pairs < len(queries):
        keep = np.random.default_rng(seed).choice(len(queries), size=max_pairs, replace=False)
        queries = [queries[i] for i in sorted(keep)]
    vocab = sorted({t for q in queries for t in translations[q]})
    position = {w: i for i, w in enumerate(vocab)}
    gold = [[position[t] for t in translations[q]] for q in queries]
    return BLITestSet(lang1, lang2, queries, vocab, gold)


@torch.no_grad()
def embed_words(model, tokenizer, words: list[str], max_tokens: int, layer: int | None = None) -> torch.Tensor:
    """Word vectors from ``model.encode_words`` (an ``AlignmentModel``), batched."""
    device = next(model.parameters()).device
    chunks = []
    for start in range(0, len(words), ENCODE_BATCH):
        enc = encode_words(tokenizer, words[start:start + ENCODE_BATCH], max_tokens)
        t = {k: torch.from_numpy(v).to(device) for k, v in enc.items()}
        chunks.append(model.encode_words(t["input_ids"], t["attention_mask"], t["word_mask"], layer).float().cpu())
    return torch.cat(chunks)


def evaluate_bli(model, tokenizer, test_sets: list[BLITestSet], max_tokens: int) -> dict[str, float]:
    """``eval/bli/<l1>-<l2>/mrr`` for each set and their mean ``eval/bli/avg/mrr``."""
    was_training = model.training
    model.eval()
    try:
        metrics = {}
        for ts in test_sets:
            src = embed_words(model, tokenizer, ts.queries, max_tokens)
            tgt = embed_words(model, tokenizer, ts.vocab, max_tokens)
            metrics[f"eval/bli/{ts.name}/mrr"] = mrr(src, tgt, ts.gold)
        if metrics:
            metrics["eval/bli/avg/mrr"] = float(np.mean(list(metrics.values())))
        return metrics
    finally:
        model.train(was_training)
