"""Language-pair sampling of constraints (BabelBERT): batches draw pair k with probability q_k ∝ p_k^α.

Two different things, as in the paper: constraint-set *subsets* (the size study) keep the full
set's shares p_k (``subsample_constraints``); *batches* are drawn from q (``pair_sampling_weights``,
``sampled_epoch``), whatever the set size. α < 1 flattens the distribution so low-resource pairs
are not drowned by large ones (α = 0.5 as in BabelBERT; α = 1 keeps the shares p, α → 0 gives
every pair the same share).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def language_pair_keys(table: pa.Table) -> np.ndarray:
    """An unordered language-pair key per row (``de-en`` for both de→en and en→de)."""
    l1 = np.asarray(table["lang1"].to_pylist(), dtype=object)
    l2 = np.asarray(table["lang2"].to_pylist(), dtype=object)
    lo, hi = np.where(l1 <= l2, l1, l2), np.where(l1 <= l2, l2, l1)
    return np.asarray([f"{a}-{b}" for a, b in zip(lo, hi)], dtype=object)


def sampling_probabilities(counts: dict[str, int], alpha: float) -> dict[str, float]:
    """q_k = p_k^alpha / sum_l p_l^alpha with p_k = n_k / N (BabelBERT §4, after Conneau & Lample 2019)."""
    total = sum(counts.values())
    weights = {k: (n / total) ** alpha for k, n in counts.items()}
    norm = sum(weights.values())
    return {k: w / norm for k, w in weights.items()}


def subsample_constraints(table: pa.Table, budget: int, seed: int) -> pa.Table:
    """Exactly ``budget`` rows without replacement, with the table's own share p_k of each language pair.

    BabelBERT's constraint-size study (§5.1) keeps "the same relative distribution of constraints
    across language pairs as in the full training" set: quotas are ``budget * p_k`` rounded by largest
    remainders (so they sum to the budget), rows drawn uniformly within each pair. 0 (or a budget at
    least the table size) keeps the whole table. The result is shuffled and reproducible for a seed.
    """
    rng = np.random.default_rng(seed)
    if budget <= 0 or budget >= len(table):
        return table.take(rng.permutation(len(table)))
    keys = language_pair_keys(table)
    pairs, counts = np.unique(keys, return_counts=True)
    exact = budget * counts / counts.sum()
    quotas = np.floor(exact).astype(int)
    by_remainder = np.argsort(-(exact - quotas), kind="stable")
    quotas[by_remainder[: budget - quotas.sum()]] += 1
    chosen = [rng.choice(np.flatnonzero(keys == pair), size=quota, replace=False)
              for pair, quota in zip(pairs, quotas)]
    return table.take(rng.permutation(np.concatenate(chosen)))


def pair_sampling_weights(table: pa.Table, alpha: float) -> np.ndarray:
    """Per-row draw probabilities that give language pair k the share q_k of the draws (q_k / n_k each)."""
    keys = language_pair_keys(table)
    pairs, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    q = sampling_probabilities(dict(zip(pairs, counts.tolist())), alpha)
    weights = np.array([q[p] for p in pairs])[inverse] / counts[inverse]
    return weights / weights.sum()


def sampled_epoch(table: pa.Table, weights: np.ndarray, seed: int, epoch: int) -> pa.Table:
    """One epoch of ``len(table)`` rows drawn with replacement by ``weights`` (a weighted random sampler,
    as the BabelBERT authors use), reproducible per (seed, epoch)."""
    rng = np.random.default_rng([seed, epoch])
    return table.take(rng.choice(len(table), size=len(table), replace=True, p=weights))


def words_of(table: pa.Table) -> set[tuple[str, str]]:
    """(lang, word) of every word in a constraint table."""
    return set(zip(table["lang1"].to_pylist(), table["word1"].to_pylist())) | set(
        zip(table["lang2"].to_pylist(), table["word2"].to_pylist())
    )


def exclude_words(table: pa.Table, banned: set[tuple[str, str]]) -> tuple[pa.Table, int]:
    """Drop constraint rows touching any banned (lang, word), e.g. words of evaluation sets."""
    if not banned:
        return table, 0
    left = [(l, w) not in banned for l, w in zip(table["lang1"].to_pylist(), table["word1"].to_pylist())]
    right = [(l, w) not in banned for l, w in zip(table["lang2"].to_pylist(), table["word2"].to_pylist())]
    keep = pc.and_(pa.array(left), pa.array(right))
    kept = table.filter(keep)
    return kept, len(table) - len(kept)
