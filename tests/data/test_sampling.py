"""distalign.data.sampling: q ∝ p^α over unordered language pairs, budgeted draws, word exclusion."""

import collections
import math

import pyarrow as pa
import pytest

from distalign.data.sampling import (
    exclude_words,
    language_pair_keys,
    sample_constraints,
    sampling_probabilities,
    words_of,
)
from distalign.data.schema import CONSTRAINT_SCHEMA


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


def pair_counts(table):
    return collections.Counter(language_pair_keys(table).tolist())


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
    assert language_pair_keys(table).tolist() == ["de-en"] * 5 + ["en-sw"]


# Pool: de-en 9000 (half each direction), en-fr 900, fr-sw 100 -> p = 0.9, 0.09, 0.01.
POOL = [("de", "en", 4500), ("en", "de", 4500), ("en", "fr", 900), ("sw", "fr", 100)]
BUDGET = 3000


def expected_q():
    w = {"de-en": math.sqrt(0.9), "en-fr": math.sqrt(0.09), "fr-sw": math.sqrt(0.01)}
    total = sum(w.values())
    return {k: v / total for k, v in w.items()}  # ≈ 0.703, 0.222, 0.074


def test_sample_constraints_follows_q():
    table = make_table(POOL)
    available = pair_counts(table)
    sample = sample_constraints(table, BUDGET, alpha=0.5, seed=0)
    counts = pair_counts(sample)
    q = expected_q()
    assert set(counts) == {"de-en", "en-fr", "fr-sw"}  # de-en and en-de pooled into one pair
    # de-en: ~2110 (alpha=1 would give 2700, unpooled directions ~2310); multinomial sd ~25
    assert abs(counts["de-en"] - q["de-en"] * BUDGET) < 100
    assert abs(counts["en-fr"] - q["en-fr"] * BUDGET) < 100
    # fr-sw's quota (~222) exceeds its 100 rows: it contributes all of them, never more
    assert counts["fr-sw"] == available["fr-sw"] == 100
    assert all(counts[k] <= available[k] for k in counts)
    assert len(sample) <= BUDGET
    # rows are drawn without replacement and come from the table
    ids = sample["synset_id"].to_pylist()
    assert len(set(ids)) == len(ids)
    assert set(ids) <= set(table["synset_id"].to_pylist())
    # both directions of de-en are represented roughly equally
    directions = collections.Counter(zip(sample["lang1"].to_pylist(), sample["lang2"].to_pylist()))
    assert abs(directions[("de", "en")] - directions[("en", "de")]) < 0.2 * counts["de-en"]


def test_sample_constraints_reproducible_per_seed():
    table = make_table(POOL)
    a = sample_constraints(table, 500, alpha=0.5, seed=7)
    b = sample_constraints(table, 500, alpha=0.5, seed=7)
    c = sample_constraints(table, 500, alpha=0.5, seed=8)
    assert a.equals(b)
    assert a["synset_id"].to_pylist() != c["synset_id"].to_pylist()
    assert set(a["synset_id"].to_pylist()) != set(c["synset_id"].to_pylist())


def test_budget_zero_or_large_keeps_everything_shuffled():
    table = make_table(POOL)
    for budget in (0, len(table), len(table) + 10):
        out = sample_constraints(table, budget, alpha=0.5, seed=1)
        assert len(out) == len(table)
        assert sorted(out["synset_id"].to_pylist()) == sorted(table["synset_id"].to_pylist())
    shuffled = sample_constraints(table, 0, alpha=0.5, seed=1)
    assert shuffled["synset_id"].to_pylist() != table["synset_id"].to_pylist()


def test_exclude_words_both_sides():
    table = pa.table({
        "word1": ["dog", "cat", "Hund", "dog", "tree"],
        "lang1": ["en", "en", "de", "de", "en"],
        "word2": ["Hund", "Katze", "dog", "chien", "Baum"],
        "lang2": ["de", "de", "en", "fr", "de"],
        "synset_id": ["1", "2", "3", "4", "5"],
        "gloss1": [None] * 5,
        "gloss2": [None] * 5,
    }, schema=CONSTRAINT_SCHEMA)
    kept, dropped = exclude_words(table, {("en", "dog"), ("de", "Baum")})
    # row 1 (en dog on the left) and 3 (en dog on the right) and 5 (de Baum) go;
    # row 4 has "dog" as a *German* word, which is not banned
    assert kept["synset_id"].to_pylist() == ["2", "4"]
    assert dropped == 3
    same, none = exclude_words(table, set())
    assert none == 0 and same.equals(table)


def test_words_of():
    table = make_table([("de", "en", 2)])
    assert words_of(table) == {("de", "deen_a0"), ("de", "deen_a1"), ("en", "deen_b0"), ("en", "deen_b1")}
