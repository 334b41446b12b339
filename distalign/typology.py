"""Languages as URIEL typology vectors (lang2vec): the diversity of a language sample, its similarity to the
test languages, and samples of languages chosen across the range of diversity (BabelBERT §5.1).

- ``typological_diversity``: d_typ of Ponti et al. (2020) as BabelBERT computes it: for every feature, the
  entropy (natural log) of its values across the sample's languages; their mean. 0 when all agree.
- ``train_test_similarity``: sim_train-test, the mean cosine similarity of the URIEL vectors over all
  (sample language, test language) pairs.
- ``diverse_samples``: many random k-language samples drawn without the test languages, binned by d_typ
  into equal-width bins, one sample taken from each bin (paper: 1M samples of 10 languages, 10 bins).

With ``syntax_knn`` (103 syntactic features, gaps filled by kNN: every language has a full vector) these
reproduce the d_typ and sim_train-test columns of BabelBERT's Table 2 (tests/test_typology.py).
"""

from __future__ import annotations

import importlib.metadata
import math
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from distalign.errors import ConfigError
from distalign.languages import iso639_3

FEATURE_SET = "syntax_knn"


@lru_cache(maxsize=1)
def _lang2vec():
    # lang2vec's wheel also installs a script bin/lang2vec.py. A console script (`distalign tune`) runs with
    # bin/ first on sys.path, where that script shadows the package: import with such directories left out.
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if not Path(p or ".", "lang2vec.py").is_file()]
    try:
        with warnings.catch_warnings():  # lang2vec 1.1.2 imports the deprecated pkg_resources
            warnings.simplefilter("ignore")
            import lang2vec.lang2vec as l2v
    finally:
        sys.path[:] = saved
    return l2v


@lru_cache(maxsize=1)
def _uriel_data() -> Path:
    """lang2vec's data folder, found without importing it: its import reads its feature files (5-15 s here), too
    long to learn that a language code is wrong."""
    return Path(str(importlib.metadata.distribution("lang2vec").locate_file("lang2vec/data")))


@cache
def _known_codes(feature_set: str) -> frozenset[str]:
    """The ISO 639-3 codes that have vectors in ``feature_set`` (the sets cover different languages)."""
    # the *_knn sets are lang2vec's predictions file: read without the import (one member of the npz)
    filename = (
        "feature_predictions.npz" if feature_set.endswith("_knn") else _lang2vec().FEATURE_SETS_DICT[feature_set][0]
    )
    return frozenset(np.load(_uriel_data() / filename, allow_pickle=True)["langs"].tolist())


def uriel_code(lang: str, feature_set: str = FEATURE_SET, where: str = "") -> str:
    """The ISO 639-3 code lang2vec knows a language by (``de``, ``deu``, ``ger`` and ``German`` are all ``deu``);
    errors name ``where`` (the key or flag that gave ``lang``) where given."""
    where = f"{where}: language '{lang}'" if where else f"language '{lang}'"
    code = iso639_3(lang, where)
    if code not in _known_codes(feature_set):
        raise ConfigError(
            f"{where}: URIEL (lang2vec) has no {feature_set} vector for it: give an ISO 639-1 "
            "or 639-3 code it knows (fr, fra)"
        )
    return code


def uriel_vectors(languages: list[str], feature_set: str = FEATURE_SET) -> np.ndarray:
    """One row of URIEL features per language, in the given order."""
    codes = [uriel_code(lang, feature_set) for lang in languages]
    features = _lang2vec().get_features(sorted(set(codes)), feature_set)
    rows = np.array([features[c] for c in codes], dtype=object)
    if (rows == "--").any():
        missing = sorted({lang for lang, row in zip(languages, rows) if (row == "--").any()})
        raise ConfigError(f"URIEL {feature_set} has missing features for {missing}; use a *_knn feature set")
    return rows.astype(float)


