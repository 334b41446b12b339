"""distalign.data.sampling: q ∝ p^α batches over unordered language pairs, subsets keeping p, word exclusion."""

import collections
import math

import numpy as np
import pyarrow as pa
import pytest

from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.sampling import (
    exactly_per_pair,
    exclude_words,
    language_pairs,
    nested_order,
    pair_sampling_weights,
    sampled_order,
    sampling_probabilities,
    subsample_constraints,
    words_of,
)


def make_table(spec):
    """spec: list of (lang1, lang2, n) blocks; words are unique per block row."""
    rows = {name: [] for name in CONSTRAINT_SCHEMA.names}
    for l1, l2, n in spec:
        for i in range(n):
            rows["word1"].append(f"{l1}{l2}_a{i}")
            rows["lang1"].append(l1)
            rows["word2"].append(f"{l1}{l2}_b{i}")
            rows["lang2"].append(l2)
            rows["synset_id"].append(f"{l1}{l2}{i}")
            rows["gloss1"].append(None)
            rows["gloss2"].append(None)
    return pa.table(rows, schema=CONSTRAINT_SCHEMA)


def pair_keys(table):
    pairs, inverse = language_pairs(table)
    return pairs[inverse]


def pair_counts(table):
    return collections.Counter(pair_keys(table).tolist())


def test_sampling_probabilities_hand_computed():
    q = sampling_probabilities({"de-en": 900, "en-sw": 100}, 0.5)
    # p = 0.9 / 0.1, p^0.5 = 0.9487 / 0.3162 -> q = 0.75 / 0.25
    assert q["de-en"] == pytest.approx(0.75)
    assert q["en-sw"] == pytest.approx(0.25)
    q1 = sampling_probabilities({"de-en": 900, "en-sw": 100}, 1.0)  # alpha=1 keeps proportions
    assert q1 == pytest.approx({"de-en": 0.9, "en-sw": 0.1})
    q0 = sampling_probabilities({"a-b": 5, "a-c": 50, "b-c": 500}, 1e-9)  # alpha->0: uniform
    assert all(v == pytest.approx(1 / 3, abs=1e-6) for v in q0.values())
    q3 = sampling_probabilities({"a-b": 1, "a-c": 4, "b-c": 16}, 0.5)  # sqrt: 1, 2, 4 -> /7
    assert q3 == pytest.approx({"a-b": 1 / 7, "a-c": 2 / 7, "b-c": 4 / 7})
    assert sum(q3.values()) == pytest.approx(1.0)


def test_language_pair_keys_are_unordered():
    table = make_table([("de", "en", 2), ("en", "de", 3), ("sw", "en", 1)])
    assert pair_keys(table).tolist() == ["de-en"] * 5 + ["en-sw"]


# Pool: de-en 9000 (half each direction), en-fr 900, fr-sw 100 -> p = 0.9, 0.09, 0.01.
POOL = [("de", "en", 4500), ("en", "de", 4500), ("en", "fr", 900), ("sw", "fr", 100)]
BUDGET = 3000


def expected_q():
    w = {"de-en": math.sqrt(0.9), "en-fr": math.sqrt(0.09), "fr-sw": math.sqrt(0.01)}
    total = sum(w.values())
    return {k: v / total for k, v in w.items()}  # ≈ 0.703, 0.222, 0.074


@pytest.mark.parametrize(
    "budget,expected", [(50, {"de-en": 45, "en-fr": 5}), (3000, {"de-en": 2700, "en-fr": 270, "fr-sw": 30})]
)
def test_subsets_keep_the_pair_shares_and_hit_the_budget(budget, expected):
    """BabelBERT §5.1: a smaller constraint set has the full set's relative distribution (p, not q)."""
    table = make_table(POOL)
    sample = subsample_constraints(table, budget, seed=0)
    assert len(sample) == budget
    # 50 x (0.9, 0.09, 0.01) = 45, 4.5, 0.5: Sainte-Laguë gives the 50th row to en-fr (a tie, the larger pair)
    assert dict(pair_counts(sample)) == expected
    ids = sample["synset_id"].to_pylist()
    assert len(set(ids)) == len(ids) and set(ids) <= set(table["synset_id"].to_pylist())  # no replacement
    directions = collections.Counter(zip(sample["lang1"].to_pylist(), sample["lang2"].to_pylist()))
    if budget == 3000:  # both directions of de-en represented roughly equally
        assert abs(directions[("de", "en")] - directions[("en", "de")]) < 0.2 * expected["de-en"]


