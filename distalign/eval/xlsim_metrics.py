"""Cross-lingual word similarity: Spearman correlation of cosine scores with human ratings."""

from __future__ import annotations

import numpy as np
import torch

from distalign.similarity import normalized_pair

__all__ = ["word_similarity_spearman"]


def word_similarity_spearman(e1: torch.Tensor, e2: torch.Tensor, gold_scores) -> float:
    """Spearman's rho between cos(e1[i], e2[i]) and gold_scores[i] (scipy.stats.spearmanr).

    e1, e2: [n, d] (same shape, else ValueError); gold_scores: n numbers, n >= 2.
    Tied values get average ranks (scipy's convention); constant input gives nan.
    """
    a, b = normalized_pair(e1, e2, same_shape=True)
    if torch.is_tensor(gold_scores):
        gold_scores = gold_scores.detach().cpu()
    gold = np.asarray(gold_scores, dtype=np.float64).reshape(-1)
    if gold.shape[0] != a.shape[0]:
        raise ValueError(f"need one gold score per pair ({a.shape[0]}), got {gold.shape[0]}")
    if gold.shape[0] < 2:
        raise ValueError("Spearman correlation needs at least 2 pairs")
    # imported here: scipy.stats takes 0.7 s to import, and every Train worker imports this module
    from scipy.stats import spearmanr

    cos = (a * b).sum(dim=1).detach().double().cpu().numpy()
    return float(spearmanr(cos, gold).statistic)