@cache
def word_order_features(lang: str, feature_set: str = FEATURE_SET) -> dict[str, float]:
    """URIEL's named syntax features of one language (``S_OBJECT_BEFORE_VERB`` -> 0 or 1, ...); NaN where the
    set has no value (``syntax_wals`` has gaps; the ``*_knn`` sets predict every value)."""
    code = uriel_code(lang, feature_set)
    features = _lang2vec().get_features([code], feature_set, header=True)
    return {name: math.nan if value == "--" else float(value) for name, value in zip(features["CODE"], features[code])}


def typological_diversity(vectors: np.ndarray) -> float:
    """d_typ of a sample whose languages are the rows of ``vectors``."""
    return float(sample_diversities(vectors, np.arange(len(vectors))[None, :])[0])


def cosine_similarities(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


def train_test_similarity(train: np.ndarray, test: np.ndarray) -> float:
    """sim_train-test: mean cosine similarity over all pairs of a training and a test language."""
    return float(cosine_similarities(train, test).mean())


@dataclass(frozen=True)
class LanguageSample:
    languages: tuple[str, ...]
    diversity: float  # d_typ
    similarity: float  # sim_train-test (nan without test languages)
    bin: int  # its d_typ bin, 0 = least diverse


def sample_diversities(vectors: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """d_typ of every sample (rows of language indices into ``vectors``): per feature, the entropy (nats) of
    its values across the sample's languages; their mean. Chunked: a million samples fit in memory."""
    values = np.unique(vectors)
    out = np.empty(len(samples))
    for start in range(0, len(samples), 50_000):
        chunk = vectors[samples[start : start + 50_000]]  # samples x languages x features
        entropy = np.zeros((chunk.shape[0], chunk.shape[2]))
        for value in values:
            share = (chunk == value).mean(axis=1)
            entropy -= share * np.log(np.where(share > 0, share, 1.0))
        out[start : start + 50_000] = entropy.mean(axis=1)
    return out


def random_subsets(rng: np.random.Generator, pool_size: int, size: int, count: int) -> np.ndarray:
    """``count`` distinct subsets of ``size`` out of ``pool_size`` items (sorted index rows), uniformly drawn."""
    count = min(count, math.comb(pool_size, size))
    drawn = np.empty((0, size), dtype=np.int64)
    while len(drawn) < count:
        batch = min(100_000, 2 * (count - len(drawn)) + 16)
        more = np.sort(np.argpartition(rng.random((batch, pool_size)), size - 1, axis=1)[:, :size], axis=1)
        drawn = np.unique(np.concatenate([drawn, more]), axis=0)  # distinct sets (np.unique also sorts them)
    return drawn[rng.permutation(len(drawn))[:count]]


def diverse_samples(
    candidates: Sequence[str], size: int, num_samples: int, num_bins: int, seed: int, test_languages: Sequence[str] = ()
) -> list[LanguageSample]:
    """One sample of ``size`` languages per d_typ bin, least diverse first (empty bins yield none).

    ``num_samples`` random samples (distinct sets, drawn uniformly) of the candidates not in
    ``test_languages`` are binned by d_typ into ``num_bins`` equal-width bins between the smallest and
    the largest value; one sample is then picked at random from each bin. Seeded.
    """
    pool = sorted(set(candidates) - set(test_languages))
    if len(pool) < size:
        raise ConfigError(
            f"language sample of {size}: only {len(pool)} candidate languages ({pool}) outside the test languages"
        )
    rng = np.random.default_rng(seed)
    vectors = uriel_vectors(pool)
    drawn = random_subsets(rng, len(pool), size, num_samples)
    diversity = sample_diversities(vectors, drawn)
    edges = np.linspace(diversity.min(), diversity.max(), num_bins + 1)
    bins = np.clip(np.searchsorted(edges, diversity, side="right") - 1, 0, num_bins - 1)
    test = uriel_vectors(list(test_languages)) if test_languages else None
    chosen = []
    for b in range(num_bins):
        members = np.flatnonzero(bins == b)
        if len(members) == 0:
            continue
        index = rng.choice(members)
        similarity = train_test_similarity(vectors[drawn[index]], test) if test is not None else float("nan")
        chosen.append(LanguageSample(tuple(pool[i] for i in drawn[index]), float(diversity[index]), similarity, b))
    return chosen
