"""URIEL typology (lang2vec's shipped data): d_typ and sim_train-test against a hand computation and against
BabelBERT's Table 2, and the sampler's d_typ bins."""

import math

import numpy as np
import pytest

from distalign.errors import ConfigError
from distalign.typology import (
    diverse_samples,
    random_subsets,
    train_test_similarity,
    typological_diversity,
    uriel_vectors,
)

PL_BLI = "bg ca eo et eu fi he hu id ka ko lt no th tr".split()  # BabelBERT §4, the test languages of §5.1
TABLE_2 = [  # language sample, d_typ, sim_train-test
    ("af de el en es fr nl pt ro uk", 0.1830, 0.7369),
    ("af en hi it ms nl pt ro ru uk", 0.2406, 0.7275),
    ("af de en fr it pl pt ta uk ur", 0.2661, 0.7113),
    ("bn de en es hi it jv ro ru uk", 0.2906, 0.7114),
    ("en it mr ms pl pt ru ta uk zh", 0.3180, 0.6953),
    ("az de en fa fr it pt sw ta uk", 0.3576, 0.6764),
    ("af de el fr jv ml mr qu ta uk", 0.3746, 0.6520),
    ("bn el fr hi jv mr ms qu ro tl", 0.4022, 0.6530),
    ("bn gu it my pt ro sw ta vi zh", 0.4231, 0.6345),
    ("ar de el en ja jv kk my sw ur", 0.4600, 0.6207),
]


def test_diversity_by_hand():
    vectors = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0]], dtype=float)
    third = -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3))  # one language in three differs
    assert typological_diversity(vectors) == pytest.approx((0 + third + third) / 3)
    assert typological_diversity(np.ones((4, 5))) == 0.0  # all languages agree
    assert train_test_similarity(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])) == pytest.approx(0.5)


@pytest.mark.parametrize("sample,d_typ,similarity", TABLE_2)
def test_babelbert_table_2(sample, d_typ, similarity):
    vectors = uriel_vectors(sample.split())
    assert vectors.shape == (10, 103)
    assert typological_diversity(vectors) == pytest.approx(d_typ, abs=5e-5)
    assert train_test_similarity(vectors, uriel_vectors(PL_BLI)) == pytest.approx(similarity, abs=5e-5)


def test_a_language_uriel_does_not_know_is_named():
    with pytest.raises(ConfigError, match="language 'xa': URIEL"):
        uriel_vectors(["en", "xa"])


def test_random_subsets_are_distinct_sorted_and_cover_the_pool():
    subsets = random_subsets(np.random.default_rng(0), 12, 4, 400)
    assert subsets.shape == (400, 4)
    assert len({tuple(row) for row in subsets}) == 400 and (np.diff(subsets, axis=1) > 0).all()
    assert set(subsets.ravel()) == set(range(12))
    assert len(random_subsets(np.random.default_rng(0), 5, 4, 400)) == 5  # only C(5, 4) exist


def test_one_sample_per_diversity_bin_without_the_test_languages():
    candidates = TABLE_2[0][0].split() + TABLE_2[-1][0].split() + ["hi", "ta", "zh", "ja", "fi", "tr"]
    test = ["fi", "tr"]
    samples = diverse_samples(candidates, size=5, num_samples=3000, num_bins=6, seed=1, test_languages=test)
    assert [s.bin for s in samples] == sorted({s.bin for s in samples}) and len(samples) >= 5
    assert samples[0].bin == 0 and samples[-1].bin == 5  # the extremes are always populated
    for sample in samples:
        assert len(set(sample.languages)) == 5 and not set(sample.languages) & set(test)
        vectors = uriel_vectors(list(sample.languages))
        assert sample.diversity == pytest.approx(typological_diversity(vectors))
        assert sample.similarity == pytest.approx(train_test_similarity(vectors, uriel_vectors(test)))
    diversities = [s.diversity for s in samples]
    assert diversities == sorted(diversities) and diversities[-1] - diversities[0] > 0.15
    again = diverse_samples(candidates, size=5, num_samples=3000, num_bins=6, seed=1, test_languages=test)
    assert again == samples  # seeded
    with pytest.raises(ConfigError, match="only 3 candidate languages"):
        diverse_samples(["en", "de", "fr", "fi"], size=4, num_samples=10, num_bins=2, seed=0, test_languages=["fi"])


def test_the_package_is_found_when_the_lang2vec_script_comes_first_on_the_path():
    """lang2vec's wheel installs bin/lang2vec.py; console scripts (`distalign tune`) put bin/ first on sys.path."""
    import subprocess
    import sys
    from pathlib import Path

    scripts = Path(sys.executable).parent
    assert (scripts / "lang2vec.py").is_file()  # else this test proves nothing
    probe = (
        f"import sys; sys.path.insert(0, {str(scripts)!r}); from distalign.typology import uriel_vectors; "
        "print(uriel_vectors(['en', 'de']).shape)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "(2, 103)", out.stderr[-2000:]
