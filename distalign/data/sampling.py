"""Language-pair sampling of constraints (BabelBERT): a pair with share p of the pool gets q ∝ p^α.

α < 1 flattens the distribution so low-resource pairs are not drowned by large ones
(α = 0.5 as in BabelBERT; α = 1 keeps the pool's proportions, α → 0 gives every pair the same share).
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
    total = sum(counts.values())
    weights = {k: (n / total) ** alpha for k, n in counts.items()}
    norm = sum(weights.values())
    return {k: w / norm for k, w in weights.items()}


def sample_constraints(table: pa.Table, max_constraints: int, alpha: float, seed: int) -> pa.Table:
    """Draw ``max_constraints`` rows without replacement, pair k getting about q_k of them.

    A pair with fewer rows than its quota contributes all of them. 0 (or a budget at least the
    table size) keeps the whole table. The result is shuffled and reproducible for a seed.
    """
    rng = np.random.default_rng(seed)
    if max_constraints <= 0 or max_constraints >= len(table):
        return table.take(rng.permutation(len(table)))
    keys = language_pair_keys(table)
    pairs, counts = np.unique(keys, return_counts=True)
    q = sampling_probabilities(dict(zip(pairs, counts.tolist())), alpha)
    quotas = rng.multinomial(max_constraints, [q[p] for p in pairs])
    chosen = []
    for pair, quota in zip(pairs, quotas):
        rows = np.flatnonzero(keys == pair)
        chosen.append(rng.choice(rows, size=min(quota, len(rows)), replace=False))
    picked = np.concatenate(chosen)
    return table.take(rng.permutation(picked))


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