def test_subsets_of_one_seed_are_nested_and_each_keeps_the_shares():
    """The constraint-size study's 1K ⊂ 10K ⊂ 100K ⊂ all, here 100 ⊂ 1,000 ⊂ 5,000 of 10,000 rows."""
    table = make_table(POOL)
    subsets = [
        set(subsample_constraints(table, budget, seed=3)["synset_id"].to_pylist()) for budget in (100, 1000, 5000)
    ]
    assert [len(s) for s in subsets] == [100, 1000, 5000]
    assert subsets[0] < subsets[1] < subsets[2]
    for budget in (7, 100, 333, 1000, 5000):
        counts = pair_counts(subsample_constraints(table, budget, seed=3))
        for pair, share in {"de-en": 0.9, "en-fr": 0.09, "fr-sw": 0.01}.items():
            assert abs(counts[pair] - budget * share) <= 1, (budget, pair, counts)
    other = set(subsample_constraints(table, 1000, seed=4)["synset_id"].to_pylist())
    assert other != subsets[1]  # another seed, other rows


def test_subsets_reproducible_per_seed():
    table = make_table(POOL)
    a, b, c = (subsample_constraints(table, 500, seed=s) for s in (7, 7, 8))
    assert a.equals(b)
    assert set(a["synset_id"].to_pylist()) != set(c["synset_id"].to_pylist())


def test_budget_zero_or_large_keeps_everything_shuffled():
    table = make_table(POOL)
    for budget in (0, len(table), len(table) + 10):
        out = subsample_constraints(table, budget, seed=1)
        assert sorted(out["synset_id"].to_pylist()) == sorted(table["synset_id"].to_pylist())
    assert subsample_constraints(table, 0, seed=1)["synset_id"].to_pylist() != table["synset_id"].to_pylist()


def test_sampled_epochs_draw_pairs_from_q_whatever_the_set_size():
    """Batches follow q ∝ p^α even on the full set (max_constraints 0), as BabelBERT's weighted sampler."""
    table = make_table(POOL)
    weights = pair_sampling_weights(table, 0.5)
    assert weights.sum() == pytest.approx(1.0)
    counts = collections.Counter()
    for epoch in range(3):
        counts += pair_counts(table.take(sampled_order(weights, seed=0, epoch=epoch)))
    draws = sum(counts.values())  # 30,000
    for pair, q in expected_q().items():
        assert abs(counts[pair] / draws - q) < 0.01, pair  # sd <= 0.0027
    first, again = sampled_order(weights, 0, 0), sampled_order(weights, 0, 0)
    assert np.array_equal(first, again) and not np.array_equal(first, sampled_order(weights, 0, 1))
    uniform = pair_sampling_weights(table, 1.0)  # alpha = 1: every row equally likely, shares p
    assert np.allclose(uniform, 1 / len(table))


def test_exclude_words_both_sides():
    table = pa.table(
        {
            "word1": ["dog", "cat", "Hund", "dog", "tree"],
            "lang1": ["en", "en", "de", "de", "en"],
            "word2": ["Hund", "Katze", "dog", "chien", "Baum"],
            "lang2": ["de", "de", "en", "fr", "de"],
            "synset_id": ["1", "2", "3", "4", "5"],
            "gloss1": [None] * 5,
            "gloss2": [None] * 5,
        },
        schema=CONSTRAINT_SCHEMA,
    )
    kept, dropped = exclude_words(table, {("en", "dog"), ("de", "Baum")})
    # row 1 (en dog on the left) and 3 (en dog on the right) and 5 (de Baum) go, and row 4, whose "dog" is
    # labelled German: the match ignores the language, so a mislabelled test word is excluded too
    assert kept["synset_id"].to_pylist() == ["2"]
    assert dropped == 4
    same, none = exclude_words(table, set())
    assert none == 0 and same.equals(table)


def test_exclude_words_matches_mined_case_folded_words_to_capitalised_evaluation_words():
    """Mined constraints are written case-folded ("haus"); G-BLI keeps German noun capitals ("Haus")."""
    from distalign.data.mining import SYNSET_SCHEMA, mine_constraints

    synsets = pa.table(
        {
            "synset_id": ["s1", "s1", "s2", "s2"],
            "lang": ["de", "fr", "de", "fr"],
            "word": ["Haus", "maison", "Baum", "arbre"],
            "gloss": [None] * 4,
        },
        schema=SYNSET_SCHEMA,
    )
    mined, _ = mine_constraints(synsets, ["de", "fr"])
    assert sorted(mined["word1"].to_pylist() + mined["word2"].to_pylist()) == ["arbre", "baum", "haus", "maison"]
    kept, dropped = exclude_words(mined, {("de", "Haus"), ("fr", "ARBRE ")})
    assert dropped == 2 and len(kept) == 0
    kept, dropped = exclude_words(mined, {("fr", "Haus")})  # "Haus" declared French: still kept out of training
    assert dropped == 1


def test_words_of():
    table = make_table([("de", "en", 2)])
    assert words_of(table) == {("de", "deen_a0"), ("de", "deen_a1"), ("en", "deen_b0"), ("en", "deen_b1")}


