"""Word-similarity Spearman vs. a naive rank-correlation implementation and hand cases."""

import math

import numpy as np
import pytest
import torch

from distalign.eval.xlsim_metrics import word_similarity_spearman


def naive_average_ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    pos = 0
    while pos < len(order):
        end = pos
        while end + 1 < len(order) and values[order[end + 1]] == values[order[pos]]:
            end += 1
        for p in range(pos, end + 1):
            ranks[order[p]] = (pos + end) / 2 + 1
        pos = end + 1
    return ranks


def naive_spearman(e1, e2, gold):
    cos = []
    for x, y in zip(np.asarray(e1, dtype=np.float64), np.asarray(e2, dtype=np.float64)):
        cos.append(
            sum(a * b for a, b in zip(x, y)) / (math.sqrt(sum(a * a for a in x)) * math.sqrt(sum(b * b for b in y)))
        )
    rx, ry = naive_average_ranks(cos), naive_average_ranks(list(gold))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))


@pytest.mark.parametrize("seed", range(5))
def test_matches_naive(seed):
    rng = np.random.default_rng(seed)
    e1 = rng.normal(size=(30, 5))
    e2 = e1 + rng.normal(size=(30, 5))
    gold = np.round(rng.uniform(0, 4, size=30))  # rounded -> ties in gold
    expected = naive_spearman(e1, e2, gold)
    got = word_similarity_spearman(torch.from_numpy(e1), torch.from_numpy(e2), torch.from_numpy(gold))
    assert isinstance(got, float)
    assert got == pytest.approx(expected, abs=1e-12)


def _pairs_with_cosines(cosines):
    e1 = torch.tensor([[1.0, 0.0]] * len(cosines), dtype=torch.float64)
    e2 = torch.tensor([[c, math.sqrt(1 - c * c)] for c in cosines], dtype=torch.float64)
    return e1, e2


def test_hand_cases():
    e1, e2 = _pairs_with_cosines([0.1, 0.2, 0.3, 0.4])
    assert word_similarity_spearman(e1, e2, [1, 2, 3, 4]) == pytest.approx(1.0)
    assert word_similarity_spearman(e1, e2, [4, 3, 2, 1]) == pytest.approx(-1.0)
    # d = [0, 1, 1, 0] -> rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert word_similarity_spearman(e1, e2, [1, 3, 2, 4]) == pytest.approx(0.8)
    # gold ties -> average ranks [1.5, 1.5, 3, 4] -> rho = 4.5 / sqrt(5 * 4.5) = sqrt(0.9)
    assert word_similarity_spearman(e1, e2, np.array([1.0, 1.0, 2.0, 3.0])) == pytest.approx(math.sqrt(0.9))


def test_uses_cosine_not_dot_product():
    e1, e2 = _pairs_with_cosines([0.1, 0.2, 0.3, 0.4])
    scale = torch.tensor([[4.0], [3.0], [2.0], [1.0]], dtype=torch.float64)
    # dot products would be [.4, .6, .6, .4]; cosine stays [.1, .2, .3, .4]
    assert word_similarity_spearman(e1 * 7, e2 * scale, [1, 3, 2, 4]) == pytest.approx(0.8)


def test_errors():
    e1, e2 = _pairs_with_cosines([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="shapes must match"):
        word_similarity_spearman(e1, e2[:2], [1, 2, 3])
    with pytest.raises(ValueError, match="one gold score"):
        word_similarity_spearman(e1, e2, [1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        word_similarity_spearman(e1[:1], e2[:1], [1])
