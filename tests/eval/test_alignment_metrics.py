"""alignment_score vs. a naive loop implementation and hand-computed cases."""

import math

import numpy as np
import pytest
import torch

from distalign.eval.alignment import aligned_nn_hits, alignment_score, vocabulary_alignment


def naive_alignment_score(e_src, e_tgt):
    e_src, e_tgt = np.asarray(e_src, dtype=np.float64), np.asarray(e_tgt, dtype=np.float64)
    correct = 0
    for i, x in enumerate(e_src):
        sims = [float(np.dot(x, y)) / (math.sqrt(np.dot(x, x)) * math.sqrt(np.dot(y, y))) for y in e_tgt]
        correct += int(np.argmax(sims) == i)
    return 100.0 * correct / len(e_src)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("noise", [0.3, 1.0, 3.0])
def test_matches_naive(seed, noise):
    rng = np.random.default_rng(seed)
    e_src = rng.normal(size=(20, 4))
    e_tgt = e_src + noise * rng.normal(size=(20, 4))
    expected = naive_alignment_score(e_src, e_tgt)
    got = alignment_score(torch.from_numpy(e_src), torch.from_numpy(e_tgt))
    assert isinstance(got, float)
    assert got == pytest.approx(expected)
    # chunking is transparent
    assert alignment_score(torch.from_numpy(e_src), torch.from_numpy(e_tgt), chunk_size=3) == pytest.approx(expected)


def test_hand_cases():
    eye = torch.eye(3)
    assert alignment_score(eye, 5 * eye) == 100.0  # cosine, so scale does not matter
    assert alignment_score(eye, eye[[1, 2, 0]]) == 0.0  # all rows point at the wrong partner
    # q0=[1,0] -> t0 [1,.2] vs t1 [1,.1]: t1 wins (wrong); q1=[1,.1] -> t1 exact (right).
    e_src = torch.tensor([[1.0, 0.0], [1.0, 0.1]])
    e_tgt = torch.tensor([[1.0, 0.2], [1.0, 0.1]])
    assert alignment_score(e_src, e_tgt) == 50.0


def test_ties_count_only_if_aligned_row_is_maximal():
    # Row 0: [1,0] vs targets [[1,0],[0,1],[1,0]] -> t0 and t2 tie, 0 among them -> correct.
    e = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert alignment_score(e, e) == 100.0
    # src [1,0],[0,1],[1,0] vs tgt [0,1],[0,1],[1,0]:
    # row 0 -> best t2 only (wrong); row 1 -> t0/t1 tie incl. 1 (right); row 2 -> t2 (right).
    e_tgt = torch.tensor([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    assert aligned_nn_hits(e, e_tgt).tolist() == [False, True, True]
    assert alignment_score(e, e_tgt) == pytest.approx(200 / 3)


def test_shape_mismatch():
    with pytest.raises(ValueError, match="shapes must match"):
        alignment_score(torch.zeros(3, 2), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="shapes must match"):
        alignment_score(torch.zeros(3, 2), torch.zeros(3, 5))


def test_vocabulary_alignment_is_align_mlms_score_by_hand():
    """Per natural-language token: 100 if its counterpart is the cosine-nearest row of the whole derived vocabulary."""
    embeddings = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.1, 1.0], [0.7, 0.7], [1.0, 0.0]])
    # natural tokens 0, 1; derived vocabulary 2, 3, 4, 5; counterparts 0 -> 2, 1 -> 4
    # token 0: nearest derived row is 5 (cos 1.0) -> miss; token 1: nearest is 3 -> miss (its counterpart is 4)
    assert vocabulary_alignment(embeddings, [0, 1], [2, 4], [2, 3, 4, 5]) == 0.0
    # counterparts 0 -> 5, 1 -> 3: both nearest -> 100; a tie counts for the counterpart
    assert vocabulary_alignment(embeddings, [0, 1], [5, 3], [2, 3, 4, 5]) == 100.0
    assert vocabulary_alignment(embeddings, [0, 1], [5, 4], [2, 3, 4, 5]) == 50.0
    tie = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    assert vocabulary_alignment(tie, [0], [2], [1, 2]) == 100.0
    with pytest.raises(ValueError, match="not among the candidate"):
        vocabulary_alignment(embeddings, [0], [1], [2, 3])
