"""Language-pair sampling of constraints (BabelBERT): batches draw pair k with probability q_k ∝ p_k^α.

Two different things, as in the paper: constraint-set *subsets* (the size study) keep the full
set's shares p_k, nested (``subsample_constraints``); *batches* are drawn from q (``pair_sampling_weights``,
``sampled_order``), whatever the set size. α < 1 flattens the distribution so low-resource pairs
are not drowned by large ones (α = 0.5 as in BabelBERT; α = 1 keeps the shares p, α → 0 gives
every pair the same share).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from distalign.errors import ConfigError

KEYS_AT_ONCE = 100_000  # distinct words turned into Python strings at a time (memory bounded by it, not the vocabulary)


def language_pairs(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(pairs, inverse): the sorted distinct unordered language pairs (``de-en`` for both de→en and en→de) and each
    row's index among them, as ``np.unique(keys, return_inverse=True)`` would give, computed in Arrow: no Python
    object per row (a constraint table has tens of millions)."""
    lang1, lang2 = table["lang1"], table["lang2"]
    in_order = pc.less_equal(lang1, lang2)
    keys = pc.binary_join_element_wise(pc.if_else(in_order, lang1, lang2), pc.if_else(in_order, lang2, lang1), "-")
    distinct = pc.unique(keys)
    names = np.asarray(distinct.to_pylist(), dtype=object)
    order = np.argsort(names, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return names[order], rank[pc.index_in(keys, value_set=distinct).to_numpy().astype(np.int64)]


def sampling_probabilities(counts: dict[str, int], alpha: float) -> dict[str, float]:
    """q_k = p_k^alpha / sum_l p_l^alpha with p_k = n_k / N (BabelBERT §4, after Conneau & Lample 2019)."""
    total = sum(counts.values())
    weights = {k: (n / total) ** alpha for k, n in counts.items()}
    norm = sum(weights.values())
    return {k: w / norm for k, w in weights.items()}


def nested_order(table: pa.Table, seed: int) -> np.ndarray:
    """An order of the rows in which every prefix keeps each language pair's share p_k of the table.

    Row s (0-based, in a seeded random order within its pair) of a pair with n_k rows gets the key
    (s + 1/2) / n_k; sorting by it hands out rows one at a time as the Sainte-Laguë (Webster) divisor
    method hands out seats. Every prefix of size b is therefore that method's apportionment of b (each
    pair within a row of b·p_k, bar rare cases with many pairs), and a smaller subset lies inside every
    larger one, which is what a constraint-size study needs. Ties go to the larger pair.
    """
    rng = np.random.default_rng(seed)
    pairs, inverse = language_pairs(table)
    counts = np.bincount(inverse, minlength=len(pairs))
    rank = np.empty(len(table), dtype=np.int64)
    shuffled = rng.permutation(len(table))
    by_pair = shuffled[np.argsort(inverse[shuffled], kind="stable")]  # each pair's rows in a random order
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank[by_pair] = np.arange(len(table)) - np.repeat(starts, counts)
    size = counts[inverse]
    return np.lexsort((shuffled.argsort(), -size, (rank + 0.5) / size))


def subsample_constraints(table: pa.Table, budget: int, seed: int) -> pa.Table:
    """Exactly ``budget`` rows without replacement, with the table's own share p_k of each language pair.

    BabelBERT's constraint-size study (§5.1) keeps "the same relative distribution of constraints
    across language pairs as in the full training" set. The rows are the first ``budget`` of
    ``nested_order``: for one seed, a smaller budget's rows are a subset of a larger one's. 0 (or a
    budget at least the table size) keeps the whole table. The result is shuffled, reproducible per seed.
    """
    rng = np.random.default_rng([seed, 1])
    if budget <= 0 or budget >= len(table):
        return table.take(rng.permutation(len(table)))
    return table.take(rng.permutation(nested_order(table, seed)[:budget]))


def restrict_to_languages(table: pa.Table, languages: list[str]) -> pa.Table:
    """The rows whose two languages are both in ``languages`` (a language sample's constraints)."""
    allowed = pa.array(sorted(set(languages)))
    return table.filter(pc.and_(pc.is_in(table["lang1"], allowed), pc.is_in(table["lang2"], allowed)))


def exactly_per_pair(table: pa.Table, per_pair: int, seed: int) -> pa.Table:
    """``per_pair`` rows of every language pair (mono- and cross-lingual), drawn without replacement and
    shuffled; as BabelBERT's language samples, which have exactly 100 constraints per pair. A pair with
    fewer rows is an error naming it: nothing is up-sampled."""
    pairs, inverse = language_pairs(table)
    counts = np.bincount(inverse, minlength=len(pairs))
    short = {p: int(n) for p, n in zip(pairs, counts) if n < per_pair}
    if short:
        raise ConfigError(
            f"data.constraints_per_pair={per_pair}: these language pairs have fewer constraints: {short}; "
            "lower it, or leave these languages out of data.constraint_languages"
        )
    rng = np.random.default_rng([seed, 2])
    rows_of_pair = np.split(np.argsort(inverse, kind="stable"), np.cumsum(counts)[:-1])  # each pair's rows, ascending
    chosen = [rng.choice(rows, size=per_pair, replace=False) for rows in rows_of_pair]
    return table.take(rng.permutation(np.concatenate(chosen))) if chosen else table


def pair_sampling_weights(table: pa.Table, alpha: float) -> np.ndarray:
    """Per-row draw probabilities that give language pair k the share q_k of the draws (q_k / n_k each)."""
    pairs, inverse = language_pairs(table)
    counts = np.bincount(inverse, minlength=len(pairs))
    q = sampling_probabilities(dict(zip(pairs, counts.tolist())), alpha)
    weights = np.array([q[p] for p in pairs])[inverse] / counts[inverse]
    return weights / weights.sum()


def sampled_order(weights: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """One epoch's row indices: ``len(weights)`` rows drawn with replacement by ``weights`` (a weighted random
    sampler, as the BabelBERT authors use), reproducible per (seed, epoch)."""
    rng = np.random.default_rng([seed, epoch])
    return rng.choice(len(weights), size=len(weights), replace=True, p=weights)


def shuffled_order(rows: int, seed: int, epoch: int) -> np.ndarray:
    """One epoch's row indices: every row once, in an order of its own per (seed, epoch) (a random sampler that
    reshuffles each epoch, as the X2Static alignment's authors use)."""
    return np.random.default_rng([seed, epoch]).permutation(rows)


def words_of(table: pa.Table) -> set[tuple[str, str]]:
    """(lang, word) of every word in a constraint table."""
    return set(zip(table["lang1"].to_pylist(), table["word1"].to_pylist())) | set(
        zip(table["lang2"].to_pylist(), table["word2"].to_pylist())
    )


def exclude_words(table: pa.Table, banned: set[tuple[str, str]]) -> tuple[pa.Table, int]:
    """Drop constraint rows touching any banned (lang, word), e.g. words of evaluation sets. Words match in
    their wordfreq form (``mining.normalize``: case-folded, Unicode-normalised), the form mined constraints
    are written in: G-BLI's German "Haus" bans a mined "haus". The match ignores the language: a test dictionary
    declared the wrong way round, or for a language the run has no data in, still keeps its words out of training
    (the price: a word of another language written the same way, a French "Haus", goes too)."""
    if not banned:
        return table, 0
    from distalign.data.mining import normalize  # wordfreq: imported by the runs that exclude words only

    forms = pa.array(sorted({normalize(word, lang) for lang, word in banned}), pa.string())
    kept_row = np.ones(len(table), dtype=bool)
    for side in "12":
        kept_row &= ~banned_words(table[f"lang{side}"], table[f"word{side}"], forms, normalize)
    kept = table.filter(pa.array(kept_row, pa.bool_()))
    return kept, len(table) - len(kept)


PYTHON_ASCII_WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what str.strip() removes from an ASCII string


def banned_words(langs: pa.ChunkedArray, words: pa.ChunkedArray, forms: pa.Array, normalize) -> np.ndarray:
    """Per row, whether ``normalize(word, lang)`` is one of ``forms``. An ASCII word without a capital I has the form
    ``word.strip().lower()`` in every language (no Unicode normalisation, transliteration or mark removal changes
    ASCII, and only Turkic languages read I otherwise): those rows are matched in Arrow. The others (any other
    script, accents, I) are normalised in Python, each distinct (lang, word) once, ``KEYS_AT_ONCE`` at a time."""
    plain = pc.and_(pc.string_is_ascii(words), pc.invert(pc.match_substring(words, "I")))
    folded = pc.ascii_lower(pc.ascii_trim(words, PYTHON_ASCII_WHITESPACE))
    hit = pc.and_(plain, pc.is_in(folded, value_set=forms)).to_numpy(zero_copy_only=False)
    rest = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
    if len(rest):
        indices = pa.array(rest)
        keys = pc.binary_join_element_wise(langs.take(indices), words.take(indices), "\t")
        distinct = pc.unique(keys)
        banned_forms = set(forms.to_pylist())
        banned_key = np.fromiter(
            (
                normalize(word, lang) in banned_forms
                for start in range(0, len(distinct), KEYS_AT_ONCE)
                for lang, word in (key.split("\t", 1) for key in distinct.slice(start, KEYS_AT_ONCE).to_pylist())
            ),
            dtype=bool,
            count=len(distinct),
        )
        hit[rest] = banned_key[pc.index_in(keys, value_set=distinct).to_numpy().astype(np.int64)]
    return hit