def test_a_language_sample_keeps_its_own_pairs_with_exactly_n_each():
    """BabelBERT §5.1: a sample of languages, exactly 100 constraints per pair (mono- and cross-lingual)."""
    from distalign.data.sampling import exactly_per_pair, restrict_to_languages

    table = make_table([("de", "en", 300), ("en", "en", 150), ("de", "de", 120), ("en", "fr", 500), ("fr", "sw", 90)])
    sample = restrict_to_languages(table, ["de", "en"])
    assert dict(pair_counts(sample)) == {"de-en": 300, "en-en": 150, "de-de": 120}
    exact = exactly_per_pair(sample, 100, seed=0)
    assert dict(pair_counts(exact)) == {"de-en": 100, "en-en": 100, "de-de": 100}
    ids = exact["synset_id"].to_pylist()
    assert len(set(ids)) == 300  # without replacement
    assert exact.equals(exactly_per_pair(sample, 100, seed=0))
    with pytest.raises(ValueError, match=r"fewer constraints: \{'fr-sw': 90\}"):
        exactly_per_pair(restrict_to_languages(table, ["fr", "sw"]), 100, seed=0)


# The preparation of tens of millions of pairs runs in Arrow and numpy (issue 47); the Python loops it replaced are
# kept here as oracles: the same rows in the same order on random tables.


def python_pair_keys(table):
    l1, l2 = table["lang1"].to_pylist(), table["lang2"].to_pylist()
    return np.asarray([f"{min(a, b)}-{max(a, b)}" for a, b in zip(l1, l2)], dtype=object)


def python_exclude_words(table, banned):
    from distalign.data.mining import normalize

    forms = {normalize(word, lang) for lang, word in banned}  # any language's test word, whatever its label
    keep = [
        normalize(x, a) not in forms and normalize(y, b) not in forms
        for a, x, b, y in zip(
            table["lang1"].to_pylist(),
            table["word1"].to_pylist(),
            table["lang2"].to_pylist(),
            table["word2"].to_pylist(),
        )
    ]
    return table.filter(pa.array(keep, pa.bool_()))


def random_table(seed, rows=3000):
    """Random pairs of 6 languages (some pairs rare, words in mixed case), in several chunks."""
    rng = np.random.default_rng(seed)
    langs = np.array(["de", "en", "fr", "sw", "tr", "zh"])
    l1 = langs[rng.choice(6, rows, p=[0.4, 0.3, 0.15, 0.1, 0.04, 0.01])]
    l2 = langs[rng.integers(0, 6, rows)]
    special = ["Haus", "haus", "HAUS", "İstanbul", "straße", "STRASSE", "Ärger"]  # forms normalize() folds together
    words = np.array(special + [f"w{i}" for i in range(300)])
    data = {
        "word1": words[rng.integers(0, len(words), rows)].tolist(),
        "lang1": l1.tolist(),
        "word2": words[rng.integers(0, len(words), rows)].tolist(),
        "lang2": l2.tolist(),
        "synset_id": [f"bn:{i}" for i in rng.integers(0, 500, rows)],
        "gloss1": [None] * rows,
        "gloss2": [None] * rows,
    }
    table = pa.table(data, schema=CONSTRAINT_SCHEMA)
    return pa.concat_tables([table.slice(0, rows // 3), table.slice(rows // 3)])


@pytest.mark.parametrize("seed", range(4))
def test_arrow_preparation_matches_the_python_loops_it_replaced(seed):
    table = random_table(seed)
    pairs, inverse = language_pairs(table)
    expected_pairs, expected_inverse = np.unique(python_pair_keys(table), return_inverse=True)
    assert pairs.tolist() == expected_pairs.tolist() and inverse.tolist() == expected_inverse.tolist()

    banned = {("de", "haus"), ("tr", "istanbul"), ("de", "Strasse"), ("fr", "w7"), ("en", "w1")}
    kept, excluded = exclude_words(table, banned)
    assert kept.equals(python_exclude_words(table, banned)) and excluded == len(table) - len(kept) > 0

    # nested_order, exactly_per_pair and pair_sampling_weights read the pairs through language_pairs: their old
    # outputs recomputed from np.unique over the Python keys
    rng = np.random.default_rng(seed)
    _, inverse, counts = np.unique(python_pair_keys(table), return_inverse=True, return_counts=True)
    rank = np.empty(len(table), dtype=np.int64)
    shuffled = rng.permutation(len(table))
    by_pair = shuffled[np.argsort(inverse[shuffled], kind="stable")]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank[by_pair] = np.arange(len(table)) - np.repeat(starts, counts)
    size = counts[inverse]
    assert nested_order(table, seed).tolist() == np.lexsort((shuffled.argsort(), -size, (rank + 0.5) / size)).tolist()

    keys = python_pair_keys(table)
    common = [p for p, n in zip(*np.unique(keys, return_counts=True)) if n >= 5]
    subset = table.filter(pa.array(np.isin(keys, common)))
    rng = np.random.default_rng([seed, 2])
    sub_keys = python_pair_keys(subset)
    chosen = [rng.choice(np.flatnonzero(sub_keys == p), size=5, replace=False) for p in np.unique(sub_keys)]
    assert exactly_per_pair(subset, 5, seed).equals(subset.take(rng.permutation(np.concatenate(chosen))))
