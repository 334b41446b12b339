"""Tatoeba retrieval accuracy vs. a naive loop implementation and hand-computed cases."""

import numpy as np
import pytest
import torch

from distalign.eval.alignment import alignment_score
from distalign.eval.retrieval import tatoeba_accuracy, tatoeba_accuracy_both_directions


def naive_accuracy(queries, candidates):
    q = np.asarray(queries, dtype=np.float64)
    c = np.asarray(candidates, dtype=np.float64)
    hits = 0
    for i in range(len(q)):
        best_j, best = -1, -np.inf
        for j in range(len(c)):
            s = q[i] @ c[j] / (np.linalg.norm(q[i]) * np.linalg.norm(c[j]))
            if s > best:
                best_j, best = j, s
        hits += best_j == i
    return hits / len(q)


@pytest.mark.parametrize("seed", range(5))
def test_matches_naive_both_directions(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(25, 6))
    b = a + rng.normal(size=(25, 6)) * rng.uniform(0.2, 2.0, size=(25, 1))
    ab, ba = tatoeba_accuracy_both_directions(torch.from_numpy(a), torch.from_numpy(b))
    assert ab == pytest.approx(naive_accuracy(a, b))
    assert ba == pytest.approx(naive_accuracy(b, a))
    assert tatoeba_accuracy(torch.from_numpy(a), torch.from_numpy(b), chunk_size=4) == pytest.approx(ab)
    assert alignment_score(torch.from_numpy(a), torch.from_numpy(b)) == pytest.approx(100 * ab)


def test_hand_asymmetric():
    # angles: a0 0deg, a1 11.3deg; b0 26.6deg, b1 2.9deg.
    a = torch.tensor([[1.0, 0.0], [1.0, 0.2]])
    b = torch.tensor([[1.0, 0.5], [1.0, 0.05]])
    # a0 -> b1 (wrong), a1 -> b1 (right); b0 -> a1 (wrong), b1 -> a0 (wrong)
    assert tatoeba_accuracy(a, b) == 0.5
    assert tatoeba_accuracy(b, a) == 0.0
    assert tatoeba_accuracy_both_directions(a, b) == (0.5, 0.0)


def test_ties():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # duplicate candidates: both queries tie between the two; aligned one always among the maxima
    c = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    assert tatoeba_accuracy(q, c) == 1.0
    # c0, c1 point the same way: q0 has cos 1 to both, q1 cos 0 to both -> all ties, both right
    c = torch.tensor([[1.0, 0.0], [2.0, 0.0]])
    assert tatoeba_accuracy(q, c) == 1.0
    c = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    q3 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    # q0 tie c0/c1 -> right; q1 best c2 -> wrong; q2 best c0/c1, not c2 -> wrong
    assert tatoeba_accuracy(q3, c) == pytest.approx(1 / 3)


def test_shape_mismatch():
    with pytest.raises(ValueError, match="shapes must match"):
        tatoeba_accuracy(torch.zeros(3, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="shapes must match"):
        tatoeba_accuracy_both_directions(torch.zeros(3, 2), torch.zeros(3, 3))
